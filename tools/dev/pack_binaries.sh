#!/usr/bin/env bash
# Packs a CUDA build's deltatron with the shared libraries that the GPU hosts' image lacks
# (fmt, yaml-cpp, ICU) into .xfer/bin.tar.xz for tools/dev/loss_comparison_remote.sh, and writes the
# commit of this working tree to .xfer/commit (`git rev-parse HEAD`, plus "-dirty" where tracked files
# differ from it): the host's copy of .git may be stale, so the remote script records this one.
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
commit=$(git rev-parse HEAD)
[[ -n $(git status --porcelain --untracked-files=no) ]] && commit+=-dirty
echo "$commit" > .xfer/commit
du -h .xfer/bin.tar.xz
echo "commit: $commit (.xfer/commit)"
