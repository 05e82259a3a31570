#!/usr/bin/env bash
# NVSHMEM's own perftests, compiled UNCHANGED against rshmem's headers and device-linked against rshmem's
# device library (no GPU needed):
#   NVSHMEM_SRC=<checkout of NVIDIA/nvshmem> bench/perftest.sh [OUTDIR]
# and on a machine with the CUDA runtime (the GPU machine), also linked into executables:
#   MODE=full NVSHMEM_SRC=... [NVSHMEM_HOME=<NVSHMEM install>] bench/perftest.sh OUTDIR
# and then, on the GPU machine, runs both sets and scores every row against NVSHMEM:
#   MODE=run bench/perftest.sh OUTDIR        (bench/perftest-run.sh: under rshmrun, NVSHMEM's set with --pmi)
#
# Programs: every .cu/.cpp of perftest/device/pt-to-pt, perftest/device/coll, perftest/host/pt-to-pt,
# perftest/host/coll and perftest/host/init, each with perftest/common/utils.cu (NVSHMEM's
# nvshmem_perftest_helper), as NVSHMEM's CMake builds them: C++17, -I perftest/common, without MPI or
# SHMEM support (NVSHMEMTEST_MPI_SUPPORT / NVSHMEMTEST_SHMEM_SUPPORT undefined), launched by NVSHMEM's
# default bootstrap (here: rshmrun). nvml.h: the CUDA toolkit's, else PyPI's nvidia-nvml-dev in .tools/nvml
# (scripts/install-cuda-tools.sh installs it).
#
# For each program (D = the work directory, target/perftest unless OUTDIR is given in check mode):
#   nvcc -rdc=true -arch=sm_90 -std=c++17 -O2 -I device/include -I <nvml> -I perftest/common -c PROG -o D/PROG.o
#   nvcc -arch=sm_90 -dlink D/PROG.o D/utils.o D/librshmem_device.a -o D/PROG_dlink.o
# MODE=full also links
#   OUTDIR/rshmem/<dir>/PROG    nvcc -rdc=true -arch=sm_90 D/PROG.o D/utils.o D/librshmem_device.a -lrshmem ...
#   OUTDIR/nvshmem/<dir>/PROG   the same sources compiled against NVSHMEM_HOME/include and linked with
#                               libnvshmem_host + libnvshmem_device (NVSHMEM_HOME default: the nvidia.nvshmem
#                               Python package, as bench/run-compare.sh uses; skipped when there is none)
# and runs nothing: run them with `rshmrun -np 2 OUTDIR/rshmem/device/pt-to-pt/shmem_put_bw` (rshmem) and
# one process per PE through NVSHMEM's launcher for the other set.
#
# Prints a table (program, compiled, device-linked[, linked, NVSHMEM compiled, NVSHMEM linked]), also
# written to D/perftest-table.md (and OUTDIR/perftest-table.md in full mode). Exit status: non-zero when a
# program that NVSHMEM itself builds fails against rshmem. Programs that NVSHMEM's own build leaves out
# because they do not compile against any NVSHMEM either are listed, with why, and not counted.
# Environment: NVSHMEM_SRC (required), MODE=check|full, ARCH (sm_90), NVCC, NVML_INCLUDE, JOBS (parallel
# compiles and links, default: the number of CPUs), WORK (the work directory D), OBJCACHE (a directory of
# objects by the hash of all a compile reads, so a later run compiles only what changed), PTX
# (device-library PTX; default: built with scripts/build-ptx.sh), RSHMEM_LIBDIR (librshmem.so for
# MODE=full: default OUTDIR when it has one, else target/release), PROGS (only these programs, e.g.
# "device/pt-to-pt/shmem_put_bw device/coll/barrier_latency": the path under perftest/ without the
# extension; default every program of the groups below), RSHMEM_RPATH (MODE=full: the run path written
# into the rshmem executables; default RSHMEM_LIBDIR; '$ORIGIN/../..'-style values make a relocatable
# set, e.g. for carry/), NVSHMEM_RPATH (the same for the NVSHMEM set; default NVSHMEM_HOME/lib; MODE=run
# puts the NVSHMEM install's lib/ on LD_LIBRARY_PATH). Where no libcuda.so exists (a CPU machine with the
# PyPI toolkit) MODE=full links against a stub libcuda.so.1 made from the driver calls the objects make;
# the executables then load the driver's at run time, on the GPU machine. `scripts/gpu.sh perftest
# prepare` builds both sets this way on the CPU machine for one device call.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mode=${MODE:-check}
arch=${ARCH:-sm_90}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
die() { echo "perftest: FAILED: $*" >&2; exit 1; }
log() { echo "perftest: $*" >&2; }
case "$mode" in
  check | full) ;;
  # Runs what MODE=full made, under both libraries, and scores it (bench/perftest-run.sh).
  run) exec bash "$root/bench/perftest-run.sh" "$@" ;;
  *) die "MODE must be check, full or run, not '$mode'" ;;
