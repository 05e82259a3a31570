#!/usr/bin/env bash
# The CUDA C++ path on ONE GPU: bench/nvshmem/nvshmem_perf.cu in its self mode (one PE, every one-sided
# case towards itself), compiled unchanged once against the image's NVSHMEM and against rshmem's
# nvshmem.h in several device-library variants, run side by side. It measures what each library's device
# calls cost from a C++ kernel (call overhead, register cap, copy loop), without any link: the part of
# issue 11's C++ gap that is in the call path. Link figures need two GPUs (bench/run-compare.sh).
#
#   bash bench/cpp-self.sh prepare        (CPU machine, after scripts/gpu.sh prepare: builds carry/cpp/)
#   OUT=dir bash bench/cpp-self.sh run [ARGS]   (GPU machine, carry/ carried: runs everything, logs in OUT)
#
# Variants (each a full program; the same source):
#   nvshmem     the image's NVSHMEM (built there with its nvcc)
#   rshmem      rshmem's nvshmem.h and device library as shipped (inline fast paths, rshmem_inline.h)
#   rshmem_lib  the same with -DRSHMEM_NO_INLINE_FASTPATH: every call goes to the device library
#               (scripts/build-device-lib.sh, -maxrregcount=64), as before the fast paths
#   rshmem_r128 the library-only build against a device library assembled with -maxrregcount=128
#               (RSHMEM_DEVICE_MAXRREG=128; it cannot launch 1024-thread blocks); analysis only, not run
#               unless named in VARIANTS
# VARIANTS="nvshmem rshmem" picks some (default: nvshmem rshmem rshmem_lib). Every variant runs with
# --grid 4 --threads 1024 (issue 11's shape) and --grid 132 --threads 512, twice each:
#   self_<variant>_g<grid>.log       ARGS (default: --quick --max-bytes 64m) --sizes $SIZES (default
#                                    8,128,2k,8k,32k,64k,512k,8m,64m): every case;
#   self_<variant>_g<grid>_off8.log  ARGS --sizes $SIZES8 (default 2k,8k,64k,512k) --offset 8 --bw-only: the
#                                    put/get sweeps with both buffers 8 bytes in, so every transfer is 8-byte
#                                    but not 16-byte aligned (ALIGN8=0 skips these runs).
# At the end, one line per figure (also in OUT/summary.txt):
#   cpp_self_<figure>: rshmem X us, nvshmem Y us, ratio R        (int_g, getmem_8B, int_atomic_fetch_add,
#                                                                 int_p_quiet; mean of the two shapes' runs)
#   cpp_self_<put|get>_block_<size>_<grid>x<threads>[_align8]: rshmem X GB/s, nvshmem Y GB/s, ratio R
# with R = rshmem / nvshmem (latency: <= 1 is as fast or faster; bandwidth: >= 1). About a minute in all
# on one H100 (each run a few seconds; every run is stopped after 90 s).
set -u
cd "$(dirname "$0")/.." || exit 1
bash scripts/gpu.sh unpack || exit 1
root=$PWD
c=$root/carry
mode=${1:-}
shift || true

