#!/usr/bin/env bash
# Prints the nvcc to use: $NVCC, else nvcc on PATH, else $CUDA_HOME/bin/nvcc, else the CUDA compiler
# tools installed from PyPI by scripts/install-cuda-tools.sh. Fails with a message when none works.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${NVCC:-}" ]; then
  nvcc=$NVCC
elif command -v nvcc >/dev/null 2>&1; then
  nvcc=$(command -v nvcc)
elif [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then
  nvcc=$CUDA_HOME/bin/nvcc
else
  home=$("$root/scripts/install-cuda-tools.sh") || { echo "no nvcc on PATH and scripts/install-cuda-tools.sh failed" >&2; exit 1; }
  nvcc=$home/bin/nvcc
fi
[ -x "$nvcc" ] || { echo "nvcc '$nvcc' is not executable" >&2; exit 1; }
echo "$nvcc"
