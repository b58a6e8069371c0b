#!/usr/bin/env bash
# GPU tests and benchmarks from binaries built on THIS machine: no build on the device, so a call
# takes 40-60 s instead of the 4 minutes of scripts/gpu_check.sh (which builds there and runs
# everything; use it for the full record). The device's glibc and CUDA match this machine's
# (Debian 12, CUDA 13): binaries built here ran there (2026-11-29).
#
# Here, once per change:
#   cmake -S . -B build-gdncu -DCMAKE_BUILD_TYPE=Release -DDELTATRON_CUDA=ON -DDELTATRON_BENCH=ON
#   cmake --build build-gdncu --target test_gpu bench_gdn bench_train -j2
#   bash tools/dev/gpu_quick.sh --stage build-gdncu   # binaries + libfmt, libyaml-cpp into .devbin/
# Then: run(carry=[".devbin"], command="export OUT; bash tools/dev/gpu_quick.sh")
#   (add ".whl" to carry and FLA=1 for fla's kernels timed in the same call: scripts/fetch_device_debs.sh;
#    carry a .triton_cache.tar.gz from scripts/gpu_check.sh to skip most of fla's compilation)
# Env: GTEST_FILTER (default: every GPU test), SHAPES (bench_gdn's), NCU="B,T,H,D ..." (ncu's
#      per-kernel times at those shapes), PROFILE="B,T,H,D:regex ..." (ncu's sections for one kernel),
#      TRAIN=1 (bench_train, hybrid 124M), SKIP_TESTS=1, FLA_RUNS (fla processes, default 2),
#      BENCH_ARGS (more bench_gdn options, for its table, ncu and the profile, e.g. --state-cols 32),
#      NCU_FLA="B,T,H,D ..." (with FLA=1: fla's per-kernel times under ncu),
#      SASS="B,T,H,D:regex ..." (stall samples per instruction, CSV under $OUT),
#      PIPES="B,T,H,D ..." (per kernel: issue, tensor, shared memory, bank conflicts, L2, DRAM busy),
#      TIMELINE="B,T,H,D ..." (each CTA's kernel, SM, start, end and cycles in one forward + backward,
#      CSV under $OUT, summed by tools/dev/gdn_timeline.py; from .devbin/tl/bench_gdn, a build configured
#      with -DDELTATRON_GDN_TIMELINE=ON: `bash tools/dev/gpu_quick.sh --stage-timeline build-tl` here).
set -uo pipefail
cd "$(dirname "$0")/../.."
if [[ "${1:-}" == "--stage" ]]; then
  B=${2:?"usage: gpu_quick.sh --stage BUILD_DIR"}
  mkdir -p .devbin
  cp "$B/tests/test_gpu" "$B/bench/bench_gdn" .devbin/
  [[ -x "$B/bench/bench_train" ]] && cp "$B/bench/bench_train" .devbin/
  for lib in libfmt.so.9 libyaml-cpp.so.0.7; do cp -L "/lib/x86_64-linux-gnu/$lib" .devbin/ 2>/dev/null || true; done
  du -sh .devbin
  exit 0
fi
if [[ "${1:-}" == "--stage-timeline" ]]; then
  B=${2:?"usage: gpu_quick.sh --stage-timeline BUILD_DIR (configured with -DDELTATRON_GDN_TIMELINE=ON)"}
  grep -q "DELTATRON_GDN_TIMELINE:BOOL=ON" "$B/CMakeCache.txt" 2>/dev/null ||
    { echo "gpu_quick: $B is not configured with -DDELTATRON_GDN_TIMELINE=ON" >&2; exit 2; }
  mkdir -p .devbin/tl
  cp "$B/bench/bench_gdn" .devbin/tl/
  du -sh .devbin/tl
  exit 0
fi
export LD_LIBRARY_PATH=$PWD/.devbin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
if [[ -z "${SKIP_TESTS:-}" ]]; then
  timeout 300 .devbin/test_gpu --gtest_filter="${GTEST_FILTER:-*}" > /tmp/test_gpu.log 2>&1
  rc=$?
  echo "test_gpu rc=$rc"
  [[ $rc -ne 0 ]] && status=1
  grep -E "^\[  PASSED|^\[  FAILED|Failure" -A3 /tmp/test_gpu.log | head -30
  awk -f tools/dev/max_errors.awk /tmp/test_gpu.log
fi
FLA_JSON=()
if [[ -n "${FLA:-}" ]]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
    .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl
  # Triton's compiled kernels: restored from .triton_cache.tar.gz when carried (scripts/gpu_check.sh
  # saves one small enough to come back; this call's own cache, fla's two processes, did not: 2026-11-30)
  export TRITON_CACHE_DIR=/tmp/triton_cache
  mkdir -p "$TRITON_CACHE_DIR"
  [[ -f .triton_cache.tar.gz ]] && tar -xzf .triton_cache.tar.gz -C "$TRITON_CACHE_DIR"
  # FLA_RUNS processes (default 2): Triton autotunes anew in each; the JSON keeps every sample and
  # bench_gdn compares with the fastest
  for run in $(seq "${FLA_RUNS:-2}"); do
    echo "== fla, process $run"
    PYTHONPATH=/tmp/site OUT=$OUT timeout 300 python3 bench/bench_gdn_peers.py 2>&1 | tail -8
  done
  # NCU_FLA="B,T,H,D ...": fla's kernels under ncu, one forward and one forward + backward each
  for sh in ${NCU_FLA:-}; do
    FLA_PROFILE=$sh PYTHONPATH=/tmp/site timeout 200 ncu --clock-control none --profile-from-start off \
      --metrics gpu__time_duration.sum --csv --page raw python3 bench/bench_gdn_peers.py > /tmp/ncu_fla.csv 2> /tmp/ncu_fla.err
    echo "== ncu fla $sh (one fwd and one fwd+bwd)"
    python3 tools/dev/ncu_summary.py /tmp/ncu_fla.csv | head -24
  done
  FLA_JSON=(--fla-json "$OUT/fla_kernels.json")
