#!/usr/bin/env bash
# Reproduces "the README's first command on a fresh machine" without a new machine, and checks that
# the build never leaves a silently CPU-only library behind (issue 7, Build item 1). A `rustup` shim
# first in PATH plays the fresh machine (see below). Steps, each a `cargo build --release -p rshmem`:
#  1. rust-src hidden, downloads refused: the build must try to install rust-src, then stop with the
#     one command to run and mention RSHMEM_SKIP_PTX=1, and leave no library; the same with nightly
#     itself missing, and a clear error without rustup;
#  2. a normal build in the same target dir (as after running that command): the library must hold
#     the real device PTX (`.target sm_90` and a device function), and the build must watch nightly's
#     component list so that a later toolchain change re-runs it;
#  3. RSHMEM_SKIP_PTX=1 builds a library without PTX that records why; a bad value is refused;
#  4. a normal build after that has the PTX again;
#  5. on a machine that can download, the build installs rust-src itself, says so, and has PTX.
# It uses its own CARGO_TARGET_DIR (target/fresh-check) so the main build is not disturbed; the
# nightly PTX build goes into that target directory too (target/fresh-check/ptx-sm_90, as any project's
# goes into its own). About 20-30 s once the dependencies in target/fresh-check are built (the first
# run also builds cudarc & co. and the nightly core library, about a minute).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CARGO_TARGET_DIR="$root/target/fresh-check"
export SHIM_DIR="$CARGO_TARGET_DIR/shim"
logs="$CARGO_TARGET_DIR/logs"
mkdir -p "$SHIM_DIR" "$logs"
rm -f "$logs"/*.log
start=$(date +%s)
SHIM_REAL_RUSTUP=$(command -v rustup) || { echo "check-fresh-build: rustup not found" >&2; exit 1; }
export SHIM_REAL_RUSTUP

log=
fail() {
  echo "check-fresh-build: FAILED: $*" >&2
  if [ -n "$log" ] && [ -f "$log" ]; then echo "--- $log:" >&2; tail -40 "$log" >&2; fi
  exit 1
}
lib="$CARGO_TARGET_DIR/release/librshmem.so"
has_ptx() { grep -aqF '.target sm_90' "$lib" && grep -aqF '.visible .func rshmem_atomic_add64(' "$lib"; }
build() { # build LOGNAME [VAR=value...] [/path/to/cargo]: builds rshmem, output in $logs/LOGNAME; returns cargo's status
  log="$logs/$1"; shift
  local cargo=cargo
  if [ $# -gt 0 ] && [[ "${!#}" == /* ]]; then cargo=${!#}; set -- "${@:1:$#-1}"; fi
  env "$@" "$cargo" build --release -p rshmem >"$log" 2>&1
}
calls() { tr '\n' ';' <"$SHIM_DIR/calls.log"; }

# The shim. SHIM_MODE=offline (default): nightly has no rust-src and nothing can be downloaded;
# no-nightly: nightly is not installed, offline; online: rust-src is missing until
# `rustup component add rust-src` "installs" it (then the real rust-src shows again).
cat >"$SHIM_DIR/rustup" <<'EOF'
#!/usr/bin/env bash
echo "rustup $*" >>"$SHIM_DIR/calls.log"
mode=${SHIM_MODE:-offline}
case " $* " in
  *" component list "*)
    if [ "$mode" = no-nightly ]; then
      echo "error: toolchain 'nightly-x86_64-unknown-linux-gnu' is not installed" >&2; exit 1
    fi
    out=$("$SHIM_REAL_RUSTUP" "$@") || exit $?
    if [ "$mode" = online ] && [ -e "$SHIM_DIR/installed" ]; then printf '%s\n' "$out"; exit 0; fi
    printf '%s\n' "$out" | grep -v '^rust-src' || true ;;
  *" component add "*|*" toolchain install "*|*" update "*)
    if [ "$mode" = online ]; then
      echo "info: installing component 'rust-src' (shim)" >&2; touch "$SHIM_DIR/installed"; exit 0
    fi
    echo "error: could not download nightly components: network unreachable (rshmem check-fresh-build shim)" >&2
    exit 1 ;;
  *) exec "$SHIM_REAL_RUSTUP" "$@" ;;
esac
EOF
chmod +x "$SHIM_DIR/rustup"
rm -f "$SHIM_DIR/installed"
: >"$SHIM_DIR/calls.log"
hidden="PATH=$SHIM_DIR:$PATH"

# A fresh machine has never built rshmem: forget this target dir's rshmem (and its build script run).
cargo clean -q --release -p rshmem
rm -f "$CARGO_TARGET_DIR"/release/librshmem.*

# 1. rust-src hidden, install refused: the build must stop, saying what to run.
if build 1-no-src.log "$hidden"; then
  fail "the build with rust-src hidden succeeded (it must stop instead of making a CPU-only library)"
fi
grep -q 'rustup component add rust-src --toolchain nightly' "$SHIM_DIR/calls.log" \
  || fail "the build did not try to install rust-src (shim calls: $(calls))"
grep -qF 'Run this once, then build again:    rustup component add rust-src --toolchain nightly' "$log" \
  || fail "the error does not give the one command to run"
grep -qF 'RSHMEM_SKIP_PTX=1' "$log" || fail "the error does not mention RSHMEM_SKIP_PTX=1"
grep -qF 'network unreachable' "$log" || fail "the error does not show why the install failed"
[ ! -e "$lib" ] || fail "a library was left behind by the stopped build"

# 1b. Nightly not installed at all: the one command installs nightly with rust-src.
: >"$SHIM_DIR/calls.log"
if build 1-no-nightly.log "$hidden" SHIM_MODE=no-nightly; then fail "the build without nightly succeeded"; fi
grep -q 'rustup toolchain install nightly --profile minimal --component rust-src' "$SHIM_DIR/calls.log" \
  || fail "the build did not try to install nightly (shim calls: $(calls))"
grep -qF 'Run this once, then build again:    rustup toolchain install nightly --profile minimal --component rust-src' "$log" \
  || fail "the error does not give the one command that installs nightly"
[ ! -e "$lib" ] || fail "a library was left behind by the stopped build"

# 1c. No rustup at all (the toolchain's own cargo, with rustup's directory not in PATH).
real_cargo=$(rustup which cargo) real_rustc=$(rustup which rustc)
if build 1-no-rustup.log PATH=/usr/local/bin:/usr/bin:/bin RUSTC="$real_rustc" "$real_cargo"; then
  fail "the build without rustup succeeded"
fi
grep -qF 'rustup cannot be run' "$log" && grep -qF 'https://rustup.rs' "$log" \
  || fail "the error without rustup does not say that rustup is needed"

# 2. rust-src visible again (as after the suggested command or scripts/setup.sh): real PTX.
build 2-normal.log || fail "the normal build after the stopped one failed"
has_ptx || fail "$lib holds no device PTX after rust-src became available"
out=$(ls -t "$CARGO_TARGET_DIR"/release/build/rshmem-*/output | head -1)
sysroot=$(RUSTUP_AUTO_INSTALL=0 rustup run nightly rustc --print sysroot)
grep -qxF "cargo:rerun-if-changed=$sysroot/lib/rustlib/components" "$out" \
  || fail "the build script does not watch nightly's component list ($out)"

