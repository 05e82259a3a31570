#!/usr/bin/env bash
# Installs rshmem for C and C++ projects under a prefix:
#   scripts/install.sh [--no-device-lib] [--arch sm_90] PREFIX
# builds (cargo build --release) and puts
#   PREFIX/bin/rshmrun                        the launcher (with rshmem-test-pe and rshmem-bench, which
#                                             `rshmrun --selftest` runs from beside it)
#   PREFIX/lib/librshmem.so, librshmem.a      the host library
#   PREFIX/lib/librshmem_device.a             the device library archive that CUDA programs link
#                                             (nvcc -rdc=true; scripts/build-device-lib.sh)
#   PREFIX/lib/rshmem/rshmem_device.ptx       the device library as PTX (what the archive is made from)
#   PREFIX/include/rshmem/                    rshmem.h, nvshmem.h, nvshmemx.h, rshmem_inline.h
#   PREFIX/lib/pkgconfig/rshmem.pc            pkg-config: Cflags/Libs of the host library; the variables
#                                             devicelib (the archive) and ptx
#   PREFIX/lib/cmake/rshmem/                  CMake package: find_package(rshmem) gives the imported
#                                             targets rshmem::rshmem (host library and headers) and
#                                             rshmem::device (the archive; it brings rshmem::rshmem)
# The headers go into include/rshmem/, not include/, so that an NVSHMEM installed in the same prefix
# keeps its own nvshmem.h; pkg-config and CMake add that directory to the include path.
# Options:
#   --no-device-lib  no device library archive (no CUDA compiler needed): host C/C++ programs only,
#                    and CMake's rshmem::device is absent (find_package(rshmem COMPONENTS device) fails)
#   --arch sm_XX     the GPU architecture of the device library (default sm_90)
# The CUDA compiler is the one scripts/find-nvcc.sh picks ($NVCC, nvcc on PATH, $CUDA_HOME/bin/nvcc, or
# the PyPI tools it installs). The prefix is relocatable: the pkg-config and CMake files find the
# libraries relative to themselves. Installing again over the same prefix replaces rshmem's files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "install: $*" >&2; exit 1; }
usage() { echo "usage: $0 [--no-device-lib] [--arch sm_90] PREFIX" >&2; exit 2; }
device_lib=1 arch=sm_90 prefix=
while [ $# -gt 0 ]; do
  case "$1" in
    --no-device-lib) device_lib=0 ;;
    --arch) [ $# -ge 2 ] || usage; arch=$2; shift ;;
    --arch=*) arch=${1#--arch=} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "install: unknown option $1" >&2; usage ;;
    *) [ -z "$prefix" ] || { echo "install: more than one PREFIX ($prefix, $1)" >&2; usage; }; prefix=$1 ;;
  esac
  shift
done
[ -n "$prefix" ] || usage
[[ "$arch" =~ ^sm_[0-9]+[a-z]?$ ]] || die "--arch $arch is not a GPU architecture such as sm_90"
mkdir -p "$prefix" || die "cannot create $prefix"
prefix=$(cd "$prefix" && pwd)

version=$(cd "$root" && cargo metadata --no-deps --format-version 1 |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="rshmem"))')

# ---- build
echo "install: building rshmem $version (cargo build --release)" >&2
(cd "$root" && cargo build --release -p rshmem -p rshmem-launcher -p rshmem-tests -p rshmem-examples) >&2 \
  || die "cargo build --release failed"
rel=$root/target/release
for f in librshmem.so librshmem.a rshmrun rshmem-test-pe rshmem-bench; do
  [ -f "$rel/$f" ] || die "the build left no $rel/$f"
done
work=$root/target/install
mkdir -p "$work"
ptx=$work/rshmem_device.ptx
"$root/scripts/build-ptx.sh" rshmem-device "$ptx" "$arch" >/dev/null || die "scripts/build-ptx.sh rshmem-device failed"
if [ "$device_lib" = 1 ]; then
  "$root/scripts/find-nvcc.sh" >/dev/null ||
    die "no CUDA compiler for the device library archive (scripts/find-nvcc.sh failed: set NVCC or CUDA_HOME); --no-device-lib installs without it"
  "$root/scripts/build-device-lib.sh" "$ptx" "$work" "$arch" >/dev/null || die "scripts/build-device-lib.sh failed"
