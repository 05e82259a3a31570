#!/usr/bin/env bash
# The one entry point for GPU runs: `scripts/gpu.sh SUBCOMMAND [ARGS]`. Build here, run there, in one
# device call (`bash scripts/gpu.sh ...` there, from the repository root, with carry/ carried):
#
#   scripts/gpu.sh prepare            (here, on the CPU machine) builds carry/ (git-ignored): the release
#                                     binaries, the host library, the device library, the CUDA C++
#                                     programs linked here with the PyPI toolkit, NVSHMEM's perftests built
#                                     unchanged against rshmem (NVSHMEM_SRC: a checkout or git directory of
#                                     NVIDIA/nvshmem; without it they are left out, said in one line), the
#                                     seed program and the anchor when ../shared is beside the checkout;
#                                     the large files packed into carry/pack.tar.xz (what travels is 64 MiB
#                                     at most).
#   bash scripts/gpu.sh remote1gpu    (there, from the repository root, with carry/ carried) the remote
#                                     engine on ONE GPU: both PEs of `rshmrun --nodes 2 -np 2` on it (MPS
#                                     started first when it starts; else the second node runs on the CPU
#                                     backend), through the proxy: the loopback bound (rshmem-loopback), the
#                                     ring shifts, NVSHMEM's shmem_put_bw / shmem_p_latency /
#                                     barrier_latency unchanged, rshmem-bench (rate, quiet, lat, barrier),
#                                     the C++ message-rate and every-thread-quiet program, the GPU suite
#                                     through the proxy and through IBGDA (emulated NIC), and NVSHMEM's
#                                     anchor benchmark (two PEs on the GPU, under MPS).
#
# remote1gpu's output: $OUT (default /tmp/gpu-out): run.log (everything, step by step, with exit codes and seconds),
# summary.txt (the figures the issue records, `name: value` lines) and logs.tar.gz (every step's log).
# BUDGET (seconds, default 540) bounds the run: a step gets at most what is left, and one that cannot
# start is listed as skipped. STEPS picks steps (default: all, in order).
#
# The other subcommands; each one's body is scripts/gpu/NAME.sh, whose top says what it runs, what it
# reads from the environment and where its output goes:
#   extras            (here, after prepare) adds to carry/ what run, remote and perftest use beyond
#                     prepare's set (rshmem-soak, cudarc_interop, the C test programs, the fresh-clone
#                     builds); BEFORE=<commit> makes carry-before/ (an earlier build, for the same-node
#                     comparison), PERFTEST=1 also runs `perftest prepare`.
#   unpack [DIR...]   (there) unpacks carry/'s packs in place; the subcommands below call it first.
#   single            one GPU: the suite twice (2 PEs on the GPU), the collectives scenarios, the CUDA C++
#                     call path in self mode (bench/cpp-self.sh), a few of NVSHMEM's perftests.
#   run               one node, 2 GPUs (NP): the suite twice, the bad-input scenarios, the soak, the ring
#                     shifts, rshmem-bench beside NVSHMEM (bench/run-compare.sh), NVSHMEM's anchor;
#                     NODES=2 runs `remote` instead.
#   nodes             simulated nodes on one machine: the `nodes` scenario with and without --netns, ring
#                     shifts across the nodes.
#   remote            two simulated nodes, one GPU each: ring shifts, the suite through the proxy and
#                     IBGDA, rshmem-bench, NCCL's socket transport and loopback TCP as references;
#                     PART=targets|checks|issue19|perftest|families picks the message-rate targets, the
#                     checks that must still hold, NVSHMEM's perftests or the API families.
#   perftest [prepare|run]
#                     NVSHMEM's perftests linked against rshmem and against NVSHMEM (prepare, here), run
#                     under both libraries and scored (run, there).
#   ncu NAME KERNEL SKIP [--pmi] -- PROGRAM ARGS...
#                     one kernel launch of PE 0 under Nsight Compute.
# scripts/gpu-node-card.sh is not a subcommand: rshmrun runs it for each PE (`rshmrun --nodes K
# scripts/gpu-node-card.sh PROGRAM`) to give each simulated node its own GPU.
#
# Results recorded in bench/results name the scripts these subcommands replace: gpu-prepare.sh (prepare,
# extras), gpu-unpack.sh, gpu-single.sh, gpu-run.sh, gpu-nodes.sh, gpu-remote.sh, gpu-perftest.sh and
# gpu-ncu.sh (the subcommand of that name); gpu-remote-check.sh and gpu-remote-evidence.sh (`remote`
# with STEPS), and the one-off gpu-issue20.sh, gpu-why.sh and gpu-p2p-ab.sh are in the history.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cmd=${1:-}
shift || true

