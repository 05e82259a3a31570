"""rshmem for Python: symmetric NumPy arrays and PyTorch tensors, host-issued RMA and collectives on
CUDA streams, a thin layer over the rshmem runtime (the Rust extension ``rshmem._rshmem``).

    import rshmem, numpy as np
    with rshmem.init():                      # under rshmrun (or init(process_group=...) under torchrun)
        me, n = rshmem.my_pe(), rshmem.n_pes()
        box = rshmem.array((4,), "int64")    # collective; zeroed; a NumPy array over the symmetric heap
        src = np.full(4, me, dtype=np.int64)
        rshmem.put(box, src, (me + 1) % n)   # into the next PE's copy
        rshmem.barrier_all()
        assert (box == (me - 1) % n).all()
        rshmem.free(box)                     # collective and explicit

On GPUs every operation is enqueued on a CUDA stream (the current torch stream unless ``stream=`` names
one) and returns at once; on the CPU backend (no GPU) it runs at once. Errors of the runtime are raised
as ``rshmem.Error`` with the runtime's message. See docs/python.md.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any, Iterable, Optional, Sequence, Union

from . import _rshmem
from ._rshmem import Allocation, Error, LeakWarning

__all__ = [
    "Error", "LeakWarning", "Allocation", "UniqueId", "Team", "Teams", "SignalOp", "ComparisonType",
    "TEAM_WORLD", "TEAM_SHARED", "TEAM_NODE",
    "init", "finalize", "is_initialized", "get_unique_id", "my_pe", "n_pes", "team_my_pe", "team_n_pes",
    "team_split_strided", "team_destroy", "team_translate_pe", "backend", "device", "heap_size",
    "array", "tensor", "free", "free_array", "free_tensor", "peer_array", "peer_tensor", "get_peer_tensor",
    "get_peer_array", "library_path", "dtypes",
    "put", "get", "put_signal", "signal_op", "signal_wait_until", "signal_wait", "quiet",
    "barrier_all", "sync_all", "barrier", "sync", "broadcast", "fcollect", "all_gather", "alltoall",
    "reduce", "all_reduce", "reducescatter",
]

# The extension also exports the runtime's C ABI (rshmem_*, nvshmem.h's host calls). Made global, a
# CUDA C++ extension imported later resolves those calls to this very runtime (python/examples/cuda).
try:
    ctypes.CDLL(_rshmem.__file__, mode=ctypes.RTLD_GLOBAL | getattr(os, "RTLD_NOLOAD", 4))
except OSError:  # pragma: no cover - the module is loaded, so this finds it
    pass


def library_path() -> str:
    """The path of the shared library that holds the runtime and its C ABI (link a C++ extension
    against it, or rely on this package having loaded it globally)."""
    return _rshmem.__file__


#: The element types: float16, bfloat16, float32, float64, int8..int64, uint8..uint64.
dtypes: tuple = tuple(_rshmem.DTYPES)


# ------------------------------------------------------------------ init and finalize

class UniqueId:
    """A unique id made by PE 0 (``get_unique_id``) and handed to every PE (it pickles, so
    ``torch.distributed.broadcast_object_list`` or MPI can carry it)."""

    __slots__ = ("hex",)

    def __init__(self, hex: str):
        self.hex = str(hex)

    def __bytes__(self) -> bytes:
        return bytes.fromhex(self.hex)

    @classmethod
    def from_bytes(cls, b: bytes) -> "UniqueId":
        return cls(bytes(b).hex())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UniqueId) and other.hex == self.hex

    def __hash__(self) -> int:
        return hash(self.hex)

    def __getstate__(self):
        return self.hex

    def __setstate__(self, state):
        self.hex = state

    def __repr__(self) -> str:
        return f"UniqueId({self.hex[:16]}...)"


def get_unique_id() -> UniqueId:
    """A unique id for ``init(uid=..., rank=..., nranks=...)``. PE 0 makes it and then must init in this
    same process (it listens for the other PEs)."""
    return UniqueId(_rshmem.get_unique_id())


class _Session:
    """What ``init`` returns: ``with rshmem.init(): ...`` finalizes at the end of the block."""

    def __enter__(self):
        return sys.modules[__name__]

    def __exit__(self, *exc):
        if _rshmem.my_pe() >= 0:
            finalize()
        return False


_state = {"gpu": False, "ordinal": 0, "raw_stream": None, "torch_bound": False}


def init(uid: Union[UniqueId, str, bytes, None] = None, rank: Optional[int] = None,
         nranks: Optional[int] = None, process_group: Any = None, **_ignored: Any) -> _Session:
    """Collective: initializes this process as a PE.

    - ``init()``: from the launcher's environment (rshmrun, mpirun, srun; a single PE without one).
    - ``init(uid=..., rank=..., nranks=...)``: from a unique id that PE 0 made (``get_unique_id``).
    - ``init(process_group=group)``: from an initialized ``torch.distributed`` group (torchrun): PE 0 of
      the group makes the unique id, the group broadcasts it, and the group's ranks become the PEs.

    On GPUs the current torch device (where torch is imported) is set to the PE's GPU. Returns a context
    manager that finalizes. Other keyword arguments (NVSHMEM4Py's ``device``, ``initializer_method``)
    are accepted and ignored."""
    if process_group is not None:
        if uid is not None:
            raise ValueError("rshmem.init: pass either uid or process_group, not both")
        import torch.distributed as dist
        group = None if process_group is True else process_group
        rank = dist.get_rank(group)
        nranks = dist.get_world_size(group)
        box = [get_unique_id().hex if rank == 0 else None]
        src = dist.get_global_rank(group, 0) if group is not None else 0
        dist.broadcast_object_list(box, src=src, group=group)
        uid = box[0]
    if uid is not None:
        if rank is None or nranks is None:
            raise ValueError("rshmem.init(uid=...): rank and nranks are needed too")
        if isinstance(uid, (bytes, bytearray)):
            uid = bytes(uid).hex()
        elif isinstance(uid, UniqueId):
            uid = uid.hex
        _rshmem.init_unique_id(str(uid), int(rank), int(nranks))
    else:
        _rshmem.init()
    _after_init()
    return _Session()


def _after_init() -> None:
    gpu = _rshmem.backend() == "cuda"
    _state["gpu"] = gpu
    _state["raw_stream"] = None
    _state["torch_bound"] = False
    if gpu:
        _state["ordinal"] = _rshmem.device_ordinal()
        if "torch" in sys.modules:
            _bind_torch()


def _bind_torch() -> None:
    """Makes the PE's GPU torch's current device (once per init; on the CPU backend nothing)."""
    if _state["gpu"] and not _state["torch_bound"]:
        import torch
        if torch.cuda.is_available():
            torch.cuda.set_device(_state["ordinal"])
        _state["torch_bound"] = True


def finalize() -> None:
    """Collective: ends this PE's part in the job. Arrays and tensors never freed are reported
    (``LeakWarning``); on the CPU backend those still referenced keep a private copy of their contents."""
    _rshmem.finalize()


def is_initialized() -> bool:
    return _rshmem.my_pe() >= 0


def my_pe() -> int:
    """This PE's number (-1 before init)."""
    return _rshmem.my_pe()


def n_pes() -> int:
    """The number of PEs (0 before init)."""
    return _rshmem.n_pes()


def backend() -> str:
    """``"cpu"`` or ``"cuda"``: where this job's symmetric heap lives."""
    return _rshmem.backend()


def device() -> str:
    """The device of this PE's symmetric heap: ``"cpu"`` or ``"cuda:N"``."""
    return f"cuda:{_rshmem.device_ordinal()}" if _rshmem.backend() == "cuda" else "cpu"


def heap_size() -> int:
    """The size in bytes of this PE's symmetric heap."""
    return _rshmem.heap_size()


# ------------------------------------------------------------------ teams

class Team:
    """A team of PEs (an NVSHMEM team handle): ``Team.WORLD``, ``Team.SHARED`` / ``Team.NODE`` (the PEs of
    this node), or one made by ``split_strided``."""

    __slots__ = ("handle",)
    WORLD: "Team"
    SHARED: "Team"
    NODE: "Team"

    def __init__(self, handle: int):
        self.handle = int(handle)

    def my_pe(self) -> int:
        """This PE's index in the team; -1 when it is not a member."""
        return _rshmem.team_my_pe(self.handle)

    def n_pes(self) -> int:
        """The number of members; -1 when the team does not exist."""
        return _rshmem.team_n_pes(self.handle)

    def split_strided(self, start: int, stride: int, size: int) -> Optional["Team"]:
        """Collective over this team: the team of members ``start, start + stride, ...`` (``size``
        of them); None on the members it leaves out."""
        h = _rshmem.team_split_strided(self.handle, int(start), int(stride), int(size))
        return None if h is None else Team(h)

    def translate_pe(self, pe: int, dest: "Team") -> int:
        """Member ``pe`` of this team as a member index of ``dest``; -1 when it is none."""
        return _rshmem.team_translate_pe(self.handle, int(pe), _team(dest))

    def destroy(self) -> None:
        """Collective over the team: destroys it."""
        _rshmem.team_destroy(self.handle)

    def __index__(self) -> int:
        return self.handle

    def __int__(self) -> int:
        return self.handle

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Team) and other.handle == self.handle

    def __hash__(self) -> int:
        return hash(self.handle)

    def __repr__(self) -> str:
        names = {_rshmem.TEAM_WORLD: "WORLD", _rshmem.TEAM_SHARED: "SHARED", _rshmem.TEAM_NODE: "NODE"}
        return f"Team.{names[self.handle]}" if self.handle in names else f"Team({self.handle})"


