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
# Issue 19 (scripts/gpu-remote.sh PART=targets / PART=checks) needs, besides:
#   carry/msg_rate          bench/nvshmem/msg_rate.cu linked against rshmem here;
#   carry/perftest/rshmem/  NVSHMEM's shmem_put_bw, shmem_p_latency and barrier_latency, unchanged, linked
#                           against rshmem here (bench/perftest.sh MODE=full PROGS=...), from
#                           NVSHMEM_SRC=<a checkout of NVIDIA/nvshmem, or its git repository> at
#                           NVSHMEM_REF (default v3.4.5-0, for a git repository); its perftest/ sources are
#                           kept in carry/nvshmem-src/ (git-ignored, never committed) so the programs can
#                           be rebuilt there. Without NVSHMEM_SRC a line says the perftest steps will not run.
#   carry/perftest-pre.tar.xz  with PERFTEST=1 (issue 20, scripts/gpu-perftest.sh): NVSHMEM's perftests
#                           linked here against rshmem and against NVSHMEM 3.4.5 (`scripts/gpu-perftest.sh
#                           prepare`, which also adds it to an existing carry/ on its own), and
#                           carry/hw/ (`scripts/gpu-issue20.sh prepare`: nvshmem_perf against both
#                           libraries, for scripts/gpu-issue20.sh, which runs the whole issue-20 call).
#   carry-before/           with BEFORE=<commit>: that commit's rshmrun, rshmem-bench and librshmem.so (and
#                           COMMIT), built in a temporary export of it, for the same-node comparison.
# What travels to the device machine is limited to 64 MiB: the binaries (mostly PTX text) are packed
# into carry/pack.tar.xz (and carry-before/pack.tar.xz), about a tenth of their size;
# scripts/gpu-unpack.sh, which the GPU scripts call first, unpacks them there. PACK=0 leaves them as files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
cargo build --workspace --release
c="$root/carry"
rm -rf "$c"; mkdir -p "$c/anchor"
cp target/release/{rshmrun,rshmem-test-pe,rshmem-soak,ring_shift,rshmem-bench,cudarc_interop,librshmem.so} "$c/"
strip "$c"/{rshmrun,rshmem-test-pe,rshmem-soak,ring_shift,rshmem-bench,cudarc_interop,librshmem.so}
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
NVSHMEM_SRC='' MODE=full scripts/check-cuda-examples.sh "$c" >&2 || echo "gpu-prepare: full link here failed; gpu-run.sh builds the CUDA programs there" >&2
if [ -f "$shared/anchor/nvshmem_bench.cu" ] && [ -f "$shared/anchor/run.sh" ]; then
  cp "$shared/anchor/nvshmem_bench.cu" "$shared/anchor/run.sh" "$c/anchor/"
else
  echo "gpu-prepare: no NVSHMEM anchor benchmark at $shared/anchor/ beside the checkout: the GPU run will skip it" >&2
fi
{ git rev-parse HEAD; git diff --quiet HEAD 2>/dev/null || echo "+dirty"; } | paste -sd '' >"$c/COMMIT"

# Issue 22: the C programs of the point operations, global_exit and team_init, linked here against carry/'s library.
for t in point_ops global_exit team_init; do
  ${CC:-cc} -std=c99 -O2 -I device/include "tests/c/$t.c" -L "$c" -lrshmem -Wl,-rpath,'$ORIGIN' -o "$c/c_$t"
done

# Issue 19: the C++ message-rate program, linked here (the PyPI toolkit links; rpath: carry/).
nvcc=$(scripts/find-nvcc.sh)
cudalib=$(cd "$(dirname "$nvcc")/../lib" && pwd)
"$nvcc" -rdc=true -arch=sm_90 -O2 -std=c++17 -I device/include -c bench/nvshmem/msg_rate.cu -o "$c/msg_rate.o" >&2
"$nvcc" -rdc=true -arch=sm_90 "$c/msg_rate.o" "$c/librshmem_device.a" -L "$c" -lrshmem -L "$cudalib" \
  -Xlinker -rpath -Xlinker '$ORIGIN' -o "$c/msg_rate" >&2
