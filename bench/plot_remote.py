#!/usr/bin/env python3
"""Plot and table of the remote-PE benchmarks (issue 8), from the files `scripts/gpu.sh remote` writes.

    python3 bench/plot_remote.py RESULTS_DIR OUT_DIR [--prefix remote]

Reads RESULTS_DIR/rshmem_proxy.log (rshmem-bench RESULT lines over the proxy transport),
nccl_socket.json (bench/nccl_socket.py), loopback_tcp.json (bench/loopback_tcp.py) and, when there,
remote_summary.json (machine, commit, step exit codes). Writes OUT_DIR/PREFIX_bw.png (bandwidth
against size: rshmem proxy put and get, NCCL socket send/recv, the loopback TCP stream as a line) and
OUT_DIR/PREFIX.md (the tables, and the issue's targets marked pass or miss):
  * 256 MiB put bandwidth >= 1.2 x NCCL socket;
  * 64 KiB put bandwidth >= 2 x NCCL socket;
  * p + quiet <= 25 us.
rshmem's put and get at a size are the best of its three scopes (thread, warp, block), named.
A missing input makes its rows say "not measured"; a target without both numbers is "not measured",
never pass. matplotlib is needed for the PNG only (the table is written without it).
"""
import argparse
import json
import os
import re
import sys

TARGETS = [
    ("256 MiB put bandwidth >= 1.2 x NCCL socket", "bw_ratio", 256 << 20, 1.2),
    ("64 KiB put bandwidth >= 2 x NCCL socket", "bw_ratio", 64 << 10, 2.0),
    ("p + quiet <= 25 us", "p_lat", None, 25.0),
]
TAG = re.compile(r"^\[pe \d+\] ")


def read_results(path):
    """{(case, scope, bytes): (value, unit, route)} from RESULT lines; the last duplicate wins."""
    rows = {}
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"plot_remote: {e}: rshmem rows not measured", file=sys.stderr)
        return rows
    with f:
        for line in f:
            line = TAG.sub("", line.strip())
            if not line.startswith("RESULT "):
                continue
            kv = dict(t.split("=", 1) for t in line.split()[1:] if "=" in t)
            try:
                rows[(kv["case"], kv.get("scope", "-"), int(kv["bytes"]))] = (float(kv["value"]), kv.get("unit", ""), kv.get("route", "?"))
            except (KeyError, ValueError):
                print(f"plot_remote: {path}: bad RESULT line skipped: {line}", file=sys.stderr)
    return rows


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        print(f"plot_remote: {e}: not measured", file=sys.stderr)
        return None


def size_name(b):
    for unit, s in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return f"{b >> s} {unit}"
    return f"{b} B"


def best(rows, case, b):
    """Best value of `case` at size b over the scopes, with the scope's name, or None."""
    c = [(v[0], scope) for (k, scope, bb), v in rows.items() if k == case and bb == b]
    return max(c) if c else None


