"""rshmem under torchrun, initialized from the torch.distributed group (no other launcher):

    torchrun --nproc-per-node 2 python/examples/torchrun_ring.py

Each rank puts its number into the next rank's symmetric tensor, then the tensors are all-reduced by
rshmem and, for comparison, by torch.distributed. CUDA tensors on GPUs (NCCL where every rank has a
GPU of its own, else gloo); CPU tensors on the CPU backend.
"""
import os
import sys

import torch
import torch.distributed as dist

import rshmem

world = int(os.environ.get("WORLD_SIZE", "1"))
gpus = torch.cuda.device_count()
if gpus:
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % gpus)
dist.init_process_group("nccl" if gpus >= world else "gloo")

with rshmem.init(process_group=dist.group.WORLD):
    me, n = rshmem.my_pe(), rshmem.n_pes()
    assert (me, n) == (dist.get_rank(), dist.get_world_size()), "the group's ranks are the PEs"
    box = rshmem.tensor((1024,), torch.float32)
    total = rshmem.tensor((1024,), torch.float32)
    rshmem.put(box, torch.full((1024,), float(me), device=box.device), (me + 1) % n)
    rshmem.barrier_all()
    rshmem.all_reduce(rshmem.TEAM_WORLD, total, box, "sum")
    ref = box.clone()
    if dist.get_backend() == "gloo":
        ref = ref.cpu()
    dist.all_reduce(ref)
    ok = bool((box == (me - 1) % n).all()) and bool((total.cpu() == ref.cpu()).all())
    # One write per line: torchrun's ranks share the terminal, and print's separate write of the
    # newline lets another rank's line land in the middle.
    sys.stdout.write(f"rank {me} of {n} on {box.device}: ring and all-reduce {'ok' if ok else 'WRONG'} "
                     f"(rshmem sum {total[0].item()}, torch {ref[0].item()})\n")
    sys.stdout.flush()
    rshmem.free(total)
    rshmem.free(box)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
