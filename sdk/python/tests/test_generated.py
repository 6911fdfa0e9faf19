"""The committed generated code is what make proto makes of the .proto
files of this checkout."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from cluster import ROOT, SDK_SRC


def test_the_generated_code_is_up_to_date(tmp_path):
    for tool in ("protoc", "grpc_python_plugin", "make"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is missing (apt-get install protobuf-compiler protobuf-compiler-grpc)")
    out = tmp_path / "src"
    (out / "barista" / "_proto").mkdir(parents=True)
    subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "proto-python", f"PY_PROTO_OUT={out}"],
                   check=True, capture_output=True, timeout=60)
    made = sorted(p.name for p in (out / "barista" / "_proto").glob("*_pb2*.py*"))
    committed = sorted(p.name for p in (SDK_SRC / "barista" / "_proto").glob("*_pb2*.py*"))
    assert any(name.endswith(".pyi") for name in made), made
    assert made == committed
    stale = [name for name in made
             if (out / "barista" / "_proto" / name).read_bytes() != (SDK_SRC / "barista" / "_proto" / name).read_bytes()]
    assert stale == [], f"run make proto: {stale} differ from what the .proto files make"
