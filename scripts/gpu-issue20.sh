#!/usr/bin/env bash
# Issue 20 in ONE device call: the hardware bounds and the C++ ratios (bench/hw_bounds.py), then NVSHMEM's
# perftests under both libraries (scripts/gpu-perftest.sh), whose score table's Targets section then has
# every target filled from this call.
#
#   scripts/gpu-issue20.sh prepare      here, after scripts/gpu-prepare.sh and scripts/gpu-perftest.sh prepare
#   scripts/gpu-issue20.sh [run]        on the GPU machine (2 GPUs of one node), from the repository root,
#                                       with carry/ present; DRY_RUN=1 checks the plumbing, runs nothing
#
# prepare: compiles and links bench/nvshmem/nvshmem_perf.cu twice, here (CUDA 13.0 tools from PyPI,
#   scripts/find-nvcc.sh): against rshmem's nvshmem.h and carry/'s librshmem_device.a and librshmem.so
#   (run path '$ORIGIN/..' = carry/), and against NVSHMEM 3.4.5's headers and libnvshmem_device.a from
#   PyPI (NVSHMEM_HOME, default .tools/nvshmem/nvidia/nvshmem, installed as scripts/gpu-perftest.sh does;
#   the executable finds the GPU machine's libnvshmem_host.so.3 through LD_LIBRARY_PATH, set below to the
#   image's nvidia.nvshmem lib/). Neither link needs libcuda (the CUDA runtime loads the driver at run
#   time). Output: carry/hw/pack.tar.xz (nvshmem_perf_rshmem, nvshmem_perf_nvshmem, BUILD.txt) and
#   carry/hw/BUILD.txt; nothing else in carry/ is touched. scripts/gpu-prepare.sh remakes carry/, so run
#   this after it (PERFTEST=1 scripts/gpu-prepare.sh runs both prepares).
#
# run (budget: TOTAL_BUDGET seconds for the whole call, default 570; the hardware part at most HW_BUDGET,
# default 200, every step bounded by `timeout` and by what is left of that; the perftests get the rest):
#   1. scripts/gpu-unpack.sh carry carry/hw
#   2. rshmem-bench --cases bw --max-bytes 256m under rshmrun -np 2, at 4 x 1024 (the C++ issue's shape:
#      the 8-64 KiB bounds) and at 132 x 512 (bench/run-compare.sh's shape: put_bw_ratio and the 256 MiB
#      bounds); each run also prints the bounds' rows (ce_*_bw, x_*_bw_deep8; examples/src/bench.rs)
#   3. nvshmem_perf --bw-only: under NVSHMEM at 132 x 512 (--sizes 8k,64k,256m: put_bw_ratio's NVSHMEM
#      side), and under rshmem (rshmrun -np 2) and NVSHMEM at 4 x 1024 (--sizes 8k,64k: the C++ ratios).
#      NVSHMEM's runs as bench/run-compare.sh starts them: one process per PE, unique id through a file.
#   4. bench/hw_bounds.py -> $OUT/extra.md (the `name: value` lines), bench/compare.py on the 132 x 512 pair
#      -> $OUT/hw/compare-132x512/
#   5. PERFTEST_EXTRA=$OUT/extra.md BUDGET=<what is left of TOTAL_BUDGET> scripts/gpu-perftest.sh run
#      -> $OUT/perftest/ (perftest-score.md with the Targets section)
#   Then a summary: every step's exit status and time, extra.md, the score's headline lines
#   ($OUT/issue20-summary.txt). Logs: $OUT/issue20.log (everything), $OUT/hw/*.log (each run, with its
#   command). OUT defaults to /tmp/issue20 when unset.
#   Environment: TOTAL_BUDGET, HW_BUDGET, DRY_RUN=1, and what scripts/gpu-perftest.sh reads (T, SHORT,
#   PERFTEST_PROGS). For checking the plumbing on the CPU backend: HW_SHAPES (default "4x1024 132x512")
#   and HW_BENCH_ARGS (default "--cases bw --max-bytes 256m"), e.g. RSHMEM_BACKEND=cpu HW_SHAPES="1x2 2x2"
#   HW_BENCH_ARGS="--cases bw --max-bytes 1m" (the hardware-bound lines then name the shapes they fell
#   back to). NVLink multicast stays off (NVSHMEM_DISABLE_NVLS=1).
# Exit status: 0 when every step ran and exited 0, else 1 (the summary says which).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
c=$root/carry
hw=$c/hw
action=${1:-run}
die() { echo "gpu-issue20: FAILED: $*" >&2; exit 1; }

