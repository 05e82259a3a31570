#!/usr/bin/env bash
# Runs NVSHMEM's perftests under both libraries in one go and scores them (issue 20), on the GPU
# machine, from the repository root:
#   bench/perftest-run.sh OUTDIR          (or: MODE=run bench/perftest.sh OUTDIR)
# OUTDIR is what `MODE=full bench/perftest.sh OUTDIR` made: OUTDIR/rshmem/<group>/<prog> (linked against
# rshmem), OUTDIR/nvshmem/<group>/<prog> (the same sources against NVSHMEM) and OUTDIR/args/<group>/
# <prog>.args (NVSHMEM's own argument lines). Every program that exists in both sets runs with each
# line of its .args, 2 PEs, one per GPU:
#   rshmem:  rshmrun -np 2 --timeout T PROG ARGS
#   NVSHMEM: rshmrun --pmi -np 2 --timeout T PROG ARGS     (NVSHMEM's default bootstrap is PMI-1)
# both with NVSHMEM_MACHINE_READABLE_OUTPUT=1 and NVSHMEM_DISABLE_NVLS=1, the rshmem run first, then the
# NVSHMEM one, program by program (so both see the same machine state). Logs: OUTDIR/logs/{rshmem,
# nvshmem}/<prog>[.<line>].log, each starting with its command; then
#   python3 bench/perftest_score.py OUTDIR/logs --out OUTDIR/perftest-score.md --csv OUTDIR/perftest-score.csv
# prints the table, `perftest_min_geomean:`, `perftest_worst_row:` and the issue's targets marked pass or
# miss (`perftest_targets:`; PERFTEST_EXTRA names files of `name: value` lines for the targets that other
# programs of the same call measure). `scripts/gpu.sh perftest` runs this on the GPU machine in one call.
# Environment: RSHMRUN (default carry/rshmrun, else target/release/rshmrun), NVSHMEM_HOME (default: the
# nvidia.nvshmem Python package; its lib/ goes on LD_LIBRARY_PATH for the NVSHMEM set), NP (2), T
# (seconds per run, default 60), BUDGET (seconds for all runs, default 540: a run that cannot start in
# time is listed as skipped), PROGS (only these, e.g. "device/coll/reduction_on_stream"), SHORT=1 (caps
# -n at 20 and -w at 5 in every argument line, to fit one device call), RSHMEM_LIBDIR (put on
# LD_LIBRARY_PATH for the rshmem set, default the directory of RSHMRUN), LIBS (which sets run, default
# "rshmem nvshmem"; e.g. LIBS=rshmem to rerun the rshmem set under other settings, scoring it against
# NVSHMEM logs already in OUTDIR/logs/nvshmem).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "perftest-run: FAILED: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: $0 OUTDIR (made by MODE=full bench/perftest.sh OUTDIR)"
out=$(cd "$1" 2>/dev/null && pwd) || die "OUTDIR '$1' is not a directory"
[ -d "$out/rshmem" ] || die "$out/rshmem not found: run MODE=full bench/perftest.sh $1 first"
rshmrun=${RSHMRUN:-}
if [ -z "$rshmrun" ]; then
  for c in "$root/carry/rshmrun" "$root/target/release/rshmrun"; do [ -x "$c" ] && rshmrun=$c && break; done
fi
[ -x "$rshmrun" ] || die "no rshmrun (set RSHMRUN)"
nv_home=${NVSHMEM_HOME:-$(python3 -c "import nvidia.nvshmem as m; print(list(m.__path__)[0])" 2>/dev/null || true)}
[ -n "$nv_home" ] && [ -d "$nv_home/lib" ] || echo "perftest-run: no NVSHMEM install (NVSHMEM_HOME): the NVSHMEM set cannot run" >&2
rlib=${RSHMEM_LIBDIR:-$(dirname "$rshmrun")}
np=${NP:-2} t=${T:-60} budget=${BUDGET:-540}
export NVSHMEM_MACHINE_READABLE_OUTPUT=1 NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0
mkdir -p "$out/logs/rshmem" "$out/logs/nvshmem"
start=$SECONDS
skipped=()

# The argument lines of a program (one run each); SHORT=1 caps the iteration counts.
arg_lines() {
  local f=$out/args/$1.args
  [ -f "$f" ] || { echo ""; return; }
  if [ "${SHORT:-0}" = 1 ]; then
    # One pass over the words: the value after -n is capped at 20, after -w at 5.
    awk 'NF { for (i = 1; i < NF; i++) { if ($i == "-n" && $(i + 1) + 0 > 20) $(i + 1) = 20; if ($i == "-w" && $(i + 1) + 0 > 5) $(i + 1) = 5 } print }' "$f" | grep . || echo ""
  else
    grep -v '^[[:space:]]*$' "$f" || echo ""
  fi
}

# run LIB PROG LOGNAME ARGS...: one run with its own limit, clamped to what is left of BUDGET.
run() {
  local lib=$1 prog=$2 log=$3; shift 3
  local left=$((budget - (SECONDS - start) - 5)) lim=$t
  if [ "$left" -lt 10 ]; then skipped+=("$lib $log"); return; fi
  [ "$lim" -gt "$left" ] && lim=$left
  local pmi=() libpath=$rlib
  if [ "$lib" = nvshmem ]; then pmi=(--pmi); libpath=$nv_home/lib; fi
  {
    echo "# $rshmrun ${pmi[*]} -np $np --timeout $lim $prog $*"
    LD_LIBRARY_PATH=$libpath:${LD_LIBRARY_PATH:-} "$rshmrun" "${pmi[@]}" -np "$np" --timeout "$lim" "$prog" "$@"
    echo "# exit: $?"
  } >"$out/logs/$lib/$log.log" 2>&1
  echo "perftest-run: $lib $log: $(tail -1 "$out/logs/$lib/$log.log")" >&2
}

libs=" ${LIBS:-rshmem nvshmem} "
mapfile -t progs < <(if [ -n "${PROGS:-}" ]; then printf '%s\n' $PROGS; else cd "$out/rshmem" && find . -type f -perm -u+x | sed 's|^\./||' | sort; fi)
for p in "${progs[@]}"; do
  [ -x "$out/rshmem/$p" ] || { echo "perftest-run: $p: no rshmem build, skipped" >&2; continue; }
  [ -x "$out/nvshmem/$p" ] || echo "perftest-run: $p: no NVSHMEM build (rshmem only, not scored)" >&2
  name=$(basename "$p")
  i=0
  while IFS= read -r line; do
    log=$name; [ "$i" -gt 0 ] && log=$name.$i
    # shellcheck disable=SC2086 # an argument line is a list of words
    case $libs in *" rshmem "*) run rshmem "$out/rshmem/$p" "$log" $line ;; esac
    # shellcheck disable=SC2086
    case $libs in *" nvshmem "*) [ -x "$out/nvshmem/$p" ] && run nvshmem "$out/nvshmem/$p" "$log" $line ;; esac
    i=$((i + 1))
  done < <(arg_lines "$p")
done
[ ${#skipped[@]} -eq 0 ] || echo "perftest-run: skipped (BUDGET ${budget}s spent): ${skipped[*]}" >&2
python3 "$root/bench/perftest_score.py" "$out/logs" --out "$out/perftest-score.md" --csv "$out/perftest-score.csv"
