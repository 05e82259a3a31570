#!/usr/bin/env bash
# Installs the CUDA compiler tools from PyPI (ptxas, nvcc, nvlink; no GPU needed) into .tools/cuda and
# prints the directory that holds bin/nvcc. Idempotent: a second run does nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.tools/cuda-py"
if [ ! -x "$dest/nvidia/cu13/bin/nvcc" ] && [ ! -x "$dest/nvidia/cuda_nvcc/bin/nvcc" ]; then
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$dest" \
    'nvidia-cuda-nvcc==13.0.*' 'nvidia-nvvm==13.0.*' 'nvidia-cuda-crt==13.0.*' 'nvidia-cuda-runtime==13.0.*' >&2
fi
home=$(dirname "$(dirname "$(find "$dest" -path '*/bin/nvcc' -type f | head -1)")")
[ -x "$home/bin/nvcc" ] || { echo "install-cuda-tools: nvcc not found under $dest" >&2; exit 1; }
echo "$home"