if [ "$mode" = prepare ]; then
  set -e
  [ -f "$c/rshmem_device.ptx" ] && [ -f "$c/librshmem.so" ] || { echo "cpp-self: run scripts/gpu.sh prepare first" >&2; exit 1; }
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
[ ${#args[@]} -gt 0 ] || args=(--quick --max-bytes 64m)
sizes=${SIZES:-8,128,2k,8k,32k,64k,512k,8m,64m}
sizes8=${SIZES8:-2k,8k,64k,512k}
export NVSHMEM_DISABLE_NVLS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/cpp-self.XXXXXX")
t0=$SECONDS
NV=$(python3 -c "import nvidia.nvshmem; print(list(nvidia.nvshmem.__path__)[0])")
nvcc -O2 -rdc=true -arch=sm_90 -I"$NV/include" bench/nvshmem/nvshmem_perf.cu -o "$work/perf_nvshmem" \
  -L"$NV/lib" -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda >"$work/build.log" 2>&1 ||
  { echo "cpp-self: building against NVSHMEM failed:"; cat "$work/build.log"; }
echo "cpp-self: NVSHMEM variant built in $((SECONDS - t0)) s"
# run_one VARIANT GRID THREADS LOG ARGS...: one nvshmem_perf process in self mode (PE 0 of 1).
run_one() {
  local v=$1 g=$2 t=$3 log=$4 bin envs
  shift 4
  if [ "$v" = nvshmem ]; then
    bin=$work/perf_nvshmem
    envs=(LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" NVSHMEM_SYMMETRIC_SIZE=2147483648)
  else
    bin=$c/cpp/perf_$v
    envs=(LD_LIBRARY_PATH="$c:${LD_LIBRARY_PATH:-}" RSHMEM_SYMMETRIC_SIZE=2g RSHMEM_BACKEND=cuda)
  fi
  rm -f "$work/uid"
  echo "== $v grid $g threads $t: $bin --grid $g --threads $t $*" | tee "$log"
  env "${envs[@]}" PE_RANK=0 PE_SIZE=1 UID_FILE="$work/uid" timeout -k 5 90 "$bin" --grid "$g" --threads "$t" "$@" >>"$log" 2>&1
  echo "exit status $?" >>"$log"
}
for shape in "4 1024" "132 512"; do
  set -- $shape
  for v in ${VARIANTS:-nvshmem rshmem rshmem_lib}; do
    run_one "$v" "$1" "$2" "$out/self_${v}_g$1.log" "${args[@]}" --sizes "$sizes"
    # The 8-byte-aligned (not 16-byte-aligned) transfers: both buffers 8 bytes in, bandwidth cases only.
    [ "${ALIGN8:-1}" = 0 ] || run_one "$v" "$1" "$2" "$out/self_${v}_g$1_off8.log" "${args[@]}" --sizes "$sizes8" --offset 8 --bw-only
  done
done
echo "cpp-self: logs in $out ($((SECONDS - t0)) s)"
# One summary line per figure: rshmem (inline fast paths) against NVSHMEM; ratio = rshmem / nvshmem (latency:
# lower is better, so <= 1 is at least as fast; bandwidth: >= 1 is at least as fast). Latencies: the mean of
# the two shapes' runs (one-thread kernels either way). Also written to $out/summary.txt.
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import glob, os, re, sys
out = sys.argv[1]
vals = {}  # (variant, grid, case, scope, bytes) -> value
for path in glob.glob(os.path.join(out, "self_*_g*.log")):
    m = re.match(r"self_(.+)_g(\d+)(_off8)?\.log$", os.path.basename(path))
    if not m:
        continue
    for line in open(path, errors="replace"):
        if not line.startswith("RESULT "):
            continue
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        try:
            vals[(m.group(1), m.group(2), f["case"], f["scope"], int(f["bytes"]))] = float(f["value"])
        except (KeyError, ValueError):
            pass
def fmt(x):
    return "n/a" if x is None else ("%.4g" % x)
def line(name, unit, r, n):
    ratio = r / n if r is not None and n else None
    print("cpp_self_%s: rshmem %s %s, nvshmem %s %s, ratio %s" % (name, fmt(r), unit, fmt(n), unit,
          "n/a" if ratio is None else "%.3f" % ratio))
def lat(v, case, b):
    xs = [vals[k] for k in vals if k[0] == v and k[2] == case and k[4] == b]
    return sum(xs) / len(xs) if xs else None
for name, case, b in (("int_g", "g_lat", 4), ("getmem_8B", "get_lat", 8), ("int_atomic_fetch_add", "amo_fetch_add_lat", 4),
                      ("int_p_quiet", "p_lat", 4)):
    line(name, "us", lat("rshmem", case, b), lat("nvshmem", case, b))
for g, t in (("4", "1024"), ("132", "512")):
    for suffix, label in (("", ""), ("_off8", "_align8")):
        for d in ("put", "get"):
            for b, bl in ((2048, "2KiB"), (8192, "8KiB"), (65536, "64KiB"), (524288, "512KiB")):
                k = lambda v: vals.get((v, g, d + "_bw" + suffix, "block", b))
                line("%s_block_%s_%sx%s%s" % (d, bl, g, t, label), "GB/s", k("rshmem"), k("nvshmem"))
PY
