#!/usr/bin/env python3
"""Scores NVSHMEM's perftests run under both libraries (issue 20's table):

    python3 bench/perftest_score.py LOGDIR [--out FILE.md] [--csv FILE.csv]
    python3 bench/perftest_score.py --self-test

LOGDIR holds `rshmem/` and `nvshmem/`, each with one log per program run (`<program>.log`, as
bench/perftest-run.sh writes them), made with NVSHMEM_MACHINE_READABLE_OUTPUT=1. Every line

    &&&& PERF <job>___<subjob>___size__<bytes>___<variable> <value> <+|-><units>

is a row; `+` says higher is better (bandwidth), `-` lower is better (latency). A row's score is
rshmem / NVSHMEM for `+` rows and NVSHMEM / rshmem for `-` rows, so above 1 means rshmem is better.
Per program: the rows found under both libraries, their geometric mean and the worst row; then the
lines

    perftest_min_geomean: X     the smallest program geometric mean
    perftest_worst_row: X       the smallest row score (with its program and row)

and the targets (every program's geometric mean >= 1.0, no row below 0.9) marked pass or miss. Rows
found under one library only are counted and listed, never scored. Python 3 standard library only.
"""
import argparse
import math
import os
import re
import sys
import tempfile

PERF = re.compile(r"&&&& PERF (\S+?)___(\S+?)___size__(\d+)___(\S+) ([0-9.eE+-]+) ([+-])(\S*)")
GEOMEAN_TARGET = 1.0
ROW_TARGET = 0.9


def parse(text):
    """{(job, subjob, size, variable): (value, higher_is_better, units)} of one log."""
    rows = {}
    for line in text.splitlines():
        m = PERF.search(line)
        if not m:
            continue
        job, sub, size, var, value, sign, units = m.groups()
        rows[(job, sub, int(size), var)] = (float(value), sign == "+", units)
    return rows


def read_logs(d):
    """{program: rows} of every `<program>.log` in directory d (missing directory: empty)."""
    out = {}
    if not os.path.isdir(d):
        return out
    for name in sorted(os.listdir(d)):
        if name.endswith(".log"):
            with open(os.path.join(d, name), errors="replace") as f:
                out[name[:-4]] = parse(f.read())
    return out


def score(logdir):
    """Per program: dict(rows=[(key, r, n, score, units)], only_rshmem=int, only_nvshmem=int)."""
    r_all, n_all = read_logs(os.path.join(logdir, "rshmem")), read_logs(os.path.join(logdir, "nvshmem"))
    progs = {}
    for prog in sorted(set(r_all) | set(n_all)):
        r, n = r_all.get(prog, {}), n_all.get(prog, {})
        rows = []
        for key in sorted(set(r) & set(n)):
            (rv, hib, units), (nv, _, _) = r[key], n[key]
            if rv <= 0 or nv <= 0:
                continue
            rows.append((key, rv, nv, rv / nv if hib else nv / rv, units))
        progs[prog] = dict(rows=rows, only_rshmem=len(set(r) - set(n)), only_nvshmem=len(set(n) - set(r)))
    return progs


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, nd=3):
    return "n/a" if x is None else f"{x:.{nd}f}"


def row_name(key):
    job, sub, size, var = key
    return f"{job}/{sub} {size} B {var}"


