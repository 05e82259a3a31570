#!/usr/bin/env bash
# The CUDA C++ path on ONE GPU: bench/nvshmem/nvshmem_perf.cu in its self mode (one PE, every one-sided
# case towards itself), compiled unchanged once against the image's NVSHMEM and against rshmem's
# nvshmem.h in several device-library variants, run side by side. It measures what each library's device
# calls cost from a C++ kernel (call overhead, register cap, copy loop), without any link: the part of
# issue 11's C++ gap that is in the call path. Link figures need two GPUs (bench/run-compare.sh).
#
#   bash bench/cpp-self.sh prepare        (CPU machine, after scripts/gpu-prepare.sh: builds carry/cpp/)
#   OUT=dir bash bench/cpp-self.sh run [ARGS]   (GPU machine, carry/ carried: runs everything, logs in OUT)
#
# Variants (each a full program; the same source):
#   nvshmem     the image's NVSHMEM (built there with its nvcc)
#   rshmem      rshmem's nvshmem.h and device library as shipped (inline fast paths, rshmem_inline.h)
#   rshmem_lib  the same with -DRSHMEM_NO_INLINE_FASTPATH: every call goes to the device library
#               (scripts/build-device-lib.sh, -maxrregcount=64), as before the fast paths
#   rshmem_r128 the library-only build against a device library assembled with -maxrregcount=128
#               (RSHMEM_DEVICE_MAXRREG=128; it cannot launch 1024-thread blocks)
# VARIANTS="nvshmem rshmem" picks some. ARGS go to every run (default: --quick). Each runs twice: --grid 4 --threads 1024 (issue 11's shape)
# and --grid 132 --threads 512.
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
c=$root/carry
mode=${1:-}
shift || true

if [ "$mode" = prepare ]; then
  set -e
  [ -f "$c/rshmem_device.ptx" ] && [ -f "$c/librshmem.so" ] || { echo "cpp-self: run scripts/gpu-prepare.sh first" >&2; exit 1; }
  nvcc=$(scripts/find-nvcc.sh)
  cudalib=$(cd "$(dirname "$nvcc")/../lib" && pwd)
  mkdir -p "$c/cpp"
  "$nvcc" -O2 -rdc=true -arch=sm_90 -I device/include -c bench/nvshmem/nvshmem_perf.cu -o "$c/cpp/perf.o"
  "$nvcc" -O2 -rdc=true -arch=sm_90 -I device/include -DRSHMEM_NO_INLINE_FASTPATH -c bench/nvshmem/nvshmem_perf.cu -o "$c/cpp/perf_lib.o"
  link() { # link NAME OBJECT ARCHIVE
    "$nvcc" -rdc=true -arch=sm_90 "$2" "$3" -L "$c" -lrshmem -L "$cudalib" \
      -Xlinker -rpath -Xlinker '$ORIGIN/..' -o "$c/cpp/$1"
  }
  link perf_rshmem "$c/cpp/perf.o" "$c/librshmem_device.a"
  link perf_rshmem_lib "$c/cpp/perf_lib.o" "$c/librshmem_device.a"
  mkdir -p "$c/cpp/r128"
  RSHMEM_DEVICE_MAXRREG=128 scripts/build-device-lib.sh "$c/rshmem_device.ptx" "$c/cpp/r128" sm_90 >&2
  link perf_rshmem_r128 "$c/cpp/perf_lib.o" "$c/cpp/r128/librshmem_device.a"
  rm -rf "$c/cpp/r128" "$c/cpp/perf.o" "$c/cpp/perf_lib.o"
  ls -la "$c/cpp"
  exit 0
fi

[ "$mode" = run ] || { echo "usage: bash bench/cpp-self.sh prepare | run [ARGS]" >&2; exit 2; }
out=${OUT:-/tmp}
mkdir -p "$out"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--quick)
export NVSHMEM_DISABLE_NVLS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/cpp-self.XXXXXX")
NV=$(python3 -c "import nvidia.nvshmem; print(list(nvidia.nvshmem.__path__)[0])")
nvcc -O2 -rdc=true -arch=sm_90 -I"$NV/include" bench/nvshmem/nvshmem_perf.cu -o "$work/perf_nvshmem" \
  -L"$NV/lib" -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda >"$work/build.log" 2>&1 ||
  { echo "cpp-self: building against NVSHMEM failed:"; cat "$work/build.log"; }
for shape in "4 1024" "132 512"; do
  set -- $shape
  for v in ${VARIANTS:-nvshmem rshmem rshmem_lib rshmem_r128}; do
    if [ "$v" = nvshmem ]; then
      bin=$work/perf_nvshmem
      envs=(LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" NVSHMEM_SYMMETRIC_SIZE=2147483648)
    else
      bin=$c/cpp/perf_$v
      envs=(LD_LIBRARY_PATH="$c:${LD_LIBRARY_PATH:-}" RSHMEM_SYMMETRIC_SIZE=2g RSHMEM_BACKEND=cuda)
    fi
    log=$out/self_${v}_g$1.log
    rm -f "$work/uid"
    echo "== $v grid $1 threads $2: $bin --grid $1 --threads $2 ${args[*]}" | tee "$log"
    env "${envs[@]}" PE_RANK=0 PE_SIZE=1 UID_FILE="$work/uid" timeout -k 5 200 "$bin" --grid "$1" --threads "$2" "${args[@]}" >>"$log" 2>&1
    echo "exit status $?" >>"$log"
    grep -E "^RESULT|exit status|rror" "$log" | head -200 >/dev/null
  done
done
echo "cpp-self: logs in $out"
