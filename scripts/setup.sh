#!/usr/bin/env bash
# Installs what building and testing rshmem needs beyond stable Rust, idempotently:
#  - the nightly toolchain's rust-src (the device library is compiled to PTX with -Zbuild-std=core);
#  - CUDA compiler tools from PyPI into .tools/ (ptxas/nvcc/nvlink: CI assembles and device-links the
#    device library and the CUDA C++ examples; no GPU needed);
#  - Open MPI (the ring shift also runs under mpirun in the tests);
#  - CMake (scripts/check-install.sh builds a CMake project against an installed prefix);
#  - Python's packages for the Python package's tests (python/tests, run by tests/tests/python.rs):
#    NumPy, pytest and PyTorch (the CPU-only runs use its CPU side; about a minute from PyPI).
# Each part is skipped when present; SETUP_SKIP_MPI=1 / SETUP_SKIP_CUDA=1 / SETUP_SKIP_PYTHON=1 /
# SETUP_SKIP_TORCH=1 skip parts.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# The same commands the build script (build/ptxbuild) runs or asks for when these are missing.
export RUSTUP_AUTO_INSTALL=0
if ! rustup component list --toolchain nightly --installed >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal --component rust-src >&2
fi
if ! rustup component list --toolchain nightly --installed | grep -q '^rust-src'; then
  rustup component add rust-src --toolchain nightly >&2
fi
if [ "${SETUP_SKIP_CUDA:-0}" != 1 ]; then
  "$root/scripts/install-cuda-tools.sh" >/dev/null
fi
# Open MPI: mpirun for the suite's run under mpirun, mpicc and mpi.h for the NVSHMEMX_INIT_WITH_MPI_COMM
# test (an MPI program).
have_mpi() {
  command -v mpirun >/dev/null 2>&1 || return 1
  local t; t=$(mktemp --suffix=.c); printf '#include <mpi.h>\n' >"$t"
  mpicc -E "$t" >/dev/null 2>&1; local rc=$?; rm -f "$t"; return $rc
}
# rdma-core's headers (libibverbs-dev: infiniband/mlx5dv.h) for the golden-byte test of the mlx5 WQEs.
have_mlx5dv() { [ -e /usr/include/infiniband/mlx5dv.h ]; }
# The `verbs` feature (runtime/src/transport/verbs): rdma-sys finds rdma-core with pkg-config (libibverbs,
# librdmacm) and runs bindgen, which needs libclang, over the system's verbs headers.
have_verbs_build() {
  command -v pkg-config >/dev/null 2>&1 && pkg-config --exists libibverbs librdmacm \
    && compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null
}
pkgs=()
if [ "${SETUP_SKIP_MPI:-0}" != 1 ] && ! have_mpi; then pkgs+=(openmpi-bin libopenmpi-dev); fi
# CMake: find_package(rshmem) from a prefix made by scripts/install.sh (scripts/check-install.sh).
if ! command -v cmake >/dev/null 2>&1; then pkgs+=(cmake); fi
if ! have_mlx5dv; then pkgs+=(libibverbs-dev); fi
if ! have_verbs_build; then pkgs+=(pkg-config libibverbs-dev librdmacm-dev libclang-dev); fi
if [ ${#pkgs[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null) >&2 \
    || echo "setup: could not install ${pkgs[*]} (the MPI tests / the mlx5 golden-byte test will be skipped; the verbs feature will not build; scripts/check-install.sh will fail without cmake)" >&2
fi
# Python's packages (python3's pip; PyPI).
if [ "${SETUP_SKIP_PYTHON:-0}" != 1 ] && command -v python3 >/dev/null 2>&1; then
  want=(numpy pytest)
  if [ "${SETUP_SKIP_TORCH:-0}" != 1 ]; then want+=(torch); fi
  missing=()
  for m in "${want[@]}"; do python3 -c "import $m" >/dev/null 2>&1 || missing+=("$m"); done
  if [ ${#missing[@]} -gt 0 ]; then
    python3 -m pip install -q --disable-pip-version-check --no-warn-script-location "${missing[@]}" >&2 \
      || echo "setup: could not install ${missing[*]} with pip (the Python package's tests will be skipped)" >&2
  fi
fi
echo "setup: ok" >&2
