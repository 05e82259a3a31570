# scripts/gpu.sh run: on the GPU machine (device tool), over carry/ made by `scripts/gpu.sh prepare`
# (and `scripts/gpu.sh extras` for the soak and the fresh-clone ring shifts), on one node:
#   (SUITE_RUNS=N, SCENARIOS=0, SOAK=0, SOAK_SEEDS, SOAK_OPS, SOAK_THREADS, SOAK_BLOCKS, SOAK_TIMEOUT, COMPARE_ARGS, ANCHOR=0 select)
#   1. the multi-process suite on the CUDA backend, 2 PEs, twice (a test that passes once and fails
#      once is a race), plus the bad-input scenarios;
#   2. the three ring shifts: Rust kernel, CUDA C++ against rshmem.h, the NVSHMEM seed unchanged;
#   3. rshmem-bench beside NVSHMEM (bench/run-compare.sh) and, unless ANCHOR=0, NVSHMEM's anchor benchmark.
# Everything is logged to $OUT/gpu-run.log (when OUT is set) and printed.
# NODES=2: instead, the remote PEs on 2 GPUs, two simulated nodes (`scripts/gpu.sh remote`).
# This file is the subcommand's body: run it through scripts/gpu.sh.
set -u
[ "${GPU_SH_PART:-}" = run ] || { echo "scripts/gpu/run.sh: run it as scripts/gpu.sh run" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
bash scripts/gpu.sh unpack || exit 1
case "${NODES:-1}" in
  1) ;;
  2) exec bash scripts/gpu.sh remote ;;
  *) echo "gpu.sh run: NODES=$NODES: only 1 (this subcommand) or 2 (scripts/gpu.sh remote)" >&2; exit 2 ;;
esac
c=$PWD/carry
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} NVSHMEM_DISABLE_NVLS=1 RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda}
log=${OUT:-/tmp}/gpu-run.log
exec > >(tee "$log") 2>&1
NP=${NP:-2}
step() { echo; echo "=== $* ==="; }
step machine; nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5; nvcc --version | tail -1
if [ ! -x "$c/ring_shift_cuda" ] || { [ -f "$c/simple_shift.cu" ] && [ ! -x "$c/simple_shift" ]; }; then
  step "building CUDA C++ programs here"; MODE=full scripts/check-cuda-examples.sh "$c"
fi
for run in $(seq 1 ${SUITE_RUNS:-2}); do
  step "suite run $run: rshmrun -np $NP rshmem-test-pe all"
  RSHMEM_SYMMETRIC_SIZE=2g "$c/rshmrun" -np $NP --timeout 300 "$c/rshmem-test-pe" all; echo "exit: $?"
done
[ "${SCENARIOS:-1}" = 1 ] && for s in bad_pe bad_addr mismatch_collective alloc_mismatch free_bad finalize_mismatch peer_payload_empty reinit_stale; do
  step "scenario $s (expected: fails, naming the problem)"; "$c/rshmrun" -np $NP --timeout 60 "$c/rshmem-test-pe" $s; echo "exit: $?"
done
if [ "${SCENARIOS:-1}" = 1 ]; then step "scenario reinit (3 init/finalize cycles with kernels)"; "$c/rshmrun" -np $NP --timeout 120 "$c/rshmem-test-pe" reinit; echo "exit: $?"; fi
if [ "${SCENARIOS:-1}" = 1 ]; then step "scenario stuck_pe (expected: PE 1 named)"; RSHMEM_WAIT_TIMEOUT=3 "$c/rshmrun" -np $NP --timeout 60 "$c/rshmem-test-pe" stuck_pe; echo "exit: $?"; fi
if [ "${SCENARIOS:-1}" = 1 ]; then step "rshmrun --timeout names the stuck PE"; "$c/rshmrun" -np $NP --timeout 8 "$c/rshmem-test-pe" stuck_pe; echo "exit: $?"; fi
if [ -x "$c/rshmem-soak" ] && [ "${SOAK:-1}" = 1 ]; then
  step "soak, quick check (a hang here skips the long soaks)"
  RSHMEM_SYMMETRIC_SIZE=256m RSHMEM_CUMEM_GRANULE=2m "$c/rshmrun" -np $NP --timeout 30 "$c/rshmem-soak" --seed 1 --ops 20000 --threads 32 --blocks 1
  quick=$?; echo "exit: $quick"
  [ $quick = 0 ] && for seed in ${SOAK_SEEDS:-20261123 7}; do
    step "soak, seed $seed: >= 10^6 device operations against the model (heap grows in 2 MiB granules)"
    RSHMEM_SYMMETRIC_SIZE=256m RSHMEM_CUMEM_GRANULE=2m "$c/rshmrun" -np $NP --timeout ${SOAK_TIMEOUT:-150} \
      "$c/rshmem-soak" --seed "$seed" --ops ${SOAK_OPS:-1000000} --threads ${SOAK_THREADS:-128} --blocks ${SOAK_BLOCKS:-8}; echo "exit: $?"
  done
fi
for f in fresh-build-first fresh-test-first; do
  if [ -x "$c/$f/ring_shift" ]; then
    step "ring shift from a fresh clone ($f: scripts/fresh-clone-check.sh)"; "$c/$f/rshmrun" -np $NP "$c/$f/ring_shift"; echo "exit: $?"
  fi
done
step "ring shift (Rust kernel)"; "$c/rshmrun" -np $NP "$c/ring_shift"; echo "exit: $?"
step "ring shift (CUDA C++, rshmem.h)"; "$c/rshmrun" -np $NP "$c/ring_shift_cuda"; echo "exit: $?"
if [ -x "$c/simple_shift" ]; then
  step "seed simple_shift.cu (unchanged, nvshmem.h)"; "$c/rshmrun" -np $NP "$c/simple_shift"; echo "exit: $?"
else
  step "seed simple_shift.cu: SKIPPED (carry/ has none: scripts/gpu.sh prepare found no ../shared/seeds/simple_shift.cu)"
fi
if [ -f bench/run-compare.sh ]; then
  step "rshmem-bench vs NVSHMEM (bench/run-compare.sh, same parameters)"; NP=$NP bash bench/run-compare.sh ${COMPARE_ARGS:-}; echo "exit: $?"
else
  step "rshmem-bench"; RSHMEM_SYMMETRIC_SIZE=2g "$c/rshmrun" -np $NP "$c/rshmem-bench"; echo "exit: $?"
fi
if [ "${ANCHOR:-1}" = 1 ] && [ -f "$c/anchor/run.sh" ]; then
  step "NVSHMEM anchor (same call)"; NP=$NP bash "$c/anchor/run.sh"; echo "exit: $?"
elif [ "${ANCHOR:-1}" = 1 ]; then
  step "NVSHMEM anchor: SKIPPED (carry/anchor/ is empty: scripts/gpu.sh prepare found no ../shared/anchor/)"
fi
