# scripts/gpu.sh remote: remote PEs on 2 GPUs in ONE device call (also `NODES=2 scripts/gpu.sh run`), from
# the repository root on the GPU machine with carry/ made by `scripts/gpu.sh prepare` (and
# `scripts/gpu.sh extras` for what PART=families and PART=checks use). Every rshmem program runs under
# `rshmrun --nodes 2` with RSHMEM_REMOTE_TRANSPORT=proxy and one GPU per simulated node (scripts/gpu-node-card.sh):
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
# Remote operations at message rate, two parts of at most ~7 minutes each, one device call
# each (a command may run 10 minutes; both together would not fit one), nvidia-h200-x2, same warm machine:
#   PART=targets  the figures of the message-rate targets, in this order:
#     perftest     NVSHMEM's shmem_put_bw built unchanged against rshmem (carry/perftest, made by
#                  scripts/gpu.sh prepare; else built here from carry/nvshmem-src), -n 10 -w 2 -b 4K -e 4M -f 4,
#                  grids 4x1024, 1x1024, 1x32, 32x32, for RSHMEM_REMOTE_TRANSPORT=proxy and ibgda
#                  (PERFTEST_TRANSPORTS), NVSHMEM_MACHINE_READABLE_OUTPUT=1;
#     fenceab      shmem_put_bw 4x1024 through the proxy with RSHMEM_PROXY_GROUP_FENCE=every (a fence per
#                  warp, as before) beside the default (one per group);
#     platency     shmem_p_latency -t 1 -b 4 -e 32 -f 2 -n 500 -w 20, proxy and ibgda;
#     barrier      barrier_latency -n 200 -w 10, proxy and ibgda;
#     msgrate      rshmem-bench --cases rate,quiet --quick over the proxy (MSGRATE_TRANSPORTS): message
#                  rate of 8 B-4 KiB putmem_nbi and 8-byte p from 1, 32, 132 blocks, and the
#                  every-thread-quiet kernel (32 x 1024) at 1, 16, 256 MiB beside one quiet per block and
#                  per grid;
#     msgrate_cpp  the same through the CUDA C++ path: carry/msg_rate (bench/nvshmem/msg_rate.cu) --reps 3;
#     loopback     bench/loopback_tcp.py --streams 1,2,4,8,16 (the medium: 1 and N streams, half round trip);
#     nccl         bench/nccl_socket.py, NCCL's default socket setting;
#     nccl4x4      the same with NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4, from 4 KiB.
#   PART=checks   what must still hold:
#     suite        the GPU suite twice through the proxy (--nodes 2 -np 2), suite_ibgda once through IBGDA;
#     p2p          same node (-np 2, no --nodes): rshmem-bench --grid 132 --threads 256 --quick
#                  --max-bytes 64m with this build, then with carry-before/ (a previous build, when it is
#                  there: BEFORE=<commit> scripts/gpu.sh extras makes it), then this build again (the spread);
#     shapes       same node, this build: rshmem-bench --cases bw,lat --quick --max-bytes 16m at 132 x 512,
#                  4 x 1024 and 32 x 1024 (Rust kernels at 1024 threads per block), and carry-before/ at
#                  132 x 512;
#     msgrate_nvshmem  bench/nvshmem/msg_rate.cu built here against the image's NVSHMEM 3.4.5, 2 PEs on
#                  one node (NVLink: a reference for the program, not a remote figure).
#   PART=issue19  both targets and checks (for a command limit of 15 minutes or more).
#   PART=perftest NVSHMEM's perftests (carry/nvshmem-src, unchanged) built here against rshmem
#                 and against the image's NVSHMEM (MODE=full bench/perftest.sh carry/perftest-cmp, once,
#                 reused by later calls), then run under both libraries (MODE=run: rshmrun -np 2 and
#                 rshmrun --pmi -np 2, one node, SHORT=1) and scored (bench/perftest_score.py:
#                 perftest_min_geomean, perftest_worst_row). PERFTEST_PROGS picks programs (paths under
#                 perftest/ without extension; default every program): split them over calls, e.g.
#                 PERFTEST_PROGS="$(cd carry/nvshmem-src/perftest && ls device/coll/*.cu | sed 's/\.cu$//')".
#   PART=families the API families (C point operations, device families, team_init, global_exit) with
#                 the suites, the cudarc example (interop) and same-node P2P before/after (p2p),
#                 and NVSHMEM's anchor benchmark in the same call (anchor).
#   DRY_RUN=1 prints every step's command (with its limit after BUDGET) without running any.
#   At the end: python3 bench/remote_summary.py prints the targets' lines (remote_put_4KiB_4x1024_GBps:
#   ...) and the tables, also into summary.txt. BUDGET (seconds, default 570) bounds the whole script:
#   a step gets at most what is left, one that cannot start is listed as skipped, so the call ends in
#   time and returns everything.
# TRANSPORT=proxy (default) or ibgda: RSHMEM_REMOTE_TRANSPORT for every step (ibgda: the emulated NIC
# when the machine has no usable NIC) unless the step names its own.
# SUITE_TIMEOUT: seconds each suite run may take (default 150).
# Selection: STEPS="ring suite bench nccl loopback suite4 netns" (default all, in that order; nicbad,
# posting and bench_proxy only when named), SUITE_RUNS=2,
# GRID/THREADS (rshmem-bench, default 32 x 256), BENCH_ARGS (more rshmem-bench options), NETNS=1 (add
# --netns to every rshmrun). A step that hangs runs into its own limit (rshmrun --timeout names the
# stalled PEs); if the call as a whole nears the device tool's 10 minutes, split STEPS over two calls.
# Output ($OUT, default /tmp/gpu-remote; at most 8 files come back from a device call, so 4 files):
#   remote.log            everything printed, step by step, with exit codes
#   summary.txt           bench/remote_summary.py's lines and tables
#   remote_summary.json   machine, commit, each step's command, exit code and seconds
#   logs.tar.gz           every step's own log (logs/): rshmem_proxy.log (rshmem-bench, RESULT lines),
#                         nccl_socket.json, loopback_tcp.json, perftest_*.log, msgrate_*.log, p2p_*.log, ...
# Then, here: tar xzf logs.tar.gz; python3 bench/plot_remote.py logs bench/results/ (the remote plot and
# table) and python3 bench/remote_summary.py logs (the targets' lines).
# This file is the subcommand's body: run it through scripts/gpu.sh.
set -u
[ "${GPU_SH_PART:-}" = remote ] || { echo "scripts/gpu/remote.sh: run it as scripts/gpu.sh remote" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
bash scripts/gpu.sh unpack || exit 1
root=$PWD
c=$root/carry
cb=$root/carry-before
out=${OUT:-/tmp/gpu-remote}
logs=$out/logs
mkdir -p "$out" "$logs"
exec > >(tee "$out/remote.log") 2>&1
tee_pid=$!
BUDGET=${BUDGET:-570}
TRANSPORT=${TRANSPORT:-proxy}
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda} RSHMEM_REMOTE_TRANSPORT=$TRANSPORT
# NVLink multicast stays off everywhere (KINDS.md): NVSHMEM, NCCL, PyTorch.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
T19_TARGETS="perftest fenceab platency barrier msgrate msgrate_cpp loopback nccl nccl4x4"
T19_CHECKS="suite suite_ibgda p2p shapes msgrate_nvshmem"
case "${PART:-}" in
  "") STEPS=${STEPS:-ring suite bench nccl loopback suite4 netns} ;;
  targets) STEPS=${STEPS:-$T19_TARGETS}
    # Every PE prints its proxy's stage counters at finalize (bench/remote_summary.py lists them): what
    # limits each target figure, measured in the same run.
    export RSHMEM_PROXY_STATS=${RSHMEM_PROXY_STATS:-1} ;;
  checks) STEPS=${STEPS:-$T19_CHECKS} SUITE_RUNS=${SUITE_RUNS:-2} ;;
  issue19) STEPS=${STEPS:-$T19_TARGETS $T19_CHECKS} ;;
  perftest) STEPS=${STEPS:-perftest_cmp} ;;
  families) STEPS=${STEPS:-suite suite_ibgda families interop teams p2p anchor} SUITE_RUNS=${SUITE_RUNS:-2} ;;
  *) echo "gpu.sh remote: PART=$PART: targets, checks, issue19, perftest or families" >&2; exit 2 ;;
