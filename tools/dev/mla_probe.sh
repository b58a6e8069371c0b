#!/usr/bin/env bash
# Probes the GPU-vs-CPU gradient-norm gap of the quickstart-sized [mla, gdn, gdn, mla] model over
# rope widths (which select the RoPE kernel's vector width and lanes per head) and repeats.
set -uo pipefail
B=$1
M="--set model.mla.n_heads=2 --set model.mla.kv_lora_rank=32 --set model.mla.qk_nope_head_dim=16 --set model.mla.v_head_dim=32"
L="--set model.layers=[mla,gdn,gdn,mla]"
for r in 16 8 12 32; do
  for il in true false; do
    echo "== rope $r interleave $il"
    bash tools/dev/gpu_cpu_track.sh "$B" configs/quickstart.yaml 12 /tmp/p_${r}_$il $L $M \
      --set model.mla.qk_rope_head_dim=$r --set model.mla.rope_interleave=$il | sed -n '1p;9,13p'
  done
done
echo "== GPU repeat, rope 16 interleaved: step 8-12 grad norms of two GPU runs"
"$B" train --config configs/quickstart.yaml --device cuda --run-dir /tmp/rep --set train.steps=12 --set run.log_every=1 \
  --set train.eval_every=0 --set train.checkpoint_every=0 $L $M --set model.mla.qk_rope_head_dim=16 > /dev/null 2>&1
grep -o '"step": *[0-9]*\|"grad_norm": *[0-9.]*' /tmp/rep/metrics.jsonl | paste - - | sed -n '8,12p'
grep -o '"step": *[0-9]*\|"grad_norm": *[0-9.]*' /tmp/p_16_true/cuda/metrics.jsonl | paste - - | sed -n '8,12p'
