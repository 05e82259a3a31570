"""Every error case raises a Python exception that names the problem; none crashes or hangs. Each
case is made the same way on every PE, so the collective ones fail everywhere alike (the runtime
itself checks collective arguments on every PE) and the job stays in step."""

import numpy as np
import pytest

import rshmem


def test_bad_pe(mem, me, npes):
    box = mem.sym((4,), "int64")
    src = mem.local_of(np.zeros(4), "int64")
    for pe in (npes, -1, 1 << 20):
        with pytest.raises(rshmem.Error, match=f"PE {pe} out of range \\(n_pes {npes}\\)"):
            rshmem.put(box, src, pe)
        with pytest.raises(rshmem.Error, match=f"PE {pe} out of range"):
            rshmem.get(src, box, pe)
        with pytest.raises(rshmem.Error, match=f"PE {pe} out of range"):
            rshmem.signal_op(mem.sym((1,), "uint64"), 1, "set", pe)
        with pytest.raises(rshmem.Error, match=f"PE {pe} out of range"):
            rshmem.peer_array(box, pe) if mem.kind == "numpy" else rshmem.peer_tensor(box, pe)


def test_object_not_on_the_symmetric_heap(mem, me, npes):
    box = mem.sym((4,), "int64")
    local = mem.local_of(np.zeros(4), "int64")
    with pytest.raises(rshmem.Error, match="not inside the symmetric heap"):
        rshmem.put(local, box, 0)  # the destination of a put must be symmetric
    with pytest.raises(rshmem.Error, match="not inside the symmetric heap"):
        rshmem.get(box, local, 0)  # the source of a get too
    with pytest.raises(rshmem.Error, match="not inside a live symmetric allocation"):
        rshmem.reduce(rshmem.TEAM_WORLD, box, local, "sum")
    with pytest.raises(rshmem.Error, match="not inside a live symmetric allocation"):
        rshmem.broadcast(rshmem.TEAM_WORLD, local, box, 0)
    with pytest.raises(rshmem.Error, match="not on the symmetric heap"):
        rshmem.peer_array(local, 0) if mem.kind == "numpy" else rshmem.peer_tensor(local, 0)
    # free is collective: the runtime compares every PE's object, and all fail alike.
    with pytest.raises(rshmem.Error, match="not the start of a live symmetric allocation"):
        rshmem.free(local)
    # A view that does not start where the allocation does is not an allocation either.
    with pytest.raises(rshmem.Error, match="not the start of a live symmetric allocation"):
        rshmem.free(box[1:])


def test_dtype_and_size_mismatch(mem, me, npes):
    f32 = mem.sym((4,), "float32")
    i32 = mem.local_of(np.zeros(4), "int32")
    with pytest.raises(ValueError, match="dtype mismatch: dst is float32 and src is int32"):
        rshmem.put(f32, i32, 0)
    with pytest.raises(ValueError, match="dst has 4 values and src has 3"):
        rshmem.put(f32, mem.local_of(np.zeros(3), "float32"), 0)
    other = mem.sym((4,), "float64")
    with pytest.raises(ValueError, match="dtype mismatch"):
        rshmem.reduce(rshmem.TEAM_WORLD, f32, other, "sum")
    big = mem.sym((4 * npes + 1,), "float32")
    with pytest.raises(ValueError, match=f"dst has {4 * npes + 1} values"):
        rshmem.fcollect(rshmem.TEAM_WORLD, big, f32)
    with pytest.raises(ValueError, match="src has"):
        rshmem.reducescatter(rshmem.TEAM_WORLD, f32, big, "sum")
    if npes > 1:
        odd = mem.sym((npes + 1,), "float32")
        with pytest.raises(ValueError, match="not a multiple"):
            rshmem.alltoall(rshmem.TEAM_WORLD, odd, odd)


def test_size_past_the_heap(mem):
    with pytest.raises(rshmem.Error, match="symmetric heap exhausted"):
        mem.sym((rshmem.heap_size() + 1,), "uint8")
    # The job goes on: the failed allocation took nothing.
    x = mem.sym((16,), "uint8")
    assert mem.np(x).sum() == 0


