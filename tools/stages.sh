#!/usr/bin/env bash
# Runs `MAKE STAGE` for each stage in turn and prints how long each took, also when one fails
# (the later stages are then not run).
#   tools/stages.sh MAKE STAGE...
set -uo pipefail
make=$1; shift
rows=()
start=$(date +%s)
status=0
for stage in "$@"; do
  t=$(date +%s)
  if $make --no-print-directory "$stage"; then result=ok; else result=FAILED; status=1; fi
  rows+=("$(printf '%-14s %6d s   %s' "$stage" $(($(date +%s) - t)) "$result")")
  [ "$status" -eq 0 ] || break
done
echo
echo "stage            time    result"
printf '%s\n' "${rows[@]}"
printf '%-14s %6d s\n' total $(($(date +%s) - start))
exit "$status"
