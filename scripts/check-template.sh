#!/usr/bin/env bash
# Builds and runs examples/template as a user's own project would be: a copy outside this clone, its
# rshmem dependencies pointed at this clone by path, its own target directory, a plain
# `cargo build --release` (which compiles its kernel crate to PTX through rshmem-ptxbuild from the
# template's build.rs, and rshmem's device library through rshmem's), then `rshmrun -np 2` on the CPU
# backend, checking every PE's output. Also checks that the kernel crate's PTX was built (not an empty
# CPU-only file) and that the nightly build went to the template's target directory.
#   scripts/check-template.sh            (CI: scripts/test.sh runs it)
# Environment: TEMPLATE_TARGET_DIR, the template's target directory (default target/consumer-check,
# kept between runs so that rshmem's dependencies are built once; the sources are copied afresh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "check-template: FAILED: $*" >&2; exit 1; }
log() { echo "check-template: $*" >&2; }
start=$(date +%s)
target=${TEMPLATE_TARGET_DIR:-$root/target/consumer-check}
mkdir -p "$target"
target=$(cd "$target" && pwd)

# rshmrun from this clone (the launcher a user installs with `cargo install --path launcher`).
(cd "$root" && cargo build --release -q -p rshmem-launcher) || die "cargo build -p rshmem-launcher"
rshmrun=$root/target/release/rshmrun

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-template.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in "$root"/*) die "the temporary directory $tmp lies inside the clone" ;; esac
app=$tmp/my-app
cp -r "$root/examples/template" "$app"
rm -rf "$app/target" "$app/Cargo.lock"
# The dependencies, by path, on this clone (the template's are relative to its place in the clone).
sed -i "s|path = \"\\.\\./\\.\\./|path = \"$root/|" "$app/Cargo.toml"
[ "$(grep -c "path = \"$root/" "$app/Cargo.toml")" = 3 ] || die "expected 3 rshmem path dependencies in $app/Cargo.toml:
$(cat "$app/Cargo.toml")"
# The clone's lock file pins the same versions of the registry dependencies (no network needed).
cp "$root/Cargo.lock" "$app/Cargo.lock"

log "building $app (target directory $target)"
(cd "$app" && CARGO_TARGET_DIR=$target cargo build --release) >"$tmp/build.log" 2>&1 || {
  tail -60 "$tmp/build.log" >&2; die "cargo build --release of the template"; }
exe=$target/release/my-app
[ -x "$exe" ] || die "no $exe after the build"
ptx=$(ls -t "$target"/release/build/my-app-*/out/my_app_kernels.ptx 2>/dev/null | head -1)
[ -n "$ptx" ] || die "the template's build.rs wrote no my_app_kernels.ptx"
grep -q '^\.target sm_90' "$ptx" && grep -q '\.entry shift_block' "$ptx" \
  || die "$ptx is not the kernel crate's PTX (no .target sm_90 / .entry shift_block)"
ls "$target"/ptx-sm_90/nvptx64-nvidia-cuda/release/deps/my_app_kernels-*.s >/dev/null 2>&1 \
  || die "the kernel crate's nightly build is not in the template's target directory ($target/ptx-sm_90)"
log "ok: built; the kernel crate's PTX is $ptx"

out=$(RSHMEM_BACKEND=cpu "$rshmrun" --timeout 120 -np 2 "$exe" 2>&1) || { echo "$out" >&2; die "rshmrun -np 2 my-app"; }
for line in "[pe 0] PE 0: received 1048576 values from PE 1" "[pe 1] PE 1: received 1048576 values from PE 0" \
  "[pe 0] PE 0: host put and get ok" "[pe 1] PE 1: host put and get ok"; do
  grep -qxF "$line" <<<"$out" || { echo "$out" >&2; die "no line '$line' in the output of rshmrun -np 2 my-app"; }
done
log "ok: rshmrun -np 2 my-app on the CPU backend"
log "ok ($(( $(date +%s) - start )) s)"
