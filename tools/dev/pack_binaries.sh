#!/usr/bin/env bash
# Packs a CUDA build's deltatron with the shared libraries that the GPU hosts' image lacks
# (fmt, yaml-cpp, ICU) into .xfer/bin.tar.xz for tools/dev/loss_comparison_remote.sh.
# Usage: tools/dev/pack_binaries.sh BUILD_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: tools/dev/pack_binaries.sh BUILD_DIR}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$build/deltatron" "$tmp/"
for lib in libfmt.so.9 libyaml-cpp.so.0.7 libicuuc.so.72 libicudata.so.72; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$tmp/"
done
mkdir -p .xfer
tar -cJf .xfer/bin.tar.xz.tmp -C "$tmp" . && mv .xfer/bin.tar.xz.tmp .xfer/bin.tar.xz
du -h .xfer/bin.tar.xz
