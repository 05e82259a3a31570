#!/usr/bin/env bash
# The situation of issue 18, reproduced exactly: a plain `git clone` of this checkout into a fresh
# private directory (mode 700, as /root or `mktemp -d` make) with nothing beside it (no ../shared),
# then the README's test command there, scripts/test.sh, as a new user would run it. Says how long it
# took and whether it passed; the clone's output goes to target/private-clone.log of this checkout.
# Also checks that the seed program's check said in one line that it was skipped (there is no
# ../shared/seeds beside the clone). Only committed work is in the clone. The clone is deleted
# afterwards (KEEP=1 keeps it). About 10-15 minutes on 2 cores (everything is built from scratch, and
# the CUDA compiler tools are installed from PyPI into the clone's .tools/).
# Run directly or as `scripts/fresh-clone-check.sh private`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "private-clone-check: $*" >&2; }
log=$root/target/private-clone.log
mkdir -p "$root/target"
dir=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-private-XXXXXX")
cleanup() { if [ "${KEEP:-0}" = 1 ]; then say "kept $dir"; else rm -rf "$dir"; fi; }
trap cleanup EXIT
chmod 700 "$dir"
clone=$dir/rshmem
git clone -q "$root" "$clone"
# The situation: only the clone in a directory that other users cannot enter.
[ "$(stat -c %a "$dir")" = 700 ] || { say "$dir is not mode 700"; exit 1; }
[ "$(ls -A "$dir")" = rshmem ] || { say "$dir holds more than the clone: $(ls -A "$dir" | tr '\n' ' ')"; exit 1; }
say "clone of $(git -C "$root" rev-parse --short HEAD) at $clone (parent mode 700, no ../shared); log $log"
start=$(date +%s)
# Nothing of this shell's setup leaks in: a new user has none of it.
rc=0
(cd "$clone" && env -u CARGO_TARGET_DIR -u SEED -u NVCC -u CUDA_HOME -u RSHMEM_TEST_NO_SKIP scripts/test.sh) >"$log" 2>&1 || rc=$?
took=$(($(date +%s) - start))
if [ $rc = 0 ] && ! grep -qx 'all tests passed' "$log"; then
  say "scripts/test.sh exited 0 without 'all tests passed'"; rc=1
fi
if [ $rc = 0 ] && [ "$(grep -c 'SKIPPED the NVSHMEM seed program' "$log")" != 1 ]; then
  say "the seed program's check did not say once that it was skipped (no ../shared beside the clone)"; rc=1
fi
[ $rc = 0 ] || tail -40 "$log" >&2
say "scripts/test.sh in a private clone: $([ $rc = 0 ] && echo passed || echo "FAILED (exit $rc)") in $((took / 60)) min $((took % 60)) s on $(nproc) cores; log $log"
exit $rc
