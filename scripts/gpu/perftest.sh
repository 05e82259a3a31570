# scripts/gpu.sh perftest: in ONE device call, NVSHMEM's perftests (unchanged) run under rshmem and under the
# image's NVSHMEM 3.4.5, scored row by row, with the targets marked pass or miss. Both sets are compiled
# AND linked here, on the CPU machine, so the GPU machine only unpacks and runs them.
#
#   scripts/gpu.sh perftest prepare      here, after scripts/gpu.sh prepare (or: PERFTEST=1 scripts/gpu.sh extras)
#   scripts/gpu.sh perftest [run]        on the GPU machine, from the repository root, with carry/ present
#
# prepare: links every program of bench/perftest.sh twice (MODE=full): against carry/'s librshmem.so and
#   device library (the rshmem set: run path '$ORIGIN/../../../..' = carry/), and against NVSHMEM 3.4.5's
#   headers and libnvshmem_device.a from PyPI (nvidia-nvshmem-cu13, installed into .tools/nvshmem; the
#   NVSHMEM set finds the GPU machine's libnvshmem_host.so.3 through LD_LIBRARY_PATH, which
#   bench/perftest-run.sh sets to the image's nvidia.nvshmem lib/). Where no libcuda.so exists,
#   bench/perftest.sh links against a stub libcuda.so.1; the executables load the driver's there.
#   Objects are kept by content hash in target/perftest-pre/objcache (OBJCACHE), so a second prepare
#   compiles only what changed (the links always run: the device library changes with rshmem).
#   Output: carry/perftest-pre.tar.xz (the two sets, NVSHMEM's argument lines, BUILD.txt with the
#   commit and tools), additive to what scripts/gpu.sh prepare made (which it needs: carry/COMMIT, and
#   librshmem.so and rshmem_device.ptx, as files or in carry/pack.tar.xz).
#   Environment: NVSHMEM_SRC (a checkout of NVIDIA/nvshmem or its git repository; default carry/nvshmem-src
#   when it has perftest/), NVSHMEM_REF (default v3.4.5-0, for a git repository), NVSHMEM_HOME (default
#   .tools/nvshmem/nvidia/nvshmem, installed from PyPI when missing: NVSHMEM_PYPI, default
#   nvidia-nvshmem-cu13==3.4.5), JOBS (default: the number of CPUs), PROGS (as bench/perftest.sh).
#
# run: scripts/gpu.sh unpack, then carry/perftest-pre.tar.xz into carry/perftest-cmp/ (once per copy),
#   then `MODE=run bench/perftest.sh carry/perftest-cmp` (bench/perftest-run.sh: every program with each
#   line of its .args, rshmrun -np 2, the NVSHMEM set with --pmi, SHORT=1) and bench/perftest_score.py.
#   Output, in OUTDIR (PERFTEST_OUT, default $OUT/perftest, $OUT being what the device call brings back;
#   /tmp/perftest without OUT):
#     perftest.log            everything printed (the machine, each run's exit, the score)
#     perftest-score.md       the table: per-row scores summarised per program, perftest_min_geomean,
#                             perftest_worst_row, the Targets section and perftest_targets
#     perftest-score.csv      every scored row
#     perftest-logs.tar.gz    every run's log (logs/{rshmem,nvshmem}/<program>[.N].log, each with its command)
#   Environment: BUDGET (seconds for the whole script, default 540: the runs get what is left less a
#   margin; a run that cannot start in time is listed as skipped), PERFTEST_PROGS (only these programs,
#   paths under perftest/ without extension), SHORT (default 1), T (seconds per run, default 60),
#   PERFTEST_EXTRA (files or directories of `name: value` lines from other programs of the call, for the
#   targets the perftests do not measure: see bench/perftest_score.py), DRY_RUN=1 (unpack and check,
#   print the run's command, run nothing), KEEP_LOGS=1 (keep carry/perftest-cmp/logs from an earlier call).
# This file is the subcommand's body: run it through scripts/gpu.sh.
set -uo pipefail
[ "${GPU_SH_PART:-}" = perftest ] || { echo "scripts/gpu/perftest.sh: run it as scripts/gpu.sh perftest" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
c=$root/carry
action=${1:-run}
die() { echo "gpu.sh perftest: FAILED: $*" >&2; exit 1; }

# ---------------------------------------------------------------- prepare (CPU machine)
if [ "$action" = prepare ]; then
  set -e
  t0=$SECONDS
  [ -f "$c/COMMIT" ] || die "no carry/COMMIT: run scripts/gpu.sh prepare first"
  pre=$root/target/perftest-pre
  mkdir -p "$pre"
  # The NVSHMEM sources (only perftest/ is used).
  src=${NVSHMEM_SRC:-}
  if [ -z "$src" ] && [ -d "$c/nvshmem-src/perftest" ]; then src=$c/nvshmem-src; fi
  src_text=$src
  [ -n "$src" ] || die "set NVSHMEM_SRC to a checkout of NVIDIA/nvshmem or its git repository"
  if [ ! -d "$src/perftest" ]; then
    ref=${NVSHMEM_REF:-v3.4.5-0}
    rm -rf "$pre/nvshmem-src" && mkdir -p "$pre/nvshmem-src"
    git --git-dir="$src" archive "$ref" perftest | tar -x -C "$pre/nvshmem-src" ||
      die "NVSHMEM_SRC=$src is neither a checkout with perftest/ nor a git repository with $ref"
    src=$pre/nvshmem-src src_text="$src_text at $ref"
  fi
  # NVSHMEM's headers and device library, as the GPU machine's Python package has them.
  # NVSHMEM_HOME, else NVSHMEM's PyPI package in .tools/nvshmem (installed on first use).
  nv_home=${NVSHMEM_HOME:-}
  if [ -z "$nv_home" ]; then
    nv_home=$("$root/scripts/install-cuda-tools.sh" --nvshmem-home) || die "could not install NVSHMEM's PyPI package (scripts/install-cuda-tools.sh --nvshmem-home)"
  fi
  [ -f "$nv_home/include/nvshmem.h" ] || die "NVSHMEM_HOME=$nv_home has no include/nvshmem.h"
  nv_version=$(awk '/#define NVSHMEM_VENDOR_(MAJOR|MINOR|PATCH)_VERSION/ { v = v (v == "" ? "" : ".") $3 } END { print v }' \
    "$nv_home/include/non_abi/nvshmem_version.h" 2>/dev/null)
  # carry/'s host library and device-library PTX: the files the GPU machine runs with.
  lib=$pre/lib
  rm -rf "$lib" && mkdir -p "$lib"
  for f in librshmem.so rshmem_device.ptx; do
    if [ -f "$c/$f" ]; then cp "$c/$f" "$lib/"
    elif [ -f "$c/pack.tar.xz" ]; then tar -xJf "$c/pack.tar.xz" -C "$lib" "$f" 2>/dev/null || true
    fi
    [ -f "$lib/$f" ] || die "no $f in carry/ (nor in carry/pack.tar.xz): run scripts/gpu.sh prepare"
  done
  cmp=$pre/perftest-cmp
  rm -rf "$cmp"
  # shellcheck disable=SC2016 # run paths, expanded by the dynamic loader
  MODE=full WORK=$pre/work OBJCACHE=$pre/objcache JOBS=${JOBS:-$(nproc)} NVSHMEM_SRC=$src NVSHMEM_HOME=$nv_home \
    RSHMEM_LIBDIR=$lib PTX=$lib/rshmem_device.ptx RSHMEM_RPATH='$ORIGIN/../../../..' NVSHMEM_RPATH='$ORIGIN' \
    PROGS="${PROGS:-}" bash bench/perftest.sh "$cmp" >"$pre/perftest-build.log" 2>&1 ||
    { tail -30 "$pre/perftest-build.log" >&2; die "bench/perftest.sh MODE=full (log: $pre/perftest-build.log)"; }
  tail -4 "$pre/perftest-build.log" >&2
  n_r=$(find "$cmp/rshmem" -type f -perm -u+x | wc -l)
  n_n=$(find "$cmp/nvshmem" -type f -perm -u+x 2>/dev/null | wc -l)
  [ "$n_n" -gt 0 ] || die "no NVSHMEM executables in $cmp/nvshmem"
  # Host symbols are not needed to run (the device code is in .nv_fatbin, which strip keeps).
  find "$cmp/rshmem" "$cmp/nvshmem" -type f -perm -u+x -exec strip {} +
  {
    echo "commit: $(cat "$c/COMMIT")"
    echo "ptx_sha1: $(sha1sum <"$lib/rshmem_device.ptx" | cut -c1-40)"
    echo "librshmem_sha1: $(sha1sum <"$lib/librshmem.so" | cut -c1-40)"
    echo "nvshmem: ${nv_version:-unknown} ($nv_home)"
    echo "nvshmem_src: $src_text"
    echo "nvcc: $("$root/scripts/find-nvcc.sh" | xargs -I{} sh -c '{} --version' | tail -1)"
    echo "programs: $n_r rshmem, $n_n NVSHMEM"
    echo "built: $(date -u +%FT%TZ) on $(hostname)"
  } >"$cmp/BUILD.txt"
  cp "$pre/perftest-build.log" "$cmp/"
  t1=$SECONDS
  rm -f "$c/perftest-pre.tar.xz"
  # One xz stream with a dictionary larger than the set: the executables share most of their device
  # code (rshmem's whole device library, or NVSHMEM's), so each copy after the first packs to almost
  # nothing (about 12 MiB for 340 MiB in 20 s at preset 1, where -6 -T0 makes 45 MiB and preset 6 with
  # this dictionary saves 0.5 MiB in 75 s); unpacking takes about a second and 256 MiB of memory.
  XZ_OPT=${XZ_OPT:---lzma2=preset=1,dict=256MiB -T1} tar -cJf "$c/perftest-pre.tar.xz" -C "$pre" perftest-cmp
  echo "gpu.sh perftest: prepared $n_r rshmem and $n_n NVSHMEM programs in $((t1 - t0)) s, packed in $((SECONDS - t1)) s:" \
    "carry/perftest-pre.tar.xz $(du -h "$c/perftest-pre.tar.xz" | cut -f1) ($(du -sh "$cmp" | cut -f1) unpacked);" \
    "carry/ $(du -sh "$c" | cut -f1), carry-before/ $(du -sh "$root/carry-before" 2>/dev/null | cut -f1 || echo none)" >&2
  exit 0
fi
[ "$action" = run ] || die "usage: scripts/gpu.sh perftest [prepare|run]"

# ---------------------------------------------------------------- run (GPU machine)
BUDGET=${BUDGET:-540}
dest=${PERFTEST_OUT:-${OUT:-/tmp}/perftest}
mkdir -p "$dest" || die "cannot make $dest"
dest=$(cd "$dest" && pwd)
exec > >(tee "$dest/perftest.log") 2>&1
tee_pid=$!
step() { echo; echo "=== $* ($SECONDS s) ==="; }
finish() {
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null || true
  exit "$1"
}
step "machine"
nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
echo "carry built from commit $(cat "$c/COMMIT" 2>/dev/null || echo unknown)"
bash scripts/gpu.sh unpack carry || { echo "gpu.sh perftest: scripts/gpu.sh unpack failed"; finish 1; }
cmp=$c/perftest-cmp
pack=$c/perftest-pre.tar.xz
if [ -f "$pack" ] && { [ ! -f "$cmp/.unpacked" ] || [ "$pack" -nt "$cmp/.unpacked" ]; }; then
  step "unpacking carry/perftest-pre.tar.xz"
  rm -rf "$cmp"
  if ! tar -xJf "$pack" -C "$c" 2>/dev/null; then
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$pack" "$c" ||
      { echo "gpu.sh perftest: cannot unpack $pack"; finish 1; }
  fi
  touch "$cmp/.unpacked"
fi
if [ ! -d "$cmp/rshmem" ]; then
  echo "gpu.sh perftest: no carry/perftest-cmp (carry/perftest-pre.tar.xz): run 'scripts/gpu.sh perftest prepare' on the CPU machine"
  finish 1
fi
cat "$cmp/BUILD.txt" 2>/dev/null
# The rshmem set holds the device library it was linked with: say so when carry/ has another one.
built=$(sed -n 's/^commit: //p' "$cmp/BUILD.txt" 2>/dev/null)
built_ptx=$(sed -n 's/^ptx_sha1: //p' "$cmp/BUILD.txt" 2>/dev/null)
carry_ptx=$(sha1sum <"$c/rshmem_device.ptx" 2>/dev/null | cut -c1-40)
if [ "$built" != "$(cat "$c/COMMIT" 2>/dev/null)" ] || [ "$built_ptx" != "$carry_ptx" ]; then
  echo "WARNING: the perftests were linked for commit '$built' (device PTX $built_ptx), carry/ is" \
    "'$(cat "$c/COMMIT" 2>/dev/null)' (PTX $carry_ptx): the rshmem set's device code is the former's (scripts/gpu.sh perftest prepare again)"
else
  echo "the rshmem set was linked with carry/'s device library (PTX $carry_ptx) and runs with carry/librshmem.so"
fi
nv_home=${NVSHMEM_HOME:-$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])" 2>/dev/null || true)}
if [ -z "$nv_home" ] || [ ! -d "$nv_home/lib" ]; then
  echo "WARNING: no NVSHMEM install here (nvidia.nvshmem Python package or NVSHMEM_HOME): the NVSHMEM set cannot run"
