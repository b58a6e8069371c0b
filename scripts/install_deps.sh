#!/usr/bin/env bash
# Installs what Deltatron needs on Debian/Ubuntu. Idempotent: installs only what is missing.
set -euo pipefail

pkgs=(cmake g++ make pkg-config git python3 python3-pip
      libyaml-cpp-dev libhdf5-dev libopenmpi-dev openmpi-bin libopenblas-dev
      libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev
      libssl-dev libicu-dev zlib1g-dev clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install_deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages for the helper scripts (plots). pip may refuse a Debian-managed python (PEP 668).
if ! python3 -c "import matplotlib" 2>/dev/null; then
  echo "install_deps: installing matplotlib (pip)"
  python3 -m pip install -q matplotlib 2>/dev/null || python3 -m pip install -q --break-system-packages matplotlib
fi

# tensorboard: scripts/metrics_to_tensorboard.py writes (and its test reads) event files with it.
if ! python3 -c "import tensorboard" 2>/dev/null; then
  echo "install_deps: installing tensorboard (pip)"
  python3 -m pip install -q tensorboard 2>/dev/null || python3 -m pip install -q --break-system-packages tensorboard
fi

# tiktoken: exact GPT-2 token counts in scripts/build_corpus.py (it reads assets/gpt2, downloads nothing).
if ! python3 -c "import tiktoken" 2>/dev/null; then
  echo "install_deps: installing tiktoken (pip)"
  python3 -m pip install -q tiktoken 2>/dev/null || python3 -m pip install -q --break-system-packages tiktoken
fi

# cuDNN 9 and the cuDNN frontend's C++ headers, for attention in CUDA builds (only where nvcc is):
# cmake/cudnn.cmake asks python3 where these wheels put them. 9.19 is the cuDNN of the GPU machines'
# torch; the frontend is pinned so its header API stays the one we build against. pip does nothing
# when the pinned versions are already there.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  cudnn_pkgs=("nvidia-cudnn-cu13==9.19.*")
  frontend_pkgs=("nvidia-cudnn-frontend==1.32.*")  # --no-deps: only its headers are used
  python3 -m pip install -q "${cudnn_pkgs[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${cudnn_pkgs[@]}"
  python3 -m pip install -q --no-deps "${frontend_pkgs[@]}" 2>/dev/null ||
    python3 -m pip install -q --no-deps --break-system-packages "${frontend_pkgs[@]}"
fi