esac
[ -n "${NVSHMEM_SRC:-}" ] || die "set NVSHMEM_SRC to a checkout of NVIDIA/nvshmem (its perftest/ is compiled unchanged)"
src=$(cd "$NVSHMEM_SRC" 2>/dev/null && pwd) || die "NVSHMEM_SRC '$NVSHMEM_SRC' is not a directory"
pt=$src/perftest
[ -f "$pt/common/utils.cu" ] || die "$pt/common/utils.cu not found: NVSHMEM_SRC must be the root of an NVSHMEM checkout"
if [ "$mode" = full ] && [ $# -lt 1 ]; then die "usage: MODE=full NVSHMEM_SRC=... $0 OUTDIR"; fi
outdir=${1:-}
if [ -n "$outdir" ]; then mkdir -p "$outdir" && outdir=$(cd "$outdir" && pwd); fi
if [ -n "${WORK:-}" ]; then work=$WORK
elif [ "$mode" = check ] && [ -n "$outdir" ]; then work=$outdir; else work=$root/target/perftest; fi
mkdir -p "$work"

# ---------------------------------------------------------------- tools and the device library
nvcc=$("$root/scripts/find-nvcc.sh") || die "no usable nvcc"
export NVCC=$nvcc
cuda_bin=$(dirname "$nvcc")
# nvml.h: NVML_INCLUDE, else the toolkit's next to nvcc (full CUDA installs have it), else .tools/nvml
# (scripts/install-cuda-tools.sh installs nvidia-nvml-dev there; carry it to machines without PyPI).
nvml_inc=${NVML_INCLUDE:-}
if [ -z "$nvml_inc" ] && [ -f "$cuda_bin/../include/nvml.h" ]; then nvml_inc=$(cd "$cuda_bin/../include" && pwd); fi
if [ -z "$nvml_inc" ]; then
  h=$(find "$root/.tools/nvml/" -name nvml.h -path '*include*' 2>/dev/null | head -1)
  if [ -n "$h" ]; then nvml_inc=$(dirname "$h"); fi
fi
if [ -z "$nvml_inc" ]; then
  nvml_inc=$("$root/scripts/install-cuda-tools.sh" --nvml-include) ||
    die "no nvml.h (set NVML_INCLUDE, or let scripts/install-cuda-tools.sh install nvidia-nvml-dev)"
fi
[ -f "$nvml_inc/nvml.h" ] || die "no nvml.h in '$nvml_inc'"
log "mode $mode, arch $arch, $jobs jobs, nvcc $nvcc ($("$nvcc" --version | tail -1)), NVSHMEM sources $src"
ptx=${PTX:-}
if [ -z "$ptx" ]; then
  ptx=$work/rshmem_device.ptx
  "$root/scripts/build-ptx.sh" rshmem-device "$ptx" "$arch" >/dev/null 2>"$work/build-ptx.log" ||
    { cat "$work/build-ptx.log" >&2; die "scripts/build-ptx.sh rshmem-device"; }
fi
"$root/scripts/build-device-lib.sh" "$ptx" "$work" "$arch" >/dev/null 2>"$work/build-device-lib.log" ||
  { cat "$work/build-device-lib.log" >&2; die "scripts/build-device-lib.sh"; }
devlib=$work/librshmem_device.a

# ---------------------------------------------------------------- full mode: what to link with
link_extra=()
need_stub=0
nv_home=""
if [ "$mode" = full ]; then
  libdir=${RSHMEM_LIBDIR:-}
  if [ -z "$libdir" ]; then
    if [ -f "$outdir/librshmem.so" ]; then libdir=$outdir; else libdir=$root/target/release; fi
  fi
  [ -f "$libdir/librshmem.so" ] || die "no librshmem.so in '$libdir' (cargo build --release -p rshmem, or set RSHMEM_LIBDIR)"
  libdir=$(cd "$libdir" && pwd)
  # libcuda: the driver's, else the toolkit's stub; the PyPI toolkit keeps libcudart_static.a in lib/.
  if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\b'; then
    link_extra+=(-lcuda)
  elif [ -e "$cuda_bin/../lib64/stubs/libcuda.so" ]; then
    link_extra+=(-L "$cuda_bin/../lib64/stubs" -lcuda)
  elif [ -e "$cuda_bin/../lib/stubs/libcuda.so" ]; then
    link_extra+=(-L "$cuda_bin/../lib/stubs" -lcuda)
  else
    # No driver here (a CPU machine with the PyPI toolkit, which ships no stubs): link against a stub
    # libcuda.so.1 made below from the driver calls the objects make, as the toolkit's own stubs are
    # used; at run time the executables load the driver's libcuda.so.1.
    need_stub=1
    log "no libcuda.so here: linking against a stub libcuda.so.1 (the driver's is loaded at run time)"
  fi
  if [ ! -e "$cuda_bin/../lib64/libcudart_static.a" ] && [ -e "$cuda_bin/../lib/libcudart_static.a" ]; then
    link_extra+=(-L "$(cd "$cuda_bin/../lib" && pwd)")
  fi
  link_extra+=(-ldl)
  nv_home=${NVSHMEM_HOME:-}
  if [ -z "$nv_home" ]; then
    nv_home=$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])" 2>/dev/null || true)
  fi
  if [ -n "$nv_home" ] && [ -f "$nv_home/include/nvshmem.h" ]; then
    nv_home=$(cd "$nv_home" && pwd)
    nv_host=$(cd "$nv_home/lib" && ls libnvshmem_host.so libnvshmem_host.so.* 2>/dev/null | head -1)
    [ -n "$nv_host" ] && [ -f "$nv_home/lib/libnvshmem_device.a" ] ||
      die "NVSHMEM_HOME '$nv_home' has no lib/libnvshmem_host.so* or lib/libnvshmem_device.a"
    log "NVSHMEM install for the comparison set: $nv_home ($nv_host)"
  else
    log "no NVSHMEM install (NVSHMEM_HOME unset and no nvidia.nvshmem Python package): only the rshmem set is linked"
    nv_home=""
  fi
