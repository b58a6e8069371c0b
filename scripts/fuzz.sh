#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) for the shard reader, the checkpoint reader
# and the safetensors reader, and runs each for a while from a valid seed.
#   scripts/fuzz.sh [--seconds N] [--out DIR] [--hdf5]   (default 60 s per target, DIR build-fuzz)
# ctest runs it as a short smoke test; run it longer by hand before touching a reader.
#
# --hdf5 adds a run that re-seals each mutated checkpoint's whole-file SHA-256 so the bytes reach
# libhdf5's parser. With Debian's HDF5 1.10.8 that finds heap overflows inside libhdf5 itself
# (e.g. in H5O__attr_exists) within a minute: HDF5 is not hardened against hostile files. That is
# why the checkpoint reader verifies the whole-file checksum before HDF5 sees a byte, and why this
# run is not part of the smoke test (its crashes are HDF5's, not ours).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
out=build-fuzz
hdf5=0
while (($#)); do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --hdf5) hdf5=1; shift ;;
    *) echo "fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (scripts/install_deps.sh installs it)" >&2; exit 1; }
mkdir -p "$out"
hdf5_cflags=$(pkg-config --cflags hdf5 2>/dev/null || echo -I/usr/include/hdf5/serial)
hdf5_libs=$(pkg-config --libs hdf5 2>/dev/null || echo "-L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5")
flags="-std=c++20 -O1 -g -I. $hdf5_cflags -fsanitize=address,undefined -fno-sanitize-recover=undefined"
srcs="core/dtype.cpp core/tensor.cpp core/sha256.cpp data/shard.cpp trainer/checkpoint_format.cpp io/safetensors.cpp"
libs="$hdf5_libs -lfmt -lcrypto"
clang++ $flags -fsanitize=fuzzer tests/fuzz/fuzz_shard.cpp $srcs $libs -o "$out/fuzz_shard"
clang++ $flags -fsanitize=fuzzer tests/fuzz/fuzz_checkpoint.cpp $srcs $libs -o "$out/fuzz_checkpoint"
clang++ $flags -fsanitize=fuzzer tests/fuzz/fuzz_safetensors.cpp $srcs $libs -o "$out/fuzz_safetensors"
clang++ $flags tests/fuzz/make_seeds.cpp $srcs $libs -o "$out/make_seeds"
rm -rf "$out/seeds" && mkdir -p "$out/seeds/shard" "$out/seeds/checkpoint" "$out/seeds/safetensors"
ASAN_OPTIONS=detect_leaks=0 "$out/make_seeds" "$out/seeds"
mkdir -p "$out/corpus_shard" "$out/corpus_checkpoint" "$out/corpus_checkpoint_resealed" "$out/corpus_safetensors"
run() {  # name corpus seeds [env]
  echo "fuzz.sh: $1 for ${seconds}s"
  env ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 ${4:-} "$out/$1" -max_total_time="$seconds" -max_len=16384 -print_final_stats=1 \
    -artifact_prefix="$out/crash_" "$out/$2" "$out/seeds/$3" 2>&1 | grep -E "Done|stat::number_of_executed_units|ERROR|SUMMARY" || true
  if ls "$out"/crash_* >/dev/null 2>&1; then
    echo "fuzz.sh: $1 found a crash: $(ls "$out"/crash_*)" >&2
    exit 1
  fi
}
run fuzz_shard corpus_shard shard
run fuzz_checkpoint corpus_checkpoint checkpoint
run fuzz_safetensors corpus_safetensors safetensors
if ((hdf5)); then run fuzz_checkpoint corpus_checkpoint_resealed checkpoint FUZZ_RESEAL=1; fi
echo "fuzz.sh: no crashes"
