#!/usr/bin/env bash
# Trains one config for N steps on the GPU and on the CPU from the same seed and prints their
# losses and gradient norms side by side (a GPU numerics check at the level of `deltatron train`).
# Usage: tools/dev/gpu_cpu_track.sh DELTATRON CONFIG STEPS OUT_DIR [--set KEY=VALUE ...]
set -euo pipefail
bin=$1 config=$2 steps=$3 out=$4
shift 4
mkdir -p "$out"
for dev in cuda cpu; do
  rm -rf "$out/$dev"
  "$bin" train --config "$config" --device "$dev" --run-dir "$out/$dev" --set train.steps="$steps" \
    --set run.log_every=1 --set train.eval_every=0 --set train.checkpoint_every=0 "$@" > "$out/$dev.log" 2>&1 ||
    { echo "gpu_cpu_track: the $dev run failed:"; tail -5 "$out/$dev.log"; exit 1; }
done
python3 - "$out/cuda/metrics.jsonl" "$out/cpu/metrics.jsonl" <<'PY'
import json, sys
def rows(p):
    return {r["step"]: r for r in map(json.loads, open(p)) if "loss" in r and r.get("loss") is not None}
g, c = rows(sys.argv[1]), rows(sys.argv[2])
print(f"{'step':>4} {'loss gpu':>9} {'loss cpu':>9} {'diff':>8} {'gnorm gpu':>9} {'gnorm cpu':>9}")
for s in sorted(set(g) & set(c)):
    print(f"{s:4d} {g[s]['loss']:9.4f} {c[s]['loss']:9.4f} {g[s]['loss'] - c[s]['loss']:8.4f} "
          f"{g[s]['grad_norm']:9.4f} {c[s]['grad_norm']:9.4f}")
PY
