#!/usr/bin/env bash
# bench/bench_gdn_peers.py: a malformed FLA_PROFILE is refused with a clear message before torch or
# fla load (so this runs without either).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
err=$(mktemp)
trap 'rm -f "$err"' EXIT
for bad in "4,4096" "4,4096,16,x" "4,0,16,128" "a"; do
  if FLA_PROFILE="$bad" python3 "$repo/bench/bench_gdn_peers.py" 2>"$err"; then
    echo "FLA_PROFILE=$bad: expected failure"; exit 1
  fi
  grep -q "FLA_PROFILE must be B,T,H,D" "$err" || { echo "FLA_PROFILE=$bad: wrong message:"; cat "$err"; exit 1; }
done
echo "bench_gdn_peers: bad FLA_PROFILE values refused"
