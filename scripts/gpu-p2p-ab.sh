#!/usr/bin/env bash
# Same-node A/B of rshmem-bench builds on the GPU machine, interleaved so drift hits every build alike:
#   ROUNDS=3 OUT=dir bash scripts/gpu-p2p-ab.sh NAME=DIR [NAME=DIR ...] [-- rshmem-bench options]
# Each DIR holds rshmrun, rshmem-bench and librshmem.so (carry/, carry-before/, ...; unpacked with
# scripts/gpu-unpack.sh first). Runs `DIR/rshmrun -np 2 DIR/rshmem-bench OPTIONS` for every build, ROUNDS
# times in turn (default options: --grid 132 --threads 256 --quick --max-bytes 8m --cases bw), logs to
# OUT/p2p_ab_NAME_ROUND.log and writes OUT/p2p_ab.md: per row (case, scope, bytes) every build's median
# over the rounds, its min-max, and each build's ratio to the first build's median.
set -u
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/p2p_ab}; mkdir -p "$out"
rounds=${ROUNDS:-3}
builds=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do builds+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#builds[@]} -ge 1 ] || { echo "usage: $0 NAME=DIR [NAME=DIR ...] [-- options]" >&2; exit 2; }
[ $# -gt 0 ] || set -- --grid 132 --threads 256 --quick --max-bytes 8m --cases bw
for r in $(seq 1 "$rounds"); do
  for b in "${builds[@]}"; do
    name=${b%%=*} dir=${b#*=}
    echo "p2p_ab: round $r, $name ($dir, $(cat "$dir/COMMIT" 2>/dev/null || echo '?')): rshmrun -np 2 rshmem-bench $*"
    LD_LIBRARY_PATH=$dir:${LD_LIBRARY_PATH:-} RSHMEM_SYMMETRIC_SIZE=2g timeout 150 "$dir/rshmrun" -np 2 --timeout 120 \
      "$dir/rshmem-bench" "$@" >"$out/p2p_ab_${name}_$r.log" 2>&1 || echo "p2p_ab: $name round $r exited $?"
  done
done
python3 - "$out" "${builds[@]}" <<'PY'
import glob, os, statistics, sys
sys.path.insert(0, "bench")
import compare  # the RESULT line format and which units are lower-is-better, defined once
out, builds = sys.argv[1], [b.split('=', 1)[0] for b in sys.argv[2:]]
rows, vals = [], {}
for b in builds:
    for f in sorted(glob.glob(os.path.join(out, f"p2p_ab_{b}_*.log"))):
        for line in open(f, errors="replace"):
            r, _ = compare.parse_line(line)
            if r is None or r["lib"] != "rshmem":
                continue
            key = (r["case"], r["scope"], r["bytes"], r["unit"])
            if key not in rows: rows.append(key)
            vals.setdefault((b, key), []).append(r["value"])
with open(os.path.join(out, "p2p_ab.md"), "w") as o:
    o.write("| case | scope | bytes | unit | " + " | ".join(f"{b} median (min-max)" for b in builds) + " | " + " | ".join(f"{b}/{builds[0]}" for b in builds[1:]) + " |\n")
    o.write("|---" * (4 + 2 * len(builds) - 1) + "|\n")
    for key in rows:
        med = {b: statistics.median(vals[(b, key)]) for b in builds if vals.get((b, key))}
        cells = [f"{med[b]:.2f} ({min(vals[(b, key)]):.2f}-{max(vals[(b, key)]):.2f})" if b in med else "-" for b in builds]
        lower_better = key[3] in compare.LOWER_IS_BETTER_UNITS
        ratios = []
        for b in builds[1:]:
            if b in med and builds[0] in med and med[b] and med[builds[0]]:
                ratios.append(f"{(med[builds[0]] / med[b]) if lower_better else (med[b] / med[builds[0]]):.3f}")
            else:
                ratios.append("-")
        o.write(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |\n")
print(open(os.path.join(out, "p2p_ab.md")).read())
PY
