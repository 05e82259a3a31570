"""The Python package's side of python/bench/overhead.sh: the same on-stream put and all-reduce as
rshmem-onstream-bench (examples/src/onstream_bench.rs), called from Python the same way, for 4 B,
64 KiB and 16 MiB: N calls back to back on the current stream after a warm-up; `issue_us` is the host
time per call until the last one returned, `per_call_us` until the stream has run them all, `GBps` the
bytes per call over that. PE 0 prints `python.OP.SIZE.METRIC: value` lines.

    rshmrun -np 2 python3 python/bench/overhead.py [--quick]

On GPUs the buffers are CUDA tensors (torch); on the CPU backend NumPy arrays (no streams: the calls
run at once, so issue and completion coincide).
"""
import sys
import time

import numpy as np

import rshmem

SIZES = [(4, "4B"), (64 << 10, "64KiB"), (16 << 20, "16MiB")]


def calls(nbytes, quick):
    n = 2000 if nbytes <= 4 else 1000 if nbytes <= 64 << 10 else 20
    return max(n // 20, 2) if quick else n


def main():
    quick = "--quick" in sys.argv
    rshmem.init()
    me, npes = rshmem.my_pe(), rshmem.n_pes()
    gpu = rshmem.backend() == "cuda"
    if gpu:
        import torch
        sym = lambda n: rshmem.tensor((n,), torch.float32)
        sync = torch.cuda.synchronize
    else:
        sym = lambda n: rshmem.array((n,), "float32")
        sync = lambda: None
    biggest = max(s for s, _ in SIZES) // 4
    dst, src = sym(biggest), sym(biggest)
    peer = (me + 1) % npes

    def timed(n, f):
        for _ in range(n // 10 + 1):
            f()
        sync()
        rshmem.barrier_all()
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        issued = time.perf_counter() - t0
        sync()
        done = time.perf_counter() - t0
        rshmem.barrier_all()
        return issued / n, done / n

    lines = []
    put, reduce, world = rshmem.put, rshmem.reduce, rshmem.TEAM_WORLD
    for nbytes, name in SIZES:
        n = calls(nbytes, quick)
        elems = nbytes // 4
        d, s = dst[:elems], src[:elems]
        issue, done = timed(n, lambda: put(d, s, peer))
        lines += [f"python.put.{name}.issue_us: {issue * 1e6:.3f}", f"python.put.{name}.per_call_us: {done * 1e6:.3f}",
                  f"python.put.{name}.GBps: {nbytes / done / 1e9:.3f}"]
        rd, rs = sym(elems), sym(elems)
        issue, done = timed(n, lambda: reduce(world, rd, rs, "sum"))
        lines += [f"python.allreduce.{name}.issue_us: {issue * 1e6:.3f}", f"python.allreduce.{name}.per_call_us: {done * 1e6:.3f}",
                  f"python.allreduce.{name}.GBps: {nbytes / done / 1e9:.3f}"]
        rshmem.free(rd)
        rshmem.free(rs)
    if me == 0:
        print(f"python.backend: {rshmem.backend()}")
        print(f"python.n_pes: {npes}")
        for line in lines:
            print(line)
    rshmem.free(dst)
    rshmem.free(src)
    rshmem.finalize()


if __name__ == "__main__":
    main()
