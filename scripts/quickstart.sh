#!/usr/bin/env bash
# Quickstart: installs what is missing, builds, turns the bundled FineWeb-Edu sample into token
# shards (once), trains the small hybrid of configs/quickstart.yaml on the CPU (a few minutes),
# then prints the first and last training loss and the validation loss. Fails (exit 1) unless
# the last training loss is at most 0.7 x the first.
#   scripts/quickstart.sh                                  # the whole thing
#   scripts/quickstart.sh --set train.steps=50             # extra arguments go to `deltatron train`
#   scripts/quickstart.sh --run-dir runs/qs2
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
BUILD_TARGET=deltatron scripts/build.sh
bin="${BUILD_DIR:-build}/deltatron"

shards=shards/fineweb_edu_sample
if [ -f "$shards/fineweb_edu.manifest.json" ]; then  # written last by prepare: the set is complete
  echo "quickstart: shards already in $shards"
else
  "$bin" prepare --input assets/fineweb-edu/fineweb_edu.jsonl --out "$shards" --overwrite
fi

# The run directory: configs/quickstart.yaml says runs/quickstart; --run-dir overrides it.
run_dir=runs/quickstart
prev=""
for arg in "$@"; do
  [ "$prev" = "--run-dir" ] && run_dir=$arg
  case "$arg" in --run-dir=*) run_dir=${arg#--run-dir=} ;; esac
  prev=$arg
done

start=$SECONDS
"$bin" train --config configs/quickstart.yaml --overwrite "$@"
echo "quickstart: training took $((SECONDS - start)) s"

python3 - "$run_dir/metrics.jsonl" <<'PY'
import json, sys
path = sys.argv[1]
train, val = [], []
with open(path) as f:
    for line in f:
        m = json.loads(line)
        if "loss" in m:
            train.append(m["loss"])
        elif "val_loss" in m:
            val.append(m["val_loss"])
if not train:
    sys.exit(f"quickstart: {path} holds no training steps")
first, last = train[0], train[-1]
val_text = f"{val[-1]:.4f}" if val else "none"
print(f"quickstart: first loss {first:.4f}, last loss {last:.4f} ({last / first:.2f} x first), val loss {val_text}")
if not last <= 0.7 * first:
    sys.exit(f"quickstart: FAILED: the last training loss {last:.4f} is above 0.7 x the first ({0.7 * first:.4f})")
print("quickstart: OK")
PY
