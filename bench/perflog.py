"""Parsers shared by the summary scripts of GPU runs (remote_summary.py, remote1gpu_summary.py): one
place for the formats of NVSHMEM's perftest lines and rshmem-bench / msg_rate RESULT lines."""
import os
import re


def reader(d):
    """read(name): the text of log `name` in folder `d` ("" when it is missing)."""
    def read(name):
        try:
            with open(os.path.join(d, name), errors="replace") as f:
                return f.read()
        except OSError:
            return ""
    return read


def perf(text, job, sub=None):
    """NVSHMEM perftest machine-readable lines: {size: value} for job (and subjob)."""
    out = {}
    for m in re.finditer(r"&&&& PERF (\w+?)___(\w+?)___size__(\d+)___\w+ ([0-9.eE+-]+)", text):
        if m.group(1) == job and (sub is None or m.group(2) == sub):
            out[int(m.group(3))] = float(m.group(4))
    return out


def results(text):
    """rshmem-bench / msg_rate RESULT lines as dicts."""
    rows = []
    for line in text.splitlines():
        i = line.find("RESULT ")
        if i < 0:
            continue
        f = dict(kv.split("=", 1) for kv in line[i + 7:].split() if "=" in kv)
        try:
            f["value"] = float(f["value"])
            f["bytes"] = int(f["bytes"])
        except (KeyError, ValueError):
            continue
        rows.append(f)
    return rows


def pick(rows, **want):
    """The value of the first row whose fields match `want`, or None."""
    for r in rows:
        if all(str(r.get(k)) == str(v) for k, v in want.items()):
            return r["value"]
    return None


def fmt(x, nd=4):
    return "n/a" if x is None else f"{x:.{nd}g}"