def fmt(x, digits=3):
    """x to `digits` significant digits, or "not measured"."""
    return "not measured" if x is None else f"{x:.{digits}g}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("outdir")
    ap.add_argument("--prefix", default="remote")
    a = ap.parse_args()
    rows = read_results(os.path.join(a.results, "rshmem_proxy.log"))
    nccl = read_json(os.path.join(a.results, "nccl_socket.json"))
    lo = read_json(os.path.join(a.results, "loopback_tcp.json"))
    summ = read_json(os.path.join(a.results, "remote_summary.json")) if os.path.exists(os.path.join(a.results, "remote_summary.json")) else None
    nrows = {r["bytes"]: r for r in (nccl or {}).get("rows", [])}
    routes = {v[2] for v in rows.values()}
    sizes = sorted({b for (k, _, b) in rows if k in ("put_bw", "get_bw")} | set(nrows))
    os.makedirs(a.outdir, exist_ok=True)
    md = [f"# Remote PEs: rshmem's proxy transport beside NCCL's socket transport", ""]
    if summ:
        md.append(f"Machine: {summ.get('machine', '?')}; commit {summ.get('commit', '?')}; {summ.get('date', '?')}; --netns: {summ.get('netns')}.")
        md.append("")
        md.append("| step | exit | seconds |")
        md.append("| --- | --- | --- |")
        for s in summ.get("steps", []):
            md.append(f"| {s['step']} | {s['exit']} | {s['seconds']} |")
        md.append("")
    if rows and routes != {"remote"}:
        md.append(f"**Warning:** rshmem-bench's pair was not on two nodes (routes {sorted(routes)}): these are not proxy figures.")
        md.append("")
    md += ["## Bandwidth (GB/s, 10^9 bytes/s; one direction)", "",
           "| size | rshmem put (scope) | rshmem get (scope) | NCCL socket send/recv | put / NCCL |", "| --- | --- | --- | --- | --- |"]
    put, get, nbw = {}, {}, {}
    for b in sizes:
        p, g = best(rows, "put_bw", b), best(rows, "get_bw", b)
        n = nrows.get(b, {}).get("bw_GBps")
        put[b], get[b], nbw[b] = p and p[0], g and g[0], n
        ratio = f"{p[0] / n:.2f} x" if p and n else "not measured"
        md.append(f"| {size_name(b)} | {fmt(p and p[0])}{f' ({p[1]})' if p else ''} | {fmt(g and g[0])}{f' ({g[1]})' if g else ''} | {fmt(n)} | {ratio} |")
    if lo:
        md += ["", f"One loopback TCP stream (the medium's limit): {lo['bandwidth_GBps']:.2f} GB/s with {size_name(lo['bytes'])} transfers, "
               f"8-byte half round trip {lo['half_rtt_8B_us']:.1f} us."]
    md += ["", "## Latency (us)", "", "| what | rshmem proxy | NCCL socket | loopback TCP |", "| --- | --- | --- | --- |"]
    lat = {case: v[0] for (case, _, _), v in rows.items() if v[1] == "us"}
    n8 = nrows.get(8, {}).get("half_rtt_us")
    for case, what in [("p_lat", "p + quiet (4 B)"), ("g_lat", "g (4 B)"), ("put_lat", "put 8 B + quiet"), ("get_lat", "get 8 B"),
                       ("amo_fetch_add_lat", "fetch_add"), ("amo_cswap_lat", "compare_swap"), ("pingpong", "ping-pong, half round trip (p + wait_until)"),
                       ("put_signal_pingpong", "ping-pong, half round trip (put_signal)"), ("barrier_all", "device barrier_all (2 PEs)"),
                       ("sync_all", "device sync_all"), ("host_barrier_all", "host barrier_all")]:
        hrt = "pingpong" in case
        md.append(f"| {what} | {fmt(lat.get(case))} | {fmt(n8) if hrt else ''} | {fmt(lo and lo['half_rtt_8B_us']) if hrt else ''} |")
    if 64 << 10 in nrows and "half_rtt_us" in nrows[64 << 10]:
        md.append(f"| NCCL 64 KiB half round trip | | {nrows[64 << 10]['half_rtt_us']:.1f} | |")
    md += ["", "## Targets (issue 8)", "", "| target | measured | result |", "| --- | --- | --- |"]
    for name, kind, b, want in TARGETS:
        if kind == "bw_ratio":
            p, n = put.get(b), nbw.get(b)
            if p is None or n is None:
                gbps = lambda x: "not measured" if x is None else f"{x:.2f} GB/s"
                md.append(f"| {name} | rshmem {gbps(p)}, NCCL {gbps(n)} | not measured |")
            else:
                md.append(f"| {name} | rshmem {p:.2f} GB/s, NCCL {n:.2f} GB/s: {p / n:.2f} x | {'pass' if p >= want * n else 'miss'} |")
        else:
            v = lat.get("p_lat")
            md.append(f"| {name} | {fmt(v)} us | {'not measured' if v is None else 'pass' if v <= want else 'miss'} |")
    md += ["", "For a miss: what limits it, measured, goes here (to be filled from the run's logs)."]
    mdpath = os.path.join(a.outdir, f"{a.prefix}.md")
    with open(mdpath, "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"plot_remote: wrote {mdpath}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_remote: matplotlib is not installed: no PNG (pip install matplotlib)", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(8, 5))
    for series, label, style in ((put, "rshmem proxy put (best scope)", "o-"), (get, "rshmem proxy get (best scope)", "s-"), (nbw, "NCCL socket send/recv", "^-")):
        pts = sorted((b, v) for b, v in series.items() if v)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    if lo:
        ax.axhline(lo["bandwidth_GBps"], color="gray", linestyle="--", label=f"one loopback TCP stream ({lo['bandwidth_GBps']:.2f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_title("Two GPUs as two nodes: rshmem proxy transport vs NCCL socket")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    png = os.path.join(a.outdir, f"{a.prefix}_bw.png")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    print(f"plot_remote: wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