# ---------------------------------------------------------------- prepare (CPU machine)
if [ "$action" = prepare ]; then
  set -e
  [ -f "$c/COMMIT" ] || die "no carry/COMMIT: run scripts/gpu-prepare.sh first"
  nvcc=$(scripts/find-nvcc.sh)
  cudalib=$(cd "$(dirname "$nvcc")/../lib" && pwd)
  # NVSHMEM_HOME, else NVSHMEM's PyPI package in .tools/nvshmem (installed on first use).
  nv_home=${NVSHMEM_HOME:-}
  if [ -z "$nv_home" ]; then
    nv_home=$("$root/scripts/install-cuda-tools.sh" --nvshmem-home) || die "could not install NVSHMEM's PyPI package (scripts/install-cuda-tools.sh --nvshmem-home)"
  fi
  [ -f "$nv_home/include/nvshmem.h" ] || die "NVSHMEM_HOME=$nv_home has no include/nvshmem.h"
  [ -f "$nv_home/lib/libnvshmem_device.a" ] || die "no NVSHMEM device library in $nv_home/lib"
  nv_host=""
  for f in libnvshmem_host.so.3 libnvshmem_host.so; do
    if [ -z "$nv_host" ] && [ -f "$nv_home/lib/$f" ]; then nv_host=$f; fi
  done
  [ -n "$nv_host" ] || die "no libnvshmem_host.so.3 in $nv_home/lib"
  work=$root/target/hw-pre
  rm -rf "$work" && mkdir -p "$work/lib" "$work/stage"
  # carry/'s host library and device library: the files the GPU machine runs with.
  for f in librshmem.so librshmem_device.a rshmem_device.ptx; do
    if [ -f "$c/$f" ]; then cp "$c/$f" "$work/lib/"
    elif [ -f "$c/pack.tar.xz" ]; then tar -xJf "$c/pack.tar.xz" -C "$work/lib" "$f" 2>/dev/null || true
    fi
    [ -f "$work/lib/$f" ] || die "no $f in carry/ (nor in carry/pack.tar.xz): run scripts/gpu-prepare.sh"
  done
  t0=$SECONDS
  src=bench/nvshmem/nvshmem_perf.cu
  "$nvcc" -O2 -rdc=true -arch=sm_90 -I device/include -c "$src" -o "$work/perf_rshmem.o" >"$work/rshmem.log" 2>&1 &
  p1=$!
  "$nvcc" -O2 -rdc=true -arch=sm_90 -I "$nv_home/include" -c "$src" -o "$work/perf_nvshmem.o" >"$work/nvshmem.log" 2>&1 &
  p2=$!
  wait "$p1" || { cat "$work/rshmem.log" >&2; die "compiling $src against rshmem"; }
  wait "$p2" || { cat "$work/nvshmem.log" >&2; die "compiling $src against NVSHMEM ($nv_home)"; }
  # shellcheck disable=SC2016 # run paths, expanded by the dynamic loader
  "$nvcc" -rdc=true -arch=sm_90 "$work/perf_rshmem.o" "$work/lib/librshmem_device.a" -L "$work/lib" -lrshmem -L "$cudalib" \
    -Xlinker -rpath -Xlinker '$ORIGIN/..' -o "$work/stage/nvshmem_perf_rshmem" >>"$work/rshmem.log" 2>&1 ||
    { cat "$work/rshmem.log" >&2; die "linking nvshmem_perf against rshmem"; }
  # shellcheck disable=SC2016
  "$nvcc" -rdc=true -arch=sm_90 "$work/perf_nvshmem.o" -L "$nv_home/lib" -l:"$nv_host" -lnvshmem_device -L "$cudalib" \
    -Xlinker -rpath -Xlinker '$ORIGIN' -o "$work/stage/nvshmem_perf_nvshmem" >>"$work/nvshmem.log" 2>&1 ||
    { cat "$work/nvshmem.log" >&2; die "linking nvshmem_perf against NVSHMEM"; }
  # Host symbols are not needed to run (the device code is in .nv_fatbin, which strip keeps).
  strip "$work/stage/nvshmem_perf_rshmem" "$work/stage/nvshmem_perf_nvshmem"
  nv_version=$(awk '/#define NVSHMEM_VENDOR_(MAJOR|MINOR|PATCH)_VERSION/ { v = v (v == "" ? "" : ".") $3 } END { print v }' \
    "$nv_home/include/non_abi/nvshmem_version.h" 2>/dev/null)
  {
    echo "commit: $(cat "$c/COMMIT")"
    echo "ptx_sha1: $(sha1sum <"$work/lib/rshmem_device.ptx" | cut -c1-40)"
    echo "librshmem_sha1: $(sha1sum <"$work/lib/librshmem.so" | cut -c1-40)"
    echo "nvshmem_perf.cu_sha1: $(sha1sum <"$src" | cut -c1-40)"
    echo "nvshmem: ${nv_version:-unknown} ($nv_home)"
    echo "nvcc: $("$nvcc" --version | tail -1)"
    echo "built: $(date -u +%FT%TZ) on $(hostname)"
  } >"$work/stage/BUILD.txt"
  rm -rf "$hw" && mkdir -p "$hw"
  tar -cJf "$hw/pack.tar.xz" -C "$work/stage" nvshmem_perf_rshmem nvshmem_perf_nvshmem BUILD.txt
  cp "$work/stage/BUILD.txt" "$hw/"
  echo "gpu-issue20: nvshmem_perf built against rshmem and NVSHMEM ${nv_version:-?} in $((SECONDS - t0)) s:" \
    "carry/hw/pack.tar.xz $(du -h "$hw/pack.tar.xz" | cut -f1); carry/ $(du -sh "$c" | cut -f1)" >&2
  exit 0
