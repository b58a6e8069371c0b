#!/usr/bin/env bash
# bench/bench_decode.py without a GPU or transformers: bad arguments are refused, and a --no-peer run
# of the quickstart model on the CPU (contexts 16 and 40, batches 1 and 2, 5 new tokens) writes one
# JSON row per context and batch with the prompt length asked, a decode rate, the state's size, and
# the peer marked as not run; the table has a row each.
# Usage: test_bench_decode.sh path/to/deltatron
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: test_bench_decode.sh path/to/deltatron}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
bd="$repo/bench/bench_decode.py"
python3 "$bd" --deltatron "$bin" --new-tokens 3 > "$tmp/err.txt" 2>&1 && fail "--new-tokens 3 accepted"
grep -q "new-tokens must be >= 4" "$tmp/err.txt" || fail "no clear error for --new-tokens 3: $(cat "$tmp/err.txt")"
python3 "$bd" --deltatron "$bin" --device tpu > "$tmp/err.txt" 2>&1 && fail "--device tpu accepted"
python3 "$bd" --deltatron "$bin" --device cpu --configs configs/quickstart.yaml --contexts 16,40 --batches 1,2 \
  --new-tokens 5 --no-peer --work "$tmp/work" --json "$tmp/out.json" > "$tmp/table.md" 2> "$tmp/log.txt" ||
  fail "the run failed: $(tail -5 "$tmp/log.txt")"
[[ $(grep -c "^| quickstart |" "$tmp/table.md") == 4 ]] || fail "expected 4 table rows: $(cat "$tmp/table.md")"
python3 - "$tmp/out.json" << 'PY' || fail "JSON rows"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert d["device"] == "cpu" and d["new_tokens"] == 5, d
assert [(r["context"], r["batch"]) for r in rows] == [(16, 1), (16, 2), (40, 1), (40, 2)], rows
for r in rows:
    o = r["deltatron"]
    assert "error" not in o, o
    assert o["prompt_tokens"] == r["context"], (o["prompt_tokens"], r["context"])
    assert o["decode_tokens_per_s"] > 0 and o["all_steps_tokens_per_s"] > 0 and o["state_bytes"] > 0 and o["device_used_delta_bytes"] is None, o
    assert r["transformers"] == {"error": "--no-peer"}, r["transformers"]
# A longer context and a second sequence hold more state.
s = {(r["context"], r["batch"]): r["deltatron"]["state_bytes"] for r in rows}
assert s[(40, 1)] > s[(16, 1)] and s[(16, 2)] > s[(16, 1)], s
PY
echo "bench_decode: arguments, table and JSON checked"
