#!/usr/bin/env python3
"""Sets rshmem-bench's results beside NVSHMEM's (bench/nvshmem/nvshmem_perf.cu).

    python3 bench/compare.py RSHMEM_LOG NVSHMEM_LOG OUTDIR [--machine TEXT] [--command TEXT]

Reads the lines `RESULT lib=... case=... scope=... bytes=... grid=... threads=... value=... unit=...`
of both logs (an optional `[pe N] ` tag in front is dropped; every other line is ignored) and writes
into OUTDIR:
  results.csv     every result of both libraries (lib,case,scope,bytes,grid,threads,value,unit);
  comparison.md   per case group a table rshmem | NVSHMEM | ratio rshmem/NVSHMEM, then the targets;
  put_bw.svg, get_bw.svg   block-scope bandwidth against message size, both libraries.
Python 3 standard library only.
"""
import argparse
import csv
import math
import os
import re
import sys
from xml.sax.saxutils import escape

LIBS = ("rshmem", "nvshmem")
LIB_NAME = {"rshmem": "rshmem", "nvshmem": "NVSHMEM"}
FIELDS = ("lib", "case", "scope", "bytes", "grid", "threads", "value", "unit")
TAG = re.compile(r"^\[pe \d+\] ")
LOWER_IS_BETTER_UNITS = {"ns", "us", "ms", "s"}

# (title, cases in display order); a case not named here goes to the last group.
GROUPS = [
    ("Put bandwidth (device-initiated)", ["put_bw"]),
    ("Get bandwidth (device-initiated)", ["get_bw"]),
    ("Host-initiated and on-stream puts", ["host_put_bw", "stream_put_bw"]),
    ("Latency (one thread)", ["p_lat", "g_lat", "put_lat", "get_lat", "amo_fetch_add_lat", "amo_cswap_lat"]),
    ("Ping-pong (half round trip)", ["pingpong", "put_signal_pingpong"]),
    ("Atomic rate", ["amo_rate"]),
    ("Synchronization", ["barrier_all", "sync_all", "host_barrier_all"]),
    ("All-pairs put bandwidth (every PE to every other at once; per PE minimum and sum)",
     ["all_pairs_put_bw", "all_pairs_put_bw_total"]),
    ("Setup", ["init_s", "malloc_us"]),
]
OTHER_GROUP = "Other cases (one library only or analysis variants)"
SCOPE_ORDER = {"thread": 0, "warp": 1, "block": 2, "-": 3}

MiB = 1 << 20
# (label, case, scope, bytes or None for the case's only row, goal, "ge" or "le")
TARGETS = [
    ("put bandwidth, block, 256 MiB", "put_bw", "block", 256 * MiB, 1.10, "ge"),
    ("get bandwidth, block, 256 MiB", "get_bw", "block", 256 * MiB, 1.10, "ge"),
    ("put bandwidth, block, 64 KiB", "put_bw", "block", 64 << 10, 1.5, "ge"),
    ("p + quiet latency (p_lat)", "p_lat", None, None, 0.8, "le"),
    ("ping-pong half round trip", "pingpong", None, None, 0.9, "le"),
    ("atomic fetch_add latency", "amo_fetch_add_lat", None, None, 1.0, "le"),
    ("device barrier_all", "barrier_all", None, None, 0.6, "le"),
    ("host barrier_all", "host_barrier_all", None, None, 0.5, "le"),
    ("init time", "init_s", None, None, 0.3, "le"),
]


# ----------------------------------------------------------------------------------------------
# Parsing
def parse_line(line):
    """One line of a benchmark log: (row, None) for a RESULT line, its numbers converted (bytes, grid,
    threads as int, value as float); (None, why) for a malformed RESULT line; (None, None) for any other
    line. The one reader of the RESULT format (hw_bounds.py uses it too)."""
    line = TAG.sub("", line.rstrip("\r\n"), count=1)
    if not line.startswith("RESULT "):
        return None, None
    kv = dict(tok.split("=", 1) for tok in line.split()[1:] if "=" in tok)
    missing = [k for k in FIELDS if k not in kv]
    if missing:
        return None, f"RESULT line without {', '.join(missing)}"
    try:
        return dict(kv, bytes=int(kv["bytes"]), grid=int(kv["grid"]), threads=int(kv["threads"]), value=float(kv["value"])), None
    except ValueError:
        return None, "bad number in RESULT line"