Team.WORLD = TEAM_WORLD = Team(_rshmem.TEAM_WORLD)
Team.SHARED = TEAM_SHARED = Team(_rshmem.TEAM_SHARED)
Team.NODE = TEAM_NODE = Team(_rshmem.TEAM_NODE)


class Teams:
    """NVSHMEM4Py's names of the predefined teams."""
    TEAM_WORLD = TEAM_WORLD
    TEAM_SHARED = TEAM_SHARED
    TEAM_NODE = TEAM_NODE
    TEAMX_NODE = TEAM_NODE


def _team(team: Union[Team, int, None]) -> int:
    if team is None:
        return _rshmem.TEAM_WORLD
    if isinstance(team, Team):
        return team.handle
    if isinstance(team, int):
        return team
    raise TypeError(f"rshmem: a team must be an rshmem.Team (or its int handle), not {type(team).__name__}")


def team_my_pe(team: Union[Team, int]) -> int:
    return _rshmem.team_my_pe(_team(team))


def team_n_pes(team: Union[Team, int]) -> int:
    return _rshmem.team_n_pes(_team(team))


def team_split_strided(parent: Union[Team, int], start: int, stride: int, size: int, *_config: Any) -> Optional[Team]:
    """Collective over ``parent``; see ``Team.split_strided`` (NVSHMEM4Py's config arguments are
    accepted and ignored)."""
    return Team(_team(parent)).split_strided(start, stride, size)