prepare() {
  set -e
  scripts/setup.sh >&2
  cargo build --workspace --release >&2
  local c="$root/carry"
  rm -rf "$c"; mkdir -p "$c/anchor"
  local bins="rshmrun rshmem-test-pe ring_shift rshmem-bench rshmem-loopback"
  for b in $bins librshmem.so; do cp "target/release/$b" "$c/"; done
  (cd "$c" && strip $bins librshmem.so)
  local ptx
  ptx=$(scripts/build-ptx.sh rshmem-device "$c/rshmem_device.ptx")
  scripts/build-device-lib.sh "$ptx" "$c" sm_90 >&2
  local shared=$root/../shared
  if [ -f "${SEED:-$shared/seeds/simple_shift.cu}" ]; then cp "${SEED:-$shared/seeds/simple_shift.cu}" "$c/simple_shift.cu"; else echo "gpu.sh prepare: no seed program beside the checkout: simple_shift will not run there" >&2; fi
  NVSHMEM_SRC='' MODE=full scripts/check-cuda-examples.sh "$c" >&2 || echo "gpu.sh prepare: the CUDA programs did not link here" >&2
  if [ -f "$shared/anchor/nvshmem_bench.cu" ]; then cp "$shared/anchor/nvshmem_bench.cu" "$shared/anchor/run.sh" "$c/anchor/"; else echo "gpu.sh prepare: no anchor beside the checkout: the NVSHMEM anchor will not run there" >&2; fi
  local nvcc cudalib
  nvcc=$(scripts/find-nvcc.sh)
  cudalib=$(cd "$(dirname "$nvcc")/../lib" && pwd)
  "$nvcc" -rdc=true -arch=sm_90 -O2 -std=c++17 -I device/include -c bench/nvshmem/msg_rate.cu -o "$c/msg_rate.o" >&2
  "$nvcc" -rdc=true -arch=sm_90 "$c/msg_rate.o" "$c/librshmem_device.a" -L "$c" -lrshmem -L "$cudalib" -Xlinker -rpath -Xlinker '$ORIGIN' -o "$c/msg_rate" >&2
  rm -f "$c/msg_rate.o"
  if [ -n "${NVSHMEM_SRC:-}" ]; then
    mkdir -p "$c/nvshmem-src"
    if [ -d "$NVSHMEM_SRC/perftest" ]; then cp -r "$NVSHMEM_SRC/perftest" "$c/nvshmem-src/"; else git --git-dir="$NVSHMEM_SRC" archive "${NVSHMEM_REF:-v3.4.5-0}" perftest | tar -x -C "$c/nvshmem-src"; fi
    MODE=full PROGS="device/pt-to-pt/shmem_put_bw device/pt-to-pt/shmem_get_bw device/pt-to-pt/shmem_p_latency device/coll/barrier_latency" \
      NVSHMEM_SRC="$c/nvshmem-src" NVSHMEM_HOME=/nonexistent RSHMEM_LIBDIR="$c" RSHMEM_RPATH='$ORIGIN/../../../..' PTX="$c/rshmem_device.ptx" \
      bench/perftest.sh "$c/perftest" >&2
    rm -rf "$c/perftest/nvshmem" "$c/nvshmem-src"
  else
    echo "gpu.sh prepare: NVSHMEM_SRC unset: NVSHMEM's perftests will not run there" >&2
  fi
  { git rev-parse HEAD; git diff --quiet HEAD 2>/dev/null || echo "+dirty"; } | paste -sd '' >"$c/COMMIT"
  # Pack every file over 256 KiB (binaries are mostly PTX text: a tenth of their size).
  local files
  mapfile -t files < <(cd "$c" && find . -type f -size +256k | sed 's|^\./||' | sort)
  (cd "$c" && tar -cJf pack.tar.xz "${files[@]}" && rm -f "${files[@]}")
  du -sh "$c"
}

