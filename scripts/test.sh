#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole CPU test suite (ctest).
# GPU tests carry the label `gpu` and are left to scripts/gpu_check.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -LE gpu -j"$(nproc)" --timeout 900
