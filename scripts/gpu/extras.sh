# scripts/gpu.sh extras (here, on the CPU machine, after `scripts/gpu.sh prepare`): adds to carry/ what
# the other subcommands use beyond prepare's set, each of which they skip, saying so, when it is missing:
#   rshmem-soak            `run`'s soak steps;
#   cudarc_interop         `remote` PART=families (the cudarc example);
#   c_point_ops, c_global_exit, c_team_init
#                          the C programs of tests/c, linked here against rshmem's library (`remote`
#                          PART=families);
#   fresh-build-first/, fresh-test-first/
#                          rshmrun and ring_shift of fresh clones built by the README's two commands
#                          (scripts/fresh-clone-check.sh), when target/ has them (`run`);
#   nvml-include/nvml.h    for building NVSHMEM's perftests on the GPU machine (`remote` PART=perftest),
#                          when .tools/nvml has it;
#   carry-before/          with BEFORE=<commit>: that commit's rshmrun, rshmem-bench and librshmem.so (and
#                          COMMIT), built in a temporary export of it, for the same-node comparison
#                          (`remote` PART=checks, p2p and shapes);
#   carry/perftest-pre.tar.xz  with PERFTEST=1: `scripts/gpu.sh perftest prepare`.
# The new files over 256 KiB are packed into carry/pack-extras.tar.xz (carry-before/pack.tar.xz), which
# `scripts/gpu.sh unpack` unpacks there; PACK=0 leaves them as files. This file is the subcommand's body:
# run it through scripts/gpu.sh.
set -euo pipefail
[ "${GPU_SH_PART:-}" = extras ] || { echo "scripts/gpu/extras.sh: run it as scripts/gpu.sh extras" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
c="$root/carry"
[ -f "$c/COMMIT" ] || { echo "gpu.sh extras: no carry/COMMIT: run scripts/gpu.sh prepare first" >&2; exit 1; }
cargo build --workspace --release >&2
added=()
add() { # add FILE...: copies target/release files into carry/, stripped
  for f in "$@"; do cp "target/release/$f" "$c/" && strip "$c/$f" && added+=("$f"); done
}
add rshmem-soak cudarc_interop
# Fresh clones built by the README's two commands (scripts/fresh-clone-check.sh), when present.
for f in fresh-build-first fresh-test-first; do
  if [ -x "target/$f/ring_shift" ]; then
    mkdir -p "$c/$f" && cp "target/$f"/{rshmrun,ring_shift} "$c/$f/" && added+=("$f/rshmrun" "$f/ring_shift")
  fi
done
# The C programs of the point operations, global_exit and team_init, linked here against the library that
# carry/ holds (packed there: linked against the build's copy), found there through the run path.
for t in point_ops global_exit team_init; do
  ${CC:-cc} -std=c99 -O2 -I device/include "tests/c/$t.c" -L target/release -lrshmem -Wl,-rpath,'$ORIGIN' -o "$c/c_$t"
  added+=("c_$t")
done
# nvml.h, which NVSHMEM's perftests include, for building them on the GPU machine, whose toolkit may
# lack it and which has no PyPI.
nvml_h=$(find "$root/.tools/nvml/" -name nvml.h -path '*include*' 2>/dev/null | head -1 || true)
if [ -n "$nvml_h" ]; then mkdir -p "$c/nvml-include" && cp "$nvml_h" "$c/nvml-include/"; fi
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
if [ "${PACK:-1}" = 1 ]; then
  # The new files over 256 KiB of carry/ into carry/pack-extras.tar.xz (prepare's pack.tar.xz is kept as
  # it is), and carry-before/'s into its pack.tar.xz.
  big=()
  for f in "${added[@]}"; do
    if [ "$(stat -c %s "$c/$f")" -gt 262144 ]; then big+=("$f"); fi
  done
  rm -f "$c/pack-extras.tar.xz" "$c/.unpacked-extras"
  if [ "${#big[@]}" -gt 0 ]; then (cd "$c" && tar -cJf pack-extras.tar.xz "${big[@]}" && rm -f "${big[@]}"); fi
  if [ -d "$cb" ]; then
    mapfile -t files < <(cd "$cb" && find . -type f -size +256k ! -name pack.tar.xz | sed 's|^\./||' | sort)
    if [ "${#files[@]}" -gt 0 ]; then rm -f "$cb/pack.tar.xz" "$cb/.unpacked"; (cd "$cb" && tar -cJf pack.tar.xz "${files[@]}" && rm -f "${files[@]}"); fi
  fi
fi
if [ "${PERFTEST:-0}" = 1 ]; then
  bash scripts/gpu.sh perftest prepare
fi
du -sh "$c"
if [ -d "$cb" ]; then du -sh "$cb"; fi
