#!/usr/bin/env bash
# scripts/metrics_to_tensorboard.py: a metrics.jsonl (with a last line still being written) becomes
# event files whose scalars read back; --follow picks up records appended later; bad input is a
# clear error. Skips (exit 77) without the tensorboard package.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
script=$repo/scripts/metrics_to_tensorboard.py
python3 -c "import tensorboard" 2>/dev/null || { echo "SKIP: no tensorboard package"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

printf '%s\n' '{"step":1,"loss":4.5,"lr":0.001,"tokens":512}' '{"step":2,"loss":4.0,"lr":0.002,"tokens":512}' \
  '{"step":2,"val_loss":4.25}' > "$tmp/metrics.jsonl"
printf '%s' '{"step":3,"loss":3.' >> "$tmp/metrics.jsonl"  # a line the run is still writing
python3 "$script" "$tmp/metrics.jsonl" --logdir "$tmp/tb" 2>/dev/null || fail "the conversion failed"

read_back() {
  python3 - "$1" <<'PY'
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1])
acc.Reload()
for tag in sorted(acc.Tags()["scalars"]):
    print(tag, " ".join(f"{e.step}:{e.value:g}" for e in acc.Scalars(tag)))
PY
}
got=$(read_back "$tmp/tb")
want=$'loss 1:4.5 2:4\nlr 1:0.001 2:0.002\ntokens 1:512 2:512\nval_loss 2:4.25'
[ "$got" = "$want" ] || fail "scalars read back:\n$got\nwanted:\n$want"

# --follow: the cut line completes and a new record arrives while the script runs.
python3 "$script" "$tmp/metrics.jsonl" --logdir "$tmp/tb2" --follow --poll 0.1 --max-idle 1.5 2>/dev/null &
pid=$!
sleep 0.5
printf '%s\n' '5}' '{"step":4,"loss":3.25}' >> "$tmp/metrics.jsonl"
wait "$pid" || fail "--follow failed"
grep -q "^loss 1:4.5 2:4 3:3.5 4:3.25$" <<< "$(read_back "$tmp/tb2")" || fail "--follow: $(read_back "$tmp/tb2")"

# Bad input.
echo 'not json' > "$tmp/bad.jsonl"
if python3 "$script" "$tmp/bad.jsonl" --logdir "$tmp/tb3" 2>"$tmp/err"; then fail "bad JSON accepted"; fi
grep -q "bad.jsonl:1: not JSON" "$tmp/err" || fail "bad JSON: $(cat "$tmp/err")"
if python3 "$script" "$tmp/missing.jsonl" --logdir "$tmp/tb3" 2>"$tmp/err"; then fail "missing file accepted"; fi
grep -q "no such file" "$tmp/err" || fail "missing file: $(cat "$tmp/err")"
echo "metrics_to_tensorboard: ok"