else
  echo "NVSHMEM here: $nv_home ($(cd "$nv_home/lib" && ls libnvshmem_host.so* 2>/dev/null | paste -sd ' '))"
fi
export NVSHMEM_HOME=$nv_home
export LD_LIBRARY_PATH=$c:${LD_LIBRARY_PATH:-} RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda}
# NVLink multicast stays off everywhere (KINDS.md).
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
[ "${KEEP_LOGS:-0}" = 1 ] || rm -rf "$cmp/logs" "$cmp/perftest-score.md" "$cmp/perftest-score.csv"
left=$((BUDGET - SECONDS))
run_budget=$((left - 30))
step "both sets run and scored: MODE=run bench/perftest.sh carry/perftest-cmp (BUDGET ${run_budget} s of ${left} s left)"
cmd=(env MODE=run RSHMRUN="$c/rshmrun" RSHMEM_LIBDIR="$c" SHORT="${SHORT:-1}" T="${T:-60}" BUDGET="$run_budget"
  PROGS="${PERFTEST_PROGS:-}" bash bench/perftest.sh "$cmp")
echo "\$ ${cmd[*]}"
rc=0
if [ "${DRY_RUN:-0}" = 1 ]; then
  echo "(dry run: not run)"
else
  t0=$SECONDS
  timeout -k 10 $((left - 10)) "${cmd[@]}"
  rc=$?
  echo "exit: $rc ($((SECONDS - t0)) s)"
  cp "$cmp/perftest-score.md" "$cmp/perftest-score.csv" "$dest/" 2>/dev/null
  tar czf "$dest/perftest-logs.tar.gz" -C "$cmp" logs 2>/dev/null
fi
step "done: $(find "$dest" -maxdepth 1 -type f -printf '%f ')"
finish "$rc"