def parse_log(path, want_lib):
    """Returns {(case, scope, bytes): row} of `want_lib`'s RESULT lines; the last of duplicates wins."""
    rows = {}
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"compare.py: cannot read {path}: {e}", file=sys.stderr)
        return rows
    with f:
        for n, line in enumerate(f, 1):
            row, why = parse_line(line)
            if why:
                print(f"compare.py: {path}:{n}: {why}; skipped", file=sys.stderr)
            if row is None:
                continue
            if row["lib"] != want_lib:
                print(f"compare.py: {path}:{n}: lib={row['lib']} in the {want_lib} log; skipped", file=sys.stderr)
                continue
            key = (row["case"], row["scope"], row["bytes"])
            if key in rows:
                print(f"compare.py: {path}:{n}: second result for {key}; the later one is used", file=sys.stderr)
            rows[key] = row
    return rows


def pair_rows(r, n):
    """Keys of both libraries, with single-row cases paired even when scope/bytes differ
    (e.g. one program prints bytes=0 and the other bytes=4 for a scalar case).
    Returns {key: (rshmem row or None, nvshmem row or None)}."""
    def by_case(rows):
        d = {}
        for k in rows:
            d.setdefault(k[0], []).append(k)
        return d

    rc, nc = by_case(r), by_case(n)
    n_alias = {}
    for case in set(rc) & set(nc):
        if len(rc[case]) == 1 and len(nc[case]) == 1 and rc[case][0] != nc[case][0]:
            n_alias[nc[case][0]] = rc[case][0]
    pairs = {}
    for k, row in r.items():
        pairs.setdefault(k, [None, None])[0] = row
    for k, row in n.items():
        pairs.setdefault(n_alias.get(k, k), [None, None])[1] = row
    return {k: tuple(v) for k, v in pairs.items()}


# ----------------------------------------------------------------------------------------------
# Formatting
def size_label(b):
    if b <= 0:
        return "-"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            v = b / (1 << shift)
            return f"{v:g} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{b} B"


def num(v):
    if v is None:
        return "—"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:.0f}"
    if a >= 0.001:
        return f"{v:.4g}"
    return f"{v:.3e}"


def lower_is_better(unit):
    return unit in LOWER_IS_BETTER_UNITS


def ratio_of(rrow, nrow):
    if rrow is None or nrow is None or nrow["value"] == 0:
        return None
    return rrow["value"] / nrow["value"]


def better_of(rrow, nrow):
    ratio = ratio_of(rrow, nrow)
    if ratio is None:
        return ""
    if abs(ratio - 1) < 0.005:
        return "even"
    rshmem_wins = ratio < 1 if lower_is_better(rrow["unit"]) else ratio > 1
    return "**rshmem**" if rshmem_wins else "NVSHMEM"


def sort_key(k):
    case, scope, b = k
    return (SCOPE_ORDER.get(scope, 9), scope, b)


# ----------------------------------------------------------------------------------------------
# Outputs
def write_csv(path, r, n):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(FIELDS)
        for rows in (r, n):
            for k in sorted(rows, key=lambda k: (k[0],) + sort_key(k)):
                row = rows[k]
                w.writerow([row["lib"], row["case"], row["scope"], row["bytes"], row["grid"], row["threads"],
                            f"{row['value']:.4f}", row["unit"]])


def lookup(pairs, case, scope, b):
    if b is not None:
        return pairs.get((case, scope, b), (None, None))
    ks = [k for k in pairs if k[0] == case]
    return pairs[ks[0]] if len(ks) == 1 else (None, None)


def put_bw_ratio(pairs):
    """`put_bw_ratio`: the block put at 256 MiB, rshmem / NVSHMEM (None when a side lacks the row).
    bench/hw_bounds.py uses this definition too."""
    rr, nr = lookup(pairs, "put_bw", "block", 256 * MiB)
    return ratio_of(rr, nr)