def team_destroy(team: Union[Team, int]) -> None:
    _rshmem.team_destroy(_team(team))


def team_translate_pe(src_team: Union[Team, int], src_pe: int, dest_team: Union[Team, int]) -> int:
    return _rshmem.team_translate_pe(_team(src_team), int(src_pe), _team(dest_team))


# ------------------------------------------------------------------ symmetric memory

def _dtype_name(dtype: Any) -> str:
    """The canonical name of a dtype given as a string, a NumPy dtype or type, or a torch dtype."""
    if isinstance(dtype, str):
        return dtype
    name = getattr(dtype, "name", None)  # numpy.dtype
    if isinstance(name, str):
        return name
    name = getattr(dtype, "__name__", None)  # numpy.float32 and other scalar types
    if isinstance(name, str) and name not in ("float", "int"):
        return name
    if dtype is float:
        return "float64"
    if dtype is int:
        return "int64"
    return str(dtype)  # torch.float32 -> "torch.float32"


def _shape(shape: Union[int, Iterable[int]]) -> list:
    if isinstance(shape, int):
        return [shape]
    return [int(d) for d in shape]


def array(shape: Union[int, Sequence[int]], dtype: Any = "float32", **_ignored: Any):
    """Collective: a zeroed NumPy array of ``shape`` and ``dtype`` on the symmetric heap (the same
    offset on every PE), without a copy. CPU backend only (on GPUs the heap is device memory: use
    ``tensor``). Free it with ``free`` (collective) before finalize. NVSHMEM4Py's other keyword
    arguments (``release``, ``morder``, ``except_on_del``) are accepted and ignored."""
    import numpy as np
    name = _dtype_name(dtype)
    if name in ("bfloat16", "torch.bfloat16"):
        raise TypeError("rshmem.array: NumPy has no bfloat16; make a bfloat16 tensor with rshmem.tensor")
    exporter = _rshmem.alloc("rshmem.array", _shape(shape), name, "cpu")
    return np.from_dlpack(exporter)


