#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a while each:
#   scripts/fuzz.sh [FUZZTIME]      (default 1m; Go syntax: 10s, 5m, 1000x)
# A finding is written under the package's testdata/fuzz/FuzzX/ by Go;
# commit it with the fix so that plain "go test" replays it forever.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-1m}
status=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "== $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$pkg"; then
      status=1
    fi
  done
done
exit $status