esac
card=$root/scripts/gpu-node-card.sh
netns=(); [ "${NETNS:-0}" = 1 ] && netns=(--netns)
summary=()
step() { echo; echo "=== $* ==="; }
# Seconds left of BUDGET, and LIMIT clamped to them (less a margin for the kill and the summary).
left() { echo $((BUDGET - SECONDS)); }
clamp() { local l; l=$(($(left) - 25)); if [ "$1" -lt "$l" ]; then echo "$1"; else echo "$l"; fi; }
record() { # record NAME RC SECONDS COMMAND
  summary+=("$(printf '{"step": "%s", "exit": %d, "seconds": %d, "command": "%s"}' "$1" "$2" "$3" "$(echo "$4" | sed 's/\\/\\\\/g; s/"/\\"/g')")")
}
# run NAME TIMEOUT CMD...: runs CMD under `timeout` (at most what is left of BUDGET), prints and records
# its exit code and duration; with LOG=file set, its output also goes to that file (in logs/). A step
# that cannot get 20 seconds is skipped (exit 125 in the record).
run() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS rc lim
  lim=$(clamp "$limit")
  if [ "$lim" -lt 20 ]; then
    echo "SKIPPED $name: $(left) s left of BUDGET=$BUDGET"
    record "$name" 125 0 "skipped (budget): $*"
    return 125
  fi
  echo "\$ $*"
  if [ "${DRY_RUN:-0}" = 1 ]; then
    echo "(dry run: not run${LOG:+, log $LOG})"
    record "$name" 0 0 "dry run: $*"
    return 0
  fi
  if [ -n "${LOG:-}" ]; then
    { timeout -k 10 "$lim" "$@" 2>&1; echo $? >"$logs/.rc"; } | tee -a "$logs/$LOG"
    rc=$(cat "$logs/.rc")
    echo "exit: $rc" >>"$logs/$LOG"
  else
    timeout -k 10 "$lim" "$@"
    rc=$?
  fi
  echo "exit: $rc ($((SECONDS - t0)) s)"
  record "$name" "$rc" $((SECONDS - t0)) "$*"
  return "$rc"
}
# rrun NAME TIMEOUT NP PROGRAM ARGS...: PROGRAM under rshmrun --nodes 2, one GPU per node.
rrun() {
  local name=$1 limit=$2 np=$3; shift 3
  # rshmrun's own --timeout (which names stalled PEs) ends 15 s before the step's outer limit.
  local lim; lim=$(($(clamp $((limit + 15))) - 15))
  [ "$lim" -ge 20 ] || lim=20
  run "$name" $((lim + 15)) "$c/rshmrun" --nodes 2 "${netns[@]}" -np "$np" --timeout "$lim" "$card" "$@"
}
# prun NAME TIMEOUT DIR PROGRAM ARGS...: PROGRAM under DIR/rshmrun -np 2 on one node (PEs on GPUs 0, 1).
prun() {
  local name=$1 limit=$2 dir=$3; shift 3
  local lim; lim=$(($(clamp $((limit + 15))) - 15))
  [ "$lim" -ge 20 ] || lim=20
  LD_LIBRARY_PATH=$dir:$LD_LIBRARY_PATH run "$name" $((lim + 15)) "$dir/rshmrun" -np 2 --timeout "$lim" "$@"
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

# ---------------------------------------------------------------- the message-rate targets (PART=targets)
pt=$c/perftest/rshmem
PT_PROGS="device/pt-to-pt/shmem_put_bw device/pt-to-pt/shmem_p_latency device/coll/barrier_latency"
if { has perftest || has platency || has barrier; } && [ ! -x "$pt/device/pt-to-pt/shmem_put_bw" ]; then
  if [ -d "$c/nvshmem-src/perftest" ]; then
    step "building NVSHMEM's perftests (unchanged) against rshmem here: bench/perftest.sh MODE=full PROGS=..."
    MODE=full PROGS=$PT_PROGS NVSHMEM_SRC=$c/nvshmem-src RSHMEM_LIBDIR=$c PTX=$c/rshmem_device.ptx \
      run perftest_build 300 bash bench/perftest.sh "$c/perftest"
  else
    step "NVSHMEM perftests: none in carry/perftest and no carry/nvshmem-src/perftest (scripts/gpu.sh prepare with NVSHMEM_SRC=...)"
  fi
fi
export NVSHMEM_MACHINE_READABLE_OUTPUT=1
if has perftest; then
  for t in ${PERFTEST_TRANSPORTS:-proxy ibgda}; do
    for shape in ${PERFTEST_SHAPES:-4x1024 1x1024 1x32 32x32}; do
      step "shmem_put_bw (NVSHMEM perftest, unchanged) -c ${shape%x*} -t ${shape#*x} -n 10 -w 2 -b 4K -e 4M -f 4, $t, --nodes 2 -np 2"
      LOG=perftest_put_bw_${t}_$shape.log RSHMEM_REMOTE_TRANSPORT=$t RSHMEM_SYMMETRIC_SIZE=1g \
        rrun "put_bw_${t}_$shape" 90 2 "$pt/device/pt-to-pt/shmem_put_bw" -c "${shape%x*}" -t "${shape#*x}" -n 10 -w 2 -b 4K -e 4M -f 4
    done
  done
fi
if has fenceab; then
  step "shmem_put_bw -c 4 -t 1024, proxy, RSHMEM_PROXY_GROUP_FENCE=every (one system fence per warp, the 317a167 behaviour; the perftest step above ran with one fence per group)"
  LOG=perftest_put_bw_proxyfenceevery_4x1024.log RSHMEM_REMOTE_TRANSPORT=proxy RSHMEM_PROXY_GROUP_FENCE=every RSHMEM_SYMMETRIC_SIZE=1g \
    rrun put_bw_fence_every 90 2 "$pt/device/pt-to-pt/shmem_put_bw" -c 4 -t 1024 -n 10 -w 2 -b 4K -e 4M -f 4
fi
if has platency; then
  for t in ${PERFTEST_TRANSPORTS:-proxy ibgda}; do
    step "shmem_p_latency -t 1 (one thread: p + quiet), $t, --nodes 2 -np 2"
    LOG=perftest_p_latency_$t.log RSHMEM_REMOTE_TRANSPORT=$t RSHMEM_SYMMETRIC_SIZE=1g \
      rrun "p_latency_$t" 90 2 "$pt/device/pt-to-pt/shmem_p_latency" -t 1 -b 4 -e 32 -f 2 -n 500 -w 20
  done
fi
if has barrier; then
  for t in ${PERFTEST_TRANSPORTS:-proxy ibgda}; do
    step "barrier_latency (device barrier and barrier_all, thread/warp/block), $t, --nodes 2 -np 2"
    LOG=perftest_barrier_$t.log RSHMEM_REMOTE_TRANSPORT=$t RSHMEM_SYMMETRIC_SIZE=1g \
      rrun "barrier_$t" 90 2 "$pt/device/coll/barrier_latency" -n 200 -w 10
  done
fi
unset NVSHMEM_MACHINE_READABLE_OUTPUT
if has msgrate; then
  for t in ${MSGRATE_TRANSPORTS:-proxy}; do
    step "message rate and every-thread quiet (rshmem-bench --cases rate,quiet --quick), $t, --nodes 2 -np 2"
    LOG=msgrate_rust_$t.log RSHMEM_REMOTE_TRANSPORT=$t RSHMEM_SYMMETRIC_SIZE=2g rrun "msgrate_rust_$t" 240 2 "$c/rshmem-bench" --cases rate,quiet --quick
  done
fi
if has msgrate_cpp; then
  for t in ${MSGRATE_TRANSPORTS:-proxy}; do
    if [ -x "$c/msg_rate" ]; then
      step "message rate and every-thread quiet, CUDA C++ (bench/nvshmem/msg_rate.cu against rshmem) --reps 3, $t, --nodes 2 -np 2"
      LOG=msgrate_cpp_$t.log RSHMEM_REMOTE_TRANSPORT=$t RSHMEM_SYMMETRIC_SIZE=2g rrun "msgrate_cpp_$t" 240 2 "$c/msg_rate" --reps 3
    else
      step "msg_rate (C++): SKIPPED (no carry/msg_rate: scripts/gpu.sh prepare builds it)"
    fi
  done
fi

if has ring; then
  if [ -x "$c/simple_shift" ]; then
    step "seed simple_shift.cu (unchanged, nvshmem.h), --nodes 2 -np 2"; rrun simple_shift 60 2 "$c/simple_shift"
  else
    step "seed simple_shift.cu: SKIPPED (carry/ has none: scripts/gpu.sh prepare found no ../shared/seeds/simple_shift.cu)"
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
if has suite_ibgda; then
  # IBGDA_RUNS runs (default 1); RET_SLOTS=device puts the emulated NIC's return slots in GPU memory (the
  # real-NIC path's placement) instead of beside its CQs in the queues' memory (queues).
  for r in $(seq 1 "${IBGDA_RUNS:-1}"); do
    step "suite through IBGDA (emulated NIC), run $r: rshmrun --nodes 2 -np 2 rshmem-test-pe all, RSHMEM_REMOTE_TRANSPORT=ibgda, return slots: ${RET_SLOTS:-queues}"
    RSHMEM_IBGDA_RET_SLOTS=${RET_SLOTS:-queues} RSHMEM_REMOTE_TRANSPORT=ibgda RSHMEM_SYMMETRIC_SIZE=2g rrun "suite_ibgda_$r" "${SUITE_TIMEOUT:-150}" 2 "$c/rshmem-test-pe" all
  done
fi
if has families; then
  # The API families on GPUs: the C program of host AMOs, strided RMA and on-stream point operations
  # (tests/c/point_ops.c), the CUDA program of half/bfloat16 RMA, device strided RMA at three scopes and
  # host AMOs racing device AMOs (tests/cuda/device_families.cu), teams from unique ids
  # (tests/c/team_init.c), the header's inline put/get at every alignment (tests/cuda/inline_rma.cu), on
  # one node and across two, and
  # nvshmem_global_exit through rshmrun (tests/c/global_exit.c: rshmrun must exit with the status).
  for prog in c_point_ops device_families inline_rma c_team_init; do
    if [ -x "$c/$prog" ]; then
      step "$prog, one node, 2 PEs"
      LOG=$prog.log RSHMEM_SYMMETRIC_SIZE=1g prun "${prog}_node" 60 "$c" "$c/$prog"
      step "$prog, two simulated nodes"
      LOG=${prog}_nodes.log RSHMEM_SYMMETRIC_SIZE=1g rrun "${prog}_nodes" 60 2 "$c/$prog"
    else
      step "$prog: SKIPPED (not in carry/: scripts/gpu.sh prepare or extras builds it)"
    fi
  done
  if [ -x "$c/c_global_exit" ]; then
    step "nvshmem_global_exit(5) from PE 1 while PE 0 waits in a barrier: rshmrun must exit 5"
    LOG=global_exit.log RSHMEM_SYMMETRIC_SIZE=1g prun global_exit 40 "$c" "$c/c_global_exit" global_exit 5
  fi
fi
if has interop; then
  # The cudarc example (a cudarc kernel, rshmem's reduction on the cudarc stream, a cudarc copy).
  if [ -x "$c/cudarc_interop" ]; then
    step "cudarc_interop, one node, 2 PEs"
    LOG=cudarc_interop.log RSHMEM_SYMMETRIC_SIZE=1g prun cudarc_interop 60 "$c" "$c/cudarc_interop"
    step "cudarc_interop, two simulated nodes"
    LOG=cudarc_interop_nodes.log RSHMEM_SYMMETRIC_SIZE=1g rrun cudarc_interop_nodes 60 2 "$c/cudarc_interop"
  else
    step "cudarc_interop: SKIPPED (not in carry/)"
  fi
fi
if has teams; then
  # The teams scenario, whose last part makes a team from a unique id (members in reverse order)
  # and runs host collectives on it: on GPUs, kernels that read the team's member table.
  step "rshmem-test-pe teams, one node, 2 PEs"
  LOG=teams.log RSHMEM_SYMMETRIC_SIZE=1g prun teams_node 60 "$c" "$c/rshmem-test-pe" teams
  step "rshmem-test-pe teams, two simulated nodes"
  LOG=teams_nodes.log RSHMEM_SYMMETRIC_SIZE=1g rrun teams_nodes 60 2 "$c/rshmem-test-pe" teams
fi
if has anchor; then
  if [ -f "$c/anchor/run.sh" ]; then
    step "NVSHMEM anchor (../shared/anchor, the image's NVSHMEM 3.4.5), same call"
    LOG=anchor.log run anchor 200 bash "$c/anchor/run.sh"
  else
    step "NVSHMEM anchor: SKIPPED (carry/anchor/ is empty: scripts/gpu.sh prepare found no ../shared/anchor/)"
  fi
fi
if has bench; then
  step "rshmem-bench over the $TRANSPORT transport: --nodes 2 -np 2, grid ${GRID:-32} x ${THREADS:-256}"
  # shellcheck disable=SC2086 # BENCH_ARGS is a list of options
  LOG=rshmem_$TRANSPORT.log RSHMEM_SYMMETRIC_SIZE=2g rrun bench 300 2 "$c/rshmem-bench" --grid "${GRID:-32}" --threads "${THREADS:-256}" ${BENCH_ARGS:-}
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
  LOG=posting.log RSHMEM_SYMMETRIC_SIZE=1g RSHMEM_REMOTE_TRANSPORT=ibgda RSHMEM_IBGDA_EMULATOR=ack RSHMEM_IBGDA_QPS_PER_PE=16 \
    rrun posting 200 2 "$c/rshmem-bench" --posting --grid "${POST_GRID:-132}" --threads "${POST_THREADS:-256}"
fi
if has bench_proxy; then
  step "rshmem-bench over the proxy transport in the same call: --nodes 2 -np 2, grid ${GRID:-32} x ${THREADS:-256}"
  # shellcheck disable=SC2086
  LOG=rshmem_proxy.log RSHMEM_SYMMETRIC_SIZE=2g RSHMEM_REMOTE_TRANSPORT=proxy rrun bench_proxy 300 2 "$c/rshmem-bench" --grid "${GRID:-32}" --threads "${THREADS:-256}" ${BENCH_ARGS:-}
fi
nccl_env=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_DEBUG="${NCCL_DEBUG:-WARN}")
if has nccl; then
  step "NCCL socket transport, 2 processes, one GPU each (bench/nccl_socket.py), NCCL's default socket setting"
  LOG=nccl_socket.log PYTHONUNBUFFERED=1 run nccl_socket 240 env "${nccl_env[@]}" python3 bench/nccl_socket.py --label default --json "$logs/nccl_socket.json"
