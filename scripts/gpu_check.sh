#!/usr/bin/env bash
# One run on a GPU machine does it all: configure (sm_90a) into build-gpu/, build, run the GPU
# tests (`ctest -L gpu`), the training-step benchmark of the 124M models (bench_train) with the
# peers' training steps in the same run (HF Llama eager / torch.compile, fla's GDN hybrid:
# bench/bench_train_peers.py), the GDN kernels against fla (bench_gdn, bench_gdn_peers.py; the gated
# norm's variants, bench_gdn_norm), the
# dense ops (bench_dense_ops), and a GPU training smoke run of `deltatron train`; logs and JSON go
# to $OUT (default out/).
#
# Usage, from a checkout on a GPU machine (CUDA, python3 with torch for the peers):
#   bash scripts/gpu_check.sh                    (OUT=DIR for the results elsewhere)
# A host without network access (an air-gapped cluster): run scripts/fetch_device_debs.sh on a
# connected machine and copy .debs/ and .whl/ (both ignored by git) into the checkout on the host;
# this script installs from them what the host lacks (ICU and zlib headers, the cuDNN frontend
# headers, the fla wheels for the peers). A .triton_cache.tar.gz at the repository root (an earlier
# run's $OUT/triton_cache.tar.gz) spares fla's kernels their compilation.
# Env:    PROFILE=1 (ncu kernel times summed by tools/dev/ncu_summary.py; PROFILE_GDN_SHAPES="B,T,H,D ..." the bench_gdn
#         shapes profiled, 124M by default; PROFILE_SECTIONS=REGEX adds ncu sections
#         for those GDN kernels), TARGETS="..." (build only these), SKIP_BENCH=1 (tests only; DENSE_BENCH=1 still runs bench_dense_ops), SKIP_PEERS=1 (no peers),
#         SKIP_GDN_BENCH=1, SKIP_TRAIN_BENCH=1, SKIP_TESTS=1, JOBS (build parallelism, default nproc),
#         GTEST_FILTER=PATTERN (only those GPU tests: test_gpu runs them directly, ctest is skipped),
#         PEERS=llama_eager,llama_compiled,fla_hybrid (bench_train_peers.py's list), SKIP_FLA_KERNELS=1
#         (bench_gdn without fla's kernels), SKIP_TRAIN_PEERS=1 (no HF / fla training steps),
#         SKIP_SMOKE=1 (no `deltatron train` run), SCALING=1 (bench/bench_scaling.py over every GPU
#         here; SCALING_CONFIGS="configs/...yaml ..." to choose).
# cuDNN comes from the machine's python3 (torch's nvidia-cudnn-cu13); the cuDNN frontend headers, which
# the machine lacks, from python3's site-packages (scripts/install_deps.sh) or, on an offline host, from the wheel
# .whl/nvidia_cudnn_frontend-*.whl.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
# Per-step logs and JSON go to $D; $OUT gets the whole log, results.json (every benchmark's JSON
# merged) and detail.tar.gz ($D): a handful of files, easy to copy off the machine.
D=/tmp/gpu_check_detail
rm -rf "$D" && mkdir -p "$D"
exec > >(tee -a "$LOG") 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
status=0

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
nvcc --version | tail -2 || true

