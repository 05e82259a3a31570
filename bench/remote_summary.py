#!/usr/bin/env python3
"""Issue 19's summary from the logs of one `scripts/gpu.sh remote` call (PART=targets and/or checks):

    python3 bench/remote_summary.py DIR      (DIR: the call's logs/, or logs.tar.gz unpacked)

Prints the lines the issue asks for,
    remote_put_4KiB_4x1024_GBps: X          NVSHMEM's shmem_put_bw built against rshmem, proxy, 4 x 1024, 4 KiB
    remote_put_64KiB_4x1024_GBps: X         the same at 64 KiB
    remote_scaling_32x32_over_1x32_min: X   min over the sizes of shmem_put_bw 32 x 32 / 1 x 32 (proxy)
    remote_p_quiet_us: X                    shmem_p_latency -t 1, 4 bytes (proxy)
    remote_put8_mops_32blocks: X            rshmem-bench msg_rate_put, 8 B, 32 blocks (proxy), 10^6 ops/s
then the same figures for IBGDA (emulated NIC) and from the C++ message-rate program, the other
targets (barrier, every-thread quiet, 1 MiB and up against NCCL's best), the media (loopback TCP with
1..16 streams, NCCL's socket transport at both settings), and the same-node P2P figures of this build
beside the previous one (carry-before/). A missing log gives `n/a`, never a guess.
"""
import glob
import json
import os
import re
import statistics
import sys

D = sys.argv[1] if len(sys.argv) > 1 else "."


from perflog import fmt, perf, pick, reader, results  # noqa: E402 (bench/ is on the path)

read = reader(D)


def load_json(name):
    t = read(name)
    try:
        return json.loads(t) if t else None
    except ValueError:
        return None


bw = {}  # (transport, "GxT") -> {size: GB/s}
for p in glob.glob(os.path.join(D, "perftest_put_bw_*.log")):
    m = re.match(r"perftest_put_bw_(\w+?)_(\d+x\d+)\.log$", os.path.basename(p))
    if m:
        bw[(m.group(1), m.group(2))] = perf(read(os.path.basename(p)), "shmem_put_bw_uni")


def scaling_min(t):
    a, b = bw.get((t, "32x32"), {}), bw.get((t, "1x32"), {})
    r = [a[s] / b[s] for s in a if s in b and b[s] > 0]
    return min(r) if r else None


plat = {t: perf(read(f"perftest_p_latency_{t}.log"), "shmem_p_latency").get(4) for t in ("proxy", "ibgda")}
bar = {t: perf(read(f"perftest_barrier_{t}.log"), "barrier_all_device", "thread") for t in ("proxy", "ibgda")}
bar = {t: (next(iter(v.values())) if v else None) for t, v in bar.items()}
rate = {t: results(read(f"msgrate_rust_{t}.log")) for t in ("proxy", "ibgda")}
cpp = {t: results(read(f"msgrate_cpp_{t}.log")) for t in ("proxy", "ibgda")}

print("# issue 19 summary (bench/remote_summary.py %s)" % D)
print(f"remote_put_4KiB_4x1024_GBps: {fmt(bw.get(('proxy', '4x1024'), {}).get(4096))}")
print(f"remote_put_64KiB_4x1024_GBps: {fmt(bw.get(('proxy', '4x1024'), {}).get(65536))}")
print(f"remote_scaling_32x32_over_1x32_min: {fmt(scaling_min('proxy'))}")
print(f"remote_p_quiet_us: {fmt(plat['proxy'])}")
print(f"remote_put8_mops_32blocks: {fmt(pick(rate['proxy'], case='msg_rate_put', bytes=8, grid=32))}")
print("# the same through IBGDA (emulated NIC), and from the C++ program (bench/nvshmem/msg_rate.cu)")
print(f"remote_put_4KiB_4x1024_GBps_ibgda: {fmt(bw.get(('ibgda', '4x1024'), {}).get(4096))}")
print(f"remote_put_64KiB_4x1024_GBps_ibgda: {fmt(bw.get(('ibgda', '4x1024'), {}).get(65536))}")
print(f"remote_scaling_32x32_over_1x32_min_ibgda: {fmt(scaling_min('ibgda'))}")
print(f"remote_p_quiet_us_ibgda: {fmt(plat['ibgda'])}")
print(f"remote_put8_mops_32blocks_ibgda: {fmt(pick(rate['ibgda'], case='msg_rate_put', bytes=8, grid=32))}")
print(f"remote_put8_mops_32blocks_cpp: {fmt(pick(cpp['proxy'], case='msg_rate_put', bytes=8, grid=32))}")
print(f"remote_p8_mops_32blocks: {fmt(pick(rate['proxy'], case='msg_rate_p', bytes=8, grid=32))}")
print(f"remote_barrier_all_us: {fmt(bar['proxy'])}")
print(f"remote_barrier_all_us_ibgda: {fmt(bar['ibgda'])}")