def report(progs):
    lines = ["| program | rows | geomean | worst row | only rshmem | only NVSHMEM | geomean >= 1.0 | no row < 0.9 |",
             "| --- | ---: | ---: | --- | ---: | ---: | --- | --- |"]
    gms, worst_all = [], None
    for prog, p in progs.items():
        rows = p["rows"]
        gm = geomean([s for _, _, _, s, _ in rows])
        worst = min(rows, key=lambda x: x[3]) if rows else None
        if gm is not None:
            gms.append((gm, prog))
        if worst and (worst_all is None or worst[3] < worst_all[1][3]):
            worst_all = (prog, worst)
        w = f"{fmt(worst[3])} ({row_name(worst[0])}: {worst[1]:g} vs {worst[2]:g} {worst[4]})" if worst else "n/a"
        ok_gm = "n/a" if gm is None else ("pass" if gm >= GEOMEAN_TARGET else "miss")
        ok_row = "n/a" if worst is None else ("pass" if worst[3] >= ROW_TARGET else "miss")
        lines.append(f"| {prog} | {len(rows)} | {fmt(gm)} | {w} | {p['only_rshmem']} | {p['only_nvshmem']} | {ok_gm} | {ok_row} |")
    lines.append("")
    min_gm = min(gms) if gms else None
    lines.append(f"perftest_min_geomean: {fmt(min_gm[0] if min_gm else None)}" + (f" ({min_gm[1]})" if min_gm else ""))
    if worst_all:
        prog, (key, rv, nv, s, units) = worst_all
        lines.append(f"perftest_worst_row: {fmt(s)} ({prog}: {row_name(key)}, rshmem {rv:g} vs NVSHMEM {nv:g} {units})")
    else:
        lines.append("perftest_worst_row: n/a")
    return "\n".join(lines) + "\n"


def write_csv(progs, path):
    with open(path, "w") as f:
        f.write("program,job,subjob,size,variable,rshmem,nvshmem,score,units\n")
        for prog, p in progs.items():
            for (job, sub, size, var), rv, nv, s, units in p["rows"]:
                f.write(f"{prog},{job},{sub},{size},{var},{rv},{nv},{s:.6f},{units}\n")


def self_test():
    """Synthetic logs with known scores: a bandwidth row, a latency row, a row of one library only."""
    with tempfile.TemporaryDirectory() as d:
        for lib in ("rshmem", "nvshmem"):
            os.makedirs(os.path.join(d, lib))
        with open(os.path.join(d, "rshmem", "shmem_put_bw.log"), "w") as f:
            f.write("[pe 0] shmem_put_bw\n[pe 0] &&&& PERF shmem_put_bw___uni___size__4096___BW 2.000000 +GB/sec\n"
                    "&&&& PERF shmem_put_bw___uni___size__8192___BW 9.000000 +GB/sec\nnoise line\n")
        with open(os.path.join(d, "nvshmem", "shmem_put_bw.log"), "w") as f:
            f.write("&&&& PERF shmem_put_bw___uni___size__4096___BW 4.000000 +GB/sec\n"
                    "&&&& PERF shmem_put_bw___uni___size__8192___BW 4.500000 +GB/sec\n"
                    "&&&& PERF shmem_put_bw___uni___size__16384___BW 5.000000 +GB/sec\n")
        with open(os.path.join(d, "rshmem", "shmem_p_latency.log"), "w") as f:
            f.write("&&&& PERF shmem_p_latency___thread___size__4___latency 1.000000 -us\n")
        with open(os.path.join(d, "nvshmem", "shmem_p_latency.log"), "w") as f:
            f.write("&&&& PERF shmem_p_latency___thread___size__4___latency 2.000000 -us\n")
        progs = score(d)
        bw = progs["shmem_put_bw"]
        assert [round(r[3], 6) for r in bw["rows"]] == [0.5, 2.0], bw
        assert bw["only_nvshmem"] == 1 and bw["only_rshmem"] == 0, bw
        assert round(geomean([r[3] for r in bw["rows"]]), 6) == 1.0
        assert [r[3] for r in progs["shmem_p_latency"]["rows"]] == [2.0], progs
        text = report(progs)
        assert "perftest_min_geomean: 1.000 (shmem_put_bw)" in text, text
        assert "perftest_worst_row: 0.500 (shmem_put_bw: shmem_put_bw/uni 4096 B BW" in text, text
        assert "| shmem_put_bw | 2 | 1.000 |" in text and "| pass | miss |" in text, text
    print("perftest_score self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logdir", nargs="?")
    ap.add_argument("--out")
    ap.add_argument("--csv")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.logdir:
        ap.error("LOGDIR is required (or --self-test)")
    progs = score(a.logdir)
    if not progs:
        sys.exit(f"perftest_score: no logs under {a.logdir}/rshmem or {a.logdir}/nvshmem")
    text = report(progs)
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.csv:
        write_csv(progs, a.csv)


if __name__ == "__main__":
    main()