# --- Missing headers: unpack the Debian packages of .debs/ into a prefix (never into /).
PREFIX=/tmp/dt-prefix
EXTRA_CMAKE=()
if ! pkg-config --exists icu-uc 2>/dev/null || [[ ! -f /usr/include/zlib.h ]]; then
  step "unpacking .debs into $PREFIX (ICU: $(pkg-config --exists icu-uc && echo found || echo missing), zlib.h: $([[ -f /usr/include/zlib.h ]] && echo found || echo missing))"
  if ! ls .debs/*.deb >/dev/null 2>&1; then
    echo "no .debs/*.deb here: install ICU and zlib headers, or run scripts/fetch_device_debs.sh on a connected machine and copy .debs here"; exit 2
  fi
  mkdir -p "$PREFIX"
  for f in .debs/*.deb; do dpkg-deb -x "$f" "$PREFIX"; done
  # The .pc files say prefix=/usr: point them at the unpacked tree.
  PCDIR=$PREFIX/usr/lib/x86_64-linux-gnu/pkgconfig
  sed -i -E "s|^prefix *= */usr\$|prefix=$PREFIX/usr|" "$PCDIR"/*.pc
  export PKG_CONFIG_PATH=$PCDIR${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  EXTRA_CMAKE+=(-DCMAKE_PREFIX_PATH=$PREFIX/usr)
  if [[ ! -f /usr/include/zlib.h ]]; then
    # zlib1g-dev's libz.so is an absolute link to /lib/...; link the unpacked runtime instead
    # (same soname libz.so.1 as the system's at run time).
    EXTRA_CMAKE+=(-DZLIB_INCLUDE_DIR=$PREFIX/usr/include -DZLIB_LIBRARY=$PREFIX/lib/x86_64-linux-gnu/libz.so.1)
  fi
  pkg-config --modversion icu-uc
fi

# --- cuDNN frontend headers (header-only C++ API) from the wheel in .whl/ when there is one.
if ls .whl/nvidia_cudnn_frontend-*.whl >/dev/null 2>&1; then
  step "cuDNN frontend headers from $(ls .whl/nvidia_cudnn_frontend-*.whl | head -1)"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/nvidia_cudnn_frontend-*.whl \
    && EXTRA_CMAKE+=(-DCUDNN_FRONTEND_INCLUDE_DIR=/tmp/site/include)
else
  echo "no .whl/nvidia_cudnn_frontend-*.whl: the frontend headers must come from python3's site-packages" \
       "(scripts/install_deps.sh), else attention on the GPU will say 'built without cuDNN'" \
       "(offline: scripts/fetch_device_debs.sh on a connected machine, then copy .whl here)"
fi

step "configure"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DDELTATRON_CUDA=ON \
  -DDELTATRON_BENCH=ON "${EXTRA_CMAKE[@]}" 2>&1 | tail -20 || { echo "configure failed"; exit 3; }

TARGETS=${TARGETS:-deltatron test_gpu bench_gdn bench_gdn_norm bench_dense_ops bench_train}
step "build $TARGETS"
# shellcheck disable=SC2086
cmake --build build-gpu -j"${JOBS:-$(nproc)}" --target $TARGETS 2>&1 | tail -40
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "build failed"; exit 4; }

