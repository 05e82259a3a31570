#!/usr/bin/env python3
"""Issue 20's hardware-bound figures, as `name: value` lines for bench/perftest_score.py (PERFTEST_EXTRA):

    python3 bench/hw_bounds.py --bench LOG [--bench LOG ...] [--nvshmem LOG ...] [--cpp-rshmem LOG ...]
                               [--ratio-shape 132x512] [--small-shape 4x1024] [--out FILE]
    python3 bench/hw_bounds.py --self-test

Inputs (each option may be repeated; a log may hold one or more launch shapes, `grid x threads`):
  --bench        rshmem-bench logs (`RESULT lib=rshmem ...`, an optional `[pe N] ` tag in front), with the
                 `bw` section's block rows and their hardware bounds: `ce_put_bw` / `ce_get_bw` (the copy
                 engine) and `x_put_bw_deep8` / `x_get_bw_deep8` (the raw copy kernel x_bw_deep).
  --nvshmem      bench/nvshmem/nvshmem_perf.cu built against NVSHMEM (`RESULT lib=nvshmem ...`).
  --cpp-rshmem   the same program built against rshmem's nvshmem.h (it prints `lib=nvshmem` too; the
                 option says which library it ran on).

Lines printed (ratios; above 1 means rshmem is faster):
  hw_put_256MiB_vs_copy_engine   block put_bw at 256 MiB / ce_put_bw at 256 MiB, at --ratio-shape (the
                                 shape put_bw_ratio is measured at; another shape when that one lacks the
                                 rows, said in the line)
  hw_get_256MiB_vs_copy_engine   the same for get
  hw_put_8_64KiB_vs_copy_kernel  the least over 8, 16, 32 and 64 KiB of block put_bw / x_put_bw_deep8 at
                                 that size, at --small-shape (which size was the least is in the line)
  hw_get_8_64KiB_vs_copy_kernel  the same for get
  put_bw_ratio                   rshmem-bench's block put at 256 MiB / nvshmem_perf's (NVSHMEM), at
                                 --ratio-shape: bench/compare.py's definition (compare.put_bw_ratio)
  cpp_put_64KiB_ratio            nvshmem_perf's block put at 64 KiB at --small-shape, under rshmem /
                                 under NVSHMEM
  cpp_put_8KiB_ratio, cpp_get_8KiB_ratio, cpp_get_64KiB_ratio   the same at 8 KiB and for get
then the same hardware-bound lines for every other shape found, suffixed `_<grid>x<threads>`. A figure
that cannot be made is printed as `name: n/a (why)`, which perftest_score.py lists as not measured.
Python 3 standard library only; the log parsing is bench/compare.py's.
"""
import argparse
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ beside the scripts (it would travel with the tree)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py: one definition of the log format and of put_bw_ratio)

KiB, MiB = 1 << 10, 1 << 20
SMALL_SIZES = (8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB)
BIG = 256 * MiB


def parse_shape(text):
    """'132x512' -> (132, 512)."""
    try:
        g, t = text.lower().replace(" ", "").split("x")
        return int(g), int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a launch shape GRIDxTHREADS (e.g. 132x512)")


def shape_text(shape):
    return f"{shape[0]} x {shape[1]}"


def read_by_shape(paths, lib):
    """{(grid, threads): {(case, scope, bytes): row}} of the RESULT lines of `lib` in the logs (compare.py's
    line format; a later line wins over an earlier one of the same shape and key)."""
    out = {}
    for path in paths:
        try:
            f = open(path, encoding="utf-8", errors="replace")
        except OSError as e:
            print(f"hw_bounds.py: cannot read {path}: {e}", file=sys.stderr)
            continue
        with f:
            for line in f:
                row, _ = compare.parse_line(line)
                if row is None or row["lib"] != lib:
                    continue
                out.setdefault((row["grid"], row["threads"]), {})[(row["case"], row["scope"], row["bytes"])] = row
    return out