fi

# ---- install
install -d "$prefix/bin" "$prefix/lib/rshmem" "$prefix/lib/pkgconfig" "$prefix/lib/cmake/rshmem" "$prefix/include/rshmem"
install -m 755 "$rel/rshmrun" "$rel/rshmem-test-pe" "$rel/rshmem-bench" "$prefix/bin/"
install -m 755 "$rel/librshmem.so" "$prefix/lib/"
install -m 644 "$rel/librshmem.a" "$prefix/lib/"
install -m 644 "$ptx" "$prefix/lib/rshmem/rshmem_device.ptx"
install -m 644 "$root"/device/include/*.h "$prefix/include/rshmem/"
rm -f "$prefix/lib/librshmem_device.a"
[ "$device_lib" = 0 ] || install -m 644 "$work/librshmem_device.a" "$prefix/lib/"

cat >"$prefix/lib/pkgconfig/rshmem.pc" <<PC
# rshmem $version, installed by scripts/install.sh. Host C/C++ programs:
#   cc \$(pkg-config --cflags rshmem) prog.c \$(pkg-config --libs rshmem) -Wl,-rpath,\$(pkg-config --variable=libdir rshmem)
# CUDA programs also link the device library archive (nvcc -rdc=true ... \$(pkg-config --variable=devicelib rshmem)).
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include/rshmem
devicelib=$([ "$device_lib" = 1 ] && echo '${libdir}/librshmem_device.a')
ptx=\${libdir}/rshmem/rshmem_device.ptx
arch=$arch

Name: rshmem
Description: PGAS runtime for NVIDIA GPUs with NVSHMEM's API (host library; the device library archive is the variable devicelib)
Version: $version
Libs: -L\${libdir} -lrshmem
Cflags: -I\${includedir}
PC

IFS=. read -r vmajor vminor _ <<<"$version"
cat >"$prefix/lib/cmake/rshmem/rshmemConfig.cmake" <<CMAKE
# rshmem $version, installed by scripts/install.sh. find_package(rshmem) defines:
#   rshmem::rshmem  the host library (librshmem.so) with the include directory of rshmem.h, nvshmem.h
#                   and nvshmemx.h; for host C/C++ and CUDA code alike
#   rshmem::device  the device library archive (librshmem_device.a, built for $arch) that CUDA code
#                   calling rshmem/NVSHMEM device functions links; it brings rshmem::rshmem. Give such
#                   targets CUDA_SEPARABLE_COMPILATION ON (nvcc -rdc=true), as with NVSHMEM.
#                   Absent from an install made with --no-device-lib: find_package(rshmem COMPONENTS
#                   device) then fails, saying so.
#   rshmem_DEVICE_PTX      the device library as PTX
#   rshmem_CUDA_ARCHITECTURE  the architecture the device library was built for ($arch)
# The prefix is found from this file's place, so it may be moved.
get_filename_component(_rshmem_prefix "\${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
set(rshmem_FOUND TRUE)
if(NOT EXISTS "\${_rshmem_prefix}/lib/librshmem.so" OR NOT EXISTS "\${_rshmem_prefix}/include/rshmem/nvshmem.h")
  set(rshmem_FOUND FALSE)
  set(rshmem_NOT_FOUND_MESSAGE "rshmem's files are missing under \${_rshmem_prefix} (lib/librshmem.so, include/rshmem/nvshmem.h): install it again with scripts/install.sh")
  return()
endif()
if(NOT TARGET rshmem::rshmem)
  add_library(rshmem::rshmem SHARED IMPORTED)
  set_target_properties(rshmem::rshmem PROPERTIES
    IMPORTED_LOCATION "\${_rshmem_prefix}/lib/librshmem.so"
    # librshmem.so has no SONAME: link it as -lrshmem, so that programs record librshmem.so, not this path.
    IMPORTED_NO_SONAME TRUE
    INTERFACE_INCLUDE_DIRECTORIES "\${_rshmem_prefix}/include/rshmem")
endif()
set(rshmem_rshmem_FOUND TRUE)
set(rshmem_device_FOUND FALSE)
if(EXISTS "\${_rshmem_prefix}/lib/librshmem_device.a")
  if(NOT TARGET rshmem::device)
    add_library(rshmem::device STATIC IMPORTED)
    set_target_properties(rshmem::device PROPERTIES
      IMPORTED_LOCATION "\${_rshmem_prefix}/lib/librshmem_device.a"
      IMPORTED_LINK_INTERFACE_LANGUAGES "CUDA"
      INTERFACE_LINK_LIBRARIES "rshmem::rshmem")
  endif()
  set(rshmem_device_FOUND TRUE)
endif()
set(rshmem_DEVICE_PTX "\${_rshmem_prefix}/lib/rshmem/rshmem_device.ptx")
set(rshmem_CUDA_ARCHITECTURE "$arch")
foreach(_rshmem_c IN LISTS rshmem_FIND_COMPONENTS)
  if(NOT rshmem_\${_rshmem_c}_FOUND AND rshmem_FIND_REQUIRED_\${_rshmem_c})
    set(rshmem_FOUND FALSE)
    if(_rshmem_c STREQUAL "device")
      set(rshmem_NOT_FOUND_MESSAGE "rshmem under \${_rshmem_prefix} has no device library (lib/librshmem_device.a): it was installed with --no-device-lib; run scripts/install.sh without it (it needs a CUDA compiler)")
    else()
      set(rshmem_NOT_FOUND_MESSAGE "rshmem has no component \${_rshmem_c} (its components: rshmem, device)")
    endif()
  endif()
endforeach()
unset(_rshmem_c)
unset(_rshmem_prefix)
CMAKE

cat >"$prefix/lib/cmake/rshmem/rshmemConfigVersion.cmake" <<CMAKE
# rshmem $version: a request for version X is met when X <= $version and, as for any 0.y release,
# X has the same major and minor version ($vmajor.$vminor); an exact request must match exactly.
set(PACKAGE_VERSION "$version")
set(PACKAGE_VERSION_COMPATIBLE FALSE)
set(PACKAGE_VERSION_EXACT FALSE)
if(PACKAGE_FIND_VERSION VERSION_LESS_EQUAL PACKAGE_VERSION)
  if("\${PACKAGE_FIND_VERSION_MAJOR}" STREQUAL "$vmajor" AND ("$vmajor" STREQUAL "0" AND "\${PACKAGE_FIND_VERSION_MINOR}" STREQUAL "$vminor" OR NOT "$vmajor" STREQUAL "0"))
    set(PACKAGE_VERSION_COMPATIBLE TRUE)
  endif()
endif()
if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)
  set(PACKAGE_VERSION_EXACT TRUE)
endif()
if(NOT CMAKE_SIZEOF_VOID_P STREQUAL "" AND NOT CMAKE_SIZEOF_VOID_P EQUAL 8)
  set(PACKAGE_VERSION "\${PACKAGE_VERSION} (64-bit)")
  set(PACKAGE_VERSION_UNSUITABLE TRUE)
endif()
CMAKE

echo "install: rshmem $version installed under $prefix" >&2
echo "install:   host library $prefix/lib/librshmem.so, headers $prefix/include/rshmem/, launcher $prefix/bin/rshmrun" >&2
if [ "$device_lib" = 1 ]; then
  echo "install:   device library $prefix/lib/librshmem_device.a ($arch)" >&2
else
  echo "install:   no device library archive (--no-device-lib): host programs only" >&2
fi
echo "install:   CMake: find_package(rshmem) with -DCMAKE_PREFIX_PATH=$prefix; pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig" >&2
