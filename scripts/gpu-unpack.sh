#!/usr/bin/env bash
# Unpacks DIR/pack.tar.xz (made by scripts/gpu-prepare.sh: the binaries of carry/ and carry-before/,
# packed to fit what travels to the device machine) in place, once per copy of DIR:
#   scripts/gpu-unpack.sh [DIR...]        (default: carry carry-before, those that exist)
# The GPU scripts (gpu-run.sh, gpu-remote.sh, gpu-single.sh) call it first. Uses xz through tar, or
# Python's tarfile where tar cannot (no xz program).
set -eu
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- carry carry-before
for d in "$@"; do
  [ -f "$d/pack.tar.xz" ] || continue
  if [ -f "$d/.unpacked" ] && [ ! "$d/pack.tar.xz" -nt "$d/.unpacked" ]; then continue; fi
  if ! tar -xJf "$d/pack.tar.xz" -C "$d" 2>/dev/null; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$d/pack.tar.xz" "$d"
  fi
  touch "$d/.unpacked"
  echo "gpu-unpack: $d: $(tar -tJf "$d/pack.tar.xz" 2>/dev/null | wc -l || echo '?') files unpacked"
done
