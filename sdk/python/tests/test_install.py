"""The offline install of docs/sdk-python.md, as a user makes it: the
release's wheel, built with Debian's setuptools and wheel without an
isolated build environment (scripts/dist_python.py, what make dist
runs), installed with pip --no-index into a fresh virtual environment
that sees Debian's grpcio and protobuf (--system-site-packages), and
imported there from the installed files, typed (py.typed)."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest

from cluster import ROOT

import barista


def _need(module: str, package: str) -> None:
    try:
        __import__(module)
    except ImportError:
        pytest.skip(f"{sys.executable} cannot import {module} (apt-get install {package})")


def test_wheel_installs_offline_into_a_fresh_venv(tmp_path: Path) -> None:
    _need("setuptools", "python3-setuptools")
    _need("wheel", "python3-wheel")
    _need("ensurepip", "python3-venv")
    src = tmp_path / "src"
    src.mkdir()
    sdk = ROOT / "sdk" / "python"
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((sdk / name).read_bytes())
    for f in (sdk / "src").rglob("*"):
        if f.is_file() and "__pycache__" not in f.parts and not any(p.endswith(".egg-info") for p in f.parts):
            dst = src / f.relative_to(sdk)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(f.read_bytes())
    out = tmp_path / "out"
    built = subprocess.run([sys.executable, str(ROOT / "scripts" / "dist_python.py"), str(src), str(out), "1700000000"],
                           capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stdout + built.stderr
    wheel = out / f"barista-{barista.__version__}-py3-none-any.whl"
    assert wheel.exists(), sorted(p.name for p in out.iterdir())
    assert (out / f"barista-{barista.__version__}.tar.gz").exists()

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", str(wheel)],
                         capture_output=True, text=True, timeout=120)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    # Imported from the venv (not this checkout: the working directory
    # is elsewhere and PYTHONPATH unset), with the system's grpc.
    probe = subprocess.run([str(py), "-c", "import barista, grpc, os; "
                            "print(barista.__version__); print(barista.__file__); "
                            "print(os.path.exists(os.path.join(os.path.dirname(barista.__file__), 'py.typed')))"],
                           capture_output=True, text=True, timeout=60, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr
    version, where, typed = probe.stdout.split()
    assert version == barista.__version__
    assert where.startswith(str(env_dir)), where
    assert typed == "True"
