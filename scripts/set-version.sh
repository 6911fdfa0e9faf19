#!/usr/bin/env bash
# Sets the one version of barista everywhere it is written:
#
#   scripts/set-version.sh X.Y.Z        a release (docs/releasing.md)
#   scripts/set-version.sh X.Y.Z-dev    the version between releases
#
# internal/version/version.go (the server, the command line, the Go
# SDK), sdk/python/src/barista/_version.py (X.Y.Z.dev0 for X.Y.Z-dev, as
# PEP 440 writes it), sdk/typescript/package.json and the lockfiles that
# name the TypeScript package. go test ./internal/version checks that
# they agree, and that CHANGELOG.md has a section for the version.
set -euo pipefail
cd "$(dirname "$0")/.."
v=${1:-}
if ! [[ $v =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-dev)?$ ]]; then
  echo "usage: scripts/set-version.sh X.Y.Z|X.Y.Z-dev" >&2
  exit 2
fi
py=${v/-dev/.dev0}
sed -i "s/^const Version = \".*\"$/const Version = \"$v\"/" internal/version/version.go
sed -i "s/^__version__ = \".*\"$/__version__ = \"$py\"/" sdk/python/src/barista/_version.py
/usr/bin/python3 - "$v" <<'PY'
import json, sys
v = sys.argv[1]
def edit(path, paths):
    with open(path) as f:
        doc = json.load(f)
    for p in paths:
        node = doc
        for key in p:
            node = node[key]
        node["version"] = v
    with open(path, "w") as f:
        json.dump(doc, f, indent=2, ensure_ascii=False)
        f.write("\n")
edit("sdk/typescript/package.json", [()])
edit("sdk/typescript/package-lock.json", [(), ("packages", "")])
edit("examples/typescript-worker/package-lock.json", [("packages", "../../sdk/typescript")])
PY
go test -count=1 ./internal/version/ >/dev/null 2>&1 || {
  echo "set to $v; go test ./internal/version fails: add a section \"## ${v%-dev} (unreleased)\" to CHANGELOG.md" >&2
  exit 1
}
echo "version $v"
