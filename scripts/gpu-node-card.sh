#!/usr/bin/env bash
# Gives each simulated node its own GPU: run as `rshmrun --nodes K ... scripts/gpu-node-card.sh PROGRAM
# [ARGS...]`; sets CUDA_VISIBLE_DEVICES to RSHMEM_NODE_ID modulo the number of GPUs, then execs PROGRAM.
# (rshmrun puts each PE on GPU RSHMEM_LOCAL_PE % GPUs, so without this node 1's first PE would share
# GPU 0 with node 0's.) The node's PEs then share that one GPU as local PEs do.
set -eu
n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${n:-0}" -ge 1 ] || { echo "gpu-node-card.sh: nvidia-smi lists no GPU" >&2; exit 1; }
export CUDA_VISIBLE_DEVICES=$(( ${RSHMEM_NODE_ID:-0} % n ))
exec "$@"