fi
[ "$action" = run ] || die "usage: $0 [prepare|run]"

# ---------------------------------------------------------------- run (GPU machine)
TOTAL_BUDGET=${TOTAL_BUDGET:-570}
HW_BUDGET=${HW_BUDGET:-200}
dry=${DRY_RUN:-0}
out=${OUT:-/tmp/issue20}
mkdir -p "$out/hw" || die "cannot make $out/hw"
out=$(cd "$out" && pwd)
logs=$out/hw
exec > >(tee "$out/issue20.log") 2>&1
tee_pid=$!
finish() {
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null || true
  exit "$1"
}
step() { echo; echo "=== $* ($SECONDS s) ==="; }
summary=()
status=0
# note NAME RC SECONDS: one summary row; a non-zero or skipped step makes the exit status 1.
note() {
  summary+=("$(printf '%-34s %s (%s s)' "$1" "$2" "$3")")
  case $2 in "exit 0" | "dry run") ;; *) status=1 ;; esac
}
hw_deadline=$((SECONDS + HW_BUDGET))

step "machine"
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
nvidia-smi topo -m 2>/dev/null | head -4
echo "carry built from commit $(cat "$c/COMMIT" 2>/dev/null || echo unknown)"
cat "$hw/BUILD.txt" 2>/dev/null || echo "no carry/hw/BUILD.txt: run 'scripts/gpu-issue20.sh prepare' on the CPU machine"
bash scripts/gpu-unpack.sh carry carry/hw || { echo "gpu-issue20: scripts/gpu-unpack.sh failed"; finish 1; }
for f in "$c/rshmrun" "$c/rshmem-bench" "$hw/nvshmem_perf_rshmem" "$hw/nvshmem_perf_nvshmem"; do
  [ -x "$f" ] || echo "gpu-issue20: missing $f (the steps that need it fail)"
done
# The C++ program against rshmem holds the device library it was linked with: say so when carry/ has another.
built_ptx=$(sed -n 's/^ptx_sha1: //p' "$hw/BUILD.txt" 2>/dev/null)
carry_ptx=$(sha1sum <"$c/rshmem_device.ptx" 2>/dev/null | cut -c1-40)
if [ -n "$built_ptx" ] && [ "$built_ptx" != "$carry_ptx" ]; then
  echo "WARNING: nvshmem_perf_rshmem was linked with device PTX $built_ptx, carry/ has $carry_ptx (scripts/gpu-issue20.sh prepare again)"
fi
NV=${NVSHMEM_HOME:-$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])" 2>/dev/null || true)}
if [ -z "$NV" ] || [ ! -d "$NV/lib" ]; then
  echo "WARNING: no NVSHMEM install here (nvidia.nvshmem Python package or NVSHMEM_HOME): the NVSHMEM runs fail"
else
  echo "NVSHMEM here: $NV ($(cd "$NV/lib" && ls libnvshmem_host.so* 2>/dev/null | paste -sd ' '))"
fi
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda}

