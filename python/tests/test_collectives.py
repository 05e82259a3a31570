"""Teams and collectives against a model: each PE's source is a formula of (team index, position), so
every PE knows what every result must be."""

import numpy as np
import pytest

import rshmem
from conftest import all_dtypes

INTEGER = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def src_values(i, n, op="sum", salt=0):
    """Member i's source: small values whose sums, products, min and max are exact in every dtype."""
    if op == "prod":
        return np.array([1 + ((i + k + salt) % 2) for k in range(n)], dtype=np.int64)  # 1 or 2
    return np.array([(i * 5 + k * 3 + salt) % 13 for k in range(n)], dtype=np.int64)


def model_reduce(op, parts):
    a = np.stack(parts)
    return {
        "sum": lambda: a.sum(0),
        "prod": lambda: a.prod(0),
        "min": lambda: a.min(0),
        "max": lambda: a.max(0),
        "and": lambda: np.bitwise_and.reduce(a, 0),
        "or": lambda: np.bitwise_or.reduce(a, 0),
        "xor": lambda: np.bitwise_xor.reduce(a, 0),
    }[op]()


def teams():
    """The teams every test runs on: the world, this node's, and the even members of the world (a
    split; None on the odd PEs, which sit it out)."""
    even = rshmem.Team.WORLD.split_strided(0, 2, (rshmem.n_pes() + 1) // 2)
    return [("world", rshmem.Team.WORLD), ("node", rshmem.Team.NODE), ("even", even)]


def test_predefined_teams(me, npes):
    world, shared, node = rshmem.Team.WORLD, rshmem.Team.SHARED, rshmem.Team.NODE
    assert (world.my_pe(), world.n_pes()) == (me, npes)
    assert (rshmem.team_my_pe(rshmem.TEAM_WORLD), rshmem.team_n_pes(rshmem.Teams.TEAM_WORLD)) == (me, npes)
    assert shared.n_pes() == node.n_pes() and shared.my_pe() == node.my_pe()
    assert npes % shared.n_pes() == 0
    # This node's PEs are consecutive (rshmrun places them so), and translate both ways.
    first = me - shared.my_pe()
    for i in range(shared.n_pes()):
        assert shared.translate_pe(i, world) == first + i
        assert world.translate_pe(first + i, shared) == i


def test_split_strided_and_destroy(me, npes):
    even = rshmem.team_split_strided(rshmem.TEAM_WORLD, 0, 2, (npes + 1) // 2)
    if me % 2 == 0:
        assert even is not None and even.my_pe() == me // 2 and even.n_pes() == (npes + 1) // 2
        assert even.translate_pe(even.my_pe(), rshmem.TEAM_WORLD) == me
        # A split of the split: its first member alone.
        first = even.split_strided(0, 1, 1)
        assert (first is not None) == (me == 0)
        if first is not None:
            assert first.n_pes() == 1
            first.destroy()
        rshmem.barrier(even)
        even.destroy()
        assert even.n_pes() == -1
    else:
        assert even is None


def each_team(mem, dst_len, src_len, dtype):
    """(name, team, dst, src) for every team of `teams()` this PE is a member of, with its own pair of
    symmetric buffers of `dst_len(n)` and `src_len(n)` values for a team of n members (allocated by
    every PE alike, for the largest team, the world; collectives use slices of them)."""
    npes = rshmem.n_pes()
    out = []
    for name, team in teams():
        dst, src = mem.sym((dst_len(npes),), dtype), mem.sym((src_len(npes),), dtype)
        out.append((name, team, dst, src))
    for name, team, dst, src in out:
        if team is not None:
            n = team.n_pes()
            yield name, team, dst[:dst_len(n)], src[:src_len(n)]
            # Every member is done with the buffers before anything is written into them again.
            rshmem.barrier(team)
            if name == "even":
                team.destroy()


@pytest.mark.parametrize("dtype", all_dtypes())
def test_broadcast(mem, me, npes, dtype):
    bad = []
    for name, team, dst, src in each_team(mem, lambda n: 7, lambda n: 7, dtype):
        i, n = team.my_pe(), team.n_pes()
        for root in range(n):
            mem.set(src, src_values(i, 7, salt=root))
            rshmem.broadcast(team, dst, src, root)
            got = mem.np(dst)
            rshmem.barrier(team)
            if not ((got == src_values(root, 7, salt=root)).all()):
                bad.append(f"{name} root {root}: {got}")
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("dtype", all_dtypes())
def test_fcollect(mem, me, npes, dtype):
    bad = []
    for name, team, dst, src in each_team(mem, lambda n: 3 * n, lambda n: 3, dtype):
        n = team.n_pes()
        mem.set(src, src_values(team.my_pe(), 3))
        rshmem.fcollect(team, dst, src)
        want = np.concatenate([src_values(j, 3) for j in range(n)])
        got = mem.np(dst)
        if not ((got == want).all()):
            bad.append(f"{name}: {got} != {want}")
    assert not bad, "; ".join(bad)


def test_all_gather_is_fcollect_of_two_dimensional_arrays(mem, me, npes):
    dst, src = mem.sym((npes, 2), "float32"), mem.sym((2,), "float32")
    mem.set(src, [me, -me])
    rshmem.all_gather(rshmem.TEAM_WORLD, dst, src)
    assert (mem.np(dst) == np.array([[p, -p] for p in range(npes)])).all()


@pytest.mark.parametrize("dtype", all_dtypes())
def test_alltoall(mem, me, npes, dtype):
    bad = []
    for name, team, dst, src in each_team(mem, lambda n: 2 * n, lambda n: 2 * n, dtype):
        i, n = team.my_pe(), team.n_pes()
        # Block j of member i's source: 10 * i + j, twice.
        mem.set(src, np.repeat([(10 * i + j) % 100 for j in range(n)], 2))
        rshmem.alltoall(team, dst, src)
        want = np.repeat([(10 * j + i) % 100 for j in range(n)], 2)
        got = mem.np(dst)
        if not ((got == want).all()):
            bad.append(f"{name}: {got} != {want}")
    assert not bad, "; ".join(bad)


def reduce_cases():
    for dtype in all_dtypes():
        for op in ["sum", "min", "max", "prod"] + (["and", "or", "xor"] if dtype in INTEGER else []):
            yield dtype, op


@pytest.mark.parametrize("dtype,op", list(reduce_cases()))
def test_reduce(mem, me, npes, dtype, op):
    bad = []
    for name, team, dst, src in each_team(mem, lambda n: 9, lambda n: 9, dtype):
        i, n = team.my_pe(), team.n_pes()
        mem.set(src, src_values(i, 9, op))
        rshmem.reduce(team, dst, src, op)
        want = model_reduce(op, [src_values(j, 9, op) for j in range(n)])
        got = mem.np(dst)
        if not ((got == want).all()):
            bad.append(f"{name} {op}: {got} != {want}")
    assert not bad, "; ".join(bad)


def test_all_reduce_in_place(mem, me, npes):
    # The source may be the destination.
    x = mem.sym((4,), "int64")
    mem.set(x, [me, 1, 2 * me, 3])
    rshmem.all_reduce(rshmem.TEAM_WORLD, x, x, "sum")
    s = sum(range(npes))
    assert mem.np(x).tolist() == [s, npes, 2 * s, 3 * npes]


@pytest.mark.parametrize("dtype,op", [(d, o) for d, o in reduce_cases() if o in ("sum", "max", "xor", "prod")])
def test_reducescatter(mem, me, npes, dtype, op):
    bad = []
    for name, team, dst, src in each_team(mem, lambda n: 3, lambda n: 3 * n, dtype):
        i, n = team.my_pe(), team.n_pes()
        mem.set(src, src_values(i, n * 3, op))
        rshmem.reducescatter(team, dst, src, op)
        full = model_reduce(op, [src_values(j, n * 3, op) for j in range(n)])
        want = full[i * 3:(i + 1) * 3]
        got = mem.np(dst)
        if not ((got == want).all()):
            bad.append(f"{name} {op}: {got} != {want}")
    assert not bad, "; ".join(bad)


def test_large_reduction_and_broadcast(mem, me, npes):
    # Past RSHMEM_ONSTREAM_GRID_MIN: the collectives' grid paths.
    n = 1 << 18
    dst, src = mem.sym((n,), "float32"), mem.sym((n,), "float32")
    mem.set(src, (np.arange(n) % 17) + me)
    rshmem.reduce(rshmem.TEAM_WORLD, dst, src, "sum")
    reduced = mem.np(dst)
    rshmem.barrier_all()
    rshmem.broadcast(rshmem.TEAM_WORLD, dst, src, npes - 1)
    broadcast = mem.np(dst)
    assert (reduced == (np.arange(n) % 17) * npes + sum(range(npes))).all()
    assert (broadcast == (np.arange(n) % 17) + npes - 1).all()
