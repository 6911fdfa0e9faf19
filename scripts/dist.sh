#!/usr/bin/env bash
# make dist: the release artifacts of this source tree, built offline and
# reproducibly (the same source, commit and toolchains give the same bytes):
#
#   scripts/dist.sh [OUT]        (default dist/; emptied first)
#
#   barista-VERSION-linux-amd64.tar.gz  the server and command line (CGO off,
#   barista-VERSION-linux-arm64.tar.gz  -trimpath, fixed ldflags), README.md
#                                       and CHANGELOG.md
#   python/barista-VERSION.tar.gz       the Python SDK's sdist
#   python/barista-VERSION-py3-none-any.whl   and wheel
#   typescript/baristahq-barista-VERSION.tgz  the TypeScript SDK (npm pack)
#   SHA256SUMS                          sha256sum -c checks every artifact
#   MANIFEST.json                       version, commit, date, toolchains,
#                                       and each artifact's size and SHA-256
#
# VERSION is internal/version's; the Python and TypeScript packages must
# say the same (the script stops otherwise). The commit and the date every
# file is stamped with come from git (the commit's time), or from
# DIST_COMMIT and SOURCE_DATE_EPOCH, which a build outside a checkout must
# give (make dist-check does). Needs: go; /usr/bin/python3 with setuptools
# and wheel (Debian's python3-setuptools, python3-wheel); node and npm
# with the TypeScript SDK's packages installed (npm ci in sdk/typescript,
# which make test-typescript does; dist runs npm ci --offline from npm's
# cache if they are missing). Nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-$root/dist}
case $out in /*) ;; *) out=$root/$out ;; esac
PYTHON3=${PYTHON3:-/usr/bin/python3}

die() { echo "dist: $*" >&2; exit 1; }

version=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/version/version.go)
[ -n "$version" ] || die "no Version in internal/version/version.go"
pyversion=${version/-dev/.dev0}
grep -qx "__version__ = \"$pyversion\"" sdk/python/src/barista/_version.py ||
  die "sdk/python/src/barista/_version.py does not say __version__ = \"$pyversion\" (scripts/set-version.sh sets every version)"
tsversion=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' sdk/typescript/package.json)
[ "$tsversion" = "$version" ] || die "sdk/typescript/package.json says version $tsversion, not $version (scripts/set-version.sh)"

if [ -z "${DIST_COMMIT:-}" ]; then
  git rev-parse HEAD >/dev/null 2>&1 || die "not a git checkout: give DIST_COMMIT and SOURCE_DATE_EPOCH"
  DIST_COMMIT=$(git rev-parse HEAD)
  # A tree with changes to tracked files is not the commit: say so.
  git diff --quiet HEAD -- || DIST_COMMIT="$DIST_COMMIT+dirty"
fi
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null) || die "not a git checkout: give SOURCE_DATE_EPOCH"
fi
export SOURCE_DATE_EPOCH
commit=$DIST_COMMIT epoch=$SOURCE_DATE_EPOCH

rm -rf "$out"
mkdir -p "$out/python" "$out/typescript"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# tar of dir $2 under $1, as a reproducible .tar.gz on stdout.
tgz() {
  tar -C "$1" --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -cf - "$2" | gzip -n -9
}

# The server and command line. GOAMD64 and GOARM64 are fixed: a machine's
# own defaults must not change the bytes.
ldflags="-s -w -buildid= -X github.com/baristahq/barista/internal/version.commit=$commit"
for arch in amd64 arm64; do
  name=barista-$version-linux-$arch
  mkdir -p "$tmp/$name"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly \
    go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/$name/barista" ./cmd/barista
  cp README.md CHANGELOG.md "$tmp/$name/"
  chmod 0755 "$tmp/$name" "$tmp/$name/barista"
  chmod 0644 "$tmp/$name/README.md" "$tmp/$name/CHANGELOG.md"
  tgz "$tmp" "$name" >"$out/$name.tar.gz"
  echo "dist: $name.tar.gz"
done

# The Python SDK: sdist and wheel, from a copy of its package files.
mkdir -p "$tmp/python"
cp sdk/python/pyproject.toml sdk/python/README.md "$tmp/python/"
(cd sdk/python && find src -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0) |
  (cd sdk/python && xargs -0 cp --parents -t "$tmp/python")
"$PYTHON3" -c 'import setuptools, wheel' 2>/dev/null ||
  die "$PYTHON3 cannot import setuptools and wheel (apt-get install python3-setuptools python3-wheel)"
"$PYTHON3" scripts/dist_python.py "$tmp/python" "$out/python" "$epoch" >"$tmp/python.log" 2>&1 ||
  { cat "$tmp/python.log" >&2; die "the Python SDK's build failed"; }
echo "dist: python/$(ls "$out/python" | tr '\n' ' ')"

# The TypeScript SDK: compiled (tsc) in a copy, packed by npm (which
# dates every entry alike and sorts them).
command -v npm >/dev/null || die "npm is missing (apt-get install nodejs npm)"
if [ ! -x sdk/typescript/node_modules/.bin/tsc ]; then
  (cd sdk/typescript && npm ci --offline --no-audit --no-fund --loglevel=error) ||
    die "sdk/typescript has no node_modules, and npm ci --offline could not install them from npm's cache (run npm ci there)"
fi
mkdir -p "$tmp/ts"
cp -r sdk/typescript/package.json sdk/typescript/package-lock.json sdk/typescript/tsconfig.json sdk/typescript/README.md sdk/typescript/src "$tmp/ts/"
ln -s "$root/sdk/typescript/node_modules" "$tmp/ts/node_modules"
(cd "$tmp/ts" && node_modules/.bin/tsc -p . --outDir dist --rootDir . && \
  npm pack --ignore-scripts --pack-destination "$out/typescript" --loglevel=error >/dev/null) ||
  die "the TypeScript SDK's build failed"
echo "dist: typescript/$(ls "$out/typescript")"

# Checksums and the manifest.
(cd "$out" && find . -type f ! -name SHA256SUMS ! -name MANIFEST.json -printf '%P\n' | LC_ALL=C sort | xargs sha256sum >SHA256SUMS)
gover=$(go env GOVERSION)
pyver=$("$PYTHON3" -c 'import setuptools, wheel, sys; print("python %d.%d.%d, setuptools %s, wheel %s" % (sys.version_info[:3] + (setuptools.__version__, wheel.__version__)))')
nodever="node $(node --version | tr -d v), npm $(npm --version), typescript $(sdk/typescript/node_modules/.bin/tsc --version | sed 's/^Version //')"
"$PYTHON3" - "$out" "$version" "$commit" "$epoch" "$gover" "$pyver" "$nodever" <<'EOF'
import json, os, sys
out, version, commit, epoch, gover, pyver, nodever = sys.argv[1:]
kinds = {".tar.gz": "archive", ".whl": "wheel", ".tgz": "npm"}
artifacts = []
for line in open(os.path.join(out, "SHA256SUMS")):
    digest, name = line.split(maxsplit=1)
    name = name.strip()
    a = {"name": name, "size": os.path.getsize(os.path.join(out, name)), "sha256": digest}
    if name.startswith("barista-") and "-linux-" in name:
        a["what"], a["platform"] = "server and command line", "linux/" + name.split("-linux-")[1].split(".")[0]
    elif name.startswith("python/"):
        a["what"] = "Python SDK " + ("wheel" if name.endswith(".whl") else "sdist")
    elif name.startswith("typescript/"):
        a["what"] = "TypeScript SDK (npm package)"
    artifacts.append(a)
manifest = {"name": "barista", "version": version, "commit": commit, "source_date_epoch": int(epoch),
            "toolchains": {"go": gover, "python": pyver, "node": nodever}, "artifacts": artifacts}
with open(os.path.join(out, "MANIFEST.json"), "w") as f:
    json.dump(manifest, f, indent=2, sort_keys=True)
    f.write("\n")
EOF
echo "dist: $out (version $version, commit $commit)"
