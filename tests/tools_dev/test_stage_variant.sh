#!/usr/bin/env bash
# tools/dev/stage_variant.sh refuses a missing build directory, an unknown ref and a REBUILD_HEAD other than
# 0 or 1 with a clear message,
# before it touches the working tree.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
err=$(mktemp)
trap 'rm -f "$err"' EXIT
expect() {  # expect WANT ARGS...: stage_variant.sh ARGS fails with WANT in its message
  local want=$1
  shift
  if bash "$repo/tools/dev/stage_variant.sh" "$@" 2>"$err"; then
    echo "stage_variant.sh $*: expected failure"; exit 1
  fi
  grep -q "$want" "$err" || { echo "stage_variant.sh $*: wrong message:"; cat "$err"; exit 1; }
}
expect "no build directory" x HEAD "$repo/no-such-build-dir"
expect "unknown ref no-such-ref-" x no-such-ref- "$repo/tools/dev"
expect "usage: stage_variant.sh NAME REF" x
REBUILD_HEAD=no expect "REBUILD_HEAD must be 0" x HEAD "$repo/tools/dev"
echo "stage_variant: missing build directory, unknown ref, missing arguments and a bad REBUILD_HEAD refused"
