#!/usr/bin/env python3
"""One TCP stream over loopback: the medium's limit for a CPU-proxy transport on one host.

    python3 bench/loopback_tcp.py [--json FILE] [--bytes N] [--reps R] [--host 127.0.0.1]

Two processes (no GIL shared), one connection, TCP_NODELAY:
  * bandwidth: the client sends N bytes (default 256 MiB, random data) R times; each time the server
    receives all of them into a poisoned buffer and answers one byte; time from the first byte sent to
    the answer, median of R after one warm-up. One direction, bytes / time, in GB/s (10^9). The server
    then checks every byte against the data (the same seeded random bytes, made on both sides), outside
    the timed region, and says so before the next repetition.
  * half round trip: 8-byte ping-pong, 10000 exchanges per repetition, median of R; half of one exchange.
  * N streams (`--streams 1,2,4,8,16`; the default runs only the single stream above): N
    connections, each with its own sending and its own receiving process (2N processes, no GIL
    shared); every sender sends `--stream-bytes` (default 64 MiB, its own seeded random data) per
    repetition, all released together by a barrier; aggregate bandwidth = N x bytes / (last answer -
    first start), median of R after one warm-up; every receiver checks every byte of every repetition
    outside the timed region. This is the bound for a transport that spreads its traffic over N
    connections (lanes) on one host.
Prints `RESULT lib=loopback_tcp case=... bytes=... value=... unit=...` lines (the N-stream figures as
`case=tcp_streams_bw ... streams=N`, bytes per stream) and writes the JSON file.
Python adds its own cost per call (a few us on the small exchange; nothing measurable on 256 MiB).
"""
import argparse
import json
import multiprocessing as mp
import os
import random
import socket
import statistics
import struct
import sys
import time

PINGS = 10000


def data_of(n, seed=20261123):
    """n seeded random bytes, made 1 MiB at a time (randbytes takes at most 2^28 bytes at once)."""
    r = random.Random(seed)
    return b"".join(r.randbytes(min(1 << 20, n - i)) for i in range(0, n, 1 << 20))


def recv_into_all(sock, view):
    got = 0
    while got < len(view):
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError(f"peer closed after {got} of {len(view)} bytes")
        got += k


def server(port_q, n, reps):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((ARGS.host, 0))
    ls.listen(1)
    port_q.put(ls.getsockname()[1])
    s, _ = ls.accept()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    want = data_of(n)
    buf = bytearray(n)
    view = memoryview(buf)
    poison = b"\xa5" * n
    for r in range(reps + 1):
        buf[:] = poison
        s.sendall(b"R")  # ready: the client starts its clock now
        recv_into_all(s, view)
        s.sendall(b"K")  # all received: the client stops its clock
        # Checked outside the timed region; the verdict goes with the next message.
        if buf != want:
            i = next(i for i in range(n) if buf[i] != want[i])
            s.sendall(b"E")
            raise SystemExit(f"loopback_tcp: repetition {r}: byte {i} is {buf[i]:#x}, expected {want[i]:#x}")
    s.sendall(b"V")  # the last repetition's data was right
    small = bytearray(8)
    sv = memoryview(small)
    for _ in range(reps + 1):
        for _ in range(PINGS):
            recv_into_all(s, sv)
            s.sendall(small)
    s.close()