fi
if has nccl4x4; then
  step "NCCL socket transport with NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 (16 connections), from 4 KiB"
  LOG=nccl_socket_4x4.log PYTHONUNBUFFERED=1 run nccl_socket_4x4 200 env "${nccl_env[@]}" NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4 \
    python3 bench/nccl_socket.py --label 4x4 --min-bytes 4096 --json "$logs/nccl_socket_4x4.json"
fi
if has loopback; then
  step "loopback TCP: one 256 MiB stream, the 8-byte half round trip, and ${LOOPBACK_STREAMS:-1,2,4,8,16} concurrent streams (bench/loopback_tcp.py)"
  LOG=loopback_tcp.log PYTHONUNBUFFERED=1 run loopback_tcp 150 python3 bench/loopback_tcp.py --streams "${LOOPBACK_STREAMS:-1,2,4,8,16}" --json "$logs/loopback_tcp.json"
fi
if has suite4; then
  step "suite: rshmrun --nodes 2 -np 4 rshmem-test-pe all (2 PEs per node: p2p inside, proxy across)"
  RSHMEM_SYMMETRIC_SIZE=1g rrun suite_np4 150 4 "$c/rshmem-test-pe" all
fi
if has netns; then
  step "ring shift (Rust kernel), --nodes 2 --netns -np 4 (a network namespace per node)"
  run ring_shift_netns 75 "$c/rshmrun" --nodes 2 --netns -np 4 --timeout 60 "$card" "$c/ring_shift"
