"""Init and finalize (this file runs last: its tests finalize the session's runtime and initialize
again, by each way there is, and leave it initialized for the next test)."""

import gc
import os
import socket

import numpy as np
import pytest

import rshmem
from conftest import need_torch


def ring_check(mem_kind="numpy"):
    """A put around the ring through the runtime that is running now; True when every PE got its
    predecessor's number."""
    me, n = rshmem.my_pe(), rshmem.n_pes()
    box = rshmem.array((2,), "int64")
    rshmem.put(box, np.array([me, 42], dtype=np.int64), (me + 1) % n)
    rshmem.barrier_all()
    ok = box.tolist() == [(me - 1) % n, 42]
    rshmem.barrier_all()
    rshmem.free(box)
    return ok


def share_from_pe0(data: bytes) -> bytes:
    """PE 0's `data` (up to 256 bytes) on every PE, through the running runtime (a broadcast)."""
    src = rshmem.array((257,), "uint8")
    dst = rshmem.array((257,), "uint8")
    if rshmem.my_pe() == 0:
        src[0] = len(data)
        src[1:1 + len(data)] = np.frombuffer(data, dtype=np.uint8)
    rshmem.broadcast(rshmem.TEAM_WORLD, dst, src, 0)
    out = bytes(dst[1:1 + int(dst[0])])
    rshmem.free(src)
    rshmem.free(dst)
    return out


def cpu_only():
    if rshmem.backend() != "cpu":
        pytest.skip("these tests use NumPy arrays over the heap (CPU backend)")


def test_use_after_finalize_raises_and_arrays_stay_usable():
    cpu_only()
    me, n = rshmem.my_pe(), rshmem.n_pes()
    kept = rshmem.array((4,), "int64")
    kept[:] = me + 7
    freed = rshmem.array((2,), "int64")
    rshmem.free(freed)
    with pytest.warns(rshmem.LeakWarning, match="1 symmetric array"):
        rshmem.finalize()
    assert not rshmem.is_initialized() and rshmem.my_pe() == -1 and rshmem.n_pes() == 0
    local = np.zeros(4, dtype=np.int64)
    calls = [
        lambda: rshmem.put(kept, local, 0),
        lambda: rshmem.get(local, kept, 0),
        lambda: rshmem.put_signal(kept, local, kept, 1, "set", 0),
        lambda: rshmem.signal_wait_until(kept, "eq", 0),
        lambda: rshmem.quiet(),
        lambda: rshmem.barrier_all(),
        lambda: rshmem.sync_all(),
        lambda: rshmem.reduce(rshmem.TEAM_WORLD, kept, kept, "sum"),
        lambda: rshmem.broadcast(rshmem.TEAM_WORLD, kept, kept, 0),
        lambda: rshmem.array((4,), "int64"),
        lambda: rshmem.free(kept),
        lambda: rshmem.peer_array(kept, 0),
        lambda: rshmem.finalize(),
        lambda: rshmem.backend(),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(rshmem.Error, match="not initialized"):
            call()
    with pytest.raises(rshmem.Error, match="not initialized"):
        rshmem.Team.WORLD.split_strided(0, 1, 1)
    assert rshmem.Team.WORLD.n_pes() == -1
    # The arrays still referenced hold their last contents in private memory: reading and writing
    # them is safe (they are no longer symmetric).
    assert kept.tolist() == [me + 7] * 4
    kept[0] = 1
    assert freed.shape == (2,)
    freed[:] = 3
    # Init again from the launcher's environment: a second runtime in this process.
    rshmem.init()
    assert (rshmem.my_pe(), rshmem.n_pes()) == (me, n)
    assert ring_check()
    # An array of the first runtime is no symmetric memory of this one.
    with pytest.raises(rshmem.Error, match="not inside a live symmetric allocation"):
        rshmem.reduce(rshmem.TEAM_WORLD, kept, kept, "sum")
    del kept, freed
    gc.collect()


def test_init_from_a_unique_id():
    cpu_only()
    me, n = rshmem.my_pe(), rshmem.n_pes()
    # PE 0 makes the id; the running job carries it to the others, as MPI or any launcher would.
    uid = rshmem.get_unique_id() if me == 0 else None
    raw = share_from_pe0(bytes(uid) if uid is not None else b"")
    got = rshmem.UniqueId.from_bytes(raw)
    if uid is not None:
        assert got == uid
    rshmem.finalize()
    with rshmem.init(uid=got, rank=me, nranks=n) as shmem:
        assert shmem is rshmem
        assert (rshmem.my_pe(), rshmem.n_pes()) == (me, n)
        assert ring_check()
    assert not rshmem.is_initialized()   # the context manager finalized
    # A bad id is refused with the runtime's message; rank past nranks too.
    with pytest.raises(rshmem.Error, match="unique id is 256 hex digits"):
        rshmem.init(uid="abcd", rank=me, nranks=n)
    with pytest.raises(ValueError, match="rank 5 is not below nranks 2"):
        rshmem.init(uid=got, rank=5, nranks=2)
    with pytest.raises(ValueError, match="rank and nranks are needed"):
        rshmem.init(uid=got)
    rshmem.init()
    assert ring_check()


def test_init_from_a_torch_distributed_gloo_group():
    cpu_only()
    torch = need_torch()
    import torch.distributed as dist
    me, n = rshmem.my_pe(), rshmem.n_pes()
    # PE 0 picks a free port for torch's rendezvous; the job tells the others.
    port = b""
    if me == 0:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1]).encode()
    port = int(share_from_pe0(port))
    rshmem.finalize()
    # torch's ranks are the reverse of rshmrun's: the group's ranks become the PEs.
    rank = n - 1 - me
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    try:
        with rshmem.init(process_group=dist.group.WORLD):
            assert (rshmem.my_pe(), rshmem.n_pes()) == (rank, n)
            t = rshmem.tensor((3,), torch.float32)
            src = torch.full((3,), float(rank))
            rshmem.put(t, src, (rank + 1) % n)
            rshmem.barrier_all()
            ok = bool((t == (rank - 1) % n).all())
            total = rshmem.tensor((3,), torch.float32)
            rshmem.reduce(rshmem.TEAM_WORLD, total, t, "sum")
            ok_sum = bool((total == sum(range(n))).all())
            rshmem.free(total)
            rshmem.free(t)
            assert ok and ok_sum
            # torch's own collectives still work beside rshmem.
            x = torch.tensor([float(rank)])
            dist.all_reduce(x)
            assert x.item() == sum(range(n))
    finally:
        dist.destroy_process_group()
    assert not rshmem.is_initialized()
    rshmem.init()
    assert rshmem.my_pe() == me and ring_check()
