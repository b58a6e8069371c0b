#!/usr/bin/env bash
# scripts/corpus_lib unit tests on tiny fixtures, and clear command-line errors of build_corpus.py and
# prepare_comparison_data.sh. Downloads nothing.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$repo/tests/scripts/test_corpus_lib.py"
# Errors: exit 1 with what is wrong.
if python3 "$repo/scripts/build_corpus.py" --out "$tmp/c" --packages , 2>"$tmp/err"; then
  echo "expected failure"; exit 1
fi
grep -q "error: --packages is empty" "$tmp/err"
if bash "$repo/scripts/prepare_comparison_data.sh" "$tmp/none" "$tmp/shards" /bin/true 2>"$tmp/err"; then
  echo "expected failure"; exit 1
fi
grep -q "$tmp/none does not exist" "$tmp/err"
test ! -e "$tmp/shards"
mkdir "$tmp/text"
if bash "$repo/scripts/prepare_comparison_data.sh" "$tmp/text" "$tmp/shards" /bin/true 2>"$tmp/err"; then
  echo "expected failure"; exit 1
fi
grep -q "train.jsonl is missing or empty" "$tmp/err"
echo "build_corpus: all checks passed"
