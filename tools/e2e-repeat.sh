#!/usr/bin/env bash
# Runs end-to-end test files again and again, stopping at the first failure, optionally with
# one core kept busy by another process (as CI's neighbours do): the check that a test waits
# for states, never for times.
#   tools/e2e-repeat.sh [--busy] N FILE...     e.g. tools/e2e-repeat.sh --busy 10 tests/e2e/*.test.mjs
# Each FILE runs N times in a row; a table of passes and the slowest run ends it. Needs pkg/
# (make test-bundles) and Chromium (make setup).
set -uo pipefail
cd "$(dirname "$0")/.."
busy=0
if [ "${1:-}" = --busy ]; then busy=1; shift; fi
n=${1:?usage: tools/e2e-repeat.sh [--busy] N FILE...}; shift
[ $# -gt 0 ] || { echo "usage: tools/e2e-repeat.sh [--busy] N FILE..." >&2; exit 2; }
hog=
if [ "$busy" = 1 ]; then
  # One core at 100 % for as long as this runs.
  sha256sum /dev/zero >/dev/null 2>&1 &
  hog=$!
  trap 'kill $hog 2>/dev/null' EXIT
fi
# Logs go to target/ (absent in a clone whose cargo target dir is elsewhere).
mkdir -p target
status=0
rows=()
for file in "$@"; do
  passed=0 slowest=0
  for ((i = 1; i <= n; i++)); do
    t=$(date +%s)
    if node --test "$file" >"target/e2e-repeat.log" 2>&1; then
      passed=$((passed + 1))
      s=$(($(date +%s) - t)); [ "$s" -gt "$slowest" ] && slowest=$s
    else
      echo "$file: run $i of $n FAILED (log: target/e2e-repeat.$(basename "$file").log)"
      cp target/e2e-repeat.log "target/e2e-repeat.$(basename "$file").log"
      status=1
      break
    fi
  done
  rows+=("$(printf '%-40s %3d/%-3d slowest %4d s' "$file" "$passed" "$n" "$slowest")")
done
echo
printf '%s\n' "${rows[@]}"
[ "$busy" = 1 ] && echo "(with one core kept busy by another process)"
exit "$status"
