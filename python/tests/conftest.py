"""The pytest suite of the Python package, run by every PE of a job:

    target/release/rshmrun -np 2 python3 -m pytest -q python/tests

(tests/tests/python.rs runs it under -np 2, -np 4 and --nodes 2). Every PE runs the same tests in the
same order, so the collective calls inside them match; each test allocates through the `mem` fixture,
which frees everything in allocation order at teardown, also after a failure, so one failing test does
not leave the PEs out of step.

Buffers are NumPy arrays on the CPU backend, torch tensors on GPUs (the same tests, on CUDA tensors);
RSHMEM_TEST_ARRAYS=torch runs them on torch CPU tensors on the CPU backend too (bfloat16 included).

RSHMEM_TEST_NO_SKIP=1 (scripts/test.sh sets it) makes a test that cannot run here (no torch) fail
instead of skipping.
"""

import os
import sys

import numpy as np
import pytest

import rshmem

NO_SKIP = os.environ.get("RSHMEM_TEST_NO_SKIP", "") not in ("", "0")


def need_torch():
    """torch, or a skip (a failure under RSHMEM_TEST_NO_SKIP=1) where it is not installed."""
    try:
        import torch
    except ImportError as e:
        why = f"torch is not installed ({e}); scripts/setup.sh installs it"
        if NO_SKIP:
            pytest.fail(f"{why} (RSHMEM_TEST_NO_SKIP=1 makes this a failure instead of a skip)")
        pytest.skip(why)
    return torch


def pytest_sessionstart(session):
    """The job: rshmem initialized from rshmrun's environment for the whole session (before
    collection, which asks the backend which dtypes to test)."""
    rshmem.init()


def pytest_sessionfinish(session, exitstatus):
    if rshmem.is_initialized():
        rshmem.finalize()


def kind() -> str:
    k = os.environ.get("RSHMEM_TEST_ARRAYS")
    if k:
        return k
    return "torch" if rshmem.backend() == "cuda" else "numpy"


def all_dtypes():
    """The element types the buffers of this run can have (NumPy has no bfloat16)."""
    names = list(rshmem.dtypes)
    if kind() == "numpy":
        names.remove("bfloat16")
    return names


class Arrays:
    """Symmetric and local buffers of this run's kind, their values as NumPy arrays, and the stream
    synchronization that makes on-stream work visible to the checks (GPUs)."""

    def __init__(self, kind_: str):
        self.kind = kind_
        self.made = []
        self.torch = need_torch() if kind_ == "torch" else None
        self.device = rshmem.device() if kind_ == "torch" else "cpu"

    # -- making buffers
    def sym(self, shape, dtype="int64"):
        """Collective: a zeroed symmetric buffer (freed by the fixture)."""
        if self.kind == "numpy":
            x = rshmem.array(shape, dtype)
        else:
            x = rshmem.tensor(shape, getattr(self.torch, dtype))
        self.made.append(x)
        return x

    def local(self, values):
        """A local (not symmetric) buffer holding `values` (a NumPy array, or float32 values for
        bfloat16 given with dtype=...)."""
        values = np.ascontiguousarray(values)
        if self.kind == "numpy":
            return values.copy()
        return self.torch.from_numpy(values.copy()).to(self.device)

    def local_of(self, values, dtype):
        """A local buffer of `dtype` from values given as float64/int64 NumPy values."""
        if dtype == "bfloat16":
            t = self.torch.from_numpy(np.asarray(values, dtype=np.float32)).to(self.torch.bfloat16)
            return t.to(self.device)
        return self.local(np.asarray(values).astype(dtype))

    def set(self, x, values):
        """Writes `values` into this PE's copy of `x` (in stream order on GPUs)."""
        if self.kind == "numpy":
            x[...] = np.asarray(values).astype(x.dtype)
        else:
            src = self.torch.from_numpy(np.asarray(values, dtype=np.float64))
            x.copy_(src.to(x.dtype).reshape(x.shape))

    # -- reading
    def sync(self):
        if self.kind == "torch" and self.device != "cpu":
            self.torch.cuda.current_stream().synchronize()

    def np(self, x):
        """The values of `x` as float64/int64 NumPy values, after this PE's enqueued work."""
        self.sync()
        if self.kind == "numpy":
            return np.array(x)
        t = x.detach().cpu()
        if t.dtype == self.torch.bfloat16:
            t = t.to(self.torch.float32)
        return t.numpy().copy()

    def free_all(self):
        made, self.made = self.made, []
        for x in made:
            rshmem.free(x)


@pytest.fixture
def mem():
    """Buffers of this run's kind; everything allocated is freed at teardown (all PEs, same order)."""
    a = Arrays(kind())
    yield a
    if rshmem.is_initialized():
        # Every PE's operations of the test are complete before anything is freed.
        rshmem.barrier_all()
        a.sync()
        a.free_all()


@pytest.fixture
def me():
    return rshmem.my_pe()


@pytest.fixture
def npes():
    return rshmem.n_pes()


def nodes_of_job():
    """Node count of the job: the PEs that share this node are the SHARED team."""
    return rshmem.n_pes() // rshmem.Team.SHARED.n_pes()