fi

# ---------------------------------------------------------------- the programs
groups=(device/pt-to-pt device/coll host/pt-to-pt host/coll host/init)
progs=()
for g in "${groups[@]}"; do
  [ -d "$pt/$g" ] || die "$pt/$g missing"
  for f in "$pt/$g"/*.cu "$pt/$g"/*.cpp; do [ -f "$f" ] && progs+=("$g/$(basename "$f")"); done
done
if [ -n "${PROGS:-}" ]; then
  picked=()
  for want in $PROGS; do
    found=""
    for p in "${progs[@]}"; do [ "${p%.*}" = "$want" ] && found=$p; done
    [ -n "$found" ] || die "PROGS: no program $want in ${groups[*]} (name it as device/pt-to-pt/shmem_put_bw)"
    picked+=("$found")
  done
  progs=("${picked[@]}")
fi
# Sources NVSHMEM's own CMake does not build, and why (they compile against no NVSHMEM either).
declare -A upstream_broken=(
  [device/coll/redmaxloc_latency.cu]="not built by NVSHMEM's CMakeLists: uses MAX_ELEMS, defined nowhere, and calls its rdxn_calling_kernel with arguments that do not match its definition"
)

cflags=(-rdc=true -arch="$arch" -std=c++17 -O2)
set_inc() { if [ "$1" = rshmem ]; then echo "$root/device/include"; else echo "$nv_home/include"; fi; }
# OBJCACHE: a directory of objects by the hash of everything a compile reads (nvcc's version, the
# flags, the set's include tree, nvml.h, perftest/common, the source and the headers beside it), so
# a later run compiles only what changed (`scripts/gpu.sh perftest prepare` keeps one in target/).
set_key() { # set_key SET: the hash of what every compile of SET reads
  {
    "$nvcc" --version
    echo "${cflags[*]} $1"
    (cd "$(set_inc "$1")" && find . -type f | LC_ALL=C sort | xargs sha1sum)
    sha1sum <"$nvml_inc/nvml.h"
    (cd "$pt/common" && find . -type f | LC_ALL=C sort | xargs sha1sum)
  } | sha1sum | cut -c1-40
}
declare -A set_keys=()
if [ -n "${OBJCACHE:-}" ]; then
  mkdir -p "$OBJCACHE" || die "OBJCACHE '$OBJCACHE': cannot make it"
  set_keys[rshmem]=$(set_key rshmem)
  [ -n "$nv_home" ] && set_keys[nvshmem]=$(set_key nvshmem)
fi
# compile SET SOURCE OBJECT: SET rshmem or nvshmem (the headers it is compiled against).
compile() {
  local inc key=""
  inc=$(set_inc "$1")
  mkdir -p "$(dirname "$3")"
  local t0=$SECONDS
  if [ -n "${OBJCACHE:-}" ]; then
    key=$( { echo "${set_keys[$1]}"; sha1sum <"$2"; cat "$(dirname "$2")"/*.h 2>/dev/null | sha1sum; } | sha1sum | cut -c1-40)
    if [ -f "$OBJCACHE/$key.o" ] && cp "$OBJCACHE/$key.o" "$3"; then
      echo "from OBJCACHE $OBJCACHE/$key.o" >"$3.log"
      echo cached >"$3.sec"
      return 0
    fi
  fi
  "$nvcc" "${cflags[@]}" -I "$inc" -I "$nvml_inc" -I "$pt/common" -c "$2" -o "$3" >"$3.log" 2>&1 || return 1
  echo $((SECONDS - t0)) >"$3.sec"
  if [ -n "$key" ]; then cp "$3" "$OBJCACHE/$key.o.tmp$$" && mv "$OBJCACHE/$key.o.tmp$$" "$OBJCACHE/$key.o"; fi
  return 0
}
# Runs compile jobs from stdin ("SET SOURCE OBJECT" lines), $jobs at a time; each leaves OBJECT.ok or not.
compile_all() {
  local n=0 set s o
  while read -r set s o; do
    (compile "$set" "$s" "$o" && touch "$o.ok") &
    n=$((n + 1))
    if [ "$n" -ge "$jobs" ]; then wait -n; n=$((n - 1)); fi
  done
  wait
}

rm -rf "$work/rshmem" "$work/nvshmem"
{
  echo "rshmem $pt/common/utils.cu $work/rshmem/common/utils.o"
  for p in "${progs[@]}"; do echo "rshmem $pt/$p $work/rshmem/${p%.*}.o"; done
  if [ -n "$nv_home" ]; then
    echo "nvshmem $pt/common/utils.cu $work/nvshmem/common/utils.o"
    for p in "${progs[@]}"; do echo "nvshmem $pt/$p $work/nvshmem/${p%.*}.o"; done
  fi
} | compile_all

if [ "$need_stub" = 1 ]; then
  stub=$work/cuda-stub
  mkdir -p "$stub"
  find "$work/rshmem" "$work/nvshmem" -name '*.o' -exec nm -u {} + 2>/dev/null | awk '$1 == "U" && $2 ~ /^cu[A-Z]/ { print $2 }' | sort -u |
    sed 's/.*/void &(void) {}/' >"$stub/stub.c"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$stub/libcuda.so" "$stub/stub.c" ||
    die "cannot build the stub libcuda.so (cc) in $stub"
  link_extra=(-L "$stub" -lcuda "${link_extra[@]}")