fi

# ---------------------------------------------------------------- NVSHMEM's perftests, both libraries (PART=perftest)
if has perftest_cmp; then
  cmp=$c/perftest-cmp
  if [ -f "$c/perftest-pre.tar.xz" ]; then
    # Both sets linked on the CPU machine (scripts/gpu.sh perftest prepare): unpack, run, score.
    step "NVSHMEM's perftests, both sets linked on the CPU machine: scripts/gpu.sh perftest (run and scored)"
    LOG=perftest_cmp_run.log PERFTEST_OUT=$logs/perftest BUDGET=$(($(left) - 30)) \
      run perftest_cmp_run $(($(left) - 25)) bash scripts/gpu.sh perftest run
    cp "$logs/perftest/perftest-score.md" "$logs/perftest/perftest-score.csv" "$logs/" 2>/dev/null
  elif [ -d "$c/nvshmem-src/perftest" ]; then
    step "NVSHMEM's perftests built here against rshmem and against NVSHMEM: MODE=full bench/perftest.sh (once per machine)"
    # shellcheck disable=SC2086 # PERFTEST_PROGS is a list
    [ -f "$c/nvml-include/nvml.h" ] && export NVML_INCLUDE=$c/nvml-include
    [ -d "$cmp/rshmem" ] || LOG=perftest_cmp_build.log MODE=full NVSHMEM_SRC=$c/nvshmem-src RSHMEM_LIBDIR=$c PTX=$c/rshmem_device.ptx \
      PROGS="${PERFTEST_PROGS:-}" JOBS=16 run perftest_cmp_build 420 bash bench/perftest.sh "$cmp"
    step "both sets run and scored: MODE=run bench/perftest.sh (rshmrun -np 2; NVSHMEM's with --pmi; SHORT=1)"
    LOG=perftest_cmp_run.log RSHMRUN=$c/rshmrun RSHMEM_LIBDIR=$c SHORT=1 T=60 BUDGET=$(($(left) - 40)) PROGS="${PERFTEST_PROGS:-}" \
      run perftest_cmp_run $(($(left) - 30)) env MODE=run bash bench/perftest.sh "$cmp"
    cp "$cmp/perftest-score.md" "$cmp/perftest-score.csv" "$logs/" 2>/dev/null
    tar czf "$logs/perftest_cmp_logs.tar.gz" -C "$cmp" logs 2>/dev/null
  else
    step "perftest_cmp: SKIPPED (no carry/nvshmem-src/perftest: scripts/gpu.sh prepare with NVSHMEM_SRC=...)"
  fi
