# scripts/gpu.sh single: what one GPU can check (nvidia-h100-x1 / nvidia-h200), in one device call, with
# carry/ from `scripts/gpu.sh prepare` + `bench/cpp-self.sh prepare` (+ carry/nvshmem-src/perftest/,
# NVSHMEM's perftest sources, for step 4):
#   1. the suite with 2 PEs on the one GPU (CUDA IPC within a device), twice;
#   2. the teams-and-collectives scenarios (coll, coll_teams, coll_prop) with 2 PEs, thread/warp/block
#      device collectives and the host and on-stream ones (the rshmemi_collective kernel);
#   3. the CUDA C++ call path in self mode (bench/cpp-self.sh run);
#   4. when carry/nvshmem-src/perftest/ holds NVSHMEM's perftest sources: bench/perftest.sh MODE=full, then a few
#      perftests under rshmrun -np 2 (smoke run; link figures need two GPUs).
# Logs (at most 8 files in $OUT, as the device tool returns): suite.log, coll.log, self.tar.gz, perftest.log.
# This file is the subcommand's body: run it through scripts/gpu.sh.
set -u
[ "${GPU_SH_PART:-}" = single ] || { echo "scripts/gpu/single.sh: run it as scripts/gpu.sh single" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
bash scripts/gpu.sh unpack || exit 1
c=$PWD/carry
out=${OUT:-/tmp}
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} NVSHMEM_DISABLE_NVLS=1 RSHMEM_BACKEND=cuda
{
  nvidia-smi -L; cat "$c/COMMIT"
  for run in 1 2; do
    echo "== suite run $run: rshmrun -np 2 rshmem-test-pe all (2 PEs on one GPU)"
    RSHMEM_SYMMETRIC_SIZE=2g timeout -k 5 150 "$c/rshmrun" -np 2 --timeout 140 "$c/rshmem-test-pe" all; echo "exit $?"
  done
} >"$out/suite.log" 2>&1
{
  for s in coll coll_teams coll_prop; do
    echo "== $s: rshmrun -np 2 rshmem-test-pe $s"
    RSHMEM_SYMMETRIC_SIZE=1g timeout -k 5 150 "$c/rshmrun" -np 2 --timeout 140 "$c/rshmem-test-pe" $s; echo "exit $?"
  done
  echo "== coll, 1 PE"
  RSHMEM_SYMMETRIC_SIZE=1g timeout -k 5 100 "$c/rshmrun" -np 1 --timeout 90 "$c/rshmem-test-pe" coll; echo "exit $?"
} >"$out/coll.log" 2>&1
mkdir -p /tmp/self
OUT=/tmp/self VARIANTS="${VARIANTS:-nvshmem rshmem rshmem_lib}" timeout 300 bash bench/cpp-self.sh run --quick --max-bytes 64m >/dev/null 2>&1
tar -C /tmp/self -czf "$out/self.tar.gz" .
if [ -d "$c/nvshmem-src/perftest" ]; then
  {
    MODE=full NVSHMEM_SRC=$c/nvshmem-src RSHMEM_LIBDIR=$c PTX=$c/rshmem_device.ptx timeout 240 bash bench/perftest.sh /tmp/pt
    echo "perftest.sh exit $?"
    for p in device/coll/barrier_latency device/coll/reduction_latency device/coll/bcast_latency device/pt-to-pt/shmem_put_bw; do
      echo "== rshmrun -np 2 $p"
      RSHMEM_SYMMETRIC_SIZE=2g timeout -k 5 60 "$c/rshmrun" -np 2 --timeout 55 /tmp/pt/rshmem/$p 2>&1 | tail -40; echo "exit $?"
    done
  } >"$out/perftest.log" 2>&1
fi
grep -E "^== |exit " "$out/suite.log" "$out/coll.log"
