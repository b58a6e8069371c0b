#!/usr/bin/env bash
# The Hugging Face round trip with transformers (scripts/hf_check.py): trains the quickstart model for
# 60 steps (on the GPU when DEVICE=cuda), exports it in fp32 and bf16, and checks each export with
# transformers: tokenizer, loading, logits of prompts against `deltatron generate --logits-out`
# (prefill and decode positions; the fp32 export against the CPU's generate, the bf16 export against
# the GPU's when DEVICE=cuda), the same 32 greedy tokens from transformers' generate, and the loss
# against `deltatron eval`. Labelled gpu: it needs a Python with torch and transformers 5.x (the GPU
# machine has them); without them it exits 77, which ctest reports as skipped.
# Usage: test_hf_transformers.sh path/to/deltatron   (env: PYTHON, default python3; DEVICE, default
# cuda when nvidia-smi sees a GPU, else cpu)
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(realpath "${1:?usage: test_hf_transformers.sh path/to/deltatron}")
py=${PYTHON:-python3}
if ! "$py" -c "import torch, safetensors; from transformers import Qwen3_5ForCausalLM" 2>/dev/null; then
  echo "skipped: $py lacks torch, safetensors or transformers with Qwen3_5ForCausalLM"
  exit 77
fi
device=${DEVICE:-$(nvidia-smi -L >/dev/null 2>&1 && echo cuda || echo cpu)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$tmp" || exit 1
"$bin" prepare --input "$repo/assets/fineweb-edu/fineweb_edu.jsonl" --out shards > prepare.log 2>&1 ||
  fail "prepare: $(tail -3 prepare.log)"
"$bin" train --config "$repo/configs/quickstart.yaml" --run-dir run --device "$device" \
  --set data.train='shards/fineweb_edu_train_*.bin' --set data.val='shards/fineweb_edu_val_*.bin' \
  --set train.steps=60 --set train.checkpoint_every=60 --set train.eval_every=0 > train.log 2>&1 ||
  fail "train: $(tail -3 train.log)"
ckpt=run/checkpoints/step_00000060.h5
status=0
for dtype in fp32 bf16; do
  "$bin" export --format hf --checkpoint "$ckpt" --out "hf_$dtype" --dtype "$dtype" > "export_$dtype.log" 2>&1 ||
    fail "export --dtype $dtype: $(tail -3 "export_$dtype.log")"
  echo "== $dtype export"
  # fp32 against the CPU's fp32 generate (tolerance 1e-3); bf16 against the GPU's bf16 one (2e-2).
  gen_device=cpu
  [[ $dtype == bf16 ]] && gen_device=$device
  "$py" "$repo/scripts/hf_check.py" "hf_$dtype" --deltatron "$bin" --checkpoint "$ckpt" \
    --data 'shards/fineweb_edu_val_*.bin' --device "$gen_device" || status=1
done
exit $status