fi

# ---------------------------------------------------------------- what must still hold (PART=checks)
P2P_ARGS=${P2P_ARGS:---grid 132 --threads 256 --quick --max-bytes 64m}
if has p2p; then
  # shellcheck disable=SC2086 # P2P_ARGS is a list of options
  { step "same node, this build: rshmrun -np 2 rshmem-bench $P2P_ARGS"
    LOG=p2p_now.log RSHMEM_SYMMETRIC_SIZE=2g prun p2p_now 150 "$c" "$c/rshmem-bench" $P2P_ARGS; }
  if [ -x "$cb/rshmem-bench" ] && [ -x "$cb/rshmrun" ]; then
    step "same node, the previous build (carry-before/, $(cat "$cb/COMMIT" 2>/dev/null || echo 'commit unknown')): the same"
    # shellcheck disable=SC2086
    LOG=p2p_before.log RSHMEM_SYMMETRIC_SIZE=2g prun p2p_before 150 "$cb" "$cb/rshmem-bench" $P2P_ARGS
    step "same node, this build again (the spread between two runs of one build)"
    # shellcheck disable=SC2086
    LOG=p2p_now2.log RSHMEM_SYMMETRIC_SIZE=2g prun p2p_now2 150 "$c" "$c/rshmem-bench" $P2P_ARGS
  else
    step "same node, the previous build: SKIPPED (no carry-before/ with rshmrun and rshmem-bench)"
  fi
