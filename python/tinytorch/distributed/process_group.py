"""The process group: MPI's world through mpi4py, and the collectives on NumPy buffers.

What this file owns: ``available``, ``init`` / ``is_initialized`` / ``finalize``, ``rank``,
``world_size``, ``local_rank``, ``barrier`` and the collectives ``all_reduce``, ``broadcast``,
``all_gather``, ``reduce_scatter`` (in place or into a given array, zero-copy through the
buffer protocol; a Tensor's ``.data`` is used), plus the helpers the rest of the package uses
(``broadcast_object``, ``check_same``: the once-per-plan layout check, ``iall_reduce_sum``:
the non-blocking sum ddp.py overlaps with backward, ``bound_all_reduce_sum``: its blocking
sums over buffers checked once, bound once; ``_comm`` stays this file's own).

What it assumes: mpi4py is imported lazily (``import tinytorch`` never loads MPI); without
mpi4py, and not started by a launcher, this process is world size 1 and every collective is
the identity. MPI itself is finalized by mpi4py at interpreter exit, so ``finalize`` only
leaves the group (after a barrier); ``init`` after it joins the same world again.
"""
from __future__ import annotations

import functools
import hashlib
import os
import sys

import numpy as np

_COMM = None
_INIT = False
_PREVIOUS_HOOK = None  # sys.excepthook before init() installed the abort-on-exception hook


def available() -> tuple[bool, str]:
    """(True, "mpi4py X on <MPI library>") when mpi4py and an MPI library load, else (False, why)."""
    try:
        import mpi4py
        from mpi4py import MPI
        # Open MPI ends the string with a NUL byte, which would reach reports and `tinytorch info`
        lib = MPI.Get_library_version().replace("\0", "").splitlines()[0].strip()
        return True, f"mpi4py {mpi4py.__version__} on {lib}"
    except Exception as e:  # ImportError, or the MPI shared library failing to load
        return False, f"mpi4py/MPI not importable ({type(e).__name__}: {e}); pip install 'tinytorch[distributed]'"


def _under_launcher() -> bool:
    return any(k in os.environ for k in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"))


def init() -> None:
    """Join MPI's world (idempotent). Without mpi4py, or when not started by a launcher and
    mpi4py is missing, this process is world size 1."""
    global _COMM, _INIT
    if _INIT:
        return
    try:
        from mpi4py import MPI
        _COMM = MPI.COMM_WORLD
        if _COMM.Get_size() > 1:
            _abort_on_exception()
    except ImportError:
        if _under_launcher():
            raise RuntimeError("started by an MPI launcher but mpi4py is not installed: "
                               "pip install 'tinytorch[distributed]'") from None
        _COMM = None
    _INIT = True


def _abort_on_exception() -> None:
    """An uncaught exception on one rank aborts every rank (non-zero exit, no hang waiting
    in a collective the failed rank will never join)."""
    global _PREVIOUS_HOOK
    if _PREVIOUS_HOOK is not None:
        return
    previous = _PREVIOUS_HOOK = sys.excepthook
    comm = _COMM

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.write(f"tinytorch.distributed: rank {comm.Get_rank()} raised {kind.__name__}; "
                         "aborting every rank\n")
        sys.stderr.flush()
        comm.Abort(1)
    sys.excepthook = hook


def is_initialized() -> bool:
    """True after ``init()`` and before ``finalize()``."""
    return _INIT


def finalize() -> None:
    """Leave the process group: every rank waits for the others (a barrier), then the
    abort-on-exception hook is removed and ``is_initialized()`` is False. MPI itself is
    finalized by mpi4py at interpreter exit; a later ``init()`` joins the same world."""
    global _COMM, _INIT, _PREVIOUS_HOOK
    if not _INIT:
        return
    if _COMM is not None and _COMM.Get_size() > 1:
        _COMM.Barrier()
    if _PREVIOUS_HOOK is not None:
        sys.excepthook, _PREVIOUS_HOOK = _PREVIOUS_HOOK, None
    _COMM, _INIT = None, False


def _comm():
    if not _INIT:
        init()
    return _COMM


def rank() -> int:
    """This process's rank in the world (0 without MPI)."""
    c = _comm()
    return 0 if c is None else c.Get_rank()


def world_size() -> int:
    """Number of processes in the world (1 without MPI)."""
    c = _comm()
    return 1 if c is None else c.Get_size()


_LOCAL_RANK = None


def local_rank() -> int:
    """Rank among the processes on this host: the launcher's variable (Open MPI's
    OMPI_COMM_WORLD_LOCAL_RANK, MPICH's MPI_LOCALRANKID, PMI_LOCAL_RANK), else the rank in
    MPI's shared-memory split of the world (``Split_type(COMM_TYPE_SHARED)``, computed once);
    0 without MPI."""
    global _LOCAL_RANK
    for k in ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"):
        if os.environ.get(k, "").isdigit():
            return int(os.environ[k])
    c = _comm()
    if c is None or c.Get_size() == 1:
        return 0
    if _LOCAL_RANK is None:
        from mpi4py import MPI
        node = c.Split_type(MPI.COMM_TYPE_SHARED)
        _LOCAL_RANK = node.Get_rank()
        node.Free()
    return _LOCAL_RANK


def barrier() -> None:
    """Wait until every rank reaches this call."""
    c = _comm()
    if c is not None:
        c.Barrier()


def _buf(x, name: str) -> np.ndarray:
    arr = getattr(x, "data", x) if not isinstance(x, np.ndarray) else x
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name}: expected a NumPy array or Tensor, got {type(x).__name__}")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{name}: buffer must be C-contiguous (got strides {arr.strides})")
    return arr


