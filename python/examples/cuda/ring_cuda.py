"""A custom CUDA kernel that calls NVSHMEM's device API (nvshmemx_putmem_block) on rshmem tensors: a
ring exchange. Needs a GPU and torch:

    python/examples/cuda/build.sh                       # -> python/examples/cuda/libring_kernel.so
    target/release/rshmrun -np 2 python3 python/examples/cuda/ring_cuda.py

(torchrun works too: `rshmem.init(process_group=...)`, see docs/python.md.) The kernel library is a
plain shared library loaded with ctypes; `import rshmem` first, so that its calls into the runtime
resolve to the runtime that rshmem.init() started.
"""
import ctypes
import os
import sys

import torch

import rshmem

LIB = os.environ.get("RING_KERNEL_LIB", os.path.join(os.path.dirname(os.path.abspath(__file__)), "libring_kernel.so"))

with rshmem.init():
    me, n = rshmem.my_pe(), rshmem.n_pes()
    if rshmem.backend() != "cuda":
        sys.exit(f"PE {me}: this example needs the CUDA backend (a GPU); this job runs on {rshmem.backend()}")
    lib = ctypes.CDLL(LIB)
    lib.ring_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    if lib.ring_bind() != 0:
        sys.exit(f"PE {me}: binding the kernel library's device state failed")

    count = 1 << 16
    src = rshmem.tensor((count,), torch.int32)       # symmetric: the kernel's put reads it
    dst = rshmem.tensor((count,), torch.int32)       # symmetric: the next PE writes it
    src.copy_(torch.arange(count, dtype=torch.int32, device=src.device) + me * 1000)
    stream = torch.cuda.current_stream()
    rshmem.barrier_all(stream)                       # every PE's src is ready before any put
    err = lib.ring_launch(dst.data_ptr(), src.data_ptr(), count, stream.cuda_stream)
    if err != 0:
        sys.exit(f"PE {me}: kernel launch failed with CUDA error {err}")
    rshmem.barrier_all(stream)                       # completes the kernel's puts everywhere
    prev = (me - 1) % n
    want = torch.arange(count, dtype=torch.int32, device=dst.device) + prev * 1000
    ok = bool(torch.equal(dst, want))                # synchronizes with the stream
    print(f"PE {me}: {count} ints from PE {prev} through the kernel: {'ok' if ok else 'WRONG'}")
    rshmem.free(dst)
    rshmem.free(src)
    if not ok:
        sys.exit(1)
