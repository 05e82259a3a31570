#!/usr/bin/env bash
# Runs on the GPU machine (device tool) over carry/ made by scripts/gpu-prepare.sh:
#   1. the multi-process suite on the CUDA backend, 2 PEs, twice (a test that passes once and fails
#      once is a race), plus the bad-input scenarios;
#   2. the three ring shifts: Rust kernel, CUDA C++ against rshmem.h, the NVSHMEM seed unchanged;
#   3. rshmem-bench beside NVSHMEM (bench/run-compare.sh) and, unless ANCHOR=0, NVSHMEM's anchor benchmark.
# Everything is logged to $OUT/gpu-run.log (when OUT is set) and printed.
set -u
cd "$(dirname "$0")/.."
c=$PWD/carry
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} NVSHMEM_DISABLE_NVLS=1 RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda}
log=${OUT:-/tmp}/gpu-run.log
exec > >(tee "$log") 2>&1
NP=${NP:-2}
step() { echo; echo "=== $* ==="; }
step machine; nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -5; nvcc --version | tail -1
if [ ! -x "$c/simple_shift" ] || [ ! -x "$c/ring_shift_cuda" ]; then
  step "building CUDA C++ programs here"; MODE=full scripts/check-cuda-examples.sh "$c"
fi
for run in 1 2; do
  step "suite run $run: rshmrun -np $NP rshmem-test-pe all"
  RSHMEM_SYMMETRIC_SIZE=2g "$c/rshmrun" -np $NP --timeout 300 "$c/rshmem-test-pe" all; echo "exit: $?"
done
for s in bad_pe bad_addr mismatch_collective alloc_mismatch free_bad; do
  step "scenario $s"; "$c/rshmrun" -np $NP --timeout 60 "$c/rshmem-test-pe" $s; echo "exit: $?"
done
step "ring shift (Rust kernel)"; "$c/rshmrun" -np $NP "$c/ring_shift"; echo "exit: $?"
step "ring shift (CUDA C++, rshmem.h)"; "$c/rshmrun" -np $NP "$c/ring_shift_cuda"; echo "exit: $?"
step "seed simple_shift.cu (unchanged, nvshmem.h)"; "$c/rshmrun" -np $NP "$c/simple_shift"; echo "exit: $?"
if [ -f bench/run-compare.sh ]; then
  step "rshmem-bench vs NVSHMEM (bench/run-compare.sh, same parameters)"; NP=$NP bash bench/run-compare.sh; echo "exit: $?"
else
  step "rshmem-bench"; RSHMEM_SYMMETRIC_SIZE=2g "$c/rshmrun" -np $NP "$c/rshmem-bench"; echo "exit: $?"
fi
if [ "${ANCHOR:-1}" = 1 ]; then
  step "NVSHMEM anchor (same call)"; NP=$NP bash "$c/anchor/run.sh"; echo "exit: $?"
fi
