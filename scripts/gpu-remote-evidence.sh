#!/usr/bin/env bash
# Issue 8's GPU evidence in ONE device command, within the device tool's limits (10 minutes, 8 files):
# P2P beside NVSHMEM (quick), NCCL socket + loopback TCP, rshmem-bench over the proxy, then the
# bounded remote check (ring shifts, suite x2 -np 2, -np 4). The files kept go to $OUT's top level.
# Run from the repository root on nvidia-h200-x2 with carry/ from scripts/gpu-prepare.sh.
cd "$(dirname "$0")/.." || exit 1
o=${OUT:-/tmp/gpu-remote-evidence}; mkdir -p "$o"
w=/tmp/gpu-remote-evidence.work; rm -rf $w; mkdir -p $w/p2p; t0=$SECONDS
OUT=$w/p2p SUITE_RUNS=0 SCENARIOS=0 SOAK=0 ANCHOR=1 COMPARE_ARGS=--quick timeout 150 bash scripts/gpu-run.sh >/dev/null 2>&1
echo "p2p: $((SECONDS - t0)) s"
OUT=$w/ref STEPS="nccl loopback" timeout 150 bash scripts/gpu-remote.sh >/dev/null 2>&1
echo "ref: $((SECONDS - t0)) s"
OUT=$w/bench STEPS="bench" GRID=1 THREADS=64 BENCH_ARGS=--quick timeout 200 bash scripts/gpu-remote.sh >/dev/null 2>&1
echo "bench: $((SECONDS - t0)) s"
left=$((560 - SECONDS))
OUT=$w/check ALL_LIMIT=150 timeout $left bash scripts/gpu-remote-check.sh >/dev/null 2>&1
echo "check: $((SECONDS - t0)) s"
cp $w/p2p/comparison.md $w/p2p/gpu-run.log $w/p2p/results.csv $w/ref/nccl_socket.json $w/ref/loopback_tcp.json $w/bench/rshmem_proxy.log $w/check/steps.log $o/ 2>/dev/null
cat $w/ref/remote.log $w/bench/remote.log > $o/remote.log 2>/dev/null
ls $o
