"""Symmetric memory: every dtype and shape, zero copy (what NumPy or torch writes is what the other PEs
read), explicit collective free, the warning for memory dropped without free, DLPack."""

import gc
import warnings

import numpy as np
import pytest

import rshmem
from conftest import need_torch


def test_package_basics(me, npes):
    assert rshmem.is_initialized() and 0 <= me < npes
    assert rshmem.backend() in ("cpu", "cuda")
    assert rshmem.heap_size() > 0
    assert set(rshmem.dtypes) == {"float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64",
                                  "uint8", "uint16", "uint32", "uint64"}


@pytest.mark.parametrize("dtype", [d for d in rshmem.dtypes if d != "bfloat16"])
@pytest.mark.parametrize("shape", [(5,), (2, 3), (2, 1, 4), ()])
def test_arrays_of_every_dtype_and_shape_are_zeroed_and_zero_copy(me, npes, dtype, shape):
    if rshmem.backend() != "cpu":
        pytest.skip("NumPy arrays over the heap need the CPU backend (GPU runs test tensors)")
    a = rshmem.array(shape, dtype)
    assert a.dtype == np.dtype(dtype) and a.shape == shape and a.flags["C_CONTIGUOUS"] and a.flags["WRITEABLE"]
    assert (a == 0).all()
    # Written through NumPy, read by the next PE with a get: the array is the symmetric memory itself.
    a[...] = np.arange(a.size).reshape(shape) % 100 + me
    rshmem.barrier_all()
    prev = (me - 1) % npes
    seen = np.empty_like(a)
    rshmem.get(seen, a, prev)
    ok = (seen == np.arange(a.size).reshape(shape) % 100 + prev).all()
    rshmem.barrier_all()
    rshmem.free(a)
    assert ok


def test_same_offset_on_every_pe(me, npes):
    if rshmem.backend() != "cpu":
        pytest.skip("NumPy arrays over the heap need the CPU backend")
    a = rshmem.array((3,), "int64")
    b = rshmem.array((3,), "int64")
    start = a.__array_interface__["data"][0]
    # The allocation's own object agrees, and allocations follow each other in every PE's heap alike.
    offsets = np.array([b.__array_interface__["data"][0] - start], dtype=np.int64)
    box = rshmem.array((npes,), "int64")
    src = rshmem.array((1,), "int64")
    src[0] = offsets[0]
    rshmem.fcollect(rshmem.TEAM_WORLD, box, src)
    same = (box == offsets[0]).all()
    for x in (a, b, box, src):
        rshmem.free(x)
    assert same


def test_views_and_slices_work_and_free_takes_the_array(me, npes):
    if rshmem.backend() != "cpu":
        pytest.skip("NumPy arrays over the heap need the CPU backend")
    a = rshmem.array((4, 4), "float32")
    row = a[2]            # a view: no allocation of its own
    rshmem.put(row, np.full(4, me, dtype=np.float32), (me + 1) % npes)
    rshmem.barrier_all()
    ok = (a[2] == (me - 1) % npes).all() and (a[:2] == 0).all()
    with pytest.raises(rshmem.Error, match="not the start"):
        rshmem.free(row)   # collective: fails on every PE alike
    rshmem.free(a)
    assert ok


def test_empty_array_is_an_allocation(me):
    if rshmem.backend() != "cpu":
        pytest.skip("NumPy arrays over the heap need the CPU backend")
    a = rshmem.array((0,), "float64")
    assert a.size == 0
    rshmem.free(a)


def test_dropped_without_free_warns_and_never_crashes(me):
    if rshmem.backend() != "cpu":
        pytest.skip("NumPy arrays over the heap need the CPU backend")
    with pytest.warns(rshmem.LeakWarning, match="dropped without rshmem.free"):
        a = rshmem.array((8,), "float32")
        a[:] = 1
        del a
        gc.collect()
    # A view keeps the memory: no warning until the last one goes.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = rshmem.array((8,), "int32")
        view = b[2:4]
        del b
        gc.collect()
        view[:] = 5
        assert (view == 5).all()
    with pytest.warns(rshmem.LeakWarning):
        del view
        gc.collect()
    # Freed memory never warns.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = rshmem.array((8,), "int32")
        rshmem.free(c)
        del c
        gc.collect()


def test_dlpack_exporter_by_hand(me):
    if rshmem.backend() != "cpu":
        pytest.skip("the CPU backend's host memory")
    e = rshmem._rshmem.alloc("test", [2, 3], "int16", None)
    assert e.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(e)
    b = np.from_dlpack(e)   # a second consumer of the same memory
    a[1, 2] = 7
    assert b[1, 2] == 7 and a.shape == (2, 3) and a.dtype == np.int16
    # A capsule nobody consumes is released without a leak or a crash.
    for kw in ({}, {"max_version": (1, 0)}, {"max_version": (0, 8)}, {"stream": None}):
        cap = e.__dlpack__(**kw)
        del cap
    alloc = e.allocation
    assert alloc.nbytes == 12 and not alloc.freed
    rshmem.free(a)
    assert alloc.freed
    del a, b, e, alloc
    gc.collect()


def test_torch_tensors_over_the_heap(me, npes):
    torch = need_torch()
    for dtype in (torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int8, torch.uint8,
                  torch.int16, torch.int32, torch.int64):
        t = rshmem.tensor((2, 5), dtype)
        assert t.dtype == dtype and tuple(t.shape) == (2, 5) and t.is_contiguous()
        assert str(t.device).startswith(rshmem.device().split(":")[0])
        t.fill_(me + 1)
        rshmem.barrier_all()
        nxt = (me + 1) % npes
        local = torch.zeros((2, 5), dtype=dtype, device=t.device)
        rshmem.get(local, t, nxt)
        if t.is_cuda:
            torch.cuda.current_stream().synchronize()
        ok = bool((local.float() == nxt + 1).all())
        rshmem.barrier_all()
        rshmem.free_tensor(t)
        assert ok, f"{dtype}: {local}"
    default = rshmem.tensor(3)
    assert default.dtype == torch.float32
    rshmem.free(default)
    with pytest.raises(ValueError, match="device"):
        rshmem.tensor(3, torch.float32, device="cuda:7" if rshmem.backend() == "cuda" else "cuda")


def test_peer_views_of_tensors(me, npes):
    torch = need_torch()
    t = rshmem.tensor((4,), torch.int32)
    views = [rshmem.get_peer_tensor(t, p) for p in range(npes)]
    for p, v in enumerate(views):
        if v is not None:
            assert v.shape == t.shape and v.dtype == t.dtype
    mine = views[me]
    assert mine is not None and mine.data_ptr() == t.data_ptr()
    rshmem.barrier_all()
    rshmem.free(t)
