"""A first rshmem program: a ring exchange with put and get.

    target/release/rshmrun -np 4 python3 python/examples/ring.py

Every PE puts its number into the next PE's symmetric array, and gets the one of the PE after the next
back. On GPUs (RSHMEM_BACKEND=cuda, torch installed) the same program runs on CUDA tensors, enqueued
on the current torch stream; on the CPU backend on NumPy arrays over the symmetric heap.
"""
import numpy as np

import rshmem

with rshmem.init():
    me, n = rshmem.my_pe(), rshmem.n_pes()
    gpu = rshmem.backend() == "cuda"
    if gpu:
        import torch
        inbox = rshmem.tensor((4,), torch.int64)              # collective: same offset on every PE
        mine = torch.full((4,), me, dtype=torch.int64, device=inbox.device)
        back = torch.zeros(4, dtype=torch.int64, device=inbox.device)
    else:
        inbox = rshmem.array((4,), "int64")                   # a NumPy array over the symmetric heap
        mine = np.full(4, me, dtype=np.int64)
        back = np.zeros(4, dtype=np.int64)

    rshmem.put(inbox, mine, (me + 1) % n)                     # into the next PE's inbox
    rshmem.barrier_all()                                      # every put is complete everywhere
    rshmem.get(back, inbox, (me + 2) % n)                     # what the PE after the next received
    rshmem.barrier_all()
    if gpu:
        torch.cuda.current_stream().synchronize()
        inbox_values, back_values = inbox.cpu().tolist(), back.cpu().tolist()
    else:
        inbox_values, back_values = inbox.tolist(), back.tolist()
    ok = inbox_values == [(me - 1) % n] * 4 and back_values == [(me + 1) % n] * 4
    print(f"PE {me} of {n}: received {inbox_values[0]} from PE {(me - 1) % n}, "
          f"PE {(me + 2) % n} received {back_values[0]}: {'ok' if ok else 'WRONG'}")
    rshmem.free(inbox)                                        # collective and explicit
    if not ok:
        raise SystemExit(1)
