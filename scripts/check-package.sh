#!/usr/bin/env bash
# Checks that rshmem's published crates package, that each package carries its metadata and everything
# its build needs, and that a project builds and runs from the packages alone, as it would from a
# registry:
#  1. `cargo package` of every published crate, in dependency order (--no-verify: the verification build
#     of a crate that needs another of rshmem's crates would fetch it from crates.io, where this version
#     is not; rshmem-common and rshmem-ptxbuild, which need none, are packaged and verified first; step
#     3 builds the others from their packages);
#  2. every package has description, license, repository, homepage, readme, keywords, categories and
#     rust-version; rshmem-device's holds the C headers (and every header they include), the CUDA shim
#     and its build script; rshmem's holds its build script;
#  3. the packages are unpacked side by side (rshmem-device is not beside rshmem's sources as in the
#     clone), a `[patch.crates-io]` in a cargo config of the directory above them stands in for the
#     registry, and examples/template, with its rshmem dependencies as registry dependencies
#     (`rshmem = "=VERSION"`), is built: its kernel crate's PTX and rshmem's device library PTX are
#     compiled from the unpacked sources; then it runs under `rshmrun -np 2` on the CPU backend.
#   scripts/check-package.sh            (CI: scripts/test.sh runs it)
# Environment: PACKAGE_TARGET_DIR, the target directory of the build from the packages (default
# target/consumer-check-package). Not check-template's: rshmem's library has no hash in its file name
# (it is also a cdylib and a staticlib), so a build from the packages overwrote the template's
# target/consumer-check/release/deps/librshmem.rlib, and the next check-template, whose rshmem was
# still fresh, linked the packaged one (two rshmem-device crates: mismatched DevPtr types).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "check-package: FAILED: $*" >&2; exit 1; }
log() { echo "check-package: $*" >&2; }
start=$(date +%s)
cd "$root"
# Dependency order: each crate after the rshmem crates it needs.
crates=(rshmem-common rshmem-ptxbuild rshmem-ibgda rshmem-device rshmem rshmem-launcher)
verified=(rshmem-common rshmem-ptxbuild)
version=$(cargo metadata --no-deps --format-version 1 | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="rshmem"))')
pkgdir=$root/target/package
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-package.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# ---- 1. package
# The crates that need none of rshmem's other crates, verified (built from the package).
rm -f "$pkgdir"/rshmem*-"$version".crate
for c in "${verified[@]}"; do
  log "cargo package -p $c"
  cargo package --allow-dirty -q -p "$c" >"$tmp/package-$c.log" 2>&1 || { cat "$tmp/package-$c.log" >&2; die "cargo package -p $c"; }
done
# All of them in one command: cargo packages them in dependency order and resolves each one's
# dependencies on the others (for its Cargo.lock) from the packages made before it.
sel=(); for c in "${crates[@]}"; do sel+=(-p "$c"); done
log "cargo package --no-verify ${sel[*]}"
cargo package --allow-dirty --no-verify "${sel[@]}" >"$tmp/package.log" 2>&1 || { cat "$tmp/package.log" >&2; die "cargo package --no-verify ${sel[*]}"; }
order=$(sed -n 's/^ *Packaging \([^ ]*\) v.*/\1/p' "$tmp/package.log" | tr '\n' ' ')
log "packaged in this order: $order"
for c in "${crates[@]}"; do
  [ -f "$pkgdir/$c-$version.crate" ] || die "no $pkgdir/$c-$version.crate after cargo package"
done
log "ok: packaged ${crates[*]} ($version)"

# ---- 2. contents and metadata
mkdir -p "$tmp/crates"
for c in "${crates[@]}"; do
  tar xzf "$pkgdir/$c-$version.crate" -C "$tmp/crates"
  d=$tmp/crates/$c-$version
  python3 - "$d/Cargo.toml" "$c" <<'PY' || die "$c: incomplete package metadata"
import sys, tomllib
m = tomllib.load(open(sys.argv[1], "rb"))["package"]
missing = [k for k in ("description", "license", "repository", "homepage", "readme", "keywords", "categories",
                       "rust-version", "include") if not m.get(k)]
if missing:
    sys.exit(f"{sys.argv[2]}: no {', '.join(missing)} in its packaged Cargo.toml")
PY
  [ -f "$d/$(python3 -c 'import sys,tomllib; print(tomllib.load(open(sys.argv[1],"rb"))["package"]["readme"])' "$d/Cargo.toml")" ] \
    || die "$c: its readme is not in the package"
done
dev=$tmp/crates/rshmem-device-$version
for f in include/rshmem.h include/nvshmem.h include/nvshmemx.h include/rshmem_inline.h cuda/rshmem_device_init.cu build.rs src/lib.rs; do
  [ -f "$dev/$f" ] || die "rshmem-device's package has no $f"
