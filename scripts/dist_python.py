#!/usr/bin/env python3
"""The Python SDK's release artifacts, built offline and reproducibly:

    scripts/dist_python.py SRC OUT EPOCH

SRC is a copy of sdk/python (pyproject.toml, README.md, src/) that this
script may write into; OUT the directory the sdist and the wheel go to;
EPOCH the time every file of both is dated (SOURCE_DATE_EPOCH, the
commit's time). It calls the package's build backend, Debian's
setuptools (python3-setuptools, python3-wheel), directly through its
PEP 517 hooks, without an isolated environment (nothing is downloaded):
the sdist first, then the wheel from the sdist's own files, so that the
wheel holds nothing the sdist lacks.

setuptools writes an sdist with the files' own times, owners and the
time of the build in its gzip header; the sdist is written again here
with every entry in name order, dated EPOCH, owned by 0:0 and with modes
0644 (0755 for directories), in a gzip stream dated EPOCH without a file
name. The wheel is reproducible by itself under SOURCE_DATE_EPOCH (wheel
sorts its entries and dates them by it).
"""

import gzip
import io
import os
import shutil
import sys
import tarfile
import tempfile


def normalize_sdist(path: str, epoch: int) -> None:
    """Rewrites the sdist at path: entries sorted, dated epoch, owned by
    root, modes 0644/0755, in a gzip stream dated epoch."""
    with tarfile.open(path, "r:gz") as src:
        members = sorted(src.getmembers(), key=lambda m: m.name)
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as dst:
            for m in members:
                data = src.extractfile(m) if m.isfile() else None
                m.mtime, m.uid, m.gid, m.uname, m.gname = epoch, 0, 0, "", ""
                m.mode = 0o755 if m.isdir() else 0o644
                m.pax_headers = {}
                dst.addfile(m, data)
    with open(path, "wb") as f:
        with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=epoch, compresslevel=9) as gz:
            gz.write(raw.getvalue())


def date_tree(root: str, epoch: int) -> None:
    """Dates every file and directory under root epoch, with modes
    0644/0755 (setuptools copies both into the sdist)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            os.chmod(p, 0o644)
            os.utime(p, (epoch, epoch))
        for name in dirnames:
            os.chmod(os.path.join(dirpath, name), 0o755)
    for dirpath, _, _ in os.walk(root, topdown=False):
        os.utime(dirpath, (epoch, epoch))


def main() -> int:
    src, out, epoch = sys.argv[1], os.path.abspath(sys.argv[2]), int(sys.argv[3])
    os.environ["SOURCE_DATE_EPOCH"] = str(epoch)
    os.makedirs(out, exist_ok=True)
    date_tree(src, epoch)
    here = os.getcwd()
    os.chdir(src)
    sys.path.insert(0, os.path.join(src, "src"))
    from setuptools import build_meta

    sdist_name = build_meta.build_sdist(out)
    sdist = os.path.join(out, sdist_name)
    normalize_sdist(sdist, epoch)
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(sdist, "r:gz") as tf:
            tf.extractall(tmp)
        (top,) = os.listdir(tmp)
        unpacked = os.path.join(tmp, top)
        date_tree(unpacked, epoch)
        os.chdir(unpacked)
        wheel_dir = os.path.join(tmp, "wheel")
        wheel_name = build_meta.build_wheel(wheel_dir)
        shutil.copyfile(os.path.join(wheel_dir, wheel_name), os.path.join(out, wheel_name))
        os.chmod(os.path.join(out, wheel_name), 0o644)
    os.chdir(here)
    os.chmod(sdist, 0o644)
    print(sdist_name)
    print(wheel_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