def tensor(shape: Union[int, Sequence[int]], dtype: Any = None, device: Any = None, **_ignored: Any):
    """Collective: a zeroed torch tensor of ``shape`` and ``dtype`` (default torch.float32) on the
    symmetric heap, through DLPack without a copy: a CUDA tensor on the PE's GPU, or a CPU tensor on the
    CPU backend. ``device`` may name that device (``"cuda"``, ``"cuda:N"``, ``"cpu"``); default: the
    heap's. Free it with ``free`` (collective) before finalize. NVSHMEM4Py's other keyword arguments
    (``release``, ``morder``, ``except_on_del``) are accepted and ignored."""
    import torch
    _bind_torch()
    if dtype is None:
        dtype = torch.float32
    dev = None if device is None else str(device)
    exporter = _rshmem.alloc("rshmem.tensor", _shape(shape), _dtype_name(dtype), dev)
    return torch.from_dlpack(exporter)


def free(x: Any) -> None:
    """Collective: frees the symmetric allocation ``x`` (an array or tensor from ``array`` /
    ``tensor``) on every PE, in the same order everywhere, after this PE's device work. ``x`` and its
    views must not be used afterwards."""
    _rshmem.free("rshmem.free", x)


free_array = free
free_tensor = free


def _peer(call: str, x: Any, pe: int):
    exporter = _rshmem.peer(call, x, _shape(x.shape), int(pe))
    return exporter


def peer_array(x: Any, pe: int):
    """PE ``pe``'s copy of symmetric ``x`` as a NumPy array this process can load and store through
    (``nvshmem_ptr``), or None where that PE's memory is not mapped here (another node)."""
    import numpy as np
    e = _peer("rshmem.peer_array", x, pe)
    return None if e is None else np.from_dlpack(e)


def peer_tensor(x: Any, pe: int):
    """PE ``pe``'s copy of symmetric tensor ``x`` as a tensor (``nvshmem_ptr``), or None where it is not
    mapped here. On GPUs: a CUDA tensor over the peer's memory (NVLink/PCIe)."""
    import torch
    e = _peer("rshmem.peer_tensor", x, pe)
    return None if e is None else torch.from_dlpack(e)


def get_peer_tensor(tensor: Any, peer_pe: int):
    """NVSHMEM4Py's name of ``peer_tensor``."""
    return peer_tensor(tensor, peer_pe)


def get_peer_array(array: Any, peer_pe: int):
    return peer_array(array, peer_pe)


# ------------------------------------------------------------------ streams

