#!/usr/bin/env bash
# Installs the CUDA compiler tools from PyPI (ptxas, nvcc, nvlink; no GPU needed) into .tools/cuda-py and
# prints the directory that holds bin/nvcc. Idempotent: a second run does nothing.
# Also installs NVML's development header (nvidia-nvml-dev: include/nvml.h) into .tools/nvml, which
# NVSHMEM's perftests include (bench/perftest.sh); `scripts/install-cuda-tools.sh --nvml-include` prints
# the directory that holds nvml.h instead.
# `scripts/install-cuda-tools.sh --nvshmem-home` installs NVSHMEM 3.4.5's PyPI package (headers, host and
# device libraries: NVSHMEM_PYPI, default nvidia-nvshmem-cu13==3.4.5) into .tools/nvshmem, for building
# the comparison programs against NVSHMEM here (`scripts/gpu.sh perftest prepare`), and
# prints its home (the directory with include/nvshmem.h).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.tools/cuda-py"
if [ ! -x "$dest/nvidia/cu13/bin/nvcc" ] && [ ! -x "$dest/nvidia/cuda_nvcc/bin/nvcc" ]; then
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$dest" \
    'nvidia-cuda-nvcc==13.0.*' 'nvidia-nvvm==13.0.*' 'nvidia-cuda-crt==13.0.*' 'nvidia-cuda-runtime==13.0.*' \
    'nvidia-cuda-cccl==13.0.*' >&2
fi
home=$(dirname "$(dirname "$(find "$dest/" -path '*/bin/nvcc' -type f | head -1)")")
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
# nvcc's profile (bin/nvcc.profile) and CMake's CUDA support look for libcudart_static.a and
# libcudadevrt.a in lib64/, where a CUDA toolkit keeps them; the PyPI packages put them in lib/. A
# lib64 link to lib lets both link CUDA programs with these tools as with a toolkit.
if [ ! -e "$home/lib64" ] && [ -f "$home/lib/libcudart_static.a" ]; then
  ln -s lib "$home/lib64"
fi
# nvml.h for NVSHMEM's perftests (their common/utils.h includes it), in its own tree so that an
# existing compiler tree is not touched. Only --nvml-include needs it: otherwise a failed install is a
# warning, and the compiler tools are usable all the same.
nvml_dest="$root/.tools/nvml"
find_nvml() { find "$nvml_dest/" -name nvml.h -path '*include*' 2>/dev/null | head -1; }
if [ -z "$(find_nvml)" ]; then
  python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$nvml_dest" \
    'nvidia-nvml-dev==13.0.*' >&2 || echo "install-cuda-tools: installing nvidia-nvml-dev (nvml.h) failed" >&2
fi
if [ "${1:-}" = --nvshmem-home ]; then
  nv_home="$root/.tools/nvshmem/nvidia/nvshmem"
  if [ ! -f "$nv_home/include/nvshmem.h" ]; then
    echo "install-cuda-tools: installing ${NVSHMEM_PYPI:-nvidia-nvshmem-cu13==3.4.5} into .tools/nvshmem" >&2
    python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --no-deps \
      --target "$root/.tools/nvshmem" "${NVSHMEM_PYPI:-nvidia-nvshmem-cu13==3.4.5}" >&2
  fi
  [ -f "$nv_home/include/nvshmem.h" ] || { echo "install-cuda-tools: no include/nvshmem.h in $nv_home after installing NVSHMEM" >&2; exit 1; }
  echo "$nv_home"
  exit 0
fi
if [ "${1:-}" = --nvml-include ]; then
  nvml_h=$(find_nvml)
  [ -f "$nvml_h" ] || { echo "install-cuda-tools: nvml.h not found under $nvml_dest (nvidia-nvml-dev)" >&2; exit 1; }
  dirname "$nvml_h"
else
  echo "$home"
fi