# ------------------------------------------------------------------------------ there
OUT=${OUT:-/tmp/gpu-out}
LOGS=$OUT/logs
BUDGET=${BUDGET:-540}
START=$(date +%s)
c=$root/carry

left() { echo $((BUDGET - ($(date +%s) - START))); }
# step NAME LIMIT CMD...: runs CMD with at most LIMIT seconds (or what is left), logs to logs/NAME.log.
step() {
  local name=$1 limit=$2; shift 2
  if [ -n "${STEPS:-}" ] && ! grep -qw "${name%%_*}" <<<"$STEPS"; then return 0; fi
  local l; l=$(left)
  if [ "$l" -lt 10 ]; then echo "== $name: SKIPPED (budget)" | tee -a "$OUT/run.log"; return 0; fi
  [ "$limit" -gt "$l" ] && limit=$l
  echo "== $name (limit ${limit}s): $*" | tee -a "$OUT/run.log"
  local t0; t0=$(date +%s)
  timeout -k 5 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $(( $(date +%s) - t0 ))s" | tee -a "$OUT/run.log"
  tail -n "${TAIL:-15}" "$LOGS/$name.log" | sed 's/^/   /' >>"$OUT/run.log"
  return 0
}

unpack() {
  if [ -f "$c/pack.tar.xz" ] && [ ! -f "$c/.unpacked" ]; then
    tar -xJf "$c/pack.tar.xz" -C "$c" 2>/dev/null || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$c/pack.tar.xz" "$c"
    touch "$c/.unpacked"
  fi
}

# MPS: both PEs' kernels on the one GPU at once. Echoes "mps" when it runs, "none" otherwise.
mps_start() {
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if nvidia-cuda-mps-control -d >/dev/null 2>&1 && sleep 1 && echo get_server_list | nvidia-cuda-mps-control >/dev/null 2>&1; then echo mps; else echo none; fi
}
mps_stop() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true; }

