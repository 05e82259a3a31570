#!/usr/bin/env python3
"""NCCL's socket transport between two GPUs of one host: the CPU-proxy TCP baseline for rshmem's
proxy transport (issue 8).

    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo \\
        python3 bench/nccl_socket.py [--json FILE] [--max-bytes N] [--reps R]
    python3 bench/nccl_socket.py --backend gloo ...   (CPU tensors: a check of this script, no GPU)

Two processes (torch.multiprocessing), rank r on GPU r, torch.distributed send/recv between them.
For each size from 8 B to 256 MiB (x4 steps, and 64 KiB and 1 MiB):
  * correctness first: the receive buffer is poisoned (0xA5), one message is received and compared
    with the sender's data (seeded random bytes, the same on both ranks); a difference stops the run;
    the receive buffers are compared again after the timed bandwidth and ping-pong runs;
  * bandwidth (one direction): rank 0 sends ITERS messages back to back, rank 1 receives them and
    answers one byte; CUDA events on rank 0 around all of it (the one-byte answer is included, under
    0.5% at 64 KiB); warm-up once, then the median of R repetitions; bytes x ITERS / time, GB/s (10^9);
  * half round trip (sizes up to 1 MiB): ping-pong of the size, ITERS exchanges, median of R; half of
    one exchange, in us.
Prints `RESULT lib=nccl_socket case=sendrecv_bw|sendrecv_half_rtt scope=- bytes=... value=... unit=...`
lines (as rshmem-bench does) and writes everything, with the NCCL variables in force, to --json.
The variables above must be set: without them NCCL takes NVLink or shared memory and this measures
something else (the script refuses unless --any-transport is given).
NCCL's socket transport spreads a message over NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD
connections (unset: NCCL's own choice, 1 x 1 outside known clouds; at most 64 together); issue 19 compares the default with
`NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4`. Both are taken from the environment, printed,
kept in the JSON (`env`, `sockets`), and `--label` (e.g. 4x4) is added to every RESULT line as
`setting=LABEL`. `--min-bytes` starts the sweep later (a shorter run for a second setting).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

NEEDED = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NET": "Socket"}


def sizes(maxb, minb=8):
    s, b = [], 8
    while b <= maxb:
        s.append(b)
        b *= 4
    for extra in (64 << 10, 1 << 20):
        if extra <= maxb and extra not in s:
            s.append(extra)
    if maxb not in s:
        s.append(maxb)
    return sorted(x for x in s if x >= minb)


def sockets():
    """NCCL's socket threads and sockets per thread as set in the environment (1 when unset: NCCL's
    default outside known clouds)."""
    def num(k):
        v = os.environ.get(k, "").strip()
        return int(v) if v else 1
    return num("NCCL_SOCKET_NTHREADS"), num("NCCL_NSOCKS_PERTHREAD")


def iters_for(b):
    return 200 if b < (1 << 20) else 50 if b < (16 << 20) else 10


class Clock:
    """CUDA events on the current stream (NCCL's stream is joined to it by each op's wait), or the host
    clock for CPU tensors."""

    def __init__(self, cuda):
        self.cuda = cuda
        if cuda:
            self.a, self.b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def start(self):
        if self.cuda:
            self.a.record()
        else:
            self.t = time.perf_counter()

    def stop_ms(self):
        if self.cuda:
            self.b.record()
            self.b.synchronize()
            return self.a.elapsed_time(self.b)
        return (time.perf_counter() - self.t) * 1e3


def worker(rank, port, args, out):
    cuda = args.backend == "nccl"
    dev = torch.device("cuda", rank) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    peer = 1 - rank
    gen = torch.Generator().manual_seed(20261123)
    src = torch.randint(0, 256, (args.max_bytes,), dtype=torch.uint8, generator=gen).to(dev)
    dst = torch.empty(args.max_bytes, dtype=torch.uint8, device=dev)
    ack = torch.ones(1, dtype=torch.uint8, device=dev)
    clock = Clock(cuda)
    rows = []

    def bw_once(b, n):
        if rank == 0:
            clock.start()
            for _ in range(n):
                dist.send(src[:b], peer)
            dist.recv(ack, peer)
            return clock.stop_ms()
        for _ in range(n):
            dist.recv(dst[:b], peer)
        dist.send(ack, peer)
        return None

    def pingpong_once(b, n):
        if rank == 0:
            clock.start()
            for _ in range(n):
                dist.send(src[:b], peer)
                dist.recv(dst[:b], peer)
            return clock.stop_ms()
        for _ in range(n):
            dist.recv(dst[:b], peer)
            dist.send(src[:b], peer)
        return None

    def check(b, what):
        """dst[:b] must hold the sender's data (src is the same seeded bytes on both ranks)."""
        if not torch.equal(dst[:b], src[:b]):
            i = int((dst[:b] != src[:b]).nonzero()[0])
            raise SystemExit(f"nccl_socket: rank {rank}: {what}, {b} bytes: byte {i} is {int(dst[i]):#x}, the peer sent {int(src[i]):#x}")

    def barrier():
        if cuda:
            dist.barrier(device_ids=[rank])
        else:
            dist.barrier()

    tag = f" setting={args.label}" if args.label else ""
    for b in sizes(args.max_bytes, args.min_bytes):
        n = iters_for(b)
        # Correctness first: poisoned receive buffer, one message, compared.
        if rank == 0:
            dist.send(src[:b], peer)
        else:
            dst[:b].fill_(0xA5)
            dist.recv(dst[:b], peer)
            check(b, "send/recv")
        barrier()
        bw_once(b, n)  # warm-up
        t = [bw_once(b, n) for _ in range(args.reps)]
        row = {"bytes": b, "iters": n}
        if rank == 0:
            row["bw_GBps"] = b * n / statistics.median(t) / 1e6
            row["bw_GBps_all"] = [b * n / x / 1e6 for x in t]
        if rank == 1:
            check(b, "after the bandwidth runs")
        if b <= 1 << 20:
            m = 1000 if b <= 64 << 10 else 100
            dst[:b].fill_(0xA5)
            pingpong_once(b, m)
            t = [pingpong_once(b, m) for _ in range(args.reps)]
            check(b, "after the ping-pongs")
            if rank == 0:
                row["half_rtt_us"] = statistics.median(t) * 1e3 / m / 2
                row["half_rtt_us_all"] = [x * 1e3 / m / 2 for x in t]
        barrier()
        if rank == 0:
            rows.append(row)
            print(f"RESULT lib=nccl_socket case=sendrecv_bw scope=- bytes={b} value={row['bw_GBps']:.4f} unit=GBps{tag}", flush=True)
            if "half_rtt_us" in row:
                print(f"RESULT lib=nccl_socket case=sendrecv_half_rtt scope=- bytes={b} value={row['half_rtt_us']:.4f} unit=us{tag}", flush=True)
    if rank == 0:
        ver = torch.cuda.nccl.version() if cuda else None
        info = {
            "what": "NCCL send/recv between two GPUs (bench/nccl_socket.py)",
            "backend": args.backend,
            "torch": torch.__version__,
            "nccl": ".".join(map(str, ver)) if isinstance(ver, tuple) else ver,
            "gpus": [torch.cuda.get_device_name(i) for i in range(2)] if cuda else None,
            "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")},
            "label": args.label,
            "sockets": sockets(),
            "reps": args.reps,
            "rows": rows,
        }
        with open(out, "w") as f:
            json.dump(info, f, indent=2)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="nccl_socket.json")
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    ap.add_argument("--any-transport", action="store_true", help="run without the socket-only NCCL variables")
    ap.add_argument("--min-bytes", type=int, default=8, help="smallest size of the sweep (default 8)")
    ap.add_argument("--label", default="", help="a name for the NCCL setting, added to every RESULT line (setting=LABEL)")
    args = ap.parse_args()
    nt, ns = sockets()
    if nt * ns > 64:
        sys.exit(f"nccl_socket: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD = {nt} x {ns} > 64, which NCCL refuses")
    print(f"nccl_socket: NCCL_SOCKET_NTHREADS={nt} NCCL_NSOCKS_PERTHREAD={ns} ({nt * ns} connections per peer; an unset variable counts as 1, NCCL's default outside known clouds)"
          f"{' label ' + args.label if args.label else ''}", flush=True)
    if args.backend == "nccl":
        wrong = {k: os.environ.get(k) for k, v in NEEDED.items() if os.environ.get(k) != v}
        if wrong and not args.any_transport:
            sys.exit(f"nccl_socket: set {' '.join(f'{k}={v}' for k, v in NEEDED.items())} (and NCCL_SOCKET_IFNAME=lo); now {wrong}")
        if torch.cuda.device_count() < 2:
            sys.exit(f"nccl_socket: needs 2 GPUs, torch sees {torch.cuda.device_count()}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tmp = args.json + ".part"
    mp.spawn(worker, args=(port, args, tmp), nprocs=2, join=True)
    os.replace(tmp, args.json)
    with open(args.json) as f:
        rows = json.load(f)["rows"]
    print(f"nccl_socket: {len(rows)} sizes -> {args.json}")


if __name__ == "__main__":
    main()
