# scripts/gpu.sh nodes: simulated nodes on the GPUs of one machine (CUDA backend, PEs on GPUs as rshmrun
# places them), over carry/ from `scripts/gpu.sh prepare`: the `nodes` scenario of the suite with and
# without network namespaces (--netns needs root), the Rust ring shift across the nodes with the remote
# transport chosen automatically (-np 2) and with RSHMEM_REMOTE_TRANSPORT=proxy (-np 4), and a look for
# leftover namespaces and processes. (`scripts/gpu.sh remote` runs more across nodes, one GPU each.)
# This file is the subcommand's body: run it through scripts/gpu.sh.
[ "${GPU_SH_PART:-}" = nodes ] || { echo "scripts/gpu/nodes.sh: run it as scripts/gpu.sh nodes" >&2; exit 2; }
cd "$(dirname "$0")/../.." || exit 1
bash scripts/gpu.sh unpack || exit 1
c=$PWD/carry
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} RSHMEM_BACKEND=cuda NVSHMEM_DISABLE_NVLS=1 RSHMEM_SYMMETRIC_SIZE=1g
step() { echo; echo "=== $*"; }
nvidia-smi -L
step "rshmrun --nodes 2 -np 4 rshmem-test-pe nodes"; RSHMEM_TEST_NODES=2 "$c/rshmrun" --nodes 2 -np 4 --timeout 60 "$c/rshmem-test-pe" nodes; echo "exit: $?"
step "rshmrun --nodes 2 --netns -np 4 rshmem-test-pe nodes"; RSHMEM_TEST_NODES=2 RSHMEM_TEST_NETNS=1 RSHMEM_DEBUG=debug "$c/rshmrun" --nodes 2 --netns -np 4 --timeout 60 "$c/rshmem-test-pe" nodes 2>&1 | grep -v "^\[pe [0-9]\] rshmem debug"; echo "exit: ${PIPESTATUS[0]}"
step "rshmrun --nodes 2 -np 2 ring_shift (the remote transport chosen automatically)"; timeout 60 "$c/rshmrun" --nodes 2 -np 2 --timeout 50 "$c/ring_shift"; echo "exit: $?"
step "RSHMEM_REMOTE_TRANSPORT=proxy rshmrun --nodes 2 -np 4 ring_shift"; RSHMEM_REMOTE_TRANSPORT=proxy timeout 60 "$c/rshmrun" --nodes 2 -np 4 --timeout 50 "$c/ring_shift"; echo "exit: $?"
step "leftover namespaces/processes"; ls /proc/*/ns/net 2>/dev/null | wc -l; pgrep -c rshmem-test-pe || true
