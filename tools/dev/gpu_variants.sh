#!/usr/bin/env bash
# A/B of kernel variants in one device call: bench_gdn from main (.devbin/) and from each variant
# (.devbin/NAME/bench_gdn, built here from another commit or a patch), same shapes, same options,
# interleaved so that the card's state is shared; then ncu's per-kernel times for each.
#
# Here: build each variant's bench_gdn and copy it to .devbin/NAME/ (and test_gpu there to check it):
#   tools/dev/stage_variant.sh NAME BRANCH does that for a branch or commit.
# Then: run(carry=[".devbin"], command="export OUT; VARIANTS='a b' bash tools/dev/gpu_variants.sh")
# Env: VARIANTS (names under .devbin/), ARGS ("opts;opts": each option set runs every variant),
#      SHAPES (bench_gdn's), NCU ("B,T,H,D ..."), NCU_ARGS (ncu's option set; default: ARGS'
#      first), ROUNDS (default 2), TESTS (gtest filter: runs each
#      variant's test_gpu when it has one), JSON_DIR (bench_gdn's JSON files; default /tmp),
#      TRAIN=1 (bench_train, hybrid 124M, for each variant that has one: main's is .devbin/bench_train).
#      With ARGS="--digest" each shape also prints its outputs' hashes: variants meant to give the same bits
#      print the same (set NCU_ARGS=" " then, so that ncu does not count the extra run).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH=$PWD/.devbin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
# the device call returns at most a few files: bench_gdn's JSONs stay in /tmp unless JSON_DIR says
JSON_DIR=${JSON_DIR:-/tmp}
SHAPES=${SHAPES:-16,1024,12,64;4,4096,16,128;1,32768,16,128}
names=(main ${VARIANTS:-})
bin() { [[ $1 == main ]] && echo .devbin || echo ".devbin/$1"; }
if [[ -n "${TESTS:-}" ]]; then
  for v in "${names[@]}"; do
    [[ -x $(bin "$v")/test_gpu ]] || continue
    timeout 300 "$(bin "$v")/test_gpu" --gtest_filter="$TESTS" > "/tmp/test_$v.log" 2>&1
    echo "== tests $v rc=$? $(grep -cE '^\[       OK' "/tmp/test_$v.log") ok"
    grep -E "^\[  FAILED|Failure" -A3 "/tmp/test_$v.log" | head -12
    awk -f tools/dev/max_errors.awk "/tmp/test_$v.log"
  done
fi
IFS=';' read -ra sets <<< "${ARGS:- }"
for round in $(seq "${ROUNDS:-2}"); do
  for a in "${sets[@]}"; do
    for v in "${names[@]}"; do
      echo "== round $round, $v, options: $a"
      # shellcheck disable=SC2086
      "$(bin "$v")/bench_gdn" --shapes "$SHAPES" --no-ceilings $a --json "$JSON_DIR/gdn_${v}_r$round.json" 2>&1 |
        grep -E "^B[0-9]+_T[0-9]+_H[0-9]+_D[0-9]+ +[0-9]| bits: " | head -12
    done
  done
done
a=${NCU_ARGS:-${sets[0]}}
for sh in ${NCU:-}; do
  for v in "${names[@]}"; do
    # shellcheck disable=SC2086
    timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw "$(bin "$v")/bench_gdn" \
      --shapes "$sh" --iters 1 --warmup 0 --profile $a > /tmp/ncu.csv 2> /tmp/ncu.err
    echo "== ncu $sh, $v, options: $a"
    python3 tools/dev/ncu_summary.py /tmp/ncu.csv | head -12
  done
done
if [[ -n "${TRAIN:-}" ]]; then
  for v in "${names[@]}"; do
    [[ -x $(bin "$v")/bench_train ]] || continue
    echo "== train $v"
    timeout 120 "$(bin "$v")/bench_train" --config configs/hybrid_124m.yaml --steps 20 --warmup 5 2>&1 | tail -3
  done
fi