fi
.devbin/bench_gdn --shapes "${SHAPES:-16,1024,12,64;4,4096,16,128;1,32768,16,128}" --json "$OUT/gdn.json" \
  "${FLA_JSON[@]}" ${BENCH_ARGS:-} 2>&1 | tail -14
for sh in ${NCU:-}; do
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw .devbin/bench_gdn \
    --shapes "$sh" --iters 1 --warmup 0 --profile ${BENCH_ARGS:-} > /tmp/ncu.csv 2> /tmp/ncu.err
  echo "== ncu $sh (one fwd and one fwd+bwd per kernel row count)"
  python3 tools/dev/ncu_summary.py /tmp/ncu.csv | head -14
done
# PROFILE="B,T,H,D:regex ...": ncu's speed-of-light, warp-stall, memory and occupancy sections for
# the first launch of the kernel matching regex at that shape
for spec in ${PROFILE:-}; do
  sh=${spec%%:*} re=${spec#*:}
  echo "== ncu sections, $re at $sh"
  timeout 200 ncu --clock-control none -k "regex:$re" --launch-count 1 --section SpeedOfLight \
    --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    .devbin/bench_gdn --shapes "$sh" --iters 1 --warmup 0 --profile ${BENCH_ARGS:-} 2>&1 |
    grep -vE "^==PROF==|^ *-+[ -]*$|^\s*$|^    (OPT|INF|WRN)|^          " | grep -vE " 0(\.0+)?$" | head -90
done
# PIPES="B,T,H,D ...": per kernel, how busy each unit was (issue, tensor, shared memory and its bank
# conflicts, L2, DRAM; tools/dev/ncu_pipes.py), one forward and one forward + backward
for sh in ${PIPES:-}; do
  timeout 200 ncu --clock-control none --metrics "$(python3 tools/dev/ncu_pipes.py --metrics)" --csv --page raw \
    .devbin/bench_gdn --shapes "$sh" --iters 1 --warmup 0 --profile ${BENCH_ARGS:-} > /tmp/pipes.csv 2> /tmp/pipes.err
  echo "== ncu units $sh (% of peak; conflict% = bank conflicts per shared-memory wavefront)"
  python3 tools/dev/ncu_pipes.py /tmp/pipes.csv > /tmp/pipes.txt || tail -5 /tmp/pipes.err
  head -14 /tmp/pipes.txt
done
# SASS="B,T,H,D:regex ...": ncu's source counters (warp-stall samples per SASS instruction, with the
# CUDA line when built with -lineinfo) for the first launch of the kernel matching regex, as CSV under
# $OUT (tools/dev/ncu_sass_summary.py sums them by source line here)
for spec in ${SASS:-}; do
  sh=${spec%%:*} re=${spec#*:}
  tag=$(echo "$sh-$re" | tr -c 'A-Za-z0-9_-' '_')
  timeout 200 ncu --clock-control none -k "regex:$re" --launch-count 1 --section SourceCounters \
    --import-source yes -o "/tmp/sass_$tag" -f .devbin/bench_gdn --shapes "$sh" --iters 1 --warmup 0 --profile \
    ${BENCH_ARGS:-} > /tmp/sass.log 2>&1 || tail -5 /tmp/sass.log
  ncu -i "/tmp/sass_$tag.ncu-rep" --page source --csv --print-source cuda,sass > "$OUT/sass_$tag.csv" 2>&1
  echo "== sass $re at $sh: $(wc -l < "$OUT/sass_$tag.csv") lines"
done
# TIMELINE="B,T,H,D ...": one forward + backward's per-CTA stamps at each shape (BENCH_ARGS apply)
for sh in ${TIMELINE:-}; do
  tag=$(echo "$sh" | tr ',' '_')
  # shellcheck disable=SC2086
  timeout 120 .devbin/tl/bench_gdn --shapes "$sh" --no-ceilings ${BENCH_ARGS:-} --timeline "$OUT/timeline_$tag.csv" \
    > /tmp/timeline.log 2>&1 || { tail -3 /tmp/timeline.log; status=1; continue; }
  python3 tools/dev/gdn_timeline.py "$OUT/timeline_$tag.csv"
done
if [[ -n "${TRAIN:-}" ]]; then
  timeout 120 .devbin/bench_train --config configs/hybrid_124m.yaml --steps 20 --warmup 5 2>&1 | tail -4
fi
exit $status
