#!/usr/bin/env bash
# One call on the GPU machine does it all: configure (sm_90a) into build-gpu/, build the GPU tests
# and bench_gdn, run `ctest -L gpu`, run bench_gdn and fla's peer benchmark in the same call, and
# copy logs and JSON to $OUT.
#
# Run on the H200 on 2026-11-29 up to the fla peer benchmark (the device time ran out there): the
# .debs unpacking, configure, build and `ctest -L gpu` (17/17) worked; bench_gdn is not yet run there.
#
# Before: scripts/fetch_device_debs.sh here (fills .debs/ and .whl/, both ignored by git).
# Then:   run(carry=[".debs", ".whl"], command="bash scripts/gpu_check.sh", timeout_s=600)
# Env:    SKIP_BENCH=1 (tests only), SKIP_PEERS=1 (no fla), JOBS (build parallelism, default nproc).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
OUT=${OUT:-$ROOT/out}
mkdir -p "$OUT"
LOG=$OUT/gpu_check.log
exec > >(tee -a "$LOG") 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
status=0

step "device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
nvcc --version | tail -2 || true

# --- Missing headers: unpack the carried Debian packages into a prefix (never into /).
PREFIX=/tmp/dt-prefix
EXTRA_CMAKE=()
if ! pkg-config --exists icu-uc 2>/dev/null || [[ ! -f /usr/include/zlib.h ]]; then
  step "unpacking .debs into $PREFIX (ICU: $(pkg-config --exists icu-uc && echo found || echo missing), zlib.h: $([[ -f /usr/include/zlib.h ]] && echo found || echo missing))"
  if ! ls .debs/*.deb >/dev/null 2>&1; then
    echo "no .debs/*.deb here: run scripts/fetch_device_debs.sh and carry .debs"; exit 2
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

step "configure"
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DDELTATRON_CUDA=ON \
  -DDELTATRON_BENCH=ON "${EXTRA_CMAKE[@]}" 2>&1 | tail -20 || { echo "configure failed"; exit 3; }

step "build test_gpu bench_gdn"
cmake --build build-gpu -j"${JOBS:-$(nproc)}" --target test_gpu bench_gdn 2>&1 | tail -40
[[ ${PIPESTATUS[0]} -eq 0 ]] || { echo "build failed"; exit 4; }

step "ctest -L gpu"
(cd build-gpu && ctest -L gpu --output-on-failure --timeout 300 2>&1 | tee "$OUT/ctest_gpu.log")
[[ ${PIPESTATUS[0]} -eq 0 ]] || status=5
# The gtest XML too, for exact per-test numbers.
build-gpu/tests/test_gpu --gtest_output=xml:"$OUT/test_gpu.xml" > "$OUT/test_gpu_direct.log" 2>&1 || true

if [[ -z "${SKIP_BENCH:-}" ]]; then
  FLA_JSON=()
  if [[ -z "${SKIP_PEERS:-}" ]] && ls .whl/*.whl >/dev/null 2>&1; then
    step "fla peer benchmark"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 OUT=$OUT timeout 240 \
         python3 bench/bench_gdn_peers.py 2>&1 | tee "$OUT/fla_peers.log"
    [[ -f $OUT/fla_kernels.json ]] && FLA_JSON=(--fla-json "$OUT/fla_kernels.json")
  fi
  step "bench_gdn"
  timeout 240 build-gpu/bench/bench_gdn --json "$OUT/bench_gdn.json" "${FLA_JSON[@]}" 2>&1 | tee "$OUT/bench_gdn.log"
fi

step "done (status $status)"
exit $status