fi
if has shapes; then
  for shape in 132x512 4x1024 32x1024; do
    step "same node, this build, Rust kernels at ${shape%x*} x ${shape#*x}: rshmem-bench --cases bw,lat --quick --max-bytes 16m"
    LOG=p2p_shape_$shape.log RSHMEM_SYMMETRIC_SIZE=1g prun "shape_$shape" 120 "$c" "$c/rshmem-bench" --grid "${shape%x*}" --threads "${shape#*x}" --cases bw,lat --quick --max-bytes 16m
  done
  if [ -x "$cb/rshmem-bench" ]; then
    step "same node, the previous build at 132 x 512 (its default shape; older builds may not launch it)"
    LOG=p2p_shape_before_132x512.log RSHMEM_SYMMETRIC_SIZE=1g prun shape_before_132x512 120 "$cb" "$cb/rshmem-bench" --grid 132 --threads 512 --quick --max-bytes 16m
  fi
fi
if has msgrate_nvshmem; then
  step "msg_rate.cu against the image's NVSHMEM 3.4.5, 2 PEs on one node (NVLink reference)"
  NV=$(python3 -c "import nvidia.nvshmem; print(list(nvidia.nvshmem.__path__)[0])" 2>/dev/null)
  nvb=/tmp/msg_rate_nvshmem
  if [ -n "$NV" ] && run msgrate_nvshmem_build 120 nvcc -O2 -rdc=true -arch=sm_90 -std=c++17 -I"$NV/include" bench/nvshmem/msg_rate.cu -o "$nvb" \
    -L"$NV/lib" -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda; then
    rm -f /tmp/msg_rate_uid
    # shellcheck disable=SC2016 # expanded by the inner shell
    LOG=msgrate_nvshmem_p2p.log run msgrate_nvshmem 120 bash -c '
      for r in 0 1; do
        LD_LIBRARY_PATH=$0/lib:$LD_LIBRARY_PATH NVSHMEM_SYMMETRIC_SIZE=2147483648 PE_RANK=$r PE_SIZE=2 UID_FILE=/tmp/msg_rate_uid \
          "$1" --reps 3 --rate-ops 200000 >/tmp/msg_rate_pe$r.log 2>&1 &
      done
      s=0; for _ in 0 1; do wait -n || s=1; done
      sed "s/^/[pe 0] /" /tmp/msg_rate_pe0.log; sed "s/^/[pe 1] /" /tmp/msg_rate_pe1.log; exit $s' "$NV" "$nvb"
  else
    echo "msg_rate against NVSHMEM: not built (no nvidia.nvshmem package or nvcc failed)"
  fi
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
python3 bench/remote_summary.py "$logs" >"$out/summary.txt" 2>&1 || echo "bench/remote_summary.py failed" >>"$out/summary.txt"
rm -f "$logs/.rc"
tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$logs"
echo "results in $out: $(find "$out" -maxdepth 1 -type f -printf '%f ')"
echo
cat "$out/summary.txt"
# Let tee write the end of remote.log before the call collects $OUT.
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null || true
