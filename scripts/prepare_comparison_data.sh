#!/usr/bin/env bash
# Turns the corpus text of scripts/build_corpus.py into the token shards the comparison configs read:
#   OUT/corpus_train_*.bin           train.jsonl (deltatron prepare --name corpus --val-docs 0)
#   OUT/fineweb_edu_val_000000.bin   all of val_fineweb_edu.jsonl
#   OUT/fineweb_val_000000.bin       all of val_fineweb.jsonl
#   OUT/docs_val_000000.bin          all of val_docs.jsonl
# `deltatron prepare` refuses --val-docs equal to the number of documents (it leaves no train shard), so
# each validation file is prepared with --val-docs 0 into one shard, which is then renamed *_val_000000.bin
# (train and validation shards have the same format). Everything is written to a temporary directory next
# to OUT and renamed into place at the end; a failure leaves a previous OUT untouched.
#
# Usage: scripts/prepare_comparison_data.sh TEXT OUT_SHARD_DIR [DELTATRON_BINARY]
#   TEXT: the directory with the jsonl files, or the bundle corpus_text.tar.xz
set -euo pipefail

die() { echo "prepare_comparison_data: error: $*" >&2; exit 1; }
[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: $0 TEXT_DIR|corpus_text.tar.xz OUT_SHARD_DIR [DELTATRON_BINARY]"
text=$1
out=${2%/}
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${3:-$repo/build/deltatron}
[ -x "$bin" ] || bin=$(command -v deltatron || true)
[ -n "$bin" ] && [ -x "$bin" ] ||
  die "no deltatron binary at ${3:-$repo/build/deltatron} or on PATH; build it (scripts/build.sh) or pass its path"
shard_tokens=100000000

mkdir -p "$(dirname "$out")"
tmp=$(mktemp -d "$(dirname "$out")/.$(basename "$out").tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

if [ -f "$text" ]; then
  case "$text" in
    *.tar.xz) ;;
    *) die "$text is a file but not a .tar.xz bundle; pass the corpus directory or corpus_text.tar.xz" ;;
  esac
  mkdir "$tmp/text"
  tar -xJf "$text" -C "$tmp/text" || die "cannot unpack $text; is it a complete corpus_text.tar.xz?"
  text_dir=$(dirname "$(find "$tmp/text" -name train.jsonl | head -n1)")
  [ "$text_dir" != "." ] || die "$text holds no train.jsonl"
elif [ -d "$text" ]; then
  text_dir=$text
else
  die "$text does not exist; pass the output directory of scripts/build_corpus.py or its corpus_text.tar.xz"
fi
for f in train.jsonl val_fineweb_edu.jsonl val_fineweb.jsonl val_docs.jsonl; do
  [ -s "$text_dir/$f" ] || die "$text_dir/$f is missing or empty; run scripts/build_corpus.py --out $text_dir"
done

mkdir "$tmp/shards"
echo "prepare_comparison_data: train.jsonl -> corpus_train_*.bin" >&2
"$bin" prepare --input "$text_dir/train.jsonl" --out "$tmp/shards" --name corpus --val-docs 0 \
  --shard-tokens "$shard_tokens"
for pair in fineweb_edu:val_fineweb_edu fineweb:val_fineweb docs:val_docs; do
  name=${pair%%:*}
  src=$text_dir/${pair#*:}.jsonl
  echo "prepare_comparison_data: $(basename "$src") -> ${name}_val_000000.bin" >&2
  stage=$tmp/stage_$name
  "$bin" prepare --input "$src" --out "$stage" --name "$name" --val-docs 0 --shard-tokens "$shard_tokens"
  made=("$stage"/*.bin)
  [ ${#made[@]} -eq 1 ] && [ -f "$stage/${name}_train_000001.bin" ] ||
    die "$src gave ${#made[@]} shards, expected one; it holds more than $shard_tokens tokens"
  mv "$stage/${name}_train_000001.bin" "$tmp/shards/${name}_val_000000.bin"
  # The set's manifest (data/manifest.h) follows the shard under its new name, so that the loader's
  # globs accept it beside the corpus set.
  python3 - "$stage/$name.manifest.json" "$tmp/shards/$name.manifest.json" "${name}_val_000000.bin" <<'PY'
import json, sys
src, dst, file = sys.argv[1:4]
with open(src) as f:
    m = json.load(f)
m["shards"][0]["file"] = file
with open(dst + ".tmp", "w") as f:
    json.dump(m, f, indent=2)
    f.write("\n")
import os
os.replace(dst + ".tmp", dst)
PY
done

# Token counts from the shard headers (int32 magic, version, token count; tokens include one <|endoftext|>
# per document).
python3 - "$tmp/shards" > "$tmp/shards/TOKENS.txt" <<'PY'
import glob, os, struct, sys
total = 0
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.bin"))):
    with open(path, "rb") as f:
        magic, version, n = struct.unpack("<3i", f.read(12))
    print(f"{os.path.basename(path)}\t{n}")
    if "_train_" in path:
        total += n
print(f"train_total\t{total}")
PY
cat "$tmp/shards/TOKENS.txt"

if [ -e "$out" ]; then
  mv "$out" "$tmp/previous"
fi
mv "$tmp/shards" "$out" || { [ -e "$tmp/previous" ] && mv "$tmp/previous" "$out"; die "cannot rename into $out"; }
echo "prepare_comparison_data: shards in $out" >&2
