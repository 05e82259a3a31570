#!/usr/bin/env bash
# Installs the CUDA compiler tools from PyPI (ptxas, nvcc, nvlink; no GPU needed) into .tools/cuda and
# prints the directory that holds bin/nvcc. Idempotent: a second run does nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.tools/cuda-py"
if [ ! -x "$dest/nvidia/cu13/bin/nvcc" ] && [ ! -x "$dest/nvidia/cuda_nvcc/bin/nvcc" ]; then
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$dest" \
    'nvidia-cuda-nvcc==13.0.*' 'nvidia-nvvm==13.0.*' 'nvidia-cuda-crt==13.0.*' 'nvidia-cuda-runtime==13.0.*' \
    'nvidia-cuda-cccl==13.0.*' >&2
fi
home=$(dirname "$(dirname "$(find "$dest" -path '*/bin/nvcc' -type f | head -1)")")
[ -x "$home/bin/nvcc" ] || { echo "install-cuda-tools: nvcc not found under $dest" >&2; exit 1; }
# cuda_fp16.h and cuda_bf16.h (which nvshmem.h brings in, as NVSHMEM's does) need the CCCL headers
# (<nv/target>). A tree installed before they were added gets them here: pip --target would replace
# the existing nvidia/ directory, so they are installed beside it and their include files copied in.
if [ ! -f "$home/include/nv/target" ]; then
  tmp=$(mktemp -d)
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$tmp" 'nvidia-cuda-cccl==13.0.*' >&2
  inc=$(dirname "$(dirname "$(find "$tmp" -path '*/include/nv/target' -type f | head -1)")")
  [ -f "$inc/nv/target" ] || { echo "install-cuda-tools: nvidia-cuda-cccl has no include/nv/target" >&2; exit 1; }
  cp -rn "$inc"/. "$home/include/"
  rm -rf "$tmp"
fi
echo "$home"