def value(rows, case, scope, b):
    row = rows.get((case, scope, b))
    return row["value"] if row and row["value"] > 0 else None


def ce_bound(rows, d):
    """(ratio, text) of block {d}_bw / ce_{d}_bw at 256 MiB in one shape's rows, or (None, why)."""
    lib, ce = value(rows, f"{d}_bw", "block", BIG), value(rows, f"ce_{d}_bw", "-", BIG)
    if lib is None or ce is None:
        missing = [n for n, v in ((f"block {d}_bw", lib), (f"ce_{d}_bw", ce)) if v is None]
        return None, "no " + " or ".join(missing) + " row at 256 MiB"
    return lib / ce, f"block {d}_bw {lib:.4g} GB/s / ce_{d}_bw {ce:.4g} GB/s at 256 MiB"


def kernel_bound(rows, d):
    """(least ratio, text) of block {d}_bw / x_{d}_bw_deep8 over 8-64 KiB in one shape's rows."""
    per, missing = [], []
    for b in SMALL_SIZES:
        lib, raw = value(rows, f"{d}_bw", "block", b), value(rows, f"x_{d}_bw_deep8", "block", b)
        if lib is None or raw is None:
            missing.append(compare.size_label(b))
        else:
            per.append((lib / raw, b, lib, raw))
    if not per:
        return None, f"no block {d}_bw with x_{d}_bw_deep8 rows at 8-64 KiB"
    r, b, lib, raw = min(per)
    text = (f"least at {compare.size_label(b)}: block {d}_bw {lib:.4g} / x_{d}_bw_deep8 {raw:.4g} GB/s; "
            + ", ".join(f"{compare.size_label(x[1])} {x[0]:.3f}" for x in per))
    if missing:
        text += "; missing " + ", ".join(missing)
    return r, text


def pick(shapes_with, want):
    """The shape to use: `want` when it has the figure, else the first shape that has it (sorted)."""
    if want in shapes_with:
        return want
    return sorted(shapes_with)[0] if shapes_with else None


def fmt_line(name, ratio, text):
    return f"{name}: {ratio:.3f} ({text})" if ratio is not None else f"{name}: n/a ({text})"


def bounds_lines(bench, ratio_shape, small_shape):
    """The four hardware-bound lines (headline shapes) and the per-shape lines."""
    lines, extra = [], []
    for d in ("put", "get"):
        for name, fn, want in ((f"hw_{d}_256MiB_vs_copy_engine", ce_bound, ratio_shape),
                               (f"hw_{d}_8_64KiB_vs_copy_kernel", kernel_bound, small_shape)):
            per = {s: fn(rows, d) for s, rows in bench.items()}
            have = [s for s, (r, _) in per.items() if r is not None]
            s = pick(have, want)
            if s is None:
                why = "; ".join(f"{shape_text(s)}: {t}" for s, (_, t) in sorted(per.items())) or "no rshmem-bench log"
                lines.append(fmt_line(name, None, why))
            else:
                r, t = per[s]
                note = "" if s == want else f"; {shape_text(want)} lacks it"
                lines.append(fmt_line(name, r, f"{shape_text(s)}: {t}{note}"))
            for s2 in sorted(per):
                r, t = per[s2]
                extra.append(fmt_line(f"{name}_{s2[0]}x{s2[1]}", r, t))
    order = {n: i for i, n in enumerate(("hw_put_256MiB_vs_copy_engine", "hw_get_256MiB_vs_copy_engine",
                                         "hw_put_8_64KiB_vs_copy_kernel", "hw_get_8_64KiB_vs_copy_kernel"))}
    lines.sort(key=lambda line: order[line.split(":", 1)[0]])
    return lines, extra