# budget CAP: seconds for the next step: CAP, or what is left of the hardware part if less.
budget() {
  local left=$((hw_deadline - SECONDS))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
# run_logged NAME CAP LOG SHOWN CMD...: CMD under `timeout` (limit in LIMIT, for CMD's own limits), its
# output in LOG and here; SHOWN is the command as the log's first line says it.
run_logged() {
  local name=$1 cap=$2 log=$3 shown=$4 t t0 rc
  shift 4
  t=$(budget "$cap")
  export LIMIT=$t
  step "$name (limit ${t} s)"
  echo "\$ $shown" | tee "$log"
  if [ "$dry" = 1 ]; then
    echo "(dry run: not run; limit ${t} s)" | tee -a "$log"
    note "$name" "dry run" 0
    return 0
  fi
  if [ "$t" -lt 15 ]; then
    echo "skipped: ${t} s left of HW_BUDGET=${HW_BUDGET}" | tee -a "$log"
    note "$name" "skipped (no time left)" 0
    return 0
  fi
  t0=$SECONDS
  timeout -k 5 "$t" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  echo "exit: $rc ($((SECONDS - t0)) s of ${t} s)" | tee -a "$log"
  note "$name" "exit $rc" $((SECONDS - t0))
}
# rshmem programs: rshmrun -np 2, its own limit a little under the step's (LIMIT), so that it names a
# stuck PE before `timeout` ends it.
rsh() { # rsh SYMMETRIC_SIZE PROGRAM ARGS...
  local sym=$1
  shift
  env LD_LIBRARY_PATH="$c:${LD_LIBRARY_PATH:-}" RSHMEM_SYMMETRIC_SIZE="$sym" "$c/rshmrun" -np 2 \
    --timeout "$((LIMIT > 20 ? LIMIT - 5 : LIMIT))" "$@"
}
# nvshmem_perf against NVSHMEM, as bench/run-compare.sh starts it: one process per PE, NVSHMEM's unique id
# through a file; when a PE fails the other is ended at once. Output tagged [pe N], PE by PE.
nv_perf() { # nv_perf ARGS...
  local work uid r s rc=0 running
  work=$(mktemp -d "${TMPDIR:-/tmp}/issue20-nv.XXXXXX")
  uid=$work/uid.bin
  for r in 0 1; do
    LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" NVSHMEM_SYMMETRIC_SIZE=2147483648 PE_RANK=$r PE_SIZE=2 UID_FILE=$uid \
      "$hw/nvshmem_perf_nvshmem" "$@" >"$work/pe$r.log" 2>&1 &
  done
  for _ in 0 1; do
    wait -n
    s=$?
    if [ "$s" -ne 0 ] && [ "$rc" -eq 0 ]; then
      rc=$s
      mapfile -t running < <(jobs -pr)
      [ "${#running[@]}" -eq 0 ] || kill -TERM "${running[@]}" 2>/dev/null
    fi
  done
  for r in 0 1; do sed "s/^/[pe $r] /" "$work/pe$r.log"; done
  rm -rf "$work"
  return "$rc"
}
# nvshmem_perf against rshmem under rshmrun: each PE's PE_RANK / PE_SIZE from rshmrun's variables, the
# unique id through a file as NVSHMEM's run does.
rsh_perf() { # rsh_perf ARGS...
  local work rc
  work=$(mktemp -d "${TMPDIR:-/tmp}/issue20-rs.XXXXXX")
  # shellcheck disable=SC2016 # expanded by each PE's shell
  UID_FILE=$work/uid.bin rsh 1g bash -c 'PE_RANK=$RSHMEM_PE PE_SIZE=$RSHMEM_NPES exec "$0" "$@"' \
    "$hw/nvshmem_perf_rshmem" "$@"
  rc=$?
  rm -rf "$work"
  return "$rc"
}
export -f rsh nv_perf rsh_perf
export c hw NV

read -r -a bench <<<"${HW_BENCH_ARGS:---cases bw --max-bytes 256m}"
renv="LD_LIBRARY_PATH=carry RSHMEM_BACKEND=$RSHMEM_BACKEND"
nenv="LD_LIBRARY_PATH=$NV/lib NVSHMEM_SYMMETRIC_SIZE=2147483648 NVSHMEM_DISABLE_NVLS=1 PE_RANK=r PE_SIZE=2 UID_FILE=f"
pargs=(--grid 4 --threads 1024 --max-bytes 64k --sizes 8k,64k --bw-only)
for shape in ${HW_SHAPES:-4x1024 132x512}; do
  set -- "${shape%x*}" "${shape#*x}"
  # shellcheck disable=SC2016 # expanded by the step's shell
  run_logged "rshmem-bench $1 x $2" 80 "$logs/bench_${1}x$2.log" \
    "$renv RSHMEM_SYMMETRIC_SIZE=2g carry/rshmrun -np 2 carry/rshmem-bench --grid $1 --threads $2 ${bench[*]}" \
    bash -c 'rsh 2g "$c/rshmem-bench" "$@"' _ --grid "$1" --threads "$2" "${bench[@]}"
done
nargs=(--grid 132 --threads 512 --max-bytes 256m --sizes 8k,64k,256m --bw-only)
# shellcheck disable=SC2016
run_logged "nvshmem_perf NVSHMEM 132 x 512" 50 "$logs/nvshmem_132x512.log" \
  "2 x ($nenv carry/hw/nvshmem_perf_nvshmem ${nargs[*]})" bash -c 'nv_perf "$@"' _ "${nargs[@]}"
# shellcheck disable=SC2016
run_logged "nvshmem_perf rshmem 4 x 1024" 40 "$logs/cpp_rshmem_4x1024.log" \
  "$renv RSHMEM_SYMMETRIC_SIZE=1g UID_FILE=f carry/rshmrun -np 2 bash -c 'PE_RANK=\$RSHMEM_PE PE_SIZE=\$RSHMEM_NPES exec \"\$0\" \"\$@\"' carry/hw/nvshmem_perf_rshmem ${pargs[*]}" \
  bash -c 'rsh_perf "$@"' _ "${pargs[@]}"
# shellcheck disable=SC2016
run_logged "nvshmem_perf NVSHMEM 4 x 1024" 40 "$logs/cpp_nvshmem_4x1024.log" \
  "2 x ($nenv carry/hw/nvshmem_perf_nvshmem ${pargs[*]})" bash -c 'nv_perf "$@"' _ "${pargs[@]}"

step "bench/hw_bounds.py -> $out/extra.md"
bench_logs=()
for shape in ${HW_SHAPES:-4x1024 132x512}; do bench_logs+=(--bench "$logs/bench_$shape.log"); done
python3 bench/hw_bounds.py "${bench_logs[@]}" \
  --nvshmem "$logs/nvshmem_132x512.log" --nvshmem "$logs/cpp_nvshmem_4x1024.log" \
  --cpp-rshmem "$logs/cpp_rshmem_4x1024.log" --out "$out/extra.md"
rc=$?
note "bench/hw_bounds.py" "exit $rc" 0
if [ "$dry" = 1 ]; then
  python3 bench/hw_bounds.py --self-test || note "bench/hw_bounds.py --self-test" "failed" 0
fi
python3 bench/compare.py "$logs/bench_132x512.log" "$logs/nvshmem_132x512.log" "$logs/compare-132x512" \
  --machine "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | paste -sd ';')" \
  --command "scripts/gpu-issue20.sh: rshmem-bench --grid 132 --threads 512 ${bench[*]} / nvshmem_perf --bw-only" \
  >/dev/null 2>&1 && echo "bench/compare.py: $logs/compare-132x512/comparison.md" ||
  echo "bench/compare.py on the 132 x 512 logs failed (no results?)"

left=$((TOTAL_BUDGET - SECONDS))
step "NVSHMEM's perftests: PERFTEST_EXTRA=$out/extra.md BUDGET=$left scripts/gpu-perftest.sh run"
t0=$SECONDS
PERFTEST_EXTRA=$out/extra.md BUDGET=$left OUT=$out DRY_RUN=$dry bash scripts/gpu-perftest.sh run
rc=$?
note "scripts/gpu-perftest.sh run" "exit $rc" $((SECONDS - t0))

step "summary"
{
  echo "issue 20, one call: $(cat "$c/COMMIT" 2>/dev/null || echo 'unknown commit'); $(nvidia-smi -L 2>/dev/null | wc -l) GPUs"
  printf '%s\n' "${summary[@]}"
  echo
  grep -v '^# per shape' "$out/extra.md" 2>/dev/null | sed '/^$/,$d'
  echo
  grep -E '^perftest_(min_geomean|worst_row|targets):' "$out/perftest/perftest-score.md" 2>/dev/null ||
    echo "no perftest-score.md (see $out/perftest/perftest.log)"
  echo "total: $SECONDS s of TOTAL_BUDGET=$TOTAL_BUDGET"
} | tee "$out/issue20-summary.txt"
finish "$status"
