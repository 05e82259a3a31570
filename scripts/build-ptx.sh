#!/usr/bin/env bash
# Builds a no_std crate of this workspace to PTX with the nightly toolchain and copies the PTX to OUT.
#   scripts/build-ptx.sh PACKAGE OUT.ptx [sm_90]
# Needs: rustup's nightly with rust-src (installed by this script when missing, as the build does). No
# CUDA toolkit.
set -euo pipefail
pkg=$1 out=$2 arch=${3:-sm_90}
root=$(cd "$(dirname "$0")/.." && pwd)
export RUSTUP_AUTO_INSTALL=0
if ! rustup component list --toolchain nightly --installed >/dev/null 2>&1; then
  echo "build-ptx: installing nightly with rust-src (rustup toolchain install nightly --profile minimal --component rust-src)" >&2
  rustup toolchain install nightly --profile minimal --component rust-src >&2
fi
if ! rustup component list --toolchain nightly --installed | grep -q '^rust-src'; then
  echo "build-ptx: installing nightly's rust-src (rustup component add rust-src --toolchain nightly)" >&2
  rustup component add rust-src --toolchain nightly >&2
fi
tdir="$root/target/ptx-$arch"
crate=${pkg//-/_}
# Panics (bounds checks) become `trap`; no debug info (ptxas rejects rustc's DWARF sections).
CARGO_PROFILE_RELEASE_DEBUG=0 RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort" CARGO_TARGET_DIR="$tdir" \
  cargo +nightly rustc -q -p "$pkg" --release --target nvptx64-nvidia-cuda -Zbuild-std=core \
  --manifest-path "$root/Cargo.toml" -- -C target-cpu="$arch" --emit=asm >&2
src=$(ls -t "$tdir"/nvptx64-nvidia-cuda/release/deps/"$crate"-*.s 2>/dev/null | head -1 || true)
if [ -z "$src" ]; then
  # Up to date but its .s is gone: rebuild that package once.
  CARGO_TARGET_DIR="$tdir" cargo +nightly clean -q -p "$pkg" --release --target nvptx64-nvidia-cuda --manifest-path "$root/Cargo.toml"
  CARGO_PROFILE_RELEASE_DEBUG=0 RUSTFLAGS="-Zunstable-options -Cpanic=immediate-abort" CARGO_TARGET_DIR="$tdir" \
    cargo +nightly rustc -q -p "$pkg" --release --target nvptx64-nvidia-cuda -Zbuild-std=core \
    --manifest-path "$root/Cargo.toml" -- -C target-cpu="$arch" --emit=asm >&2
  src=$(ls -t "$tdir"/nvptx64-nvidia-cuda/release/deps/"$crate"-*.s | head -1)
fi
mkdir -p "$(dirname "$out")"
cp "$src" "$out"
echo "$out"