def ratio_line(bench, nvshmem, ratio_shape):
    """put_bw_ratio at ratio_shape (else a shape both sides have), compare.py's definition."""
    common = [s for s in set(bench) & set(nvshmem)
              if compare.put_bw_ratio(compare.pair_rows(bench[s], nvshmem[s])) is not None]
    s = pick(common, ratio_shape)
    if s is None:
        return fmt_line("put_bw_ratio", None, f"no block put_bw at 256 MiB in both an rshmem-bench and an NVSHMEM "
                        f"nvshmem_perf log of one shape (rshmem-bench: {', '.join(map(shape_text, sorted(bench))) or 'none'}; "
                        f"NVSHMEM: {', '.join(map(shape_text, sorted(nvshmem))) or 'none'})")
    r = compare.put_bw_ratio(compare.pair_rows(bench[s], nvshmem[s]))
    rv, nv = value(bench[s], "put_bw", "block", BIG), value(nvshmem[s], "put_bw", "block", BIG)
    note = "" if s == ratio_shape else f"; {shape_text(ratio_shape)} lacks it"
    return fmt_line("put_bw_ratio", r, f"rshmem-bench {rv:.4g} / NVSHMEM nvshmem_perf {nv:.4g} GB/s, block put "
                    f"256 MiB, {shape_text(s)}{note}")


def cpp_lines(cpp_r, nvshmem, small_shape):
    """nvshmem_perf under rshmem / under NVSHMEM, block put and get at 64 KiB and 8 KiB, at small_shape."""
    out = []
    r, n = cpp_r.get(small_shape, {}), nvshmem.get(small_shape, {})
    for d, b in (("put", 64 * KiB), ("put", 8 * KiB), ("get", 8 * KiB), ("get", 64 * KiB)):
        name = f"cpp_{d}_{b // KiB}KiB_ratio"
        rv, nv = value(r, f"{d}_bw", "block", b), value(n, f"{d}_bw", "block", b)
        if rv is None or nv is None:
            missing = [w for w, v in (("rshmem", rv), ("NVSHMEM", nv)) if v is None]
            out.append(fmt_line(name, None, f"no block {d}_bw at {compare.size_label(b)}, {shape_text(small_shape)}, "
                                f"from nvshmem_perf under {' and '.join(missing)}"))
        else:
            out.append(fmt_line(name, rv / nv, f"nvshmem_perf block {d}_bw {compare.size_label(b)}, "
                                f"{shape_text(small_shape)}: rshmem {rv:.4g} / NVSHMEM {nv:.4g} GB/s"))
    return out


def report(bench, nvshmem, cpp_r, ratio_shape, small_shape):
    head = ["# Hardware bounds and C++ ratios (bench/hw_bounds.py); ratios above 1 favour rshmem.",
            f"# rshmem-bench shapes: {', '.join(map(shape_text, sorted(bench))) or 'none'}; "
            f"nvshmem_perf (NVSHMEM): {', '.join(map(shape_text, sorted(nvshmem))) or 'none'}; "
            f"nvshmem_perf (rshmem): {', '.join(map(shape_text, sorted(cpp_r))) or 'none'}"]
    lines, extra = bounds_lines(bench, ratio_shape, small_shape)
    body = lines + [ratio_line(bench, nvshmem, ratio_shape)] + cpp_lines(cpp_r, nvshmem, small_shape)
    return "\n".join(head + body + ["", "# per shape:"] + extra) + "\n"