def _stream(stream: Any) -> int:
    """The raw CUDA stream handle of ``stream``, or of the current torch stream when None; 0 on the
    CPU backend (no streams: operations run at once)."""
    if not _state["gpu"]:
        return 0
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is None:
            return 0
        raw = _state["raw_stream"]
        if raw is None:
            getter = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            ordinal = _state["ordinal"]
            raw = (lambda: getter(ordinal)) if getter else (lambda: torch.cuda.current_stream().cuda_stream)
            _state["raw_stream"] = raw
        return raw()
    if isinstance(stream, int):
        return stream
    handle = getattr(stream, "cuda_stream", None)  # torch.cuda.Stream
    if isinstance(handle, int):
        return handle
    proto = getattr(stream, "__cuda_stream__", None)  # CUDA stream protocol (cuda.core, cupy)
    if proto is not None:
        return int(proto()[1])
    ptr = getattr(stream, "ptr", None)  # cupy.cuda.Stream
    if isinstance(ptr, int):
        return ptr
    raise TypeError(f"rshmem: stream must be a torch.cuda.Stream, a CUDA stream object or handle, or None, not {type(stream).__name__}")


# ------------------------------------------------------------------ RMA and signals

class SignalOp:
    """Signal update operators (``NVSHMEM_SIGNAL_SET`` / ``_ADD``)."""
    SET = SIGNAL_SET = _rshmem.SIGNAL_SET
    ADD = SIGNAL_ADD = _rshmem.SIGNAL_ADD


_CMP = dict(_rshmem.CMP)


class ComparisonType:
    """Comparisons of the waits (``NVSHMEM_CMP_*``)."""
    CMP_EQ = EQ = _CMP["eq"]
    CMP_NE = NE = _CMP["ne"]
    CMP_GT = GT = _CMP["gt"]
    CMP_GE = GE = _CMP["ge"]
    CMP_LT = LT = _CMP["lt"]
    CMP_LE = LE = _CMP["le"]


def _signal_op(op: Any) -> int:
    if isinstance(op, str):
        ops = {"set": _rshmem.SIGNAL_SET, "add": _rshmem.SIGNAL_ADD}
        if op.lower() not in ops:
            raise ValueError(f"rshmem: signal operator {op!r} is not 'set' or 'add'")
        return ops[op.lower()]
    return int(op)


def _cmp(cmp: Any) -> int:
    if isinstance(cmp, str):
        key = cmp.lower().removeprefix("cmp_")
        if key not in _CMP:
            raise ValueError(f"rshmem: comparison {cmp!r} is not one of {', '.join(_CMP)}")
        return _CMP[key]
    return int(cmp)


def put(dst: Any, src: Any, remote_pe: int, stream: Any = None) -> None:
    """Copies local ``src`` into symmetric ``dst`` (same dtype and size; contiguous, slices allowed) on
    PE ``remote_pe``: enqueued on ``stream`` on GPUs (complete at the target after ``quiet`` or a
    barrier), at once on the CPU backend."""
    _rshmem.put("rshmem.put", dst, src, int(remote_pe), _stream(stream))


def get(dst: Any, src: Any, remote_pe: int, stream: Any = None) -> None:
    """Copies symmetric ``src`` on PE ``remote_pe`` into local ``dst`` (same dtype and size)."""
    _rshmem.get("rshmem.get", dst, src, int(remote_pe), _stream(stream))


def put_signal(dst: Any, src: Any, signal_var: Any, signal_val: int, signal_op: Any, remote_pe: int,
               stream: Any = None) -> None:
    """``put``, then the signal update ``signal_op`` (``SignalOp.SET`` / ``ADD``, or "set" / "add") of
    ``signal_val`` on the first value of the symmetric uint64 array ``signal_var`` at ``remote_pe``; the
    signal lands after the data."""
    _rshmem.put_signal("rshmem.put_signal", dst, src, signal_var, int(signal_val), _signal_op(signal_op),
                       int(remote_pe), _stream(stream))


def signal_op(signal_var: Any, signal_val: int, signal_op: Any, remote_pe: int, stream: Any = None) -> None:
    """The signal update alone (``nvshmemx_signal_op_on_stream``)."""
    _rshmem.signal_op("rshmem.signal_op", signal_var, int(signal_val), _signal_op(signal_op), int(remote_pe),
                      _stream(stream))