done
# Every header a header includes with quotes is in the package, and so is every one in the clone.
for h in "$dev"/include/*.h; do
  for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$h"); do
    [ -f "$dev/include/$inc" ] || die "rshmem-device's package: $(basename "$h") includes \"$inc\", which it lacks"
  done
done
for h in device/include/*; do [ -f "$dev/include/$(basename "$h")" ] || die "rshmem-device's package lacks $h"; done
[ -f "$tmp/crates/rshmem-$version/build.rs" ] || die "rshmem's package has no build.rs"
grep -q '^links = "rshmem_device"' "$dev/Cargo.toml" || die "rshmem-device's package does not declare links = \"rshmem_device\""
log "ok: metadata, headers, CUDA shim and build scripts in the packages"

# ---- 3. a project built from the packages alone
mkdir -p "$tmp/.cargo"
{
  echo "# The unpacked packages stand in for crates.io (what cargo would unpack from the registry)."
  echo "[patch.crates-io]"
  for c in "${crates[@]}"; do echo "$c = { path = \"$tmp/crates/$c-$version\" }"; done
} >"$tmp/.cargo/config.toml"
app=$tmp/my-app
cp -r "$root/examples/template" "$app"
rm -rf "$app/target" "$app/Cargo.lock"
python3 - "$app/Cargo.toml" "$version" <<'PY' || die "cannot rewrite the template's rshmem dependencies"
import re, sys
p, v = sys.argv[1], sys.argv[2]
s = open(p).read()
n = 0
for c in ("rshmem", "rshmem-device", "rshmem-ptxbuild"):
    s, k = re.subn(r'^%s = \{ path = "[^"]*" \}$' % re.escape(c), '%s = "=%s"' % (c, v), s, flags=re.M)
    n += k
if n != 3:
    sys.exit(f"expected 3 rshmem path dependencies in {p}, rewrote {n}")
open(p, "w").write(s)
PY
cp "$root/Cargo.lock" "$app/Cargo.lock"
(cd "$root" && cargo build --release -q -p rshmem-launcher) || die "cargo build -p rshmem-launcher"
target=${PACKAGE_TARGET_DIR:-$root/target/consumer-check-package}
mkdir -p "$target"
log "building $app against the unpacked packages (target directory $target)"
(cd "$app" && CARGO_TARGET_DIR=$target cargo build --release) >"$tmp/build.log" 2>&1 || {
  tail -60 "$tmp/build.log" >&2; die "cargo build --release of the template against the packages"; }
grep -q "Compiling rshmem v$version ($tmp/crates/rshmem-$version)" "$tmp/build.log" \
  || { tail -30 "$tmp/build.log" >&2; die "the build did not compile rshmem from the unpacked package"; }
dptx=$(ls -t "$target"/release/build/rshmem-[0-9a-f]*/out/rshmem_device.ptx 2>/dev/null | head -1)
[ -n "$dptx" ] && grep -q '^\.target sm_90' "$dptx" && grep -q '^\.visible \.func .*rshmem_my_pe' "$dptx" \
  || die "rshmem's device library PTX built from the package is missing or not real PTX ($dptx)"
kptx=$(ls -t "$target"/release/build/my-app-*/out/my_app_kernels.ptx 2>/dev/null | head -1)
[ -n "$kptx" ] && grep -q '\.entry shift_block' "$kptx" || die "the kernel crate's PTX is missing or holds no shift_block"
[ ! -e "$tmp/crates/rshmem-device-$version/target" ] || die "the PTX build wrote a target directory into the unpacked rshmem-device"
cmp -s "$tmp/crates/rshmem-device-$version/Cargo.lock" <(tar xzf "$pkgdir/rshmem-device-$version.crate" -O "rshmem-device-$version/Cargo.lock") \
  || die "the PTX build changed the Cargo.lock of the unpacked rshmem-device"
out=$(RSHMEM_BACKEND=cpu "$root/target/release/rshmrun" --timeout 120 -np 2 "$target/release/my-app" 2>&1) \
  || { echo "$out" >&2; die "rshmrun -np 2 my-app (built from the packages)"; }
for pe in 0 1; do
  grep -qxF "[pe $pe] PE $pe: received 1048576 values from PE $((1 - pe))" <<<"$out" \
    && grep -qxF "[pe $pe] PE $pe: host put and get ok" <<<"$out" || { echo "$out" >&2; die "PE $pe's lines missing"; }
done
log "ok: the template built from the packages alone runs under rshmrun -np 2"
log "ok ($(( $(date +%s) - start )) s)"
