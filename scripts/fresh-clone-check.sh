#!/usr/bin/env bash
# Follows the README on fresh clones, as a new user on a fresh machine would:
#   private:            scripts/test.sh in a clone inside a fresh mode-700 directory with nothing beside
#                       it, no ../shared (scripts/private-clone-check.sh; leaves the toolchain alone)
# and in both orders:
#   fresh-build-first:  cargo build --release && target/release/rshmrun -np 4 target/release/ring_shift,
#                       then scripts/test.sh
#   fresh-test-first:   scripts/test.sh, then the first command
# and in both, last: target/release/rshmrun --nodes 2 -np 4 target/release/ring_shift (remote PEs).
# Before each clone, nightly's rust-src is REMOVED from rustup (the state of the machine that showed the
# stale CPU-only build), so this changes your toolchain: the build puts rust-src back by itself.
# Each clone is made in a fresh mode-700 directory with nothing beside it (no ../shared, as on a user's
# machine) and deleted afterwards; its rshmrun and ring_shift are kept in target/<order>/ for a GPU run
# (`scripts/gpu.sh extras` carries them). Each must hold real device PTX (checked here) and is run on the
# GPUs by `scripts/gpu.sh run`. Logs: target/<order>.log. Takes several minutes per order on 2 cores.
# `scripts/fresh-clone-check.sh private` runs the first alone.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "fresh-clone-check: $*" >&2; }
has_ptx() { grep -c '\.target sm_90' "$1" >/dev/null; }

one() {
  local order=$1 log=$root/target/$1.log
  if [ "$order" = private ]; then "$root/scripts/private-clone-check.sh"; return; fi
  local private dir
  private=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-$order-XXXXXX") && chmod 700 "$private"
  dir=$private/rshmem
  rm -rf "$root/target/$order"
  git clone -q "$root" "$dir"
  rustup component remove rust-src --toolchain nightly >/dev/null 2>&1 || true
  if rustup component list --toolchain nightly --installed | grep -q rust-src; then
    say "could not remove rust-src"; return 1
  fi
  say "$order: $dir (nightly rust-src removed); log $log"
  local first='cargo build --release && target/release/rshmrun -np 4 target/release/ring_shift'
  local second='scripts/test.sh'
  if [ "$order" = fresh-test-first ]; then local t=$first; first=$second; second=$t; fi
  # Then, as the README's remote-PE section says, the ring shift across two simulated nodes.
  local nodes='target/release/rshmrun --nodes 2 -np 4 target/release/ring_shift'
  ( cd "$dir" && unset CARGO_TARGET_DIR && for cmd in "$first" "$second" "$nodes"; do
      echo "+ $cmd"; bash -c "$cmd" || { echo "FAILED: $cmd"; exit 1; }
    done ) >"$log" 2>&1 || { tail -30 "$log" >&2; say "$order FAILED"; return 1; }
  grep -q 'received message' "$log" || { say "$order: the ring shift printed nothing"; return 1; }
  sed -n "/^+ ${nodes//\//\\/}/,\$p" "$log" | grep -c 'received message' | grep -qx 4 ||
    { say "$order: the ring shift across two nodes did not print 4 lines"; return 1; }
  has_ptx "$dir/target/release/ring_shift" || { say "$order: ring_shift holds no device PTX"; return 1; }
  mkdir -p "$root/target/$order"
  cp "$dir/target/release/"{rshmrun,ring_shift} "$root/target/$order/"
  strip "$root/target/$order/"{rshmrun,ring_shift}
  grep -E 'warning: rshmem-ptxbuild|installing|rust-src' "$log" | head -5 >&2 || true
  say "$order: ok ($(grep -c 'received message' "$log") ring-shift lines, PTX in ring_shift)"
  rm -rf "$private"
}

orders=${*:-private fresh-build-first fresh-test-first}
for o in $orders; do
  case $o in private | fresh-build-first | fresh-test-first) ;; *) say "unknown order '$o' (private, fresh-build-first, fresh-test-first)"; exit 2 ;; esac
done
for o in $orders; do one "$o"; done
rustup component list --toolchain nightly --installed | grep -q rust-src || rustup component add rust-src --toolchain nightly
say "done"