def target_rows(pairs):
    out = []
    for label, case, scope, b, goal, how in TARGETS:
        rrow, nrow = lookup(pairs, case, scope, b)
        ratio = ratio_of(rrow, nrow)
        if ratio is None:
            have = [LIB_NAME[l] for l, row in zip(LIBS, (rrow, nrow)) if row is None]
            status = "n/a (no result from " + " and ".join(have) + ")" if have else "n/a"
        else:
            ok = round(ratio, 3) >= goal if how == "ge" else round(ratio, 3) <= goal
            status = "**pass**" if ok else "miss"
        out.append((label, rrow, nrow, ratio, ("≥ " if how == "ge" else "≤ ") + f"{goal:g}", status))
    return out


def write_markdown(path, r, n, pairs, args):
    L = []
    L.append("# rshmem vs NVSHMEM")
    L.append("")
    ratio = put_bw_ratio(pairs)
    L.append(f"put_bw_ratio: {ratio:.3f}" if ratio is not None else "put_bw_ratio: n/a")
    L.append("")
    if args.machine:
        L.append(f"Machine: {args.machine}")
        L.append("")
    if args.command:
        L.append(f"Command: `{args.command}`")
        L.append("")
    shapes = sorted({(row["grid"], row["threads"]) for rows in (r, n) for row in rows.values()})
    shape_txt = ", ".join(f"{g} x {t}" for g, t in shapes) or "none"
    L.append(f"Logs: `{args.rshmem_log}` ({len(r)} results), `{args.nvshmem_log}` ({len(n)} results); "
             f"grid x threads: {shape_txt}. Ratio = rshmem / NVSHMEM. Bandwidth and rates: higher is better; "
             "times (unit us or s, marked ↓): lower is better, so a ratio below 1 favours rshmem there.")
    L.append("")

    # Targets first: they are what the comparison is for.
    L.append("## Targets")
    L.append("")
    L.append("| target | unit | rshmem | NVSHMEM | ratio (goal) result |")
    L.append("| --- | --- | ---: | ---: | --- |")
    tr = target_rows(pairs)
    for label, rrow, nrow, ratio, goal, status in tr:
        unit = (rrow or nrow or {}).get("unit", "")
        rtxt = f"{ratio:.3f}" if ratio is not None else "—"
        L.append(f"| {label} | {unit} | {num(rrow and rrow['value'])} | {num(nrow and nrow['value'])} | "
                 f"{rtxt} ({goal}) {status} |")
    passed = sum(1 for t in tr if t[5] == "**pass**")
    L.append("")
    L.append(f"{passed} of {len(tr)} targets met.")
    L.append("")

    known = {c for _, cs in GROUPS for c in cs}
    groups = [(t, cs) for t, cs in GROUPS]
    other = sorted({k[0] for k in pairs if k[0] not in known})
    if other:
        groups.append((OTHER_GROUP, other))
    for title, cases in groups:
        keys = [k for c in cases for k in sorted((k for k in pairs if k[0] == c), key=sort_key)]
        if not keys:
            continue
        L.append(f"## {title}")
        L.append("")
        L.append("| case | scope | size | unit | rshmem | NVSHMEM | ratio | better |")
        L.append("| --- | --- | ---: | --- | ---: | ---: | ---: | --- |")
        for k in keys:
            rrow, nrow = pairs[k]
            row = rrow or nrow
            unit = row["unit"] + (" ↓" if lower_is_better(row["unit"]) else "")
            ratio = ratio_of(rrow, nrow)
            size = size_label(k[2])
            if rrow and nrow and rrow["bytes"] != nrow["bytes"]:
                size = f"{size_label(rrow['bytes'])} / {size_label(nrow['bytes'])}"
            L.append(f"| {k[0]} | {k[1]} | {size} | {unit} | {num(rrow and rrow['value'])} | "
                     f"{num(nrow and nrow['value'])} | {f'{ratio:.3f}' if ratio is not None else '—'} | "
                     f"{better_of(rrow, nrow)} |")
        L.append("")
    L.append("Plots: [put_bw.svg](put_bw.svg), [get_bw.svg](get_bw.svg) (block scope). "
             "Raw results: [results.csv](results.csv).")
    L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L))