def self_test():
    """Synthetic logs of two shapes with known ratios."""
    def rl(lib, case, scope, b, g, t, v):
        return f"[pe 0] RESULT lib={lib} case={case} scope={scope} bytes={b} grid={g} threads={t} value={v} unit=GBps\n"

    with tempfile.TemporaryDirectory() as d:
        small = os.path.join(d, "bench-4x1024.log")
        with open(small, "w") as f:
            f.write("# noise\n")
            for b, (pb, xb, gb, xg) in zip(SMALL_SIZES, ((10, 10, 9, 10), (19, 20, 20, 20), (40, 40, 40, 50), (80, 80, 80, 80))):
                f.write(rl("rshmem", "put_bw", "block", b, 4, 1024, pb) + rl("rshmem", "x_put_bw_deep8", "block", b, 4, 1024, xb))
                f.write(rl("rshmem", "get_bw", "block", b, 4, 1024, gb) + rl("rshmem", "x_get_bw_deep8", "block", b, 4, 1024, xg))
            f.write(rl("rshmem", "put_bw", "block", BIG, 4, 1024, 100) + rl("rshmem", "ce_put_bw", "-", BIG, 4, 1024, 400))
        big = os.path.join(d, "bench-132x512.log")
        with open(big, "w") as f:
            f.write(rl("rshmem", "put_bw", "block", BIG, 132, 512, 392) + rl("rshmem", "ce_put_bw", "-", BIG, 132, 512, 400))
            f.write(rl("rshmem", "get_bw", "block", BIG, 132, 512, 410) + rl("rshmem", "ce_get_bw", "-", BIG, 132, 512, 400))
            # A thread-scope row of the same size must not be taken for the block row.
            f.write(rl("rshmem", "put_bw", "thread", BIG, 132, 512, 1))
        nv = os.path.join(d, "nvshmem.log")
        with open(nv, "w") as f:
            f.write(rl("nvshmem", "put_bw", "block", BIG, 132, 512, 350))
            f.write(rl("nvshmem", "put_bw", "block", 64 * KiB, 4, 1024, 50) + rl("nvshmem", "put_bw", "block", 8 * KiB, 4, 1024, 8))
            f.write(rl("nvshmem", "get_bw", "block", 8 * KiB, 4, 1024, 10))
        cpp = os.path.join(d, "cpp-rshmem.log")
        with open(cpp, "w") as f:
            f.write(rl("nvshmem", "put_bw", "block", 64 * KiB, 4, 1024, 55) + rl("nvshmem", "put_bw", "block", 8 * KiB, 4, 1024, 6))
            f.write(rl("nvshmem", "get_bw", "block", 8 * KiB, 4, 1024, 12) + rl("nvshmem", "get_bw", "block", 64 * KiB, 4, 1024, 70))
            f.write(rl("rshmem", "put_bw", "block", 64 * KiB, 4, 1024, 999))  # another library's line: ignored
        text = report(read_by_shape([small, big], "rshmem"), read_by_shape([nv], "nvshmem"),
                      read_by_shape([cpp], "nvshmem"), (132, 512), (4, 1024))
        lines = text.splitlines()

        def line(name):
            hits = [x for x in lines if x.startswith(name + ":")]
            assert len(hits) == 1, (name, text)
            return hits[0]
        # 256 MiB at the ratio shape: 392/400 and 410/400; the 4 x 1024 put (100/400) only per shape.
        assert line("hw_put_256MiB_vs_copy_engine").startswith("hw_put_256MiB_vs_copy_engine: 0.980 (132 x 512: block put_bw 392"), text
        assert line("hw_get_256MiB_vs_copy_engine").startswith("hw_get_256MiB_vs_copy_engine: 1.025 (132 x 512"), text
        assert line("hw_put_256MiB_vs_copy_engine_4x1024").startswith("hw_put_256MiB_vs_copy_engine_4x1024: 0.250 ("), text
        assert line("hw_get_256MiB_vs_copy_engine_4x1024") == \
            "hw_get_256MiB_vs_copy_engine_4x1024: n/a (no block get_bw or ce_get_bw row at 256 MiB)", text
        # 8-64 KiB: put ratios 1.0, 0.95, 1.0, 1.0 (least at 16 KiB); get 0.9, 1.0, 0.8, 1.0 (least at 32 KiB).
        assert line("hw_put_8_64KiB_vs_copy_kernel").startswith(
            "hw_put_8_64KiB_vs_copy_kernel: 0.950 (4 x 1024: least at 16 KiB: block put_bw 19 / x_put_bw_deep8 20 GB/s; "
            "8 KiB 1.000, 16 KiB 0.950, 32 KiB 1.000, 64 KiB 1.000)"), text
        assert line("hw_get_8_64KiB_vs_copy_kernel").startswith("hw_get_8_64KiB_vs_copy_kernel: 0.800 (4 x 1024: least at 32 KiB"), text
        assert line("hw_put_8_64KiB_vs_copy_kernel_132x512").startswith("hw_put_8_64KiB_vs_copy_kernel_132x512: n/a ("), text
        # put_bw_ratio: compare.py's definition at 132 x 512: 392 / 350.
        assert line("put_bw_ratio").startswith("put_bw_ratio: 1.120 (rshmem-bench 392 / NVSHMEM nvshmem_perf 350 GB/s"), text
        # C++: 55/50, 6/8, 12/10; the 64 KiB get has no NVSHMEM row.
        assert line("cpp_put_64KiB_ratio").startswith("cpp_put_64KiB_ratio: 1.100 (nvshmem_perf block put_bw 64 KiB, 4 x 1024: rshmem 55 / NVSHMEM 50"), text
        assert line("cpp_put_8KiB_ratio").startswith("cpp_put_8KiB_ratio: 0.750 ("), text
        assert line("cpp_get_8KiB_ratio").startswith("cpp_get_8KiB_ratio: 1.200 ("), text
        assert line("cpp_get_64KiB_ratio").startswith("cpp_get_64KiB_ratio: n/a (no block get_bw at 64 KiB, 4 x 1024, from nvshmem_perf under NVSHMEM)"), text
        # A headline falls back to another shape, saying so.
        text2 = report(read_by_shape([small], "rshmem"), {}, {}, (132, 512), (4, 1024))
        assert "hw_put_256MiB_vs_copy_engine: 0.250 (4 x 1024: block put_bw 100 GB/s / ce_put_bw 400 GB/s at 256 MiB; 132 x 512 lacks it)" in text2, text2
        assert "put_bw_ratio: n/a (no block put_bw at 256 MiB in both" in text2, text2
        # perftest_score.py reads exactly the figures, and lists the n/a ones as not measured.
        import perftest_score
        out = os.path.join(d, "extra.md")
        with open(out, "w") as f:
            f.write(text)
        extra = perftest_score.read_extra([out])
        assert round(extra["hw_put_256MiB_vs_copy_engine"][0], 3) == 0.98 and round(extra["put_bw_ratio"][0], 3) == 1.12, extra
        assert round(extra["cpp_put_64KiB_ratio"][0], 3) == 1.1 and "cpp_get_64KiB_ratio" not in extra, extra
        rows, _, counts = perftest_score.targets({}, extra)
        status = {what.split(":", 1)[0]: st for what, _, _, st in rows}
        assert status["hw_put_256MiB_vs_copy_engine"] == "pass" and status["hw_get_8_64KiB_vs_copy_kernel"] == "miss", status
        assert status["put_bw_ratio"] == "pass" and status["cpp_put_64KiB_ratio"] == "recorded", status
    print("hw_bounds self-test: ok")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", action="append", default=[], help="an rshmem-bench log")
    ap.add_argument("--nvshmem", action="append", default=[], help="an nvshmem_perf log, built against NVSHMEM")
    ap.add_argument("--cpp-rshmem", action="append", default=[], help="an nvshmem_perf log, built against rshmem")
    ap.add_argument("--ratio-shape", type=parse_shape, default=(132, 512),
                    help="shape of put_bw_ratio and the 256 MiB bounds (default 132x512, bench/run-compare.sh's)")
    ap.add_argument("--small-shape", type=parse_shape, default=(4, 1024),
                    help="shape of the 8-64 KiB bounds and the C++ ratios (default 4x1024)")
    ap.add_argument("--out", help="also write the lines to this file")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if not (a.bench or a.nvshmem or a.cpp_rshmem):
        ap.error("give at least one log (--bench, --nvshmem, --cpp-rshmem), or --self-test")
    text = report(read_by_shape(a.bench, "rshmem"), read_by_shape(a.nvshmem, "nvshmem"),
                  read_by_shape(a.cpp_rshmem, "nvshmem"), a.ratio_shape, a.small_shape)
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