fi

# link_one PROG: the links of one program (run $jobs at a time), each leaving a .ok file:
#   check mode: the device link (rshmem set) -> PROG.dlink.ok
#   full mode:  the rshmem executable -> PROG.link.ok (a device link included; the separate device link
#               runs only when it fails, to tell which step did), and the NVSHMEM one -> nvshmem/PROG.link.ok
link_one() {
  local p=$1 o no exe nexe
  o=$work/rshmem/${p%.*}.o no=$work/nvshmem/${p%.*}.o
  exe=$outdir/rshmem/${p%.*} nexe=$outdir/nvshmem/${p%.*}
  [ "$mode" = full ] && rm -f "$exe" "$nexe"
  dlink() {
    "$nvcc" -arch="$arch" -dlink "$o" "$work/rshmem/common/utils.o" "$devlib" -o "${o%.o}_dlink.o" >"${o%.o}.dlink.log" 2>&1 &&
      touch "${o%.o}.dlink.ok"
  }
  if [ "$mode" != full ]; then
    [ -f "$o.ok" ] && [ "$utils_ok" = 1 ] && dlink
    return 0
  fi
  if [ -f "$o.ok" ] && [ "$utils_ok" = 1 ]; then
    if "$nvcc" -rdc=true -arch="$arch" "$o" "$work/rshmem/common/utils.o" "$devlib" -L "$libdir" -lrshmem \
      "${link_extra[@]}" -Xlinker -rpath -Xlinker "${RSHMEM_RPATH:-$libdir}" -o "$exe" >"${o%.o}.link.log" 2>&1; then
      touch "${o%.o}.link.ok" "${o%.o}.dlink.ok"
    else
      dlink
    fi
  fi
  if [ -n "$nv_home" ] && [ -f "$no.ok" ] && [ "$nv_utils_ok" = 1 ] && "$nvcc" -rdc=true -arch="$arch" "$no" \
    "$work/nvshmem/common/utils.o" -L "$nv_home/lib" -l:"$nv_host" -lnvshmem_device "${link_extra[@]}" \
    -Xlinker -rpath -Xlinker "${NVSHMEM_RPATH:-$nv_home/lib}" -o "$nexe" >"${no%.o}.link.log" 2>&1; then
    touch "${no%.o}.link.ok"
  fi
  return 0
}

