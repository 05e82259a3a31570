#!/usr/bin/env python3
"""The remote engine's figures on one GPU from the logs of `scripts/gpu.sh remote1gpu`:

    python3 bench/remote1gpu_summary.py LOGS     (LOGS: the call's logs/ folder)

Prints `name: value` lines (n/a when a log is missing: never a guess), then the tables they come from:
    remote1gpu_put_4KiB_4x1024_GBps          NVSHMEM's shmem_put_bw (unchanged), 4 x 1024, 4 KiB
    remote1gpu_put_64KiB_4x1024_GBps         the same, 64 KiB
    remote1gpu_scaling_32x32_over_1x32_min   min over 4 KiB..4 MiB of 32 x 32 / 1 x 32
    remote1gpu_put8_mops_32blocks            rshmem-bench msg_rate_put, 8 B, 32 blocks (10^6 ops/s)
    remote1gpu_put64_mops_32blocks           the same, 64 B
    remote1gpu_p_quiet_us                    shmem_p_latency -t 1, 4 bytes
    remote1gpu_p_quiet_over_rtt_us           that minus the loopback round trip (polling receiver)
    remote1gpu_barrier_us / _over_rtt_us     barrier_latency, barrier_all from one thread
    remote1gpu_put_1MiB_over_loopback        shmem_put_bw 4 x 1024 at 1 MiB (and 4 MiB) over the
                                             loopback bound of as many streams as the engine has lanes
    remote1gpu_quiet_all_over_block_min      every-thread quiet (32 x 1024) over one quiet per block
"""
import os
import re
import sys

D = sys.argv[1] if len(sys.argv) > 1 else "."


from perflog import fmt, perf, pick, reader, results  # noqa: E402 (bench/ is on the path)

read = reader(D)


lb = read("loopback.log")
loop_bw = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"loopback_bw streams=(\d+) GBps=([0-9.]+)", lb)}
rtt = {m.group(1): float(m.group(2)) for m in re.finditer(r"loopback_rtt mode=(\w+) us=([0-9.]+)", lb)}
bw = {g: perf(read(f"putbw_{g}.log"), "shmem_put_bw_uni") for g in ("4x1024", "1x1024", "1x32", "32x32")}
getbw = perf(read("getbw.log"), "shmem_get_bw_uni")
plat = perf(read("platency.log"), "shmem_p_latency").get(4)
bar = perf(read("barrier.log"), "barrier_all_device", "thread").get(0) or next(iter(perf(read("barrier.log"), "barrier_all_device", "thread").values()), None)
rows = results(read("benchrate.log"))
cpp = results(read("msgratecpp.log"))
lanes = 4
m = re.search(r"(\d+) lanes per peer", read("ring.log"))
if m:
    lanes = int(m.group(1))

sizes = sorted(set(bw["32x32"]) & set(bw["1x32"]))
scaling = min((bw["32x32"][s] / bw["1x32"][s] for s in sizes if bw["1x32"][s] > 0), default=None)
r = rtt.get("poll")
print(f"remote1gpu_put_4KiB_4x1024_GBps: {fmt(bw['4x1024'].get(4096))}")
print(f"remote1gpu_put_64KiB_4x1024_GBps: {fmt(bw['4x1024'].get(65536))}")
print(f"remote1gpu_scaling_32x32_over_1x32_min: {fmt(scaling)}")
print(f"remote1gpu_put8_mops_32blocks: {fmt(pick(rows, case='msg_rate_put', bytes=8, grid=32))}")
print(f"remote1gpu_put64_mops_32blocks: {fmt(pick(rows, case='msg_rate_put', bytes=64, grid=32))}")
print(f"remote1gpu_put8_mops_32blocks_cpp: {fmt(pick(cpp, case='msg_rate_put', bytes=8, grid=32))}")
print(f"remote1gpu_p_quiet_us: {fmt(plat)}")
print(f"remote1gpu_loopback_rtt_poll_us: {fmt(r)}")
print(f"remote1gpu_loopback_rtt_block_us: {fmt(rtt.get('block'))}")
print(f"remote1gpu_p_quiet_over_rtt_us: {fmt(None if plat is None or r is None else plat - r)}")
print(f"remote1gpu_barrier_us: {fmt(bar)}")
print(f"remote1gpu_barrier_over_rtt_us: {fmt(None if bar is None or r is None else bar - r)}")
for s, name in ((1 << 20, "1MiB"), (4 << 20, "4MiB")):
    b = bw["4x1024"].get(s)
    bound = loop_bw.get(lanes)
    print(f"remote1gpu_put_{name}_over_loopback_{lanes}streams: {fmt(None if b is None or not bound else b / bound)}")
qa = [(pick(cpp, case='quiet_bw_all', bytes=n), pick(cpp, case='quiet_bw_block', bytes=n)) for n in (1 << 20, 16 << 20, 256 << 20)]
qr = [a / b for a, b in qa if a and b]
print(f"remote1gpu_quiet_all_over_block_min: {fmt(min(qr) if qr else None)}")

print("\n## shmem_put_bw, GB/s (NVSHMEM's perftest unchanged, rshmrun --nodes 2 -np 2 on one GPU, proxy)")
allsizes = sorted(set().union(*[set(v) for v in bw.values()]))
print("| grid | " + " | ".join(f"{s >> 10} KiB" for s in allsizes) + " |")
print("| --- |" + " ---: |" * len(allsizes))
for g, v in bw.items():
    print(f"| {g} | " + " | ".join(fmt(v.get(s)) for s in allsizes) + " |")
if getbw:
    print("\nshmem_get_bw 4 x 1024, GB/s: " + ", ".join(f"{s >> 10} KiB {fmt(v)}" for s, v in sorted(getbw.items())))
print("\n## loopback (rshmem-loopback): " + ", ".join(f"{n} streams {v} GB/s" for n, v in sorted(loop_bw.items())) + f"; RTT poll {rtt.get('poll')} us, block {rtt.get('block')} us")
print("\n## rshmem-bench (rate, quiet, lat, barrier) RESULT lines")
for row in rows:
    print(f"{row.get('case')} scope={row.get('scope')} bytes={row.get('bytes')} grid={row.get('grid')} value={row['value']} {row.get('unit')}")
print("\n## msg_rate (C++) RESULT lines")
for row in cpp:
    print(f"{row.get('case')} scope={row.get('scope')} bytes={row.get('bytes')} grid={row.get('grid')} value={row['value']} {row.get('unit')}")
print("\n## stage counters (RSHMEM_PROXY_STATS)")
for name in sorted(os.listdir(D)) if os.path.isdir(D) else []:
    for line in read(name).splitlines():
        if "rshmem proxy stats" in line:
            print(f"{name}: {line.strip()}")
