#!/usr/bin/env bash
# Checks scripts/install.sh the way a C/C++ project uses it:
#  1. installs rshmem into a fresh prefix outside the clone (with the device library archive where a CUDA
#     compiler is found: scripts/find-nvcc.sh; CI has the PyPI tools);
#  2. builds examples/cmake (NVSHMEM code: a host-API ring shift in C++ and a GPU ring shift in CUDA
#     C++ using nvshmem.h), copied outside the clone, against the prefix with find_package(rshmem):
#     both compile and link, the CUDA one device-linked against librshmem_device.a by CMake
#     (CUDA_SEPARABLE_COMPILATION); the programs record librshmem.so, not a path;
#  3. runs the host ring shift under the prefix's rshmrun -np 2 and -np 3 on the CPU backend (the GPU
#     one needs a GPU) and checks every PE's message;
#  4. the same host program built with pkg-config instead, and run;
#  5. the prefix moved elsewhere still works (CMake and pkg-config find it relative to themselves);
#  6. an install made with --no-device-lib: find_package(rshmem COMPONENTS device) fails saying so, and
#     host code still builds.
# Without a CUDA compiler the device link is left out, saying so in one line, or, under
# RSHMEM_TEST_NO_SKIP=1 (scripts/test.sh), the check fails.
#   scripts/check-install.sh            (CI: scripts/test.sh runs it)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "check-install: FAILED: $*" >&2; exit 1; }
log() { echo "check-install: $*" >&2; }
start=$(date +%s)
command -v cmake >/dev/null 2>&1 || die "cmake is not installed (scripts/setup.sh installs it: apt-get install cmake)"
command -v pkg-config >/dev/null 2>&1 || die "pkg-config is not installed (scripts/setup.sh installs it)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
case "$tmp/" in "$root"/*) die "the temporary directory $tmp lies inside the clone" ;; esac

nvcc=
if nvcc=$("$root/scripts/find-nvcc.sh" 2>"$tmp/find-nvcc.err"); then
  log "CUDA compiler: $nvcc"
else
  cat "$tmp/find-nvcc.err" >&2
  case "${RSHMEM_TEST_NO_SKIP:-}" in
    "" | 0) log "SKIPPED the device library and the CUDA program's device link: no CUDA compiler (scripts/find-nvcc.sh failed)" ;;
    *) die "no CUDA compiler for the device library and the device link (scripts/find-nvcc.sh failed; RSHMEM_TEST_NO_SKIP=1 makes this a failure)" ;;
  esac
  nvcc=
fi

# ---- 1. install
prefix=$tmp/prefix
flags=(); [ -n "$nvcc" ] || flags=(--no-device-lib)
NVCC=$nvcc "$root/scripts/install.sh" "${flags[@]}" "$prefix" >"$tmp/install.log" 2>&1 || {
  tail -40 "$tmp/install.log" >&2; die "scripts/install.sh ${flags[*]} $prefix"; }
for f in bin/rshmrun lib/librshmem.so lib/librshmem.a lib/rshmem/rshmem_device.ptx include/rshmem/nvshmem.h \
  include/rshmem/nvshmemx.h include/rshmem/rshmem.h include/rshmem/rshmem_inline.h lib/pkgconfig/rshmem.pc \
  lib/cmake/rshmem/rshmemConfig.cmake lib/cmake/rshmem/rshmemConfigVersion.cmake; do
  [ -e "$prefix/$f" ] || die "the prefix has no $f"
done
[ -z "$nvcc" ] || [ -f "$prefix/lib/librshmem_device.a" ] || die "the prefix has no lib/librshmem_device.a"
log "ok: installed into $prefix"

# ---- 2. the CMake project
proj=$tmp/ring-shift-cmake
cp -r "$root/examples/cmake" "$proj"
cmake_flags=(-DCMAKE_PREFIX_PATH="$prefix")
[ -z "$nvcc" ] || cmake_flags+=(-DCMAKE_CUDA_COMPILER="$nvcc")
cmake -S "$proj" -B "$proj/build" "${cmake_flags[@]}" >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log" >&2; die "cmake configure of examples/cmake"; }
cmake --build "$proj/build" -v >"$tmp/cmake-build.log" 2>&1 || { tail -40 "$tmp/cmake-build.log" >&2; die "cmake --build of examples/cmake"; }
host=$proj/build/ring_shift_host
[ -x "$host" ] || die "no ring_shift_host after the build"
if [ -n "$nvcc" ]; then
  [ -x "$proj/build/ring_shift" ] || die "no ring_shift (CUDA) after the build"
  grep -q -- '-dlink' "$tmp/cmake-build.log" && grep -q 'librshmem_device.a' "$proj/build/CMakeFiles/ring_shift.dir/deviceLinkLibs.rsp" \
    || die "the CUDA program was not device-linked against librshmem_device.a"
  log "ok: ring_shift.cu (nvshmem.h) compiled with -rdc=true, device-linked against librshmem_device.a and linked"
fi
for exe in "$host" ${nvcc:+"$proj/build/ring_shift"}; do
  needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  grep -qx 'librshmem.so' <<<"$needed" || die "$(basename "$exe") does not record librshmem.so (NEEDED: $(echo $needed))"
done
log "ok: ring_shift_host (C++, nvshmem.h host API) built with find_package(rshmem)"

# ---- 3. run it
check_run() { # check_run RSHMRUN EXE NP WHAT
  local out pe
  out=$(RSHMEM_BACKEND=cpu "$1" --timeout 60 -np "$3" "$2" 2>&1) || { echo "$out" >&2; die "$4: rshmrun -np $3 failed"; }
  for ((pe = 0; pe < $3; pe++)); do
    grep -qxF "[pe $pe] $pe: received message $(( (pe + $3 - 1) % $3 ))" <<<"$out" || { echo "$out" >&2; die "$4: PE $pe's message is wrong or missing"; }
  done
}
check_run "$prefix/bin/rshmrun" "$host" 2 "the CMake-built ring_shift_host"
check_run "$prefix/bin/rshmrun" "$host" 3 "the CMake-built ring_shift_host"
log "ok: ring_shift_host runs under the prefix's rshmrun -np 2 and -np 3 (CPU backend)"

# ---- 4. pkg-config
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[ "$(pkg-config --modversion rshmem)" = "$(sed -n 's/^Version: //p' "$prefix/lib/pkgconfig/rshmem.pc")" ] || die "pkg-config --modversion rshmem"
pc_host=$tmp/ring_shift_host_pc
# shellcheck disable=SC2046
c++ $(pkg-config --cflags rshmem) "$proj/ring_shift_host.cpp" $(pkg-config --libs rshmem) \
  -Wl,-rpath,"$(pkg-config --variable=libdir rshmem)" -o "$pc_host" || die "c++ with pkg-config --cflags --libs rshmem"
check_run "$prefix/bin/rshmrun" "$pc_host" 2 "ring_shift_host built with pkg-config"
if [ -n "$nvcc" ]; then
  devlib=$(pkg-config --variable=devicelib rshmem)
  [ -f "$devlib" ] || die "pkg-config's devicelib ($devlib) is not a file"
fi
log "ok: pkg-config gives the flags of the host library (and the device library archive)"

# ---- 5. the prefix moved
moved=$tmp/moved/prefix
mkdir -p "$tmp/moved" && mv "$prefix" "$moved"
rm -rf "$proj/build-moved"
cmake -S "$proj" -B "$proj/build-moved" -DCMAKE_PREFIX_PATH="$moved" >"$tmp/cmake-moved.log" 2>&1 \
  && cmake --build "$proj/build-moved" --target ring_shift_host >>"$tmp/cmake-moved.log" 2>&1 \
  || { tail -30 "$tmp/cmake-moved.log" >&2; die "find_package(rshmem) from the moved prefix"; }
grep -q "$moved/lib" "$proj/build-moved/CMakeFiles/ring_shift_host.dir/link.txt" || die "the build against the moved prefix does not link its library"
check_run "$moved/bin/rshmrun" "$proj/build-moved/ring_shift_host" 2 "ring_shift_host against the moved prefix"
[ "$(PKG_CONFIG_PATH=$moved/lib/pkgconfig pkg-config --variable=libdir rshmem)" -ef "$moved/lib" ] || die "pkg-config's libdir after the move"
log "ok: the prefix works after a move"

# ---- 6. --no-device-lib
if [ -n "$nvcc" ]; then
  host_only=$tmp/prefix-host
  "$root/scripts/install.sh" --no-device-lib "$host_only" >"$tmp/install-host.log" 2>&1 || {
    tail -30 "$tmp/install-host.log" >&2; die "scripts/install.sh --no-device-lib"; }
  [ ! -e "$host_only/lib/librshmem_device.a" ] || die "--no-device-lib installed a device library"
  comp=$tmp/components
  mkdir -p "$comp"
  cat >"$comp/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.18)
project(components LANGUAGES CXX)
find_package(rshmem REQUIRED COMPONENTS ${WANT})
CM
  if cmake -S "$comp" -B "$comp/b1" -DWANT=device -DCMAKE_PREFIX_PATH="$host_only" >"$tmp/comp.log" 2>&1; then
    die "find_package(rshmem COMPONENTS device) succeeded on an install without the device library"
  fi
  grep -q "installed with --no-device-lib" "$tmp/comp.log" || { cat "$tmp/comp.log" >&2; die "find_package(rshmem COMPONENTS device) failed without saying why"; }
  cmake -S "$comp" -B "$comp/b2" -DWANT=rshmem -DCMAKE_PREFIX_PATH="$host_only" >"$tmp/comp2.log" 2>&1 || {
    cat "$tmp/comp2.log" >&2; die "find_package(rshmem) on a host-only install"; }
  if cmake -S "$comp" -B "$comp/b3" -DWANT=nosuch -DCMAKE_PREFIX_PATH="$host_only" >"$tmp/comp3.log" 2>&1 ||
    ! grep -q "no component nosuch" "$tmp/comp3.log"; then
    cat "$tmp/comp3.log" >&2; die "an unknown component was not refused clearly"
  fi
  log "ok: --no-device-lib installs host code only, and find_package(rshmem COMPONENTS device) says so"
fi
log "ok ($(( $(date +%s) - start )) s)"