first_error() { grep -m1 -E 'error|undefined|Undefined' "$1" 2>/dev/null | sed "s|$pt/||" | cut -c1-160; }

yes_no() { if [ "$1" = 1 ]; then echo yes; else echo no; fi; }
utils_ok=0 nv_utils_ok=0
[ -f "$work/rshmem/common/utils.o.ok" ] && utils_ok=1
[ -n "$nv_home" ] && [ -f "$work/nvshmem/common/utils.o.ok" ] && nv_utils_ok=1
fails=0 rows=() notes=()
# The links, $jobs at a time (the directories and NVSHMEM's argument lines first).
link_t0=$SECONDS
n=0
for p in "${progs[@]}"; do
  if [ "$mode" = full ]; then
    mkdir -p "$(dirname "$outdir/rshmem/${p%.*}")"
    [ -n "$nv_home" ] && mkdir -p "$(dirname "$outdir/nvshmem/${p%.*}")"
    # NVSHMEM's own argument lines travel with the executables (MODE=run uses them).
    if [ -f "$pt/${p%.*}.args" ]; then
      mkdir -p "$(dirname "$outdir/args/${p%.*}")" && cp "$pt/${p%.*}.args" "$outdir/args/${p%.*}.args"
    fi
  fi
  link_one "$p" &
  n=$((n + 1))
  if [ "$n" -ge "$jobs" ]; then wait -n; n=$((n - 1)); fi
done
wait
log "links: $((SECONDS - link_t0)) s ($jobs at a time)"
if [ "$utils_ok" != 1 ]; then
  fails=$((fails + 1))
  notes+=("common/utils.cu: $(first_error "$work/rshmem/common/utils.o.log")")
