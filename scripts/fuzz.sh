#!/usr/bin/env bash
# Runs every Go fuzz target of the module for a while each:
#   scripts/fuzz.sh [FUZZTIME]      (default 1m; Go syntax: 10s, 5m, 1000x)
# A finding is written under the package's testdata/fuzz/FuzzX/ by Go;
# commit it with the fix so that plain "go test" replays it forever.
#
# Go 1.26's fuzz coordinator can end a run with a bare "context deadline
# exceeded" when a duration -fuzztime expires while a worker is busy
# (go.dev/issue/75804, fixed in Go 1.27): that run found nothing and wrote
# no input. Such a run is tried once more; any other failure, and a
# second bare deadline, fail.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-1m}
status=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

run() { # pkg target: 0 passed, 1 failed, 2 a bare deadline at the end of the fuzz time
  go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" -fuzzminimizetime 5s "$1" 2>&1 | tee "$log"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then return 0; fi
  if grep -q 'context deadline exceeded' "$log" && ! grep -q -e 'Failing input written' -e 'panic:' -e '_test.go:[0-9]*:' "$log"; then
    return 2
  fi
  return 1
}

for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u); do
    echo "== $pkg $target ($fuzztime)"
    rc=0; run "$pkg" "$target" || rc=$?
    if [ "$rc" -eq 2 ]; then
      echo "== $target: ended with a bare deadline at the end of its fuzz time (go.dev/issue/75804), nothing found; once more"
      rc=0; run "$pkg" "$target" || rc=$?
    fi
    if [ "$rc" -ne 0 ]; then
      status=1
    fi
  done
done
exit $status
