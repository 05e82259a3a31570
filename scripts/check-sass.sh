#!/usr/bin/env bash
# The IBGDA doorbell path in machine code (issue 21): assembles the device library's PTX for sm_90 as
# the device library is built (ptxas, -maxrregcount=64), disassembles it (nvdisasm) and checks with
# scripts/sass_doorbell.py that in QpDesc::post_send every strong store (the doorbell record, the
# doorbell, the `rung` ticket's release; system-scope for queues in host memory, GPU-scope for queues in
# GPU memory) follows a barrier of its scope on its path, the record before the doorbell at each scope.
# A compiler change that drops or moves a barrier fails here. scripts/test.sh runs it.
# Tools: ptxas next to scripts/find-nvcc.sh's nvcc; nvdisasm from NVDISASM, PATH, next to nvcc, else
# PyPI's nvidia-cuda-nvdisasm into .tools/nvdisasm (13.2: the oldest on PyPI; it reads 13.0's cubins).
# PTX: PTX=path, else target/cuda-check/rshmem_device.ptx (scripts/check-cuda-examples.sh makes it),
# else built with scripts/build-ptx.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "check-sass: $*" >&2; }
work=$root/target/sass-check
mkdir -p "$work"
nvcc=$("$root/scripts/find-nvcc.sh")
ptxas=$(dirname "$nvcc")/ptxas
[ -x "$ptxas" ] || { say "FAILED: no ptxas beside $nvcc"; exit 1; }
nvdisasm=${NVDISASM:-}
if [ -z "$nvdisasm" ]; then
  if command -v nvdisasm >/dev/null 2>&1; then nvdisasm=$(command -v nvdisasm)
  elif [ -x "$(dirname "$nvcc")/nvdisasm" ]; then nvdisasm=$(dirname "$nvcc")/nvdisasm
  else
    dest=$root/.tools/nvdisasm
    nvdisasm=$(find "$dest/" -path '*/bin/nvdisasm' -type f 2>/dev/null | head -1 || true)
    if [ -z "$nvdisasm" ]; then
      say "installing nvdisasm from PyPI (nvidia-cuda-nvdisasm==13.2.*) into $dest"
      python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$dest" 'nvidia-cuda-nvdisasm==13.2.*' >&2
      nvdisasm=$(find "$dest/" -path '*/bin/nvdisasm' -type f | head -1)
      chmod +x "$nvdisasm"
    fi
  fi
fi
[ -x "$nvdisasm" ] || { say "FAILED: no nvdisasm (set NVDISASM)"; exit 1; }
ptx=${PTX:-$root/target/cuda-check/rshmem_device.ptx}
if [ ! -f "$ptx" ]; then
  ptx=$work/rshmem_device.ptx
  "$root/scripts/build-ptx.sh" rshmem-device "$ptx" sm_90 >/dev/null
fi
"$ptxas" -arch=sm_90 -maxrregcount=64 -c "$ptx" -o "$work/rshmem_device.cubin" 2> >(grep -v "Unresolved extern variable" >&2)
"$nvdisasm" -c "$work/rshmem_device.cubin" >"$work/rshmem_device.sass"
python3 "$root/scripts/sass_doorbell.py" --self-test
python3 "$root/scripts/sass_doorbell.py" "$work/rshmem_device.sass"
