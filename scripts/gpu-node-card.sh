#!/usr/bin/env bash
# Gives each simulated node its own GPU: run as `rshmrun --nodes K ... scripts/gpu-node-card.sh PROGRAM
# [ARGS...]`; sets CUDA_VISIBLE_DEVICES to RSHMEM_NODE_ID modulo the number of GPUs, then execs PROGRAM.
# (rshmrun puts each PE on GPU RSHMEM_LOCAL_PE % GPUs, so without this node 1's first PE would share
# GPU 0 with node 0's.) The node's PEs then share that one GPU as local PEs do. With one GPU every node
# gets GPU 0 (run MPS so that their kernels run at once). GPU_CARD_CPU_NODES=1,3 runs the PEs of those
# nodes on the CPU backend instead (RSHMEM_BACKEND=cpu): a job of GPU and CPU PEs across nodes.
set -eu
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${n:-0}" -ge 1 ] || { echo "gpu-node-card.sh: nvidia-smi lists no GPU" >&2; exit 1; }
export CUDA_VISIBLE_DEVICES=$(( ${RSHMEM_NODE_ID:-0} % n ))
if [ -n "${GPU_CARD_CPU_NODES:-}" ] && grep -qw "${RSHMEM_NODE_ID:-0}" <<<"${GPU_CARD_CPU_NODES//,/ }"; then
  export RSHMEM_BACKEND=cpu
fi
exec "$@"