def test_bad_team_root_and_operator(mem, me, npes):
    f = mem.sym((4,), "float32")
    i = mem.sym((4,), "int32")
    with pytest.raises(rshmem.Error, match="team 40 does not exist"):
        rshmem.reduce(rshmem.Team(40), f, f, "sum")
    with pytest.raises(rshmem.Error, match="team 40 does not exist"):
        rshmem.barrier(40)
    with pytest.raises(rshmem.Error, match=f"root {npes} is not a member index"):
        rshmem.broadcast(rshmem.TEAM_WORLD, f, f, npes)
    for op in ("and", "or", "xor"):
        with pytest.raises(rshmem.Error, match="bitwise operators are for integer types"):
            rshmem.reduce(rshmem.TEAM_WORLD, f, f, op)
    with pytest.raises(ValueError, match='reduction operator "mean"'):
        rshmem.reduce(rshmem.TEAM_WORLD, i, i, "mean")
    with pytest.raises(rshmem.Error, match="do not select PEs of the parent team"):
        rshmem.Team.WORLD.split_strided(0, 1, npes + 1)
    with pytest.raises(TypeError, match="a team must be an rshmem.Team"):
        rshmem.barrier("world")


def test_bad_buffers(mem, me, npes):
    box = mem.sym((8,), "int64")
    with pytest.raises(TypeError, match="must be a NumPy array or a torch tensor"):
        rshmem.put(box, [1, 2, 3, 4, 5, 6, 7, 8], 0)
    with pytest.raises(ValueError, match="not contiguous"):
        rshmem.put(box[::2], mem.local_of(np.zeros(4), "int64"), 0)
    with pytest.raises(TypeError, match="does not handle"):
        rshmem.put(box, np.zeros(8, dtype=np.complex64).view(np.complex64), 0)
    if mem.kind == "numpy":
        ro = np.zeros(8, dtype=np.int64)
        ro.setflags(write=False)
        with pytest.raises(ValueError, match="read-only"):
            rshmem.get(ro, box, 0)
    with pytest.raises(ValueError, match="the signal must be a symmetric uint64"):
        rshmem.signal_op(mem.sym((1,), "float64"), 1, "set", 0)
    with pytest.raises(ValueError, match="signal operator 'mul'"):
        rshmem.signal_op(mem.sym((1,), "uint64"), 1, "mul", 0)
    with pytest.raises(rshmem.Error, match="signal operator 3 is not NVSHMEM_SIGNAL_SET"):
        rshmem.signal_op(mem.sym((1,), "uint64"), 1, 3, 0)
    with pytest.raises(ValueError, match="does not fit the variable's type uint8"):
        rshmem.signal_wait_until(mem.sym((1,), "uint8"), "eq", 300)
    with pytest.raises(rshmem.Error, match="element width 1 bytes is not one of"):
        rshmem.signal_wait_until(mem.sym((1,), "uint8"), "eq", 1)
    with pytest.raises(ValueError, match="comparison 'about'"):
        rshmem.signal_wait_until(mem.sym((1,), "uint64"), "about", 1)
    with pytest.raises(rshmem.Error, match="comparison 9 is not one of"):
        rshmem.signal_wait_until(mem.sym((1,), "uint64"), 9, 1)


def test_unsupported_dtypes_and_devices():
    with pytest.raises(ValueError, match='dtype "bool" is not one rshmem handles'):
        rshmem.array((4,), "bool")
    with pytest.raises(ValueError, match='dtype "complex64"'):
        rshmem.array((4,), np.complex64)
    with pytest.raises(TypeError, match="NumPy has no bfloat16"):
        rshmem.array((4,), "bfloat16")
    with pytest.raises(ValueError, match="negative dimension"):
        rshmem.array((4, -1), "int8")
    if rshmem.backend() == "cpu":
        with pytest.raises(ValueError, match="whose symmetric heap is host memory"):
            rshmem._rshmem.alloc("rshmem.tensor", [4], "float32", "cuda")


def test_use_after_free(mem, me, npes):
    a = rshmem.array((4,), "int64") if mem.kind == "numpy" else rshmem.tensor((4,), mem.torch.int64)
    b = mem.sym((4,), "int64")
    rshmem.free(a)
    with pytest.raises(rshmem.Error, match="not the start of a live symmetric allocation"):
        rshmem.free(a)
    with pytest.raises(rshmem.Error, match="not inside a live symmetric allocation"):
        rshmem.reduce(rshmem.TEAM_WORLD, b, a, "sum")


def test_init_twice():
    with pytest.raises(rshmem.Error, match="already initialized"):
        rshmem.init()