remote1gpu() {
  mkdir -p "$LOGS"; : >"$OUT/run.log"
  unpack
  export PATH=$c:$PATH NVSHMEM_DISABLE_NVLS=1 NVSHMEM_MACHINE_READABLE_OUTPUT=1 RSHMEM_REMOTE_TRANSPORT=proxy
  # 1023 MiB + the 1 MiB internal area in 2 MiB granules: the same heap on a GPU PE and a CPU PE.
  export RSHMEM_SYMMETRIC_SIZE=${RSHMEM_SYMMETRIC_SIZE:-1023m} RSHMEM_CUMEM_GRANULE=${RSHMEM_CUMEM_GRANULE:-2m}
  { echo "commit: $(cat "$c/COMMIT" 2>/dev/null)"; nvidia-smi -L; nproc; } >>"$OUT/run.log" 2>&1
  # The clients find the MPS server through these: exported here, in this shell (mps_start runs in a
  # command substitution, whose exports do not come back).
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  local mps; mps=$(mps_start)
  echo "mps: $mps" | tee -a "$OUT/run.log"
  # Both nodes on GPU 0 (gpu-node-card.sh: node id modulo the GPUs); without MPS node 1 on the CPU.
  local card=(bash "$root/scripts/gpu-node-card.sh")
  local R=("$c/rshmrun" --nodes 2 -np 2 --timeout)
  if [ "$mps" != mps ]; then export GPU_CARD_CPU_NODES=1; fi
  step loopback 60 "$c/rshmem-loopback" --streams 1,4,8,16 --bytes 512m
  step ring 60 "${R[@]}" 50 "${card[@]}" "$c/ring_shift"
  step ring4 60 "$c/rshmrun" --nodes 2 -np 4 --timeout 50 "${card[@]}" "$c/ring_shift"
  [ -x "$c/ring_shift_cuda" ] && step ringcuda 60 "${R[@]}" 50 "${card[@]}" "$c/ring_shift_cuda"
  [ -x "$c/simple_shift" ] && step simpleshift 60 "${R[@]}" 50 "${card[@]}" "$c/simple_shift"
  local pt=$c/perftest/rshmem/device
  if [ -d "$pt" ]; then
    for g in "4 1024" "1 1024" "1 32" "32 32"; do
      set -- $g
      RSHMEM_PROXY_STATS=1 step "putbw_${1}x${2}" 60 "${R[@]}" 55 "${card[@]}" "$pt/pt-to-pt/shmem_put_bw" -n 200 -w 20 -b 4096 -e 4194304 -f 4 -c "$1" -t "$2"
    done
    step getbw 60 "${R[@]}" 55 "${card[@]}" "$pt/pt-to-pt/shmem_get_bw" -n 100 -w 10 -b 4096 -e 4194304 -f 4 -c 4 -t 1024
    RSHMEM_PROXY_STATS=1 step platency 60 "${R[@]}" 55 "${card[@]}" "$pt/pt-to-pt/shmem_p_latency" -t 1 -b 4 -e 32 -f 2 -n 500 -w 20
    step barrier 60 "${R[@]}" 55 "${card[@]}" "$pt/coll/barrier_latency" -n 200 -w 10
  fi
  RSHMEM_PROXY_STATS=1 step benchrate 120 "${R[@]}" 110 "${card[@]}" "$c/rshmem-bench" --cases rate,quiet,lat,barrier --quick --rate-grids 1,4,32 --rate-sizes 8,64,512,4k
  [ -x "$c/msg_rate" ] && step msgratecpp 90 "${R[@]}" 85 "${card[@]}" "$c/msg_rate" --cases rate,quiet --rate-grids 1,32 --reps 3
  RSHMEM_SYMMETRIC_SIZE=2047m step suiteproxy 150 "${R[@]}" 140 "${card[@]}" "$c/rshmem-test-pe" all
  RSHMEM_SYMMETRIC_SIZE=2047m RSHMEM_REMOTE_TRANSPORT=ibgda step suiteibgda 150 "${R[@]}" 140 "${card[@]}" "$c/rshmem-test-pe" all
  if [ -f "$c/anchor/run.sh" ] && [ "$mps" = mps ]; then NP=2 step anchor 120 bash "$c/anchor/run.sh"; fi
  mps_stop
  python3 "$root/bench/remote1gpu_summary.py" "$LOGS" >"$OUT/summary.txt" 2>&1 || true
  cat "$OUT/summary.txt" >>"$OUT/run.log"
  tar -czf "$OUT/logs.tar.gz" -C "$OUT" logs
}

case "$cmd" in
  prepare) prepare "$@" ;;
  remote1gpu) remote1gpu "$@" ;;
  extras | unpack | single | run | nodes | remote | perftest | ncu) GPU_SH_PART=$cmd exec bash "$root/scripts/gpu/$cmd.sh" "$@" ;;
  *) echo "usage: scripts/gpu.sh prepare | remote1gpu | extras | unpack | single | run | nodes | remote | perftest | ncu   (see the notes at the top)" >&2; exit 2 ;;
esac