if [[ -n "${PROFILE:-}" ]]; then
  # Kernel times under Nsight Compute (one duration metric, clocks left alone): one training step
  # of the hybrid (after one warm-up step) and the GDN kernels at the 124M shape; summed per kernel
  # name by tools/dev/ncu_summary.py.
  step "profile: ncu over one hybrid training step and bench_gdn at 124M"
  NCU=(ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw)
  timeout 240 "${NCU[@]}" build-gpu/bench/bench_train --config configs/hybrid_124m.yaml --steps 1 --warmup 0 \
    > "$D/ncu_hybrid.csv" 2> "$D/ncu_hybrid.err"
  python3 tools/dev/ncu_summary.py "$D/ncu_hybrid.csv" 2>&1 | tee "$D/ncu_hybrid_summary.txt" | head -60
  for shape in ${PROFILE_GDN_SHAPES:-16,1024,12,64}; do
    tag=${shape//,/x}
    echo "--- bench_gdn $shape"
    timeout 120 "${NCU[@]}" build-gpu/bench/bench_gdn --shapes "$shape" --iters 1 --warmup 0 --profile \
      > "$D/ncu_gdn_$tag.csv" 2> "$D/ncu_gdn_$tag.err"
    python3 tools/dev/ncu_summary.py "$D/ncu_gdn_$tag.csv" 2>&1 | tee "$D/ncu_gdn_${tag}_summary.txt" | head -40
  done
  if [[ -n "${PROFILE_SECTIONS:-}" ]]; then
    timeout 200 ncu --clock-control none -k "regex:${PROFILE_SECTIONS}" --launch-count 6 --section SpeedOfLight \
      --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      build-gpu/bench/bench_gdn --shapes 16,1024,12,64 --iters 1 --warmup 0 --profile \
      > "$D/ncu_gdn_sections.txt" 2>&1
    grep -E "gdn_|Duration|Throughput|Warp Cycles|Stall|Occupancy|Registers|Shared Memory|Block Limit|Eligible|Issued" \
      "$D/ncu_gdn_sections.txt" | head -200
  fi
fi

if [[ -n "${SKIP_TESTS:-}" ]]; then
  echo "SKIP_TESTS: no GPU tests"
elif [[ -z "${GTEST_FILTER:-}" ]]; then
  step "ctest -L gpu"
  (cd build-gpu && ctest -L gpu --output-on-failure --timeout 300 2>&1 | tee "$D/ctest_gpu.log")
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=5
  # The gtest XML too, for exact per-test numbers.
  build-gpu/tests/test_gpu --gtest_output=xml:"$D/test_gpu.xml" > "$D/test_gpu_direct.log" 2>&1 || true
else
  step "test_gpu --gtest_filter=$GTEST_FILTER"
  build-gpu/tests/test_gpu --gtest_output=xml:"$D/test_gpu.xml" 2>&1 | tee "$D/test_gpu_direct.log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=5
fi

# Triton's compiled kernels (fla, torch.compile) in one directory: restored from .triton_cache.tar.gz
# when present (git-ignored), saved to $OUT/triton_cache.tar.gz at the end, so that the next run
# (with it copied back as .triton_cache.tar.gz) skips most of fla's compilation, which took more than
# the 240 s given to it at the long shape.
export TRITON_CACHE_DIR=/tmp/triton_cache
mkdir -p "$TRITON_CACHE_DIR"
if [[ -f .triton_cache.tar.gz ]]; then
  tar -xzf .triton_cache.tar.gz -C "$TRITON_CACHE_DIR" && echo "triton cache restored: $(du -sh "$TRITON_CACHE_DIR" | cut -f1)"
fi

PEER_ENV=()
if [[ -z "${SKIP_BENCH:-}" && -z "${SKIP_PEERS:-}" ]] && ls .whl/fla*.whl .whl/flash_linear*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/fla_core-*.whl .whl/flash_linear_attention-*.whl && PEER_ENV=(PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH})
fi

if [[ -z "${SKIP_BENCH:-}" && -z "${SKIP_TRAIN_BENCH:-}" ]]; then
  # The 124M models at 16 x 1024: the softmax baseline as configured (gated attention, q/k norm,
  # untied), the same at the HF Llama peer's architecture (plain attention, tied), and the hybrid.
  step "bench_train"
  BT=(timeout 150 build-gpu/bench/bench_train --steps 20 --warmup 5)
  "${BT[@]}" --config configs/softmax_124m.yaml --set model.attn.output_gate=false --set model.attn.qk_norm=false \
    --set model.tie_embeddings=true --name softmax_124m_llama_arch --json "$D/train_softmax_llama_arch.json" \
    2>&1 | tee "$D/bench_train.log"
  "${BT[@]}" --config configs/softmax_124m.yaml --json "$D/train_softmax.json" 2>&1 | tee -a "$D/bench_train.log"
  "${BT[@]}" --config configs/hybrid_124m.yaml --json "$D/train_hybrid.json" 2>&1 | tee -a "$D/bench_train.log"
  if [[ -z "${SKIP_PEERS:-}" && -z "${SKIP_TRAIN_PEERS:-}" ]]; then
    step "peers: training steps (bench_train_peers.py)"
    env "${PEER_ENV[@]}" PYTHONUNBUFFERED=1 OUT=$D timeout 300 python3 bench/bench_train_peers.py 2>&1 | tee "$D/train_peers.log"
  fi
  python3 bench/report_train.py "$D" 2>&1 | tee "$D/train_report.txt"
fi

