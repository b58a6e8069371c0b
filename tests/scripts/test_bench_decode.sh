#!/usr/bin/env bash
# bench/bench_decode.py without a GPU or transformers: bad arguments are refused, and a --no-peer run
# of the quickstart model on the CPU (contexts 16 and 40, batches 1 and 2, 8 new tokens) writes one
# JSON row per context and batch with the prompt length asked, a decode rate, the state's size, and
# the peer marked as not run; the table has a row each. A tiny MLA hybrid given plain and as
# PATH@fp8 gives a row each, the second labelled "(fp8 cache)", decoded with --mla-cache fp8 and
# holding a smaller state; an unknown variant is refused; the default configs include the fp8 row;
# a failed decode is recorded by its message without the source's absolute path.
# Usage: test_bench_decode.sh path/to/deltatron
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: test_bench_decode.sh path/to/deltatron}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
bd="$repo/bench/bench_decode.py"
python3 "$bd" --deltatron "$bin" --new-tokens 11 > "$tmp/err.txt" 2>&1 && fail "--new-tokens 11 accepted"
grep -q "new-tokens must be >= 12" "$tmp/err.txt" || fail "no clear error for --new-tokens 11: $(cat "$tmp/err.txt")"
python3 "$bd" --deltatron "$bin" --device tpu > "$tmp/err.txt" 2>&1 && fail "--device tpu accepted"
python3 "$bd" --deltatron "$bin" --device cpu --configs configs/quickstart.yaml --contexts 16,40 --batches 1,2 \
  --new-tokens 12 --no-peer --work "$tmp/work" --json "$tmp/out.json" > "$tmp/table.md" 2> "$tmp/log.txt" ||
  fail "the run failed: $(tail -5 "$tmp/log.txt")"
[[ $(grep -c "^| quickstart |" "$tmp/table.md") == 4 ]] || fail "expected 4 table rows: $(cat "$tmp/table.md")"
python3 - "$tmp/out.json" << 'PY' || fail "JSON rows"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert d["device"] == "cpu" and d["new_tokens"] == 12, d
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
python3 "$bd" --deltatron "$bin" --configs configs/quickstart.yaml@fp9 > "$tmp/err.txt" 2>&1 && fail "@fp9 accepted"
grep -q "unknown variant" "$tmp/err.txt" || fail "no clear error for @fp9: $(cat "$tmp/err.txt")"
python3 -c "import sys; sys.path.insert(0, '$repo/bench'); import bench_decode as b; \
assert 'configs/experiments/hybrid_mla_124m.yaml@fp8' in b.DEFAULT_CONFIGS.split(','), b.DEFAULT_CONFIGS" ||
  fail "the default configs lack hybrid_mla_124m@fp8"
cat > "$tmp/tiny_mla.yaml" << 'YAML'
model:
  d_model: 64
  d_ff: 96
  layers: [gdn, mla]
  tie_embeddings: false
  mla: {n_heads: 2, q_lora_rank: 0, kv_lora_rank: 128, qk_nope_head_dim: 16, qk_rope_head_dim: 16, v_head_dim: 16}
  gdn: {n_k_heads: 1, n_v_heads: 2, head_k_dim: 32, head_v_dim: 32}
run:
  name: tiny_mla
YAML
python3 "$bd" --deltatron "$bin" --device cpu --configs "$tmp/tiny_mla.yaml,$tmp/tiny_mla.yaml@fp8" --contexts 16 \
  --batches 1 --new-tokens 12 --no-peer --work "$tmp/work" --json "$tmp/mla.json" > "$tmp/mla.md" 2> "$tmp/log.txt" ||
  fail "the MLA run failed: $(tail -5 "$tmp/log.txt")"
grep -q "^| tiny_mla (fp8 cache) | 16 | 1 |" "$tmp/mla.md" || fail "no fp8 row: $(cat "$tmp/mla.md")"
python3 - "$tmp/mla.json" << 'PY' || fail "MLA JSON rows"
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
assert [r["model"] for r in rows] == ["tiny_mla", "tiny_mla (fp8 cache)"], rows
plain, fp8 = (r["deltatron"] for r in rows)
assert "error" not in plain and "error" not in fp8, rows
assert plain["mla_cache"] == "bf16" and fp8["mla_cache"] == "fp8", rows
assert fp8["state_bytes"] < plain["state_bytes"], (fp8["state_bytes"], plain["state_bytes"])
PY
# A failed decode is recorded by its message, without the source location's absolute path.
printf '#!/bin/sh\necho "deltatron: error: device: CUDA error 2 (out of memory) at /build/here/core/device.cpp:49" >&2\nexit 1\n' \
  > "$tmp/failing"
chmod +x "$tmp/failing"
python3 -c "import sys, types; sys.path.insert(0, '$repo/bench'); import bench_decode as b; \
r = b.deltatron_decode(types.SimpleNamespace(deltatron='$tmp/failing', new_tokens=4, device='cuda'), 'c.h5', 'p.txt', 1); \
assert r == {'error': 'deltatron: error: device: CUDA error 2 (out of memory)'}, r" ||
  fail "a failed decode's error is not recorded without its path"
echo "bench_decode: arguments, table and JSON checked"
