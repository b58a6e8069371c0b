#!/usr/bin/env bash
# Configures and builds Deltatron in build/ (or $BUILD_DIR). Extra arguments go to cmake's configure
# step; BUILD_TARGET=name builds one target only (the quickstart builds just `deltatron`).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j"$(nproc)" ${BUILD_TARGET:+--target "$BUILD_TARGET"}
