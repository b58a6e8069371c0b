#!/usr/bin/env bash
# Downloads, HERE (where apt and PyPI are reachable), what the GPU machine lacks for
# scripts/gpu_check.sh, into folders git ignores and the device `run` call carries:
#   .debs/  libicu-dev, libicu72, zlib1g-dev, zlib1g (.deb files; the device image has no ICU
#           headers and maybe no zlib headers; gpu_check.sh unpacks them into a prefix)
#   .whl/   nvidia-cudnn-frontend (always: the C++ headers of cuDNN's graph API, which the device lacks;
#           its cuDNN itself is torch's nvidia-cudnn-cu13), and flash-linear-attention and fla-core
#           (--no-deps; the peer benchmark imports fla). Wheels for the device's python 3.12.
# Usage: scripts/fetch_device_debs.sh [--no-wheels]   (--no-wheels: without the fla wheels)
# Then: run(carry=[".debs", ".whl"], command="bash scripts/gpu_check.sh").
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .debs
(cd .debs && apt-get download libicu-dev libicu72 zlib1g-dev zlib1g)
ls -l .debs
mkdir -p .whl
pip_download() {
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$@"
}
pip_download "nvidia-cudnn-frontend==1.32.*"  # the same pin as scripts/install_deps.sh
if [[ "${1:-}" != "--no-wheels" ]]; then
  pip_download flash-linear-attention fla-core
fi
ls -l .whl
