#!/usr/bin/env bash
# Prepares carry/ (git-ignored) for a run on the GPU machine: release binaries, the host library, the
# device library archive, the CUDA C++ programs fully linked here (CUDA 13.0 tools from PyPI), and the
# NVSHMEM anchor benchmark sources (built there against the image's NVSHMEM), and carry/COMMIT (the
# commit the binaries were built from, "+dirty" with uncommitted changes). The seed program and the
# anchor come from ../shared beside the checkout when it is there (otherwise a line says what will not
# run there: SEED=path names another seed program). Then, on the device machine:
# `bash scripts/gpu-run.sh`, or `NODES=2 bash scripts/gpu-run.sh` for remote PEs across two simulated
# nodes (scripts/gpu-remote.sh; it also needs bench/nccl_socket.py and bench/loopback_tcp.py, which
# travel with the working tree, and torch on the machine).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
cargo build --workspace --release
c="$root/carry"
rm -rf "$c"; mkdir -p "$c/anchor"
cp target/release/{rshmrun,rshmem-test-pe,rshmem-soak,ring_shift,rshmem-bench,librshmem.so} "$c/"
strip "$c"/{rshmrun,rshmem-test-pe,rshmem-soak,ring_shift,rshmem-bench,librshmem.so}
# Fresh clones built by the README's two commands (scripts/fresh-clone-check.sh), when present.
for f in fresh-build-first fresh-test-first; do
  if [ -x "target/$f/ring_shift" ]; then mkdir -p "$c/$f" && cp "target/$f"/{rshmrun,ring_shift} "$c/$f/"; fi
done
ptx=$(scripts/build-ptx.sh rshmem-device "$c/rshmem_device.ptx")
scripts/build-device-lib.sh "$ptx" "$c" sm_90 >&2
shared=$root/../shared
seed=${SEED:-$shared/seeds/simple_shift.cu}
if [ -f "$seed" ]; then
  cp "$seed" "$c/simple_shift.cu"
else
  echo "gpu-prepare: no seed program at $seed (../shared beside the checkout, or SEED=path): the GPU run will not run simple_shift" >&2
fi
MODE=full scripts/check-cuda-examples.sh "$c" >&2 || echo "gpu-prepare: full link here failed; gpu-run.sh builds the CUDA programs there" >&2
if [ -f "$shared/anchor/nvshmem_bench.cu" ] && [ -f "$shared/anchor/run.sh" ]; then
  cp "$shared/anchor/nvshmem_bench.cu" "$shared/anchor/run.sh" "$c/anchor/"
else
  echo "gpu-prepare: no NVSHMEM anchor benchmark at $shared/anchor/ beside the checkout: the GPU run will skip it" >&2
fi
{ git rev-parse HEAD; git diff --quiet HEAD 2>/dev/null || echo "+dirty"; } | paste -sd '' >"$c/COMMIT"
du -sh "$c"
