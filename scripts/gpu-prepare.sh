#!/usr/bin/env bash
# Prepares carry/ (git-ignored) for a run on the GPU machine: release binaries, the host library, the
# device library archive, the CUDA C++ programs fully linked here (CUDA 13.0 tools from PyPI), and the
# NVSHMEM anchor benchmark sources (built there against the image's NVSHMEM), and carry/COMMIT (the
# commit the binaries were built from, "+dirty" with uncommitted changes). Then, on the device machine:
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
MODE=full scripts/check-cuda-examples.sh "$c" >&2 || echo "gpu-prepare: full link here failed; gpu-run.sh builds the CUDA programs there" >&2
cp "$root/../shared/anchor/nvshmem_bench.cu" "$root/../shared/anchor/run.sh" "$c/anchor/"
cp "$root/../shared/seeds/simple_shift.cu" "$c/"
{ git rev-parse HEAD; git diff --quiet HEAD 2>/dev/null || echo "+dirty"; } | paste -sd '' >"$c/COMMIT"
du -sh "$c"
