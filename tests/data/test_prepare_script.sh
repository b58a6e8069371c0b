#!/usr/bin/env bash
# Offline test of scripts/prepare_fineweb_edu.py (its --local path) on the bundled FineWeb-Edu sample.
# Usage: test_prepare_script.sh DELTATRON_BINARY SOURCE_DIR   (registered with ctest in tests/CMakeLists.txt)
set -euo pipefail
bin=$1
src=$2
script="$src/scripts/prepare_fineweb_edu.py"
sample="$src/assets/fineweb-edu/fineweb_edu.jsonl"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A `datasets` module that refuses to load: the --local path must never import it.
mkdir "$tmp/fake"
echo 'raise ImportError("the offline path imported datasets")' >"$tmp/fake/datasets.py"
export PYTHONPATH="$tmp/fake"

# 1. The whole sample through the script equals `deltatron prepare` on the file, byte for byte.
python3 "$script" --local "$sample" --out "$tmp/a" --deltatron "$bin" --shard-tokens 60000 --threads 2 \
  >"$tmp/a.out" 2>"$tmp/a.err" || { cat "$tmp/a.err" >&2; fail "the script failed on the bundled sample"; }
"$bin" prepare --input "$sample" --out "$tmp/b" --shard-tokens 60000 --threads 1 >/dev/null 2>&1 ||
  fail "deltatron prepare failed on the bundled sample"
[ -f "$tmp/a/fineweb_edu_val_000000.bin" ] || fail "no validation shard"
[ -f "$tmp/a/fineweb_edu_train_000001.bin" ] || fail "no train shard"
# The shards, byte for byte (the manifests differ in the inputs they record: - and the file).
diff -r -x '*.manifest.json' "$tmp/a" "$tmp/b" >/dev/null || fail "the script's shards differ from deltatron prepare's"
[ -f "$tmp/a/fineweb_edu.manifest.json" ] || fail "no manifest"
for f in "$tmp"/a/*.bin; do
  "$bin" info "$f" >"$tmp/info.out" || fail "deltatron info rejects $f"
  grep -q "valid:      yes" "$tmp/info.out" || fail "deltatron info: $f not valid"
done
grep -q "documents:  17 " <("$bin" info "$tmp/a/fineweb_edu_val_000000.bin") || fail "validation shard: not 17 documents"

# 2. --max-docs stops early: 30 documents -> 3 for validation (a tenth), 27 for training.
python3 "$script" --local "$sample" --max-docs 30 --out "$tmp/c" --deltatron "$bin" >/dev/null 2>&1 ||
  fail "--max-docs 30 failed"
grep -q "documents:  3 " <("$bin" info "$tmp/c/fineweb_edu_val_000000.bin") || fail "--max-docs 30: not 3 val documents"
grep -q "documents:  27 " <("$bin" info "$tmp/c/fineweb_edu_train_000001.bin") || fail "--max-docs 30: not 27 train documents"

# 3. Errors come back as a non-zero exit with a message: a bad line (its line number), a missing file,
#    and the download path without `datasets` (which must say how to work offline).
printf '{"text": "one"}\n{"text": "two"}\n{broken\n' >"$tmp/bad.jsonl"
if python3 "$script" --local "$tmp/bad.jsonl" --out "$tmp/d" --deltatron "$bin" 2>"$tmp/d.err"; then
  fail "a malformed line was accepted"
fi
grep -q "line 3: not valid JSON" "$tmp/d.err" || { cat "$tmp/d.err" >&2; fail "no line number for a malformed line"; }
if python3 "$script" --local "$tmp/missing.jsonl" --out "$tmp/e" --deltatron "$bin" 2>"$tmp/e.err"; then
  fail "a missing --local file was accepted"
fi
grep -q "missing.jsonl" "$tmp/e.err" || fail "the missing file is not named"
if python3 "$script" --max-docs 5 --out "$tmp/f" --deltatron "$bin" 2>"$tmp/f.err"; then
  fail "the download path ran without datasets"
fi
grep -q -- "--local" "$tmp/f.err" || fail "the download error does not point to --local"
[ ! -e "$tmp/f" ] || fail "the failed download left an output directory"

# 4. --help documents the offline path.
python3 "$script" --help | grep -q -- "--local FILE.jsonl" || fail "--help does not document --local"
echo "prepare_fineweb_edu.py: all checks passed"