# shmem_put_bw tables.
sizes = sorted({s for v in bw.values() for s in v})
if sizes:
    print("\n## shmem_put_bw (NVSHMEM's perftest unchanged against rshmem, --nodes 2), GB/s")
    print("| transport | grid | " + " | ".join(f"{s // 1024} KiB" if s < 1 << 20 else f"{s >> 20} MiB" for s in sizes) + " |")
    print("| --- | --- |" + " ---: |" * len(sizes))
    for (t, g) in sorted(bw, key=lambda k: (k[0] != "proxy", k[0], ["4x1024", "1x1024", "1x32", "32x32"].index(k[1]) if k[1] in ["4x1024", "1x1024", "1x32", "32x32"] else 9)):
        print(f"| {t} | {g} | " + " | ".join(fmt(bw[(t, g)].get(s), 3) for s in sizes) + " |")
    for t in ("proxy", "ibgda"):
        a, b = bw.get((t, "32x32"), {}), bw.get((t, "1x32"), {})
        if a and b:
            print(f"32x32 / 1x32 ({t}): " + ", ".join(f"{s}: {fmt(a[s] / b[s], 3)}" for s in sizes if s in a and s in b and b[s]))

# Message rate and every-thread quiet.
for label, rows in (("rshmem-bench", rate), ("msg_rate.cu", cpp)):
    for t, rs in rows.items():
        if not rs:
            continue
        grids = sorted({int(r["grid"]) for r in rs if r["case"].startswith("msg_rate")})
        if grids:
            print(f"\n## message rate, {label}, {t}: 10^6 operations/s (thread 0 of each block, one quiet)")
            print("| case | bytes | " + " | ".join(f"{g} blocks" for g in grids) + " |")
            print("| --- | ---: |" + " ---: |" * len(grids))
            for case, b in sorted({(r["case"], r["bytes"]) for r in rs if r["case"].startswith("msg_rate")}, key=lambda x: (x[0] != "msg_rate_put", x[1])):
                print(f"| {case} | {b} | " + " | ".join(fmt(pick(rs, case=case, bytes=b, grid=g), 3) for g in grids) + " |")
        q = [r for r in rs if r["case"].startswith("quiet_bw")]
        if q:
            print(f"\n## every-thread quiet, {label}, {t}: GB/s ({q[0]['grid']} x {q[0]['threads']}, 100 putmem_nbi_block per block)")
            print("| bytes | every thread quiets | each block's thread 0 | one thread of the grid | all / one |")
            print("| ---: | ---: | ---: | ---: | ---: |")
            for b in sorted({r["bytes"] for r in q}):
                a, k, o = (pick(q, case=c, bytes=b) for c in ("quiet_bw_all", "quiet_bw_block", "quiet_bw_one"))
                print(f"| {b} | {fmt(a, 3)} | {fmt(k, 3)} | {fmt(o, 3)} | {fmt(a / o if a and o else None, 3)} |")
nv = results(read("msgrate_nvshmem_p2p.log"))
if nv:
    print("\n## msg_rate.cu against NVSHMEM 3.4.5, same node (NVLink: a reference, not a remote figure)")
    for r in nv:
        print(f"{r['case']} bytes={r['bytes']} grid={r['grid']}: {fmt(r['value'], 4)} {r['unit']}")

