#!/usr/bin/env bash
# Runs every test of rshmem on this machine (CI runs exactly this through .ci/run):
#  1. installs what is missing (scripts/setup.sh: nightly rust-src, CUDA compiler tools, Open MPI, CMake,
#     Python's NumPy, pytest and torch);
#  2. builds the workspace (release; the device library and kernels are also compiled to PTX) and
#     checks the workspace lints with clippy (every unsafe block says why it is sound), then the API
#     docs (`cargo doc`, no warning; missing docs are errors in both library crates);
#  3. runs all Rust tests: unit tests, doc tests (the API docs' examples), the launcher and bootstrap tests, and the multi-process suite
#     under rshmrun and mpirun (CPU backend unless a GPU is present), on one node (tests/tests/suite.rs)
#     and across two simulated nodes through the proxy transport, with --netns as root
#     (tests/tests/suite_nodes.rs; the cases are defined once, in tests/tests/common/suite.rs), and teams
#     and collectives on 1-4 PEs and two nodes, against a model (tests/tests/coll.rs), and the Python
#     package's pytest suite under rshmrun (tests/tests/python.rs: -np 2, -np 4, two nodes, torch tensors);
#     then the Python package as a user installs it (scripts/check-python.sh: pip install ./python into a
#     virtual environment, the README's example under rshmrun, the type stubs, the CUDA C++ extension
#     example built and device-linked, the overhead benchmark's script);
#  4. builds the runtime with its real-NIC path (the `verbs` feature: the IBGDA setup of a ConnectX
#     NIC and host-posted RDMA for a future verbs proxy, rdma-core loaded at run time) and runs its unit tests and the
#     layout check of its verbs/mlx5dv structs against the system's rdma-core headers;
#  5. assembles the PTX with ptxas and compiles + device-links the CUDA C++ examples against rshmem's
#     headers (no GPU needed), and NVSHMEM's seed program unchanged when it is beside the checkout
#     (../shared/seeds/simple_shift.cu, as in CI; otherwise its summary says in one line that it skipped
#     it, and examples/cuda/ring_shift.cu covers the same path);
#     Then checks the IBGDA doorbell path in the device library's machine code (scripts/check-sass.sh:
#     ptxas + nvdisasm, a barrier of the queues' scope before the doorbell record and before the doorbell);
#  6. reproduces a fresh machine (nightly's rust-src hidden from rustup, then visible again) and checks
#     that the build stops with the command to run, then builds a library with real PTX
#     (scripts/check-fresh-build.sh, its own target dir under target/);
#  7. builds and runs projects of a user's own, from outside this clone: examples/template (a Rust host
#     crate and kernel crate) with rshmem as a path dependency (scripts/check-template.sh) and from
#     rshmem's packages as from a registry (scripts/check-package.sh: `cargo package` of every published
#     crate, its metadata and contents, then the template built from the unpacked packages), each run
#     under rshmrun -np 2; and installs rshmem into a prefix (scripts/install.sh) and builds the CMake
#     project examples/cmake (NVSHMEM code, find_package(rshmem), device-linked) against it
#     (scripts/check-install.sh). The template's builds keep their own target directories (target/consumer-check,
#     target/consumer-check-package).
# Nothing is skipped: RSHMEM_TEST_NO_SKIP=1 makes every test that cannot run here (no root for network
# namespaces or another user, no mpirun, no rdma-core headers, no C compiler) fail, saying why, instead
# of passing without testing (rshmem_test_support::skip; plain `cargo test` prints one line per skip).
# Wherever the checkout lies: nothing here needs ../shared, and tests that run something as another
# user copy it where that user can reach it.
set -euo pipefail
cd "$(dirname "$0")/.."
export RSHMEM_TEST_NO_SKIP=1
scripts/setup.sh
cargo build --workspace --release --all-targets
# The workspace lints (Cargo.toml): every unsafe block says why it is sound; rustc checks
# unsafe_op_in_unsafe_fn in every build, clippy checks the SAFETY comments here.
cargo clippy --workspace --all-targets --release
cargo clippy -p rshmem --features verbs --all-targets --release
# The API documentation: every public item of rshmem and rshmem-device is documented (both crates deny
# missing_docs, so the builds above checked it) and the docs build without a warning (broken links
# included), with and without the verbs feature. Their examples run as doc tests below.
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --release -p rshmem -p rshmem-device
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --release -p rshmem --features verbs
cargo test --workspace --release --lib --bins --tests
# The documentation's examples carry the CPU backend's kernels, not PTX: they run on the CPU backend,
# GPU or not (the library never sets a variable of its own, so the choice is made here).
RSHMEM_BACKEND=cpu cargo test --workspace --release --doc
cargo test --release -p rshmem --features verbs --lib
cargo test --release -p rshmem --features verbs --test verbs_layout
scripts/check-python.sh
scripts/check-cuda-examples.sh
scripts/check-sass.sh
scripts/check-fresh-build.sh
scripts/check-template.sh
scripts/check-package.sh
scripts/check-install.sh
echo "all tests passed"
