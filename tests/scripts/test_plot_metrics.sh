#!/usr/bin/env bash
# scripts/plot_metrics.py: a PNG for one and for two runs; clear errors for bad run directories.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for run in a b; do
  mkdir -p "$tmp/$run"
  for s in 1 2 3 4 5; do
    echo "{\"step\": $s, \"loss\": $((10 - s)).5, \"lr\": 0.001, \"grad_norm\": 1.0, \"tokens\": $((s * 512)), \"tokens_per_s\": 1000}"
  done > "$tmp/$run/metrics.jsonl"
  echo '{"step": 5, "val_loss": 6.0}' >> "$tmp/$run/metrics.jsonl"
  echo '{"step": 6, "loss": null, "skipped": true, "lr": 0.001, "tokens": 3072}' >> "$tmp/$run/metrics.jsonl"
done
python3 "$repo/scripts/plot_metrics.py" "$tmp/a"
test -s "$tmp/a/loss.png"
head -c 8 "$tmp/a/loss.png" | od -c | grep -q "P   N   G" || { echo "not a PNG"; exit 1; }
python3 "$repo/scripts/plot_metrics.py" "$tmp/a" "$tmp/b" --x tokens --smooth 2 -o "$tmp/cmp.png"
test -s "$tmp/cmp.png"
# Errors: a directory without metrics, and a corrupt line.
if python3 "$repo/scripts/plot_metrics.py" "$tmp/none" 2>"$tmp/err"; then echo "expected failure"; exit 1; fi
grep -q "metrics.jsonl does not exist" "$tmp/err"
echo "not json" >> "$tmp/b/metrics.jsonl"
if python3 "$repo/scripts/plot_metrics.py" "$tmp/b" 2>"$tmp/err"; then echo "expected failure"; exit 1; fi
grep -q "metrics.jsonl:8: not JSON" "$tmp/err"
echo "plot_metrics: all checks passed"
