#!/usr/bin/env bash
# Builds the device library archive that nvcc programs link (-rdc=true) against:
#   scripts/build-device-lib.sh DEVICE.ptx OUTDIR [sm_90]   ->  OUTDIR/librshmem_device.a
# DEVICE.ptx comes from `scripts/build-ptx.sh rshmem-device DEVICE.ptx sm_90`. The archive holds
#   rshmem_device_ptx.o   the Rust device library (every rshmem_* device function)
#   rshmem_device_init.o  device/cuda/rshmem_device_init.cu (rshmemi_device_state in the constant bank,
#                         rshmemi_bind_device_library)
# Commands (NVCC: nvcc on PATH, else $CUDA_HOME/bin/nvcc, else the one scripts/install-cuda-tools.sh installs):
#   nvcc -arch=sm_90 -rdc=true -Xcompiler -fPIC -maxrregcount=64 -c DEVICE.ptx -o rshmem_device_ptx.o
#   nvcc -arch=sm_90 -rdc=true -O2 -Xcompiler -fPIC -DRSHMEMI_DEVICE_STATE_BYTES=N -c device/cuda/rshmem_device_init.cu -I device/include -o rshmem_device_init.o
#   (N: the size in the PTX's `.extern .const ... rshmemi_device_state[N]`)
#   nvcc -lib rshmem_device_ptx.o rshmem_device_init.o -o OUTDIR/librshmem_device.a
# -maxrregcount (RSHMEM_DEVICE_MAXRREG, default 64; 0 = no cap): the device functions are separately
# compiled callees, so a kernel that calls one needs at least as many registers as the callee uses.
# Uncapped, the block/warp put/get functions take ~142-156 registers, and a kernel calling them cannot
# launch with 512 or 1024 threads per block (cudaErrorLaunchOutOfResources; 65536 registers per SM).
# 64 registers x 1024 threads fits an SM, as NVSHMEM programs expect; the price is some spilling in the
# copy routines (about 100 bytes of stack per call).
set -euo pipefail
if [ $# -lt 2 ] || [ $# -gt 3 ]; then
  echo "usage: $0 DEVICE.ptx OUTDIR [sm_90]" >&2
  exit 2
fi
ptx=$1 outdir=$2 arch=${3:-sm_90}
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "build-device-lib: $*" >&2; exit 1; }

[ -f "$ptx" ] || die "PTX file '$ptx' not found (build it with scripts/build-ptx.sh rshmem-device OUT.ptx $arch)"
# The device state is declared (.extern .const) by the PTX and defined by rshmem_device_init.cu, with
# the size the PTX declares.
state_bytes=$(sed -n 's/^\.extern \.const \.align 8 \.b8 rshmemi_device_state\[\([0-9]*\)\];.*/\1/p' "$ptx" | head -1)
[ -n "$state_bytes" ] || die "'$ptx' does not declare rshmemi_device_state (.extern .const): not the rshmem-device PTX?"
grep -q '^\.visible \.func .*rshmem_my_pe' "$ptx" || die "'$ptx' does not define rshmem_my_pe: not the rshmem-device PTX?"

nvcc=$("$root/scripts/find-nvcc.sh") || die "no usable nvcc"

mkdir -p "$outdir"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-devlib.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

run() { echo "+ $*" >&2; "$@" || die "failed: $*"; }
maxrreg=${RSHMEM_DEVICE_MAXRREG:-64}
case "$maxrreg" in '' | *[!0-9]*) die "RSHMEM_DEVICE_MAXRREG must be a number (0: no cap), not '$maxrreg'" ;; esac
regcap=()
[ "$maxrreg" -gt 0 ] && regcap=(-maxrregcount="$maxrreg")
run "$nvcc" -arch="$arch" -rdc=true -Xcompiler -fPIC "${regcap[@]}" -c "$ptx" -o "$tmp/rshmem_device_ptx.o"
# Position-independent host code: the archive links into executables and shared libraries alike (a
# Python extension, python/examples/cuda).
run "$nvcc" -arch="$arch" -rdc=true -O2 -Xcompiler -fPIC -DRSHMEMI_DEVICE_STATE_BYTES="$state_bytes" -c "$root/device/cuda/rshmem_device_init.cu" -I "$root/device/include" \
  -o "$tmp/rshmem_device_init.o"
rm -f "$outdir/librshmem_device.a"
run "$nvcc" -lib "$tmp/rshmem_device_ptx.o" "$tmp/rshmem_device_init.o" -o "$outdir/librshmem_device.a"
echo "$outdir/librshmem_device.a"
