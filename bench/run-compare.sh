#!/usr/bin/env bash
# rshmem vs NVSHMEM with the same cases and parameters, on the GPU machine (device tool, with
# carry=["carry"] made by scripts/gpu.sh prepare: carry/rshmrun, carry/rshmem-bench, carry/librshmem.so).
#   1. builds bench/nvshmem/nvshmem_perf.cu with the image's nvcc against the image's NVSHMEM (the
#      nvidia.nvshmem Python package), as ../shared/anchor/run.sh does;
#   2. runs  carry/rshmrun -np $NP carry/rshmem-bench --grid G --threads T [ARGS]   (RSHMEM_SYMMETRIC_SIZE=2g);
#   3. runs nvshmem_perf with the same options, one process per PE through NVSHMEM's unique-id bootstrap
#      (NVSHMEM_SYMMETRIC_SIZE=2147483648), 300 s limit for each program;
#   4. bench/compare.py writes results.csv, comparison.md, put_bw.svg, get_bw.svg beside the two logs
#      rshmem.log and nvshmem.log in $OUT (default /tmp), and comparison.md is printed.
# Usage (from anywhere):
#   [NP=2] [GRID=132] [THREADS=512] [OUT=dir] bash bench/run-compare.sh [--quick] [--max-bytes N]
# ARGS after the script name go to both programs. NVSHMEM_DISABLE_NVLS=1 is exported for everything.
# Exit status: non-zero when the build, either program or compare.py failed.
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
c=$root/carry
out=${OUT:-/tmp}
NP=${NP:-2}
G=${GRID:-132}
T=${THREADS:-512}
args=(--grid "$G" --threads "$T" "$@")
export NVSHMEM_DISABLE_NVLS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/rshmem-compare.XXXXXX")
mkdir -p "$out"
: >"$out/rshmem.log"
: >"$out/nvshmem.log"
status=0
say() { echo "run-compare: $*"; }

# 1. Build the NVSHMEM program.
built=0
NV=$(python3 -c "import nvidia.nvshmem; print(list(nvidia.nvshmem.__path__)[0])" 2>"$work/nv.err")
if [ -z "$NV" ] || [ ! -d "$NV/include" ]; then
  say "NVSHMEM not found (python3 -c 'import nvidia.nvshmem'):"; cat "$work/nv.err"; status=1
elif ! command -v nvcc >/dev/null; then
  say "nvcc not on PATH"; status=1
else
  say "building bench/nvshmem/nvshmem_perf.cu against $NV"
  if nvcc -O2 -rdc=true -arch="${ARCH:-sm_90}" -I"$NV/include" bench/nvshmem/nvshmem_perf.cu -o "$work/nvshmem_perf" \
      -L"$NV/lib" -l:libnvshmem_host.so.3 -lnvshmem_device -lcuda >"$work/build.log" 2>&1; then
    built=1
  else
    say "build failed:"; cat "$work/build.log"; status=1
  fi
fi

# 2. rshmem.
if [ -x "$c/rshmrun" ] && [ -x "$c/rshmem-bench" ]; then
  say "rshmem: rshmrun -np $NP rshmem-bench ${args[*]}"
  LD_LIBRARY_PATH="$c:${LD_LIBRARY_PATH:-}" RSHMEM_BACKEND=${RSHMEM_BACKEND:-cuda} RSHMEM_SYMMETRIC_SIZE=2g \
    timeout -k 10 320 "$c/rshmrun" -np "$NP" --timeout 300 "$c/rshmem-bench" "${args[@]}" 2>&1 | tee "$out/rshmem.log"
  r_rc=${PIPESTATUS[0]}
  say "rshmem-bench exit status $r_rc"
  [ "$r_rc" -eq 0 ] || status=1
else
  say "carry/rshmrun or carry/rshmem-bench missing (run scripts/gpu.sh prepare and carry carry/)"; status=1
fi

# 3. NVSHMEM: one process per PE, unique id through a file, as the anchor does. When a PE fails the
# others are ended at once (they would otherwise wait in a barrier until the time limit).
if [ "$built" = 1 ]; then
  say "NVSHMEM: $NP x nvshmem_perf ${args[*]}"
  uid=$work/nvshmem_uid.bin
  rm -f "$uid" "$uid.tmp"
  for r in $(seq 0 $((NP - 1))); do
    LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}" NVSHMEM_SYMMETRIC_SIZE=2147483648 \
      PE_RANK=$r PE_SIZE=$NP UID_FILE=$uid timeout -k 10 300 "$work/nvshmem_perf" "${args[@]}" >"$work/pe$r.log" 2>&1 &
  done
  n_rc=0
  for _ in $(seq 1 "$NP"); do
    wait -n
    s=$?
    if [ "$s" -ne 0 ] && [ "$n_rc" -eq 0 ]; then
      n_rc=$s
      mapfile -t running < <(jobs -pr)
      if [ "${#running[@]}" -gt 0 ]; then
        say "an NVSHMEM PE exited with $s; ending the others"
        kill -TERM "${running[@]}" 2>/dev/null
      fi
    fi
  done
  for r in $(seq 0 $((NP - 1))); do sed "s/^/[pe $r] /" "$work/pe$r.log"; done >"$out/nvshmem.log"
  cat "$out/nvshmem.log"
  say "nvshmem_perf exit status $n_rc"
  [ "$n_rc" -eq 0 ] || status=1
fi

# 4. Compare.
gpu=$( (nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c |
        sed 's/^ *\([0-9]*\) \(.*\), \(.*\)/\1 x \2 (driver \3)/' | paste -sd ';') 2>/dev/null)
cuda=$(nvcc --version 2>/dev/null | tail -1)
machine="${gpu:-unknown GPUs}; ${cuda:-nvcc unknown}; $NP PEs${NV:+; NVSHMEM from $NV}"
command="NP=$NP GRID=$G THREADS=$T bash bench/run-compare.sh${*:+ $*}"
if python3 bench/compare.py "$out/rshmem.log" "$out/nvshmem.log" "$out" --machine "$machine" --command "$command"; then
  echo
  cat "$out/comparison.md"
else
  say "compare.py failed"; status=1
fi
rm -rf "$work"
say "logs and results in $out (exit status $status)"
exit $status