# 3. A CPU-only build on purpose, and the reason it records for the run-time error.
build 3-skip.log RSHMEM_SKIP_PTX=1 || fail "the RSHMEM_SKIP_PTX=1 build failed"
grep -qF 'RSHMEM_SKIP_PTX=1 is set' "$log" || fail "the RSHMEM_SKIP_PTX=1 build gave no warning"
if has_ptx; then fail "the RSHMEM_SKIP_PTX=1 library still holds PTX"; fi
grep -aqF 'RSHMEM_SKIP_PTX=1 was set when it was built' "$lib" \
  || fail "the RSHMEM_SKIP_PTX=1 library does not record why it has no PTX"
if build 3-bad.log RSHMEM_SKIP_PTX=yes; then fail "RSHMEM_SKIP_PTX=yes was accepted"; fi
grep -qF 'RSHMEM_SKIP_PTX="yes" is not valid' "$log" || fail "RSHMEM_SKIP_PTX=yes was not refused clearly"

# 4. Back to a normal build: the CPU-only state must not stick.
build 4-normal.log || fail "the normal build after the RSHMEM_SKIP_PTX=1 one failed"
has_ptx || fail "$lib holds no device PTX after RSHMEM_SKIP_PTX was unset"

# 5. A fresh machine that can download: the build installs rust-src itself, says so, and has PTX.
cargo clean -q --release -p rshmem
: >"$SHIM_DIR/calls.log"
build 5-online.log "$hidden" SHIM_MODE=online || fail "the build that could install rust-src failed"
grep -q 'rustup component add rust-src --toolchain nightly' "$SHIM_DIR/calls.log" \
  || fail "the build did not install rust-src (shim calls: $(calls))"
grep -qF 'installing it now with `rustup component add rust-src --toolchain nightly`' "$log" \
  || fail "the build did not say what it installs"
has_ptx || fail "$lib holds no device PTX after the build installed rust-src"
log=
echo "check-fresh-build: ok ($(( $(date +%s) - start )) s)" >&2