# Media.
lt = load_json("loopback_tcp.json")
if lt:
    print("\n## loopback TCP (bench/loopback_tcp.py)")
    print(f"one stream, {lt['bytes'] >> 20} MiB: {fmt(lt['bandwidth_GBps'])} GB/s; 8-byte half round trip {fmt(lt['half_rtt_8B_us'])} us")
    for r in lt.get("streams", []):
        print(f"{r['streams']} streams x {r['bytes_per_stream'] >> 20} MiB: {fmt(r['GBps'])} GB/s")
best_nccl = {}
for name in ("nccl_socket.json", "nccl_socket_4x4.json"):
    j = load_json(name)
    if not j:
        continue
    print(f"\n## NCCL socket transport ({name}: {j.get('label') or 'default'}, sockets {j.get('sockets')})")
    for r in j["rows"]:
        print(f"{r['bytes']} B: {fmt(r.get('bw_GBps'))} GB/s" + (f", half round trip {fmt(r['half_rtt_us'])} us" if "half_rtt_us" in r else ""))
        if r.get("bw_GBps"):
            best_nccl[r["bytes"]] = max(best_nccl.get(r["bytes"], 0), r["bw_GBps"])
mine = bw.get(("proxy", "4x1024"), {})
big = [s for s in sorted(mine) if s >= 1 << 20]
if big and best_nccl:
    print("\n## shmem_put_bw proxy 4 x 1024 from 1 MiB against NCCL's best setting at the same size (target >= 2)")
    for s in big:
        n = best_nccl.get(s)
        print(f"{s >> 20} MiB: rshmem {fmt(mine[s])} GB/s, NCCL best {fmt(n)} GB/s, ratio {fmt(mine[s] / n if n else None, 3)}")

# Same-node P2P: this build beside the previous one.
now, before, now2 = results(read("p2p_now.log")), results(read("p2p_before.log")), results(read("p2p_now2.log"))
if now:
    print("\n## same-node P2P (rshmem-bench, same parameters): this build" + (" beside carry-before/" if before else " (no carry-before/)")
          + "; 'now' is the better of this build's two runs (the second ran after the previous build's)")
    keys = [("put_bw", "block", 65536), ("put_bw", "block", 8 << 20), ("put_bw", "thread", 65536), ("get_bw", "block", 65536),
            ("p_lat", "-", 4), ("put_lat", "-", 8), ("amo_fetch_add_lat", "-", 4), ("pingpong", "-", 4), ("barrier_all", "-", 0)]
    print("| case | scope | bytes | now (run 1, run 2) | before | now / before |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for c, sc, b in keys:
        a1, a2, o = pick(now, case=c, scope=sc, bytes=b), pick(now2, case=c, scope=sc, bytes=b), pick(before, case=c, scope=sc, bytes=b)
        both = [x for x in (a1, a2) if x is not None]
        # Bandwidth: higher is better; latency (us): lower is better.
        a = (max(both) if c.endswith("_bw") else min(both)) if both else None
        print(f"| {c} | {sc} | {b} | {fmt(a)} ({fmt(a1)}, {fmt(a2)}) | {fmt(o)} | {fmt(a / o if a and o else None, 3)} |")
for name in sorted(glob.glob(os.path.join(D, "p2p_shape_*.log"))):
    rs = results(read(os.path.basename(name)))
    v64, v512 = (pick(rs, case="put_bw", scope="block", bytes=b) for b in (65536, 524288))
    st = re.search(r"exit: (\d+)", read(os.path.basename(name)))
    print(f"{os.path.basename(name)[:-4]}: put_bw block 64 KiB {fmt(v64)} GB/s, 512 KiB {fmt(v512)} GB/s, {len(rs)} RESULT lines"
          + (f", exit {st.group(1)}" if st else ""))

# The proxy's stage counters (RSHMEM_PROXY_STATS=1, set for PART=targets): one line per PE and run.
stat_lines = []
for name in sorted(glob.glob(os.path.join(D, "*.log"))):
    for line in read(os.path.basename(name)).splitlines():
        i = line.find("rshmem proxy stats [PE ")
        if i >= 0:
            stat_lines.append(f"{os.path.basename(name)[:-4]}: {line[i + len('rshmem proxy stats '):]}")
if stat_lines:
    print("\n## proxy stages (RSHMEM_PROXY_STATS=1: per PE, what its proxy spent time on)")
    for l in stat_lines:
        print(l)