def signal_wait_until(signal_var: Any, cmp: Any, value: int, stream: Any = None) -> None:
    """Waits until this PE's ``signal_var[0]`` (a symmetric integer array) compares true with ``cmp``
    (``ComparisonType.*`` or "eq", "ne", "gt", "ge", "lt", "le") against ``value``: on GPUs work
    enqueued later on ``stream`` waits; on the CPU backend this call waits (``RSHMEM_WAIT_TIMEOUT``
    bounds it)."""
    _rshmem.wait_until("rshmem.signal_wait_until", signal_var, _cmp(cmp), int(value), _stream(stream))


def signal_wait(signal_var: Any, signal_val: int, signal_op: Any, stream: Any = None) -> None:
    """NVSHMEM4Py's argument order of ``signal_wait_until`` (value, then comparison)."""
    signal_wait_until(signal_var, signal_op, signal_val, stream)


def quiet(stream: Any = None) -> None:
    """Completes this PE's outstanding operations (on ``stream`` on GPUs)."""
    _rshmem.quiet("rshmem.quiet", _stream(stream))


# ------------------------------------------------------------------ synchronization and collectives

def barrier_all(stream: Any = None) -> None:
    """Barrier of all PEs (completes this PE's operations first), on ``stream`` on GPUs."""
    _rshmem.team_sync("rshmem.barrier_all", _rshmem.TEAM_WORLD, True, _stream(stream))


def sync_all(stream: Any = None) -> None:
    """Synchronization of all PEs (without completing operations)."""
    _rshmem.team_sync("rshmem.sync_all", _rshmem.TEAM_WORLD, False, _stream(stream))


def barrier(team: Union[Team, int], stream: Any = None) -> None:
    """Barrier of ``team``."""
    _rshmem.team_sync("rshmem.barrier", _team(team), True, _stream(stream))


def sync(team: Union[Team, int], stream: Any = None) -> None:
    """Synchronization of ``team``."""
    _rshmem.team_sync("rshmem.sync", _team(team), False, _stream(stream))


def broadcast(team: Union[Team, int, None], dst_array: Any, src_array: Any, root: int = 0, stream: Any = None) -> None:
    """Collective over ``team``: ``src_array`` of member ``root`` into ``dst_array`` on every member
    (both symmetric, same dtype and size)."""
    _rshmem.broadcast("rshmem.broadcast", _team(team), dst_array, src_array, int(root), _stream(stream))


def fcollect(team: Union[Team, int, None], dst_array: Any, src_array: Any, stream: Any = None) -> None:
    """Collective over ``team``: every member's ``src_array``, in member order, into ``dst_array``
    (team size x ``src_array``'s values)."""
    _rshmem.fcollect("rshmem.fcollect", _team(team), dst_array, src_array, _stream(stream))


all_gather = fcollect


def alltoall(team: Union[Team, int, None], dst_array: Any, src_array: Any, stream: Any = None) -> None:
    """Collective over ``team``: block i of ``src_array`` (team size blocks) into block ``my index`` of
    member i's ``dst_array``."""
    _rshmem.alltoall("rshmem.alltoall", _team(team), dst_array, src_array, _stream(stream))


def reduce(team: Union[Team, int, None], dst_array: Any, src_array: Any, op: str = "sum", stream: Any = None) -> None:
    """Collective over ``team``: the reduction with ``op`` ("sum", "min", "max", "prod"; "and", "or",
    "xor" for integers) of every member's ``src_array`` into ``dst_array`` on every member (an
    all-reduce)."""
    _rshmem.reduce("rshmem.reduce", _team(team), dst_array, src_array, str(op).lower(), False, _stream(stream))


all_reduce = reduce


def reducescatter(team: Union[Team, int, None], dst_array: Any, src_array: Any, op: str = "sum", stream: Any = None) -> None:
    """Collective over ``team``: member i gets block i (``dst_array``'s size) of the reduction of every
    member's ``src_array`` (team size x that)."""
    _rshmem.reduce("rshmem.reducescatter", _team(team), dst_array, src_array, str(op).lower(), True, _stream(stream))
