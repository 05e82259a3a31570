# scripts/gpu.sh ncu: one kernel launch of PE 0 under Nsight Compute (ncu), on the GPU machine, from the repository root:
#   OUT=dir scripts/gpu.sh ncu NAME KERNEL SKIP [--pmi] -- PROGRAM ARGS...
# runs `rshmrun [--pmi] -np 2 PROGRAM ARGS` with PE 0 (RSHMEM_PE, or PMI_RANK under --pmi) inside
#   ncu --clock-control none -k KERNEL --launch-skip SKIP --launch-count 1
# (the SKIP+1-th launch of KERNEL in PE 0), the other PE plain. The clocks are left as they are
# (the device README: never change them). Sections: speed of light, memory workload, warp states,
# launch and occupancy, plus the kernel's duration, SM clock, instructions, global load and store
# bytes and L2 bytes. ncu replays the kernel for its passes, saving and restoring the memory it
# writes: use it on kernels that wait for no other PE (a put or get loop, not a collective).
# Output: OUT/ncu_NAME.txt (ncu's details page and the program's output) and the key lines on stdout.
# Environment: RSHMRUN (default carry/rshmrun), LIBDIR (put on LD_LIBRARY_PATH, default the program's
# directory), NCU (default: ncu on PATH, else the newest under /opt/nvidia/nsight-compute), T (seconds,
# default 120), NP (PEs, default 2; 1 profiles a collective without a partner to wait for), METRICS_EXTRA
# (more metrics, comma-separated).
# This file is the subcommand's body: run it through scripts/gpu.sh.
set -uo pipefail
[ "${GPU_SH_PART:-}" = ncu ] || { echo "scripts/gpu/ncu.sh: run it as scripts/gpu.sh ncu" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
[ $# -ge 5 ] || { echo "usage: scripts/gpu.sh ncu NAME KERNEL SKIP [--pmi] -- PROGRAM ARGS..." >&2; exit 2; }
name=$1 kernel=$2 skip=$3; shift 3
pmi=()
[ "${1:-}" = --pmi ] && { pmi=(--pmi); shift; }
[ "${1:-}" = -- ] && shift
out=${OUT:-/tmp}/ncu_$name.txt
ncu=${NCU:-$(command -v ncu || ls -d /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | sort -V | tail -1)}
[ -x "$ncu" ] || { echo "gpu.sh ncu: no ncu found" >&2; exit 1; }
rshmrun=${RSHMRUN:-carry/rshmrun}
libdir=${LIBDIR:-$(dirname "$1")}
metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum,lts__t_bytes.sum${METRICS_EXTRA:+,$METRICS_EXTRA}
# PE 0 under ncu, the other PE plain.
wrap='r=${PMI_RANK:-${RSHMEM_PE:-0}}; if [ "$r" = 0 ]; then exec "$NCU_BIN" --clock-control none --target-processes all -k "$NCU_K" --launch-skip "$NCU_SKIP" --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy --metrics "$NCU_METRICS" "$@"; else exec "$@"; fi'
{
  echo "# gpu.sh ncu $name: ${pmi[*]} $* (kernel $kernel, launch $((skip + 1)) of PE 0)"
  NCU_BIN=$ncu NCU_K=$kernel NCU_SKIP=$skip NCU_METRICS=$metrics LD_LIBRARY_PATH=$libdir:${LD_LIBRARY_PATH:-} \
    timeout $((${T:-120} + 30)) "$rshmrun" "${pmi[@]}" -np "${NP:-2}" --timeout "${T:-120}" bash -c "$wrap" wrap "$@"
  echo "# exit: $?"
} >"$out" 2>&1
echo "== ncu $name ($(tail -1 "$out"))"
grep -E "stalled|gpu__time_duration|sm__cycles_elapsed.avg.per_second|smsp__inst_executed.sum|global_op_(st|ld)|lts__t_bytes.sum|Duration|SM Frequency|Memory Throughput|Registers Per|Achieved Occupancy|Stall|Warp Cycles Per Issued|==PROF==|==ERROR==|==WARNING==" "$out" | head -40
