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

Rows found under one library only are counted and listed, never scored. Then a "Targets" section: each
target of issue 20 with its measured value, marked pass or miss:

    every program's geometric mean >= 1.0          (one line; the table marks each program)
    no row below 0.9                               (one line: the worst row, and how many are below)
    collectives at 8 B-4 KiB: score >= 1.25        (latency <= 0.8 x NVSHMEM), one line per collective
                                                   program: its worst row in that range (barrier and
                                                   sync rows carry no message size: all of them count)
    on-stream collectives at 1 MiB: score >= 1.0   one line per on-stream program with 1 MiB rows

and the targets whose figures come from other programs of the same call (EXTRA_TARGETS below: the
hardware bounds, put_bw_ratio as bench/run-compare.sh writes it, cpp_put_64KiB_ratio), read as
`name: value` lines from the files given with --extra PATH (a file, or a directory: its files; may be
repeated) or PERFTEST_EXTRA (paths separated by ':'); a figure found nowhere is listed as "not measured
by this script". Last the line

    perftest_targets: P pass, M miss, N not measured

A program is a log name less a `.N` suffix (the N-th argument line). Python 3 standard library only.
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
SMALL_COLL_TARGET = 1.25
SMALL_COLL_BYTES = (8, 4096)
ON_STREAM_TARGET = 1.0
ON_STREAM_BYTES = 1 << 20
# Collective programs (device/coll and host/coll of NVSHMEM's perftests), by name.
COLLECTIVE = re.compile(r"barrier|sync|bcast|broadcast|fcollect|alltoall|reduction|reducescatter|redmaxloc")
# Their rows without a message size (the size field holds threads per block or a constant).
SIZELESS = re.compile(r"barrier|sync")
# Rows to read with care: (program, job, subjob) -> why.
CAVEATS = {
    ("barrier_latency", "barrier_all_device", "block"):
        "barrier_latency.cu times the block-scoped barrier_all with the warm-up count and divides by the "
        "iteration count: both libraries' figures are off by the same factor, so the score still compares them",
}
for _scope in ("thread", "warp", "block"):
    CAVEATS[("sync_latency", "sync_all_device", _scope)] = (
        "sync_latency.cu launches its sync_all kernels (two parameters) with one-element argument arrays "
        "(`{&skip}`, `{&iter}`): the launch reads past them, so what those kernels run is undefined; the PEs "
        "fall out of step (no wait, hence sub-microsecond figures) or the program hangs, under either "
        "library (bench/results/2026-11-27-h100x2.md, calls M-P): not a comparison")
# Targets measured by other programs of the same call: (name, goal or None to record only, what).
EXTRA_TARGETS = [
    ("put_bw_ratio", 1.08, "block put at 256 MiB, rshmem / NVSHMEM (bench/run-compare.sh); the copy engine's "
                           "rate is about 1.08 x NVSHMEM on 2 x H200"),
    ("hw_put_256MiB_vs_copy_engine", 0.98, "block put at 256 MiB / the copy engine's rate (at the rate, within 2 %)"),
    ("hw_get_256MiB_vs_copy_engine", 0.98, "block get at 256 MiB / the copy engine's rate (at the rate, within 2 %)"),
    ("hw_put_8_64KiB_vs_copy_kernel", 0.95, "block put at 8-64 KiB / a raw copy kernel's rate (the least of the sizes)"),
    ("hw_get_8_64KiB_vs_copy_kernel", 0.95, "block get at 8-64 KiB / a raw copy kernel's rate (the least of the sizes)"),
    ("cpp_put_64KiB_ratio", None, "bench/nvshmem/nvshmem_perf.cu, block put at 64 KiB (4 x 1024), rshmem / NVSHMEM "
                                  "(recorded, no goal)"),
]
EXTRA_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_]*):\s*([-+]?[0-9][0-9.]*(?:[eE][-+]?[0-9]+)?)\b")


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


def base_program(prog):
    """The program of a log name: `shmem_put_bw.1` (its second argument line) -> `shmem_put_bw`."""
    return re.sub(r"\.\d+$", "", prog)


def read_extra(paths):
    """{name: value} of the `name: value` lines in the given files (a directory: its files); the last wins."""
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, f) for f in sorted(os.listdir(p)) if os.path.isfile(os.path.join(p, f))]
        elif os.path.isfile(p):
            files.append(p)
    out = {}
    for f in files:
        try:
            with open(f, errors="replace") as fh:
                for line in fh:
                    m = EXTRA_LINE.match(line)
                    if m:
                        out[m.group(1)] = (float(m.group(2)), os.path.basename(f))
        except OSError:
            continue
    return out


