#!/usr/bin/env bash
# Remote PEs on 2 x H200 in ONE device call (issue 8's evidence): `NODES=2 bash scripts/gpu-run.sh`, or
# this script directly, from the repository root on the GPU machine with carry/ made by
# scripts/gpu-prepare.sh. Every rshmem program runs under `rshmrun --nodes 2` with
# RSHMEM_REMOTE_TRANSPORT=proxy and one GPU per simulated node (scripts/gpu-node-card.sh):
#   1. the three ring shifts: the seed simple_shift.cu unchanged (nvshmem.h), the CUDA C++ ring shift
#      (examples/cuda, rshmem.h), the Rust ring_shift; -np 2, and the Rust one with -np 4 too;
#   2. the GPU suite (rshmem-test-pe all), twice, -np 2 (one PE per node: every peer is remote);
#   3. rshmem-bench over the proxy (-np 2: PE 1 is on the other node): put/get bandwidth 8 B..256 MiB,
#      p + quiet, fetch_add, ping-pong, barrier_all;
#   4. NCCL's socket transport between the same two GPUs (bench/nccl_socket.py, torch);
#   5. one loopback TCP stream, the medium's limit (bench/loopback_tcp.py);
#   6. the suite once more with -np 4 (two PEs per node: p2p inside a node, proxy across);
#   7. the Rust ring shift with --netns (each node in its own network namespace; needs root);
#   8. (ibgda) nicbad: a WQE with a bad rkey and one with a remote address past the target's heap,
#      each ending in a clear error completion (rshmem-test-pe nic_bad_key / nic_bad_addr);
#   9. (ibgda) posting: rshmem-bench --posting with the emulated NIC acknowledging without moving data
#      (RSHMEM_IBGDA_EMULATOR=ack, 16 QPs per PE): ns per WQE and WQEs/s per block and per grid;
#  10. bench_proxy: rshmem-bench over the proxy in the same call, beside an ibgda run.
# TRANSPORT=proxy (default) or ibgda: RSHMEM_REMOTE_TRANSPORT for every step (ibgda: the emulated NIC
# when the machine has no usable NIC).
# SUITE_TIMEOUT: seconds each suite run may take (default 150).
# Selection: STEPS="ring suite bench nccl loopback suite4 netns" (default all, in that order; nicbad,
# posting and bench_proxy only when named), SUITE_RUNS=2,
# GRID/THREADS (rshmem-bench, default 32 x 256), BENCH_ARGS (more rshmem-bench options), NETNS=1 (add
# --netns to every rshmrun). A step that hangs runs into its own limit (rshmrun --timeout names the
# stalled PEs); if the call as a whole nears the device tool's 10 minutes, split STEPS over two calls.
# Output ($OUT, default /tmp/gpu-remote; at most 8 files come back from a device call, so 5 files):
#   remote.log            everything printed, step by step, with exit codes
#   rshmem_proxy.log      rshmem-bench's output (RESULT lines, route=remote)
#   nccl_socket.json      NCCL socket send/recv: bandwidth and half round trip per size
#   loopback_tcp.json     one TCP stream over lo: 256 MiB bandwidth and the 8-byte half round trip
#   remote_summary.json   machine, commit, each step's command, exit code and seconds
# Then, here: python3 bench/plot_remote.py DIR bench/results/  (the plot and the table with the targets).
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
c=$root/carry
out=${OUT:-/tmp/gpu-remote}
mkdir -p "$out"
exec > >(tee "$out/remote.log") 2>&1
tee_pid=$!
TRANSPORT=${TRANSPORT:-proxy}
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda} RSHMEM_REMOTE_TRANSPORT=$TRANSPORT
# NVLink multicast stays off everywhere (KINDS.md): NVSHMEM, NCCL, PyTorch.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
STEPS=${STEPS:-ring suite bench nccl loopback suite4 netns}
card=$root/scripts/gpu-node-card.sh
netns=(); [ "${NETNS:-0}" = 1 ] && netns=(--netns)
summary=()
step() { echo; echo "=== $* ==="; }
# run NAME TIMEOUT CMD...: runs CMD under `timeout`, prints and records its exit code and duration.
run() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS
  echo "\$ $*"
  timeout -k 10 "$limit" "$@"
  local rc=$?
  echo "exit: $rc ($((SECONDS - t0)) s)"
  summary+=("$(printf '{"step": "%s", "exit": %d, "seconds": %d, "command": "%s"}' "$name" "$rc" $((SECONDS - t0)) "$(echo "$*" | sed 's/\\/\\\\/g; s/"/\\"/g')")")
  return $rc
}
# rrun NAME TIMEOUT NP PROGRAM ARGS...: PROGRAM under rshmrun --nodes 2, one GPU per node.
rrun() {
  local name=$1 limit=$2 np=$3; shift 3
  run "$name" $((limit + 15)) "$c/rshmrun" --nodes 2 "${netns[@]}" -np "$np" --timeout "$limit" "$card" "$@"
}
has() { case " $STEPS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

step machine
nvidia-smi -L; nvidia-smi topo -m 2>/dev/null | head -4; nvcc --version 2>/dev/null | tail -1
python3 -c 'import torch; print("torch", torch.__version__, "GPUs", torch.cuda.device_count(), "NCCL", torch.cuda.nccl.version())' 2>&1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$ngpu" -ge 2 ] || echo "WARNING: $ngpu GPU(s): the two simulated nodes share one"
commit=$(cat "$c/COMMIT" 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown)
echo "carry built from commit $commit"
if [ ! -x "$c/ring_shift_cuda" ] || { [ -f "$c/simple_shift.cu" ] && [ ! -x "$c/simple_shift" ]; }; then
  step "building CUDA C++ programs here"; MODE=full scripts/check-cuda-examples.sh "$c"
fi

if has ring; then
  if [ -x "$c/simple_shift" ]; then
    step "seed simple_shift.cu (unchanged, nvshmem.h), --nodes 2 -np 2"; rrun simple_shift 60 2 "$c/simple_shift"
  else
    step "seed simple_shift.cu: SKIPPED (carry/ has none: gpu-prepare.sh found no ../shared/seeds/simple_shift.cu)"
  fi
  step "ring shift (CUDA C++, rshmem.h), --nodes 2 -np 2"; rrun ring_shift_cuda 60 2 "$c/ring_shift_cuda"
  step "ring shift (Rust kernel), --nodes 2 -np 2"; rrun ring_shift 60 2 "$c/ring_shift"
  step "ring shift (Rust kernel), --nodes 2 -np 4 (the README's command)"; rrun ring_shift_np4 60 4 "$c/ring_shift"
fi
if has suite; then
  for r in $(seq 1 "${SUITE_RUNS:-2}"); do
    step "suite run $r: rshmrun --nodes 2 -np 2 rshmem-test-pe all ($TRANSPORT between the two nodes)"
    RSHMEM_SYMMETRIC_SIZE=2g rrun "suite_$r" "${SUITE_TIMEOUT:-150}" 2 "$c/rshmem-test-pe" all
  done
fi
if has bench; then
  step "rshmem-bench over the $TRANSPORT transport: --nodes 2 -np 2, grid ${GRID:-32} x ${THREADS:-256}"
  # shellcheck disable=SC2086 # BENCH_ARGS is a list of options
  RSHMEM_SYMMETRIC_SIZE=2g rrun bench 300 2 "$c/rshmem-bench" --grid "${GRID:-32}" --threads "${THREADS:-256}" ${BENCH_ARGS:-} \
    > >(tee "$out/rshmem_$TRANSPORT.log")
fi
if has nicbad; then
  for s in nic_bad_key nic_bad_addr; do
    step "bad input through IBGDA: rshmem-test-pe $s (must end in an error completion naming it)"
    RSHMEM_SYMMETRIC_SIZE=1g RSHMEM_REMOTE_TRANSPORT=ibgda rrun "$s" 60 2 "$c/rshmem-test-pe" "$s"
  done
fi
if has posting; then
  step "posting cost: rshmem-bench --posting, ibgda with the emulated NIC acknowledging only, 16 QPs per PE"
  # shellcheck disable=SC2086
  RSHMEM_SYMMETRIC_SIZE=1g RSHMEM_REMOTE_TRANSPORT=ibgda RSHMEM_IBGDA_EMULATOR=ack RSHMEM_IBGDA_QPS_PER_PE=16 \
    rrun posting 200 2 "$c/rshmem-bench" --posting --grid "${POST_GRID:-132}" --threads "${POST_THREADS:-256}" > >(tee "$out/posting.log")
fi
if has bench_proxy; then
  step "rshmem-bench over the proxy transport in the same call: --nodes 2 -np 2, grid ${GRID:-32} x ${THREADS:-256}"
  # shellcheck disable=SC2086
  RSHMEM_SYMMETRIC_SIZE=2g RSHMEM_REMOTE_TRANSPORT=proxy rrun bench_proxy 300 2 "$c/rshmem-bench" --grid "${GRID:-32}" --threads "${THREADS:-256}" ${BENCH_ARGS:-} \
    > >(tee "$out/rshmem_proxy.log")
fi
if has nccl; then
  step "NCCL socket transport, 2 processes, one GPU each (bench/nccl_socket.py)"
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG=${NCCL_DEBUG:-WARN} \
    run nccl_socket 240 python3 bench/nccl_socket.py --json "$out/nccl_socket.json"
fi
if has loopback; then
  step "one loopback TCP stream (bench/loopback_tcp.py)"
  run loopback_tcp 120 python3 bench/loopback_tcp.py --json "$out/loopback_tcp.json"
fi
if has suite4; then
  step "suite: rshmrun --nodes 2 -np 4 rshmem-test-pe all (2 PEs per node: p2p inside, proxy across)"
  RSHMEM_SYMMETRIC_SIZE=1g rrun suite_np4 150 4 "$c/rshmem-test-pe" all
fi
if has netns; then
  step "ring shift (Rust kernel), --nodes 2 --netns -np 4 (a network namespace per node)"
  run ring_shift_netns 75 "$c/rshmrun" --nodes 2 --netns -np 4 --timeout 60 "$card" "$c/ring_shift"
fi

step summary
gpus=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sort | uniq -c | sed 's/^ *//' | paste -sd ';')
{
  printf '{\n  "machine": "%s",\n  "commit": "%s",\n  "date": "%s",\n  "netns": %s,\n  "steps": [\n' \
    "$gpus" "$commit" "$(date -u +%FT%TZ)" "$([ "${NETNS:-0}" = 1 ] && echo true || echo false)"
  for i in "${!summary[@]}"; do
    printf '    %s%s\n' "${summary[$i]}" "$([ "$i" -lt $((${#summary[@]} - 1)) ] && echo ,)"
  done
  printf '  ]\n}\n'
} >"$out/remote_summary.json"
cat "$out/remote_summary.json"
echo "results in $out: $(find "$out" -maxdepth 1 -type f -printf '%f ')"
# Let tee write the end of remote.log before the call collects $OUT.
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null || true
