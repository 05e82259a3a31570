"""Put, get, signals, quiet, barriers and peer views against a model: every PE computes what every
other PE wrote from a formula of (PE, index), and checks it."""

import numpy as np
import pytest

import rshmem
from conftest import all_dtypes


def values(pe, n, salt=0):
    """PE `pe`'s values: small integers, exact in every dtype (int8, float16, bfloat16)."""
    return np.array([(pe * 7 + i * 3 + salt) % 61 for i in range(n)], dtype=np.int64)


@pytest.mark.parametrize("dtype", all_dtypes())
def test_put_to_every_pe_into_its_own_slice(mem, me, npes, dtype):
    # box[p*4:(p+1)*4] on PE t is what PE p put there: p's values for t.
    box = mem.sym((npes * 4,), dtype)
    for t in range(npes):
        rshmem.put(box[me * 4:(me + 1) * 4], mem.local_of(values(me, 4, salt=t), dtype), t)
    rshmem.barrier_all()
    got = mem.np(box)
    want = np.concatenate([values(p, 4, salt=me) for p in range(npes)])
    assert (got == want).all(), f"PE {me}: {got} != {want}"


@pytest.mark.parametrize("dtype", all_dtypes())
def test_get_from_every_pe(mem, me, npes, dtype):
    box = mem.sym((5,), dtype)
    mem.set(box, values(me, 5))
    rshmem.barrier_all()
    for p in range(npes):
        dst = mem.local_of(np.zeros(5), dtype)
        rshmem.get(dst, box, p)
        got = mem.np(dst)
        assert (got == values(p, 5)).all(), f"PE {me} got {got} from PE {p}"


def test_get_of_a_slice_into_a_slice(mem, me, npes):
    box = mem.sym((10,), "int32")
    mem.set(box, values(me, 10))
    rshmem.barrier_all()
    peer = (me + 1) % npes
    dst = mem.local_of(np.full(10, -1), "int32")
    rshmem.get(dst[2:6], box[4:8], peer)
    got = mem.np(dst)
    want = np.full(10, -1)
    want[2:6] = values(peer, 10)[4:8]
    assert (got == want).all(), f"{got} != {want}"


def test_put_of_two_dimensional_arrays(mem, me, npes):
    box = mem.sym((3, 4), "float64")
    nxt = (me + 1) % npes
    rshmem.put(box, mem.local_of(values(me, 12).reshape(3, 4), "float64"), nxt)
    rshmem.barrier_all()
    prev = (me - 1) % npes
    assert (mem.np(box) == values(prev, 12).reshape(3, 4)).all()


def test_put_from_symmetric_source(mem, me, npes):
    # The source of a put may itself be symmetric memory.
    src = mem.sym((6,), "uint16")
    dst = mem.sym((6,), "uint16")
    mem.set(src, values(me, 6))
    rshmem.put(dst, src, (me + 1) % npes)
    rshmem.barrier_all()
    assert (mem.np(dst) == values((me - 1) % npes, 6)).all()


def test_quiet_completes_puts_before_a_sync(mem, me, npes):
    # quiet makes this PE's puts complete; sync_all (which completes nothing) then orders them.
    box = mem.sym((8,), "int64")
    rshmem.put(box, mem.local_of(values(me, 8), "int64"), (me + 1) % npes)
    rshmem.quiet()
    rshmem.sync_all()
    assert (mem.np(box) == values((me - 1) % npes, 8)).all()


@pytest.mark.parametrize("op", ["set", "add"])
def test_put_signal_then_wait(mem, me, npes, op):
    data = mem.sym((16,), "float32")
    sig = mem.sym((1,), "uint64")
    nxt = (me + 1) % npes
    rounds = 3
    for r in range(rounds):
        val = (r + 1) if op == "set" else 1
        sig_op = rshmem.SignalOp.SET if op == "set" else rshmem.SignalOp.ADD
        rshmem.put_signal(data, mem.local_of(values(me, 16, salt=r), "float32"), sig, val, sig_op, nxt)
        # The data of round r is there once the signal says so.
        rshmem.signal_wait_until(sig, rshmem.ComparisonType.CMP_GE, r + 1)
        got = mem.np(data)
        assert (got == values((me - 1) % npes, 16, salt=r)).all(), f"round {r}: {got}"
        # Nobody puts round r+1 before everyone read round r.
        rshmem.barrier_all()
    assert mem.np(sig)[0] == rounds