def stream_server(port_q, idx, n, reps, errors):
    """The receiving end of stream idx: reps + 1 repetitions of n bytes, each checked."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((ARGS.host, 0))
    ls.listen(1)
    port_q.put((idx, ls.getsockname()[1]))
    s, _ = ls.accept()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    want = data_of(n, seed=20261123 + idx)
    buf = bytearray(n)
    view = memoryview(buf)
    poison = b"\xa5" * n
    for r in range(reps + 1):
        buf[:] = poison
        s.sendall(b"R")
        recv_into_all(s, view)
        s.sendall(b"K")
        if buf != want:
            i = next(i for i in range(n) if buf[i] != want[i])
            errors.put(f"stream {idx}, repetition {r}: byte {i} is {buf[i]:#x}, expected {want[i]:#x}")
    s.close()


def stream_client(port, idx, n, reps, barrier, times_q):
    """The sending end of stream idx: waits for the server's ready and the barrier, then sends."""
    s = socket.create_connection((ARGS.host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = memoryview(data_of(n, seed=20261123 + idx))
    ack = bytearray(1)
    av = memoryview(ack)
    for r in range(reps + 1):
        recv_into_all(s, av)  # the server's ready
        barrier.wait()
        t0 = time.perf_counter()  # CLOCK_MONOTONIC: comparable across processes
        s.sendall(data)
        recv_into_all(s, av)
        t1 = time.perf_counter()
        if ack != b"K":
            raise SystemExit(f"loopback_tcp: stream {idx}: unexpected answer {bytes(ack)!r}")
        times_q.put((idx, r, t0, t1))
    s.close()


def streams_bw(k, n, reps):
    """k concurrent streams of n bytes each: aggregate GB/s, median of reps after one warm-up."""
    ctx = mp.get_context("fork")
    port_q, times_q, errors = ctx.Queue(), ctx.Queue(), ctx.Queue()
    barrier = ctx.Barrier(k)
    servers = [ctx.Process(target=stream_server, args=(port_q, i, n, reps, errors)) for i in range(k)]
    for p in servers:
        p.start()
    ports = dict(port_q.get(timeout=60) for _ in range(k))
    clients = [ctx.Process(target=stream_client, args=(ports[i], i, n, reps, barrier, times_q)) for i in range(k)]
    for p in clients:
        p.start()
    spans = {}
    for _ in range(k * (reps + 1)):
        i, r, t0, t1 = times_q.get(timeout=600)
        spans.setdefault(r, []).append((t0, t1))
    for p in clients + servers:
        p.join(60)
    bad = [p.exitcode for p in clients + servers if p.exitcode != 0]
    if bad or not errors.empty():
        msgs = []
        while not errors.empty():
            msgs.append(errors.get())
        raise SystemExit(f"loopback_tcp: {k} streams: processes exited with {bad}; {msgs}")
    per_rep = [k * n / (max(t1 for _, t1 in spans[r]) - min(t0 for t0, _ in spans[r])) / 1e9 for r in range(1, reps + 1)]
    return {"streams": k, "bytes_per_stream": n, "GBps": statistics.median(per_rep), "GBps_all": per_rep}


def main():
    n, reps = ARGS.bytes, ARGS.reps
    q = mp.Queue()
    p = mp.Process(target=server, args=(q, n, reps))
    p.start()
    port = q.get(timeout=30)
    s = socket.create_connection((ARGS.host, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = memoryview(data_of(n))
    ack = bytearray(1)
    av = memoryview(ack)
    times = []
    for r in range(reps + 1):
        recv_into_all(s, av)
        if ack == b"E":
            raise SystemExit("loopback_tcp: the server found the data wrong")
        t = time.perf_counter()
        s.sendall(data)
        recv_into_all(s, av)
        dt = time.perf_counter() - t
        if ack != b"K":
            raise SystemExit(f"loopback_tcp: unexpected answer {bytes(ack)!r}")
        if r > 0:
            times.append(dt)
    recv_into_all(s, av)
    if ack != b"V":
        raise SystemExit("loopback_tcp: the server found the data wrong")
    bw = n / statistics.median(times) / 1e9
    msg = struct.pack("<Q", 0x1122334455667788)
    back = bytearray(8)
    bv = memoryview(back)
    lat = []
    for r in range(reps + 1):
        t = time.perf_counter()
        for _ in range(PINGS):
            s.sendall(msg)
            recv_into_all(s, bv)
        dt = time.perf_counter() - t
        if bytes(back) != msg:
            raise SystemExit("loopback_tcp: the ping came back changed")
        if r > 0:
            lat.append(dt / PINGS / 2 * 1e6)
    s.close()
    p.join(30)
    if p.exitcode != 0:
        raise SystemExit(f"loopback_tcp: the server process exited with {p.exitcode}")
    half = statistics.median(lat)
    print(f"RESULT lib=loopback_tcp case=tcp_stream_bw scope=- bytes={n} value={bw:.4f} unit=GBps", flush=True)
    print(f"RESULT lib=loopback_tcp case=tcp_half_rtt scope=- bytes=8 value={half:.4f} unit=us", flush=True)
    multi = []
    for k in ARGS.streams:
        if k == 1 and ARGS.streams == [1]:
            break
        row = streams_bw(k, ARGS.stream_bytes, reps)
        multi.append(row)
        print(f"RESULT lib=loopback_tcp case=tcp_streams_bw scope=- bytes={ARGS.stream_bytes} streams={k} value={row['GBps']:.4f} unit=GBps", flush=True)
    res = {
        "what": "one TCP stream over loopback (bench/loopback_tcp.py)",
        "host": ARGS.host,
        "bytes": n,
        "reps": reps,
        "bandwidth_GBps": bw,
        "bandwidth_GBps_all": [n / t / 1e9 for t in times],
        "half_rtt_8B_us": half,
        "half_rtt_8B_us_all": lat,
        "pings_per_rep": PINGS,
        "streams": multi,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump(res, f, indent=2)
    print(json.dumps({**{k: res[k] for k in ("bandwidth_GBps", "half_rtt_8B_us")}, "streams_GBps": {r["streams"]: round(r["GBps"], 3) for r in multi}}))


ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--json")
ap.add_argument("--bytes", type=int, default=256 << 20)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--streams", default="1", help="comma-separated stream counts, e.g. 1,2,4,8,16 (default: 1, the single stream only)")
ap.add_argument("--stream-bytes", type=int, default=64 << 20, help="bytes per stream and repetition in the N-stream runs")
ARGS = ap.parse_args()
ARGS.streams = [int(x) for x in ARGS.streams.split(",") if x.strip()]
if __name__ == "__main__":
    main()