rm -f "$c/msg_rate.o"
# Issue 19: NVSHMEM's perftests (unchanged) for the remote steps.
if [ -n "${NVSHMEM_SRC:-}" ]; then
  mkdir -p "$c/nvshmem-src"
  if [ -d "$NVSHMEM_SRC/perftest" ]; then
    cp -r "$NVSHMEM_SRC/perftest" "$c/nvshmem-src/"
  else
    git --git-dir="$NVSHMEM_SRC" archive "${NVSHMEM_REF:-v3.4.5-0}" perftest | tar -x -C "$c/nvshmem-src" ||
      { echo "gpu-prepare: NVSHMEM_SRC=$NVSHMEM_SRC is neither a checkout with perftest/ nor a git repository with ${NVSHMEM_REF:-v3.4.5-0}" >&2; exit 1; }
  fi
  MODE=full PROGS="device/pt-to-pt/shmem_put_bw device/pt-to-pt/shmem_p_latency device/coll/barrier_latency" \
    NVSHMEM_SRC="$c/nvshmem-src" NVSHMEM_HOME=/nonexistent RSHMEM_LIBDIR="$c" RSHMEM_RPATH='$ORIGIN/../../../..' PTX="$c/rshmem_device.ptx" \
    bench/perftest.sh "$c/perftest" >&2
  rm -rf "$c/perftest/nvshmem"
  # nvml.h, which the perftests include, for building the comparison set on the GPU machine
  # (gpu-remote.sh PART=perftest), whose toolkit may lack it and which has no PyPI.
  nvml_h=$(find "$root/.tools/nvml/" -name nvml.h -path '*include*' 2>/dev/null | head -1)
  if [ -n "$nvml_h" ]; then mkdir -p "$c/nvml-include" && cp "$nvml_h" "$c/nvml-include/"; fi
else
  echo "gpu-prepare: NVSHMEM_SRC unset: no NVSHMEM perftests in carry/ (gpu-remote.sh PART=targets skips shmem_put_bw, shmem_p_latency, barrier_latency)" >&2
fi
# carry-before/: a previous build for the same-node comparison (BEFORE=<commit>).
cb="$root/carry-before"
if [ -n "${BEFORE:-}" ]; then
  rm -rf "$cb"; mkdir -p "$cb"
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-before.XXXXXX")
  git archive "$BEFORE" | tar -x -C "$tmp"
  # .tools (the CUDA tools) is not part of an export; the build only needs rustup's nightly for PTX.
  (cd "$tmp" && cargo build --release -p rshmem -p rshmem-launcher -p rshmem-examples >&2)
  cp "$tmp"/target/release/{rshmrun,rshmem-bench,librshmem.so} "$cb/"
  strip "$cb"/{rshmrun,rshmem-bench,librshmem.so}
  git rev-parse "$BEFORE" >"$cb/COMMIT"
  rm -rf "$tmp"
fi
# Pack the binaries (see the notes at the top).
pack() { # pack DIR: every file over 256 KiB into DIR/pack.tar.xz
  local d=$1 files
  [ -d "$d" ] || return 0
  mapfile -t files < <(cd "$d" && find . -type f -size +256k ! -name pack.tar.xz | sed 's|^\./||' | sort)
  # Nothing new to pack (e.g. carry-before/ kept from an earlier BEFORE=): keep its pack as it is.
  [ "${#files[@]}" -gt 0 ] || return 0
  rm -f "$d/pack.tar.xz"
  (cd "$d" && tar -cJf pack.tar.xz "${files[@]}" && rm -f "${files[@]}")
}
if [ "${PACK:-1}" = 1 ]; then
  pack "$c"
  pack "$cb"
fi
# Issue 20 (opt-in, PERFTEST=1): NVSHMEM's perftests, compiled and linked here against rshmem and against
# NVSHMEM 3.4.5 (PyPI's headers and device library), into carry/perftest-pre.tar.xz, after the pack
# (it reads carry/'s librshmem.so and PTX); scripts/gpu-perftest.sh runs them on the GPU machine.
if [ "${PERFTEST:-0}" = 1 ]; then
  bash scripts/gpu-perftest.sh prepare
  # bench/nvshmem/nvshmem_perf.cu against both libraries, for scripts/gpu-issue20.sh (carry/hw/).
  bash scripts/gpu-issue20.sh prepare
fi
du -sh "$c"
if [ -d "$cb" ]; then du -sh "$cb"; fi
