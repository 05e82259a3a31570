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
Prints `RESULT lib=loopback_tcp case=... bytes=... value=... unit=...` lines and writes the JSON file.
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
    print(f"RESULT lib=loopback_tcp case=tcp_stream_bw scope=- bytes={n} value={bw:.4f} unit=GBps")
    print(f"RESULT lib=loopback_tcp case=tcp_half_rtt scope=- bytes=8 value={half:.4f} unit=us")
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
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
    }
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump(res, f, indent=2)
    print(json.dumps({k: res[k] for k in ("bandwidth_GBps", "half_rtt_8B_us")}))


ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--json")
ap.add_argument("--bytes", type=int, default=256 << 20)
ap.add_argument("--reps", type=int, default=5)
ap.add_argument("--host", default="127.0.0.1")
ARGS = ap.parse_args()
if __name__ == "__main__":
    main()
