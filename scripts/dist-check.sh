#!/usr/bin/env bash
# make dist-check: is the release reproducible, and does it install?
#
#   scripts/dist-check.sh [OUT]     (default dist/)
#
# Builds the release twice (scripts/dist.sh): into OUT from this tree,
# then from a copy of the tree's files in another directory, with an
# empty Go build cache and the first build's commit and date, and
# compares every byte (SHA256SUMS and MANIFEST.json). Then
# TestReleaseArtifacts (test/release_test.go) checks OUT: the checksums,
# the release's binary of this machine's architecture, the wheel
# installed offline into a fresh virtual environment, and the Python
# example run by it against a cluster of the release's binary. About 6
# minutes on 2 cores (most of it the second build's compile from an empty
# cache).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out=${1:-$root/dist}
case $out in /*) ;; *) out=$root/$out ;; esac

scripts/dist.sh "$out"
commit=$(sed -n 's/^  "commit": "\(.*\)",$/\1/p' "$out/MANIFEST.json")
epoch=$(sed -n 's/^  "source_date_epoch": \([0-9]*\),$/\1/p' "$out/MANIFEST.json")

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src"
# The tree's files as they are (tracked, and new ones not ignored), not
# its .git: the second build cannot ask git anything.
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [ -e "$f" ] && printf '%s\0' "$f"
done | xargs -0 cp --parents -t "$tmp/src"
ln -s "$root/sdk/typescript/node_modules" "$tmp/src/sdk/typescript/node_modules"
(cd "$tmp/src" && DIST_COMMIT=$commit SOURCE_DATE_EPOCH=$epoch GOCACHE="$tmp/gocache" scripts/dist.sh "$tmp/second")

if ! cmp -s "$out/SHA256SUMS" "$tmp/second/SHA256SUMS" || ! cmp -s "$out/MANIFEST.json" "$tmp/second/MANIFEST.json"; then
  echo "dist-check: the two builds differ:" >&2
  diff "$out/SHA256SUMS" "$tmp/second/SHA256SUMS" >&2 || true
  diff "$out/MANIFEST.json" "$tmp/second/MANIFEST.json" >&2 || true
  exit 1
fi
echo "dist-check: two builds, $(wc -l <"$out/SHA256SUMS") artifacts, the same bytes:"
cat "$out/SHA256SUMS"

version=$(sed -n 's/^  "version": "\(.*\)"$/\1/p' "$out/MANIFEST.json")
arch=$(go env GOARCH)
mkdir -p "$tmp/bin"
tar -xzf "$out/barista-$version-linux-$arch.tar.gz" -C "$tmp/bin"
BARISTA_DIST=$out BARISTA_BIN="$tmp/bin/barista-$version-linux-$arch/barista" \
  go test -count=1 -p 1 -timeout 10m -run '^TestReleaseArtifacts$' -v ./test/ 2>&1 | grep -v '^\s*20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T'
exit "${PIPESTATUS[0]}"