fi
row="| common/utils.cu (helper) | $(yes_no $utils_ok) | - |"
if [ "$mode" = full ]; then
  row+=" - |"
  [ -n "$nv_home" ] && row+=" $(yes_no $nv_utils_ok) | - |"
fi
rows+=("$row")
n_ok=0
for p in "${progs[@]}"; do
  o=$work/rshmem/${p%.*}.o
  c=0 d=0 l="-" nc="-" nl="-"
  [ -f "$o.ok" ] && c=1
  [ -f "${o%.o}.dlink.ok" ] && d=1
  if [ "$mode" = full ]; then
    l=no
    [ -f "${o%.o}.link.ok" ] && l=yes
    if [ -n "$nv_home" ]; then
      no=$work/nvshmem/${p%.*}.o
      nc=$(yes_no "$([ -f "$no.ok" ] && echo 1)")
      nl=no
      [ -f "${no%.o}.link.ok" ] && nl=yes
    fi
  fi
  why=""
  if [ "$c" != 1 ]; then why=$(first_error "$o.log")
  elif [ "$d" != 1 ] && [ "$utils_ok" = 1 ]; then why=$(first_error "${o%.o}.dlink.log")
  elif [ "$l" = no ]; then why=$(first_error "${o%.o}.link.log")
  fi
  ok=$([ "$c" = 1 ] && [ "$d" = 1 ] && [ "$l" != no ] && echo 1)
  if [ -n "${upstream_broken[$p]:-}" ]; then
    notes+=("$p: does not compile against NVSHMEM either: ${upstream_broken[$p]} (here: $why)")
  elif [ "$ok" = 1 ]; then
    n_ok=$((n_ok + 1))
  else
    fails=$((fails + 1))
    notes+=("$p: ${why:-see $o.log}")
  fi
  if [ "$nc" = no ] && [ -z "${upstream_broken[$p]:-}" ]; then
    notes+=("$p (NVSHMEM set, for comparison only): $(first_error "$work/nvshmem/${p%.*}.o.log")")
  elif [ "$nl" = no ] && [ -z "${upstream_broken[$p]:-}" ]; then
    notes+=("$p (NVSHMEM set, for comparison only): $(first_error "$work/nvshmem/${p%.*}.link.log")")
  fi
  row="| $p | $(yes_no $c) | $(yes_no $d) |"
  if [ "$mode" = full ]; then
    row+=" $l |"
    [ -n "$nv_home" ] && row+=" $nc | $nl |"
  fi
  rows+=("$row")
done

# ---------------------------------------------------------------- the table
{
  echo "NVSHMEM perftests ($(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo "$src"), unchanged) against rshmem's headers, $arch, $("$nvcc" --version | tail -1 | sed 's/^Build //')"
  echo
  if [ "$mode" = full ] && [ -n "$nv_home" ]; then
    echo "| program | compiled | device-linked | linked (librshmem.so) | NVSHMEM: compiled | NVSHMEM: linked |"
    echo "| --- | --- | --- | --- | --- | --- |"
  elif [ "$mode" = full ]; then
    echo "| program | compiled | device-linked | linked (librshmem.so) |"
    echo "| --- | --- | --- | --- |"
  else
    echo "| program | compiled | device-linked |"
    echo "| --- | --- | --- |"
  fi
  printf '%s\n' "${rows[@]}"
  echo
  n_broken=0
  for p in "${progs[@]}"; do [ -n "${upstream_broken[$p]:-}" ] && n_broken=$((n_broken + 1)); done
  echo "$n_ok of $((${#progs[@]} - n_broken)) programs NVSHMEM builds: compiled and device-linked$([ "$mode" = full ] && echo " and linked")."
  for n in "${notes[@]}"; do echo "- $n"; done
} >"$work/perftest-table.md"
[ "$mode" = full ] && cp "$work/perftest-table.md" "$outdir/perftest-table.md"
cat "$work/perftest-table.md"
echo
echo "perftest: $n_ok passed, $fails failed"
[ "$fails" -eq 0 ]