# ----------------------------------------------------------------------------------------------
# SVG plot
COLORS = {"rshmem": "#e66100", "nvshmem": "#1f6fb4"}
MARKERS = {"rshmem": "circle", "nvshmem": "square"}


def nice_ceil(v):
    """Smallest 1/2/2.5/5 x 10^k >= v, with a tick step giving 4..8 intervals."""
    if v <= 0:
        return 1.0, 0.2
    e = math.floor(math.log10(v))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        top = m * 10 ** e
        if top >= v * 0.999:
            break
    for step_m in (0.1, 0.2, 0.25, 0.5, 1, 2, 2.5, 5):
        step = step_m * 10 ** e
        if top / step <= 8:
            return top, step
    return top, top / 5


def marker(kind, x, y, color, title):
    t = f"<title>{escape(title)}</title>"
    if kind == "square":
        return (f'<rect x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7" fill="{color}" '
                f'stroke="white" stroke-width="1">{t}</rect>')
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}" stroke="white" stroke-width="1">{t}</circle>'


def write_svg(path, case, title, r, n, subtitle):
    W, H = 800, 500
    ml, mr, mt, mb = 78, 24, 62, 64
    pw, ph = W - ml - mr, H - mt - mb
    series = {}
    for lib, rows in (("rshmem", r), ("nvshmem", n)):
        pts = sorted((k[2], row["value"]) for k, row in rows.items()
                     if k[0] == case and k[1] == "block" and k[2] > 0)
        if pts:
            series[lib] = pts
    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{W / 2}" y="26" text-anchor="middle" font-size="18" font-weight="bold">{escape(title)}</text>']
    if subtitle:
        o.append(f'<text x="{W / 2}" y="46" text-anchor="middle" font-size="12" fill="#555">{escape(subtitle)}</text>')
    if not series:
        o.append(f'<text x="{W / 2}" y="{H / 2}" text-anchor="middle" font-size="16" fill="#888">'
                 f'no {escape(case)} block-scope results</text></svg>')
        with open(path, "w") as f:
            f.write("\n".join(o) + "\n")
        return
    xs = [b for pts in series.values() for b, _ in pts]
    lo, hi = math.floor(math.log2(min(xs))), math.ceil(math.log2(max(xs)))
    if hi == lo:
        lo, hi = lo - 1, hi + 1
    x0, x1 = lo - 0.5, hi + 0.5
    ymax, ystep = nice_ceil(max(v for pts in series.values() for _, v in pts) * 1.05)

    def X(b):
        return ml + (math.log2(b) - x0) / (x1 - x0) * pw

    def Y(v):
        return mt + ph - v / ymax * ph

    # Grid and y ticks.
    o.append(f'<rect x="{ml}" y="{mt}" width="{pw}" height="{ph}" fill="#fbfbfb" stroke="none"/>')
    nt = int(round(ymax / ystep))
    for i in range(nt + 1):
        v = i * ystep
        y = Y(v)
        o.append(f'<line x1="{ml}" y1="{y:.1f}" x2="{ml + pw}" y2="{y:.1f}" stroke="#ddd" stroke-width="1"/>')
        o.append(f'<line x1="{ml - 5}" y1="{y:.1f}" x2="{ml}" y2="{y:.1f}" stroke="#333"/>')
        o.append(f'<text x="{ml - 8}" y="{y + 4:.1f}" text-anchor="end" font-size="12">{v:g}</text>')
    # x ticks: every power of two gets a minor line; labels every `step` powers (at most ~13 labels).
    step = 1
    while (hi - lo) / step > 13:
        step *= 2
    for e in range(lo, hi + 1):
        x = X(2 ** e)
        labelled = (e - lo) % step == 0
        o.append(f'<line x1="{x:.1f}" y1="{mt}" x2="{x:.1f}" y2="{mt + ph}" '
                 f'stroke="{"#ddd" if labelled else "#eee"}" stroke-width="1"/>')
        if labelled:
            o.append(f'<line x1="{x:.1f}" y1="{mt + ph}" x2="{x:.1f}" y2="{mt + ph + 5}" stroke="#333"/>')
            o.append(f'<text x="{x:.1f}" y="{mt + ph + 19}" text-anchor="middle" font-size="11">'
                     f'{escape(size_label(2 ** e))}</text>')
    # Axes and labels.
    o.append(f'<line x1="{ml}" y1="{mt + ph}" x2="{ml + pw}" y2="{mt + ph}" stroke="#333" stroke-width="1.2"/>')
    o.append(f'<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{mt + ph}" stroke="#333" stroke-width="1.2"/>')
    o.append(f'<text x="{ml + pw / 2}" y="{H - 14}" text-anchor="middle" font-size="13">'
             'message size (bytes, log scale)</text>')
    o.append(f'<text x="20" y="{mt + ph / 2}" text-anchor="middle" font-size="13" '
             f'transform="rotate(-90 20 {mt + ph / 2})">bandwidth (GB/s)</text>')
    # Series (rshmem drawn last, on top).
    for lib in reversed(LIBS):
        pts = series.get(lib)
        if not pts:
            continue
        c = COLORS[lib]
        path_pts = " ".join(f"{X(b):.1f},{Y(v):.1f}" for b, v in pts)
        o.append(f'<polyline points="{path_pts}" fill="none" stroke="{c}" stroke-width="2.2" '
                 'stroke-linejoin="round"/>')
        for b, v in pts:
            o.append(marker(MARKERS[lib], X(b), Y(v), c, f"{LIB_NAME[lib]}: {size_label(b)}: {v:.2f} GB/s"))
    # Legend (top left of the plot area, where small sizes keep the curves low).
    lx, ly = ml + 14, mt + 12
    shown = [lib for lib in LIBS if lib in series]
    o.append(f'<rect x="{lx}" y="{ly}" width="128" height="{12 + 20 * len(shown)}" fill="white" '
             'stroke="#bbb" rx="3"/>')
    for i, lib in enumerate(shown):
        y = ly + 16 + 20 * i
        c = COLORS[lib]
        o.append(f'<line x1="{lx + 10}" y1="{y}" x2="{lx + 40}" y2="{y}" stroke="{c}" stroke-width="2.2"/>')
        o.append(marker(MARKERS[lib], lx + 25, y, c, LIB_NAME[lib]))
        o.append(f'<text x="{lx + 48}" y="{y + 4}" font-size="13">{escape(LIB_NAME[lib])}</text>')
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare rshmem-bench and nvshmem_perf RESULT lines.")
    ap.add_argument("rshmem_log")
    ap.add_argument("nvshmem_log")
    ap.add_argument("outdir")
    ap.add_argument("--machine", default="", help="machine description for comparison.md")
    ap.add_argument("--command", default="", help="command line for comparison.md")
    args = ap.parse_args(argv)
    r = parse_log(args.rshmem_log, "rshmem")
    n = parse_log(args.nvshmem_log, "nvshmem")
    if not r and not n:
        print("compare.py: no RESULT lines in either log", file=sys.stderr)
    os.makedirs(args.outdir, exist_ok=True)
    pairs = pair_rows(r, n)
    write_csv(os.path.join(args.outdir, "results.csv"), r, n)
    write_markdown(os.path.join(args.outdir, "comparison.md"), r, n, pairs, args)
    shapes = sorted({(row["grid"], row["threads"]) for rows in (r, n) for row in rows.values()
                     if row["case"] in ("put_bw", "get_bw")})
    sub = "block scope, " + ", ".join(f"grid {g} x {t} threads" for g, t in shapes) if shapes else "block scope"
    if args.machine:
        sub += " — " + args.machine
    if len(sub) > 110:
        sub = sub[:107] + "..."
    write_svg(os.path.join(args.outdir, "put_bw.svg"), "put_bw", "Put bandwidth: rshmem vs NVSHMEM", r, n, sub)
    write_svg(os.path.join(args.outdir, "get_bw.svg"), "get_bw", "Get bandwidth: rshmem vs NVSHMEM", r, n, sub)
    print(f"compare.py: {len(r)} rshmem and {len(n)} NVSHMEM results -> {args.outdir}/"
          "{results.csv,comparison.md,put_bw.svg,get_bw.svg}", file=sys.stderr)
    return 0 if (r or n) else 1


if __name__ == "__main__":
    sys.exit(main())
