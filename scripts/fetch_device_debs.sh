#!/usr/bin/env bash
# For a GPU host without network access (an air-gapped cluster): downloads, HERE (a connected machine
# where apt and PyPI are reachable), what such a host typically lacks for scripts/gpu_check.sh, into
# folders git ignores; copy them into the checkout on the host, where gpu_check.sh installs from them:
#   .debs/  libicu-dev, libicu72, zlib1g-dev, zlib1g (.deb files for ICU's and zlib's headers;
#           gpu_check.sh unpacks them into a prefix under /tmp, never into /)
#   .whl/   nvidia-cudnn-frontend (always: the C++ headers of cuDNN's graph API; cuDNN itself comes
#           from the host's python3, torch's nvidia-cudnn-cu13), and flash-linear-attention and fla-core
#           (--no-deps; the peer benchmarks import fla). Wheels for python 3.12 on x86_64 Linux.
# The .deb files are this machine's Debian release's: the host should run the same release.
# Usage: scripts/fetch_device_debs.sh [--no-wheels]   (--no-wheels: without the fla wheels)
# Then, on the host: bash scripts/gpu_check.sh
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