def test_signal_op_alone_and_signal_wait_order(mem, me, npes):
    sig = mem.sym((2,), "uint64")
    for p in range(npes):
        rshmem.signal_op(sig, 1 << me, "add", p)
    rshmem.signal_wait(sig, (1 << npes) - 1, rshmem.ComparisonType.CMP_EQ)  # NVSHMEM4Py's order
    assert mem.np(sig)[0] == (1 << npes) - 1
    rshmem.barrier_all()
    rshmem.signal_op(sig, 7, rshmem.SignalOp.SET, (me + 1) % npes)
    rshmem.signal_wait_until(sig, "eq", 7)
    assert mem.np(sig).tolist() == [7, 0]


@pytest.mark.parametrize("dtype,value", [("int32", -3), ("uint16", 65535), ("int64", -(1 << 40)), ("uint64", (1 << 64) - 1)])
def test_wait_until_on_integer_types(mem, me, npes, dtype, value):
    var = mem.sym((1,), dtype)
    src = mem.local_of(np.array([value]), dtype)
    rshmem.put(var, src, (me + 1) % npes)
    rshmem.signal_wait_until(var, "eq", value)
    assert int(mem.np(var)[0]) == value
    rshmem.barrier_all()


@pytest.mark.parametrize("cmp,threshold,initial", [("eq", 5, 0), ("ne", 0, 0), ("gt", 4, 0), ("ge", 5, 0), ("lt", 6, 9), ("le", 5, 9)])
def test_every_comparison(mem, me, npes, cmp, threshold, initial):
    # False for the initial value, true once the previous PE's 5 is there: the wait waits for it.
    var = mem.sym((1,), "int64")
    mem.set(var, [initial])
    rshmem.barrier_all()
    rshmem.put(var, mem.local_of(np.array([5]), "int64"), (me + 1) % npes)
    rshmem.signal_wait_until(var, cmp, threshold)
    assert mem.np(var)[0] == 5


def test_barrier_and_sync_of_teams(mem, me, npes):
    box = mem.sym((1,), "int64")
    for team in (rshmem.TEAM_WORLD, rshmem.TEAM_SHARED, rshmem.TEAM_NODE):
        rshmem.barrier(team)
        rshmem.sync(team)
    rshmem.put(box, mem.local_of(np.array([me + 100]), "int64"), (me + 1) % npes)
    rshmem.barrier(rshmem.Team.WORLD)
    assert mem.np(box)[0] == (me - 1) % npes + 100


def test_peer_views_of_the_node(mem, me, npes):
    box = mem.sym((4,), "int64")
    node = rshmem.Team.SHARED
    rshmem.barrier_all()
    for p in range(npes):
        view = rshmem.peer_array(box, p) if mem.kind == "numpy" else rshmem.peer_tensor(box, p)
        on_node = rshmem.Team.WORLD.translate_pe(p, node) >= 0
        assert (view is not None) == on_node, f"PE {p}: view {view is not None}, on this node {on_node}"
        if view is not None and p == (me + 1) % npes:
            mem.set(view, values(me, 4))  # a store straight into the peer's memory
    rshmem.barrier_all()
    prev = (me - 1) % npes
    if rshmem.Team.WORLD.translate_pe(prev, node) >= 0:
        assert (mem.np(box) == values(prev, 4)).all()
    own = rshmem.peer_array(box, me) if mem.kind == "numpy" else rshmem.peer_tensor(box, me)
    assert own is not None and (mem.np(own) == mem.np(box)).all()
