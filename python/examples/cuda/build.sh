#!/usr/bin/env bash
# Builds the CUDA C++ extension of ring_cuda.py, python/examples/cuda/libring_kernel.so by default:
#   python/examples/cuda/build.sh [OUT.so] [sm_90]
# 1. rshmem's device library for the architecture (scripts/build-ptx.sh, scripts/build-device-lib.sh);
# 2. nvcc -rdc=true -Xcompiler -fPIC -I device/include -c ring_kernel.cu
# 3. nvcc -shared -rdc=true ring_kernel.o librshmem_device.a -o OUT.so  (nvcc device-links the
#    kernel with the device library; the runtime's host calls stay undefined, resolved when Python
#    loads the library after `import rshmem`).
# nvcc: scripts/find-nvcc.sh's (NVCC, PATH, CUDA_HOME, or the PyPI tools it installs). No GPU needed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$here/libring_kernel.so}
arch=${2:-sm_90}
nvcc=$("$root/scripts/find-nvcc.sh")
work=$root/target/python-cuda-example
mkdir -p "$work"
run() { echo "+ $*" >&2; "$@"; }
run "$root/scripts/build-ptx.sh" rshmem-device "$work/rshmem_device.ptx" "$arch" >/dev/null
NVCC=$nvcc run "$root/scripts/build-device-lib.sh" "$work/rshmem_device.ptx" "$work" "$arch" >/dev/null
run "$nvcc" -rdc=true -arch="$arch" -O2 -Xcompiler -fPIC -I "$root/device/include" -c "$here/ring_kernel.cu" -o "$work/ring_kernel.o"
# The PyPI CUDA tools keep libcudart_static.a in lib/, where nvcc's profile does not look.
cudalib=()
[ -d "$(dirname "$nvcc")/../lib" ] && cudalib=(-L "$(dirname "$nvcc")/../lib")
run "$nvcc" -shared -rdc=true -arch="$arch" -Xcompiler -fPIC "$work/ring_kernel.o" "$work/librshmem_device.a" "${cudalib[@]}" -o "$out"
echo "$out"