if [[ -z "${SKIP_BENCH:-}" && -z "${SKIP_GDN_BENCH:-}" ]]; then
  FLA_JSON=()
  if [[ -z "${SKIP_PEERS:-}" && -z "${SKIP_FLA_KERNELS:-}" && ${#PEER_ENV[@]} -gt 0 ]]; then
    step "fla peer benchmark"
    env "${PEER_ENV[@]}" PYTHONUNBUFFERED=1 OUT=$D timeout 240 python3 bench/bench_gdn_peers.py 2>&1 | tee "$D/fla_peers.log"
    [[ -f $D/fla_kernels.json ]] && FLA_JSON=(--fla-json "$D/fla_kernels.json")
  fi
  step "bench_gdn"
  timeout 240 build-gpu/bench/bench_gdn --json "$D/bench_gdn.json" "${FLA_JSON[@]}" 2>&1 | tee "$D/bench_gdn.log"
  if [[ -x build-gpu/bench/bench_gdn_norm ]]; then
    step "bench_gdn_norm (the gated norm, every backward variant)"
    timeout 120 build-gpu/bench/bench_gdn_norm --json "$D/bench_gdn_norm.json" 2>&1 | tee "$D/bench_gdn_norm.log"
  fi
fi
if [[ -n "${SCALING:-}" ]]; then
  # TP / DP scaling over every GPU of this machine (bench/bench_scaling.py; one rank per GPU);
  # SCALING_CONFIGS picks the configs (default: the 124M and 1.3B hybrids).
  step "bench_scaling ($(nvidia-smi -L 2>/dev/null | wc -l) GPUs)"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 400 python3 bench/bench_scaling.py \
    --bench build-gpu/bench/bench_train --configs ${SCALING_CONFIGS:-configs/hybrid_124m.yaml configs/hybrid_1p3b.yaml} \
    --steps 10 --warmup 3 --json "$D/scaling.json" 2>&1 | tee "$D/scaling.log"
fi
if [[ -z "${SKIP_BENCH:-}" || -n "${DENSE_BENCH:-}" ]]; then
  step "bench_dense_ops"
  timeout 120 build-gpu/bench/bench_dense_ops --json "$D/bench_dense_ops.json" 2>&1 | tee "$D/bench_dense_ops.log"
fi

if [[ -z "${SKIP_BENCH:-}" && -z "${SKIP_SMOKE:-}" ]]; then
  # `deltatron train` on the GPU on the bundled sample: the quickstart's model and data, 40 steps.
  step "deltatron train on the GPU (quickstart, 40 steps)"
  build-gpu/deltatron prepare --input assets/fineweb-edu/fineweb_edu.jsonl --out /tmp/shards/fineweb_edu_sample \
    > "$D/smoke_prepare.log" 2>&1
  timeout 120 build-gpu/deltatron train --config configs/quickstart.yaml --device cuda --run-dir /tmp/runs/smoke \
    --set train.steps=40 --set "data.train=/tmp/shards/fineweb_edu_sample/fineweb_edu_train_*.bin" \
    --set "data.val=/tmp/shards/fineweb_edu_sample/fineweb_edu_val_*.bin" 2>&1 | tail -8 | tee "$D/smoke_train.log"
  [[ ${PIPESTATUS[0]} -eq 0 ]] || status=6
  cp /tmp/runs/smoke/metrics.jsonl "$D/smoke_metrics.jsonl" 2>/dev/null || true
fi

python3 - "$D" "$OUT/results.json" <<'PY'
import glob, json, os, sys
d, out = sys.argv[1], sys.argv[2]
merged = {}
for p in sorted(glob.glob(os.path.join(d, "*.json"))):
    try:
        merged[os.path.basename(p)[:-5]] = json.load(open(p))
    except Exception as e:
        merged[os.path.basename(p)[:-5]] = repr(e)
json.dump(merged, open(out, "w"), indent=1)
PY
tar -czf "$OUT/detail.tar.gz" -C "$D" . 2>/dev/null || true
if [[ -n "$(ls -A "$TRITON_CACHE_DIR" 2>/dev/null)" ]]; then
  tar -czf /tmp/triton_cache.tar.gz -C "$TRITON_CACHE_DIR" . 2>/dev/null
  # Only when small enough to copy along with the checkout to another host.
  if [[ $(stat -c %s /tmp/triton_cache.tar.gz) -lt $((40 * 1024 * 1024)) ]]; then
    cp /tmp/triton_cache.tar.gz "$OUT/triton_cache.tar.gz"
  else
    echo "triton cache $(du -h /tmp/triton_cache.tar.gz | cut -f1): too large to bring back"
  fi
fi

step "done (status $status)"
exit $status
