#!/bin/bash
# Simulated nodes on 2 x H200 (CUDA backend): the nodes scenario with and without network namespaces,
# a cross-node ring shift (no remote transport yet: must fail clearly, not hang), the transport choice.
# Run on the GPU machine from the repository root with carry/ made by scripts/gpu-prepare.sh.
c=$(cd "$(dirname "$0")/.." && pwd)/carry
export LD_LIBRARY_PATH=$c RSHMEM_BACKEND=cuda NVSHMEM_DISABLE_NVLS=1 RSHMEM_SYMMETRIC_SIZE=1g
step() { echo; echo "=== $*"; }
nvidia-smi -L
step "rshmrun --nodes 2 -np 4 rshmem-test-pe nodes"; RSHMEM_TEST_NODES=2 $c/rshmrun --nodes 2 -np 4 --timeout 60 $c/rshmem-test-pe nodes; echo "exit: $?"
step "rshmrun --nodes 2 --netns -np 4 rshmem-test-pe nodes"; RSHMEM_TEST_NODES=2 RSHMEM_TEST_NETNS=1 RSHMEM_DEBUG=debug $c/rshmrun --nodes 2 --netns -np 4 --timeout 60 $c/rshmem-test-pe nodes 2>&1 | grep -v "^\[pe [0-9]\] rshmem debug"; echo "exit: ${PIPESTATUS[0]}"
step "rshmrun --nodes 2 -np 2 ring_shift (crosses nodes: no remote transport yet, must fail clearly)"; timeout 60 $c/rshmrun --nodes 2 -np 2 --timeout 30 $c/ring_shift; echo "exit: $?"
step "RSHMEM_REMOTE_TRANSPORT=proxy"; RSHMEM_REMOTE_TRANSPORT=proxy $c/rshmrun --nodes 2 -np 2 --timeout 30 $c/ring_shift; echo "exit: $?"
step "leftover namespaces/processes"; ls /proc/*/ns/net 2>/dev/null | wc -l; pgrep -c rshmem-test-pe || true