def worst_of(rows):
    return min(rows, key=lambda x: x[3]) if rows else None


def row_text(prog, row):
    key, rv, nv, s, units = row
    return f"{fmt(s)} ({prog}: {row_name(key)}, {rv:g} vs {nv:g} {units})"


def targets(progs, extra):
    """The Targets section: [(target, measured, goal, status)], the notes, and the pass/miss/not counts."""
    out, notes = [], []
    # Every program's geometric mean.
    gms = [(geomean([r[3] for r in p["rows"]]), prog) for prog, p in progs.items() if p["rows"]]
    if gms:
        low = sorted(x for x in gms if x[0] < GEOMEAN_TARGET)
        m = min(gms)
        measured = f"least {fmt(m[0])} ({m[1]}); {len(gms) - len(low)} of {len(gms)} programs at or above"
        if low:
            measured += "; below: " + ", ".join(f"{prog} {fmt(g)}" for g, prog in low)
        out.append(("every program's geometric mean", measured, f">= {GEOMEAN_TARGET}",
                    "pass" if not low else "miss"))
    else:
        out.append(("every program's geometric mean", "no scored rows", f">= {GEOMEAN_TARGET}", "not measured"))
    # No row below 0.9.
    all_rows = [(prog, r) for prog, p in progs.items() for r in p["rows"]]
    if all_rows:
        prog, w = min(all_rows, key=lambda x: x[1][3])
        below = sum(1 for _, r in all_rows if r[3] < ROW_TARGET)
        out.append(("no row below 0.9", f"worst {row_text(prog, w)}; {below} of {len(all_rows)} rows below",
                    f">= {ROW_TARGET}", "pass" if below == 0 else "miss"))
    else:
        out.append(("no row below 0.9", "no scored rows", f">= {ROW_TARGET}", "not measured"))
    # Collectives at 8 B-4 KiB, per collective program.
    lo, hi = SMALL_COLL_BYTES
    for prog, p in progs.items():
        base = base_program(prog)
        if not COLLECTIVE.search(base):
            continue
        sizeless = bool(SIZELESS.search(base))
        rows = [r for r in p["rows"] if sizeless or lo <= r[0][2] <= hi]
        what = f"collective {prog} at {lo} B-{hi // 1024} KiB" + (" (all rows: no message size)" if sizeless else "")
        if not rows:
            out.append((what, "no scored rows in range", f">= {SMALL_COLL_TARGET} every row", "not measured"))
            continue
        w = worst_of(rows)
        below = sum(1 for r in rows if r[3] < SMALL_COLL_TARGET)
        measured = (f"worst {row_text(prog, w)}; geomean {fmt(geomean([r[3] for r in rows]))}; "
                    f"{below} of {len(rows)} rows below")
        out.append((what, measured, f">= {SMALL_COLL_TARGET} every row", "pass" if below == 0 else "miss"))
    # On-stream collectives at 1 MiB, per program.
    no_mib = []
    for prog, p in progs.items():
        if "_on_stream" not in base_program(prog):
            continue
        rows = [r for r in p["rows"] if r[0][2] == ON_STREAM_BYTES]
        if not rows:
            no_mib.append(prog)
            continue
        w = worst_of(rows)
        below = sum(1 for r in rows if r[3] < ON_STREAM_TARGET)
        out.append((f"on-stream {prog} at 1 MiB", f"worst {row_text(prog, w)}; {below} of {len(rows)} rows below",
                    f">= {ON_STREAM_TARGET} every row", "pass" if below == 0 else "miss"))
    if no_mib:
        notes.append("on-stream programs without a 1 MiB row (no size, or their argument lines end below): "
                     + ", ".join(no_mib))
    # Figures from other programs of the same call.
    for name, goal, what in EXTRA_TARGETS:
        goal_text = "recorded" if goal is None else f">= {goal}"
        if name not in extra:
            out.append((f"{name}: {what}", "not measured by this script", goal_text, "not measured"))
            continue
        v, src = extra[name]
        status = "recorded" if goal is None else ("pass" if round(v, 3) >= goal else "miss")
        out.append((f"{name}: {what}", f"{v:g} (from {src})", goal_text, status))
    for prog, p in progs.items():
        for r in p["rows"]:
            why = CAVEATS.get((base_program(prog), r[0][0], r[0][1]))
            if why:
                notes.append(f"{prog}: {row_name(r[0])} (score {fmt(r[3])}): {why}")
    counts = {k: sum(1 for t in out if t[3] == k) for k in ("pass", "miss", "not measured")}
    return out, notes, counts


