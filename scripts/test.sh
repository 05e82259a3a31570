#!/usr/bin/env bash
# Runs every test of rshmem on this machine (CI runs exactly this through .ci/run):
#  1. installs what is missing (scripts/setup.sh: nightly rust-src, CUDA compiler tools, Open MPI);
#  2. builds the workspace (release; the device library and kernels are also compiled to PTX);
#  3. runs all Rust tests: unit tests, the launcher and bootstrap tests, and the multi-process suite
#     under rshmrun and mpirun (CPU backend unless a GPU is present), on one node (tests/tests/suite.rs)
#     and across two simulated nodes through the proxy transport, with --netns as root
#     (tests/tests/suite_nodes.rs; the cases are defined once, in tests/tests/common/suite.rs), and teams
#     and collectives on 1-4 PEs and two nodes, against a model (tests/tests/coll.rs);
#  4. builds the runtime with its real-NIC path (the `verbs` feature: the IBGDA setup of a ConnectX
#     NIC and host-posted RDMA for a future verbs proxy, rdma-core loaded at run time) and runs its unit tests and the
#     layout check of its verbs/mlx5dv structs against the system's rdma-core headers;
#  5. assembles the PTX with ptxas and compiles + device-links the CUDA C++ examples and the seed
#     program against rshmem's headers (no GPU needed);
#  6. reproduces a fresh machine (nightly's rust-src hidden from rustup, then visible again) and checks
#     that the build stops with the command to run, then builds a library with real PTX
#     (scripts/check-fresh-build.sh, its own target dir under target/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo build --workspace --release --all-targets
cargo test --workspace --release
cargo test --release -p rshmem --features verbs --lib
CI=${CI:-1} cargo test --release -p rshmem --features verbs --test verbs_layout
scripts/check-cuda-examples.sh
scripts/check-fresh-build.sh
echo "all tests passed"
