#!/usr/bin/env bash
# scripts/hf_check.py's arguments, without transformers: each bad combination exits 2 with a message
# naming the flag, before anything is loaded.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect MESSAGE ARGS...
  local msg=$1 out status
  shift
  out=$(python3 "$repo/scripts/hf_check.py" "$@" 2>&1)
  status=$?
  [[ $status == 2 ]] || fail "hf_check.py $*: exit $status, want 2: $out"
  grep -qF -- "$msg" <<<"$out" || fail "hf_check.py $*: no '$msg' in: $out"
}
expect "--data needs --checkpoint" export_dir --data 'x_*.bin'
expect "--new-tokens must be >= 1" export_dir --checkpoint c.h5 --new-tokens 0
expect "invalid choice: 'tpu'" export_dir --device tpu
expect "the following arguments are required: dir"
echo "hf_check: bad arguments refused"