def targets_report(progs, extra):
    rows, notes, counts = targets(progs, extra)
    lines = ["", "## Targets (issue 20)", "",
             "| target | measured | goal | status |", "| --- | --- | --- | --- |"]
    for what, measured, goal, status in rows:
        lines.append(f"| {what} | {measured} | {goal} | {'**pass**' if status == 'pass' else status} |")
    lines.append("")
    for n in notes:
        lines.append(f"- {n}")
    if notes:
        lines.append("")
    lines.append(f"perftest_targets: {counts['pass']} pass, {counts['miss']} miss, {counts['not measured']} not measured")
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
        # Targets: collectives (sized and sizeless), an on-stream program at 1 MiB, a figure from elsewhere.
        lat = "&&&& PERF {}___{}___size__{}___latency {} -us\n"
        logs = {  # log name: (rshmem lines, NVSHMEM lines)
            "bcast_latency": (lat.format("bcast_device", "32-bit-warp", 8, 1.0) + lat.format("bcast_device", "32-bit-warp", 4096, 2.0)
                              + lat.format("bcast_device", "32-bit-warp", 1 << 20, 100.0),
                              lat.format("bcast_device", "32-bit-warp", 8, 2.0) + lat.format("bcast_device", "32-bit-warp", 4096, 3.0)
                              + lat.format("bcast_device", "32-bit-warp", 1 << 20, 10.0)),
            "sync_latency": (lat.format("sync_device", "thread", 1024, 1.0), lat.format("sync_device", "thread", 1024, 1.0)),
            "broadcast_on_stream.1": (lat.format("broadcast_on_stream", "int-none", 1 << 20, 20.0),
                                      lat.format("broadcast_on_stream", "int-none", 1 << 20, 30.0)),
        }
        for name, (rl, nl) in logs.items():
            for lib, body in (("rshmem", rl), ("nvshmem", nl)):
                with open(os.path.join(d, lib, name + ".log"), "w") as f:
                    f.write(body)
        with open(os.path.join(d, "extra.md"), "w") as f:
            f.write("# compare\nput_bw_ratio: 1.100\ncpp_put_64KiB_ratio: 0.97 (8 KiB ...)\n")
        text = targets_report(score(d), read_extra([d]))
        # bcast: 8 B scores 2.0, 4 KiB 1.5 (both >= 1.25); 1 MiB (0.1) is outside the range.
        assert "| collective bcast_latency at 8 B-4 KiB | worst 1.500 (bcast_latency: bcast_device/32-bit-warp 4096 B" in text, text
        assert "0 of 2 rows below | >= 1.25 every row | **pass** |" in text, text
        assert "| collective sync_latency at 8 B-4 KiB (all rows: no message size) | worst 1.000" in text, text
        assert "1 of 1 rows below | >= 1.25 every row | miss |" in text, text
        assert "| on-stream broadcast_on_stream.1 at 1 MiB | worst 1.500" in text, text
        assert "| collective broadcast_on_stream.1 at 8 B-4 KiB | no scored rows in range |" in text, text
        assert "| put_bw_ratio: block put at 256 MiB" in text and "| 1.1 (from extra.md) | >= 1.08 | **pass** |" in text, text
        assert "| 0.97 (from extra.md) | recorded | recorded |" in text, text
        assert "hw_put_256MiB_vs_copy_engine: block put at 256 MiB / the copy engine's rate (at the rate, within 2 %) | not measured by this script |" in text, text
        assert "| every program's geometric mean | least 0.100 (bcast_latency)" not in text, text
        assert "| no row below 0.9 | worst 0.100 (bcast_latency: bcast_device/32-bit-warp 1048576 B latency, 100 vs 10 us)" in text, text
        assert "perftest_targets: 3 pass, 3 miss, 5 not measured" in text, text
    print("perftest_score self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logdir", nargs="?")
    ap.add_argument("--out")
    ap.add_argument("--csv")
    ap.add_argument("--extra", action="append", default=[],
                    help="a file or directory of `name: value` lines (other figures of the same call)")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.logdir:
        ap.error("LOGDIR is required (or --self-test)")
    progs = score(a.logdir)
    if not progs:
        sys.exit(f"perftest_score: no logs under {a.logdir}/rshmem or {a.logdir}/nvshmem")
    extra_paths = a.extra + [x for x in os.environ.get("PERFTEST_EXTRA", "").split(":") if x]
    text = report(progs) + targets_report(progs, read_extra(extra_paths))
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    if a.csv:
        write_csv(progs, a.csv)


if __name__ == "__main__":
    main()