def all_reduce(x, op: str = "sum"):
    """Reduce ``x`` (NumPy array or Tensor) over all ranks in place; ``op`` is "sum", "mean",
    "max" or "min". Returns ``x``."""
    if op not in ("sum", "mean", "max", "min"):
        raise ValueError(f"all_reduce: op must be sum, mean, max or min, got {op!r}")
    arr = _buf(x, "all_reduce")
    c = _comm()
    if c is not None and c.Get_size() > 1:
        from mpi4py import MPI
        mop = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
        c.Allreduce(MPI.IN_PLACE, arr, op=mop)
        if op == "mean":
            arr /= c.Get_size()
    return x


def broadcast(x, root: int = 0):
    """Overwrite ``x`` (NumPy array or Tensor) on every rank with rank ``root``'s values; returns ``x``."""
    arr = _buf(x, "broadcast")
    c = _comm()
    if c is not None and c.Get_size() > 1:
        if not 0 <= root < c.Get_size():
            raise ValueError(f"broadcast: root {root} outside world size {c.Get_size()}")
        c.Bcast(arr, root=root)
    return x


def all_gather(x) -> np.ndarray:
    """Stack ``x`` (NumPy array or Tensor, same shape on every rank) from all ranks: a new
    array of shape (world_size, *x.shape)."""
    arr = _buf(x, "all_gather")
    c = _comm()
    out = np.empty((world_size(),) + arr.shape, dtype=arr.dtype)
    if c is None or c.Get_size() == 1:
        out[0] = arr
    else:
        c.Allgather(arr, out)
    return out


def broadcast_object(obj):
    """Rank 0's ``obj`` on every rank (pickled by MPI); ``obj`` itself at world size 1.

    Args:
        obj: any picklable object (only rank 0's is used).
    """
    c = _comm()
    return obj if c is None or c.Get_size() == 1 else c.bcast(obj, root=0)




def reduce_scatter(x, out=None, op: str = "sum"):
    """Reduce ``x`` over all ranks and give each rank one equal slice of the result:
    rank r receives elements ``[r*k, (r+1)*k)`` of the reduced flat array, ``k = x.size //
    world_size`` (``x.size`` must divide evenly). ``op`` is "sum" or "mean". Writes into
    ``out`` (a NumPy array or Tensor of k elements and x's dtype) when given; returns it
    (a new array of shape (k,) otherwise)."""
    if op not in ("sum", "mean"):
        raise ValueError(f"reduce_scatter: op must be sum or mean, got {op!r}")
    arr = _buf(x, "reduce_scatter")
    n = world_size()
    if arr.size % n:
        raise ValueError(f"reduce_scatter: {arr.size} elements do not split evenly over {n} ranks "
                         "(pad the buffer to a multiple of world_size())")
    k = arr.size // n
    res = np.empty(k, dtype=arr.dtype) if out is None else _buf(out, "reduce_scatter out")
    if res.size != k or res.dtype != arr.dtype:
        raise ValueError(f"reduce_scatter: out must hold {k} elements of {arr.dtype}, "
                         f"got {res.size} of {res.dtype}")
    flat, rflat = arr.reshape(-1), res.reshape(-1)
    c = _comm()
    if c is None or n == 1:
        rflat[...] = flat
    else:
        from mpi4py import MPI
        c.Reduce_scatter_block(flat, rflat, op=MPI.SUM)
        if op == "mean":
            rflat /= n
    return res if out is None else out


def check_same(what: str, layout) -> None:
    """Every rank must pass an equal ``layout`` (any repr-able plan: bucket sizes, dtypes);
    one all_gather of a 64-bit hash per plan, so a mismatch is an error naming the ranks,
    not a deadlock or wrong sums in a later collective."""
    if world_size() == 1:
        return
    h = int.from_bytes(hashlib.blake2b(repr(layout).encode(), digest_size=8).digest(), "little") >> 1
    hashes = all_gather(np.array([h], dtype=np.int64)).ravel()
    if not np.all(hashes == hashes[0]):
        bad = [int(r) for r in np.flatnonzero(hashes != hashes[0])]
        mine = repr(layout)
        raise RuntimeError(f"{what} differs across ranks: rank 0 and rank(s) {bad} disagree (this is "
                           f"rank {rank()}, its layout {mine[:300]}{'...' if len(mine) > 300 else ''}); "
                           "every rank must build the same model with the same options")


def bound_all_reduce_sum(arrays):
    """A function of no arguments that sums each of ``arrays`` (C-contiguous NumPy arrays the
    caller keeps, such as DDP's bucket buffers) over all ranks in place, one blocking
    ``Allreduce`` each, with no per-call checks. Everything is looked up once here: a small
    model's all-reduce is tens of microseconds, and the lookups, import and size check per
    call (run cold, right after a backward) were measured at 10-15 us of it."""
    c = _comm()
    if c is None or c.Get_size() == 1:
        return lambda: None
    from mpi4py import MPI
    allreduce = functools.partial(c.Allreduce, MPI.IN_PLACE, op=MPI.SUM)
    if len(arrays) == 1:
        return functools.partial(allreduce, arrays[0])
    calls = [functools.partial(allreduce, a) for a in arrays]

    def sum_all():
        for call in calls:
            call()
    return sum_all


def iall_reduce_sum(arr: np.ndarray):
    """Start a non-blocking in-place sum all-reduce of ``arr``; returns the MPI request
    (None when there is nothing to do: world size 1)."""
    c = _comm()
    if c is None or c.Get_size() == 1:
        return None
    from mpi4py import MPI
    return c.Iallreduce(MPI.IN_PLACE, arr, op=MPI.SUM)
