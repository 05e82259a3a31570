#!/usr/bin/env bash
# A short remote-PE check on 2 GPUs (two simulated nodes, proxy transport), each step with its own
# limit so that one hang does not use up the device call: the three ring shifts (-np 2, and the Rust
# one with -np 4), the GPU suite `all` (and, if it fails, its scenarios one by one so the log says
# which), then `all` twice more (-np 2 and -np 4). Everything goes to $OUT/steps.log as it runs, so a
# call that times out still brings back what ran. Run from the repository root on the GPU machine with
# carry/ from scripts/gpu-prepare.sh. RSHMEM_DEBUG=trace logs every proxy request and frame.
cd "$(dirname "$0")/.." || exit 1
c=$PWD/carry; o=${OUT:-/tmp/out}; mkdir -p "$o"
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} RSHMEM_BACKEND=cuda NVSHMEM_DISABLE_NVLS=1
card=$PWD/scripts/gpu-node-card.sh
r() { local lim=$1; shift; local t0=$SECONDS; echo "\$ rshmrun --nodes 2 --timeout $lim $*"; "$c/rshmrun" --nodes 2 --timeout "$lim" "$@"; local rc=$?; echo "exit: $rc ($((SECONDS - t0)) s)"; return $rc; }
exec > >(tee "$o/steps.log") 2>&1
echo "commit $(cat "$c/COMMIT" 2>/dev/null)"; nvidia-smi -L
for p in simple_shift ring_shift_cuda ring_shift; do
  if [ -x "$c/$p" ]; then r 20 -np 2 "$card" "$c/$p"; else echo "SKIPPED $p: not in carry/ (the seed comes from ../shared beside the checkout)"; fi
done
r 20 -np 4 "$card" "$c/ring_shift"
if RSHMEM_SYMMETRIC_SIZE=2g r "${ALL_LIMIT:-90}" -np 2 "$card" "$c/rshmem-test-pe" all; then
  RSHMEM_SYMMETRIC_SIZE=2g r "${ALL_LIMIT:-90}" -np 2 "$card" "$c/rshmem-test-pe" all
  RSHMEM_SYMMETRIC_SIZE=1g r "${ALL_LIMIT:-90}" -np 4 "$card" "$c/rshmem-test-pe" all
else
  for s in ring pg rma amo contention amo_mixed lock fence put_signal wait barrier host_rma alloc teams; do
    RSHMEM_SYMMETRIC_SIZE=2g r "${ONE_LIMIT:-30}" -np 2 "$card" "$c/rshmem-test-pe" "$s"
  done
fi
echo done
