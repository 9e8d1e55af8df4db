"""DistributedDataParallel: every rank runs its share of the batch; gradients are averaged.

What this file owns: the wrap-time broadcast of rank 0's parameters, the cross-rank check of
parameter names/shapes/dtypes (error naming the first difference) and of the bucket plan (one
hash all-gathered, so different ``bucket_mb`` on two ranks is an error, not a deadlock), the
bucket plan (trainable parameters in reverse order, the order backward finishes them, cut into
flat buckets of about ``bucket_mb`` MB of one dtype), and the two ways to average:

  * every trainable parameter gets a post-accumulate-grad hook (autograd.py): as soon as its
    gradient is final in a backward, the hook copies it, times 1/N, into its place in its
    bucket's flat buffer (one pass, while the gradient is still in cache), so after a backward
    ``sync_gradients()`` is an identity check per parameter and the all-reduces;
  * ``overlap=False``: ``sync_gradients()`` (after backward, before ``optimizer.step()``) packs
    what no hook packed (unused parameters count as zeros) and all-reduces each bucket, one
    blocking ``Allreduce`` per bucket;
  * ``overlap=True``: once a bucket is complete, and every bucket before it has started (so all
    ranks start them in one order), a non-blocking ``Iallreduce`` starts while backward goes on
    with earlier layers. Each hook call also tests the requests in flight (Open MPI progresses
    non-blocking collectives only inside MPI calls). ``sync_gradients()`` starts what is left
    and waits.

Each bucket owns one flat buffer for the life of the wrapper, allocated and touched once at
wrap time: an ``Allreduce`` on a fresh array each step paid for first-touch page faults and the
MPI transport's handling of new memory (a 3.3 MB bucket on 2 ranks: 5.7 ms fresh vs 1.1 ms
reused, raw ``Allreduce`` 0.6 ms). The buffers share one allocation; from 2 MiB on it is its
own mapping, 2 MiB aligned and marked for transparent huge pages (``_bucket_memory``): MPI's
shared-memory all-reduce walks both ranks' pages, and on 4 KiB pages the GPT of
bench_distributed.py (3.3 MB in 5 buckets) took 1.12-1.28x as long as raw ``Allreduce`` on
buffers NumPy happened to place in huge-page memory. Packing scales by 1/N in the same pass
(exact for N a power of two), so no pass divides afterwards; the averaged gradients are left
in ``.grad`` as views of the buffer (PyTorch's ``gradient_as_bucket_view``): a ``.grad`` array
kept from one step is overwritten by the next synchronised step (copy it to keep it). The hook
leaves ``.grad`` the engine's own array until ``sync_gradients()``, so a second backward before
it (without ``no_sync``, overlap off) accumulates as usual and its hook packs the sum again.
Both modes give the same bits. A ``.grad`` replaced after backward is packed again by
``sync_gradients()``; one changed in place after backward is not seen (as in PyTorch, whose DDP
reduces during backward): clip or unscale after ``sync_gradients()``. Frozen parameters are
skipped; a missing ``.grad`` counts as zeros so every rank's buffers match; ``no_sync()``
accumulates locally (hooks do nothing inside it), and the next synchronised backward averages
the accumulated sums.

What it assumes: every rank wraps the same model (checked at wrap time) and runs the same
backward; the collectives are process_group.py's (mpi4py; without it the world is one process
and averaging is the identity); overlap relies on autograd's post-accumulate-grad hooks
(``register_post_accumulate_grad_hook``) for packing in both modes.
"""
from __future__ import annotations

import contextlib
import mmap

import numpy as np

from . import process_group as _pg

__all__ = ["DistributedDataParallel"]

_UNPACKED = object()  # no gradient packed yet in this pass (None is a gradient: zeros)
_HUGE_PAGE = 2 << 20   # bytes; the runtime's storage uses huge pages from this size on too
_ALIGN = 64            # bytes between buckets: each starts on a cache line


def _bucket_memory(nbytes: int) -> np.ndarray:
    """Zeroed bytes for every bucket (module docstring). Below 2 MiB a NumPy array; from
    2 MiB on an anonymous mapping rounded up to whole 2 MiB pages, its start 2 MiB aligned
    within it, and marked MADV_HUGEPAGE where the OS has it (elsewhere plain pages)."""
    if nbytes < _HUGE_PAGE:
        return np.zeros(nbytes, dtype=np.uint8)
    size = -(-nbytes // _HUGE_PAGE) * _HUGE_PAGE
    # private and anonymous: zero pages (touched below) that THP may back (a shared mapping,
    # mmap's default, is shmem, which transparent huge pages leave alone by default)
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    region = mmap.mmap(-1, size + _HUGE_PAGE, flags=flags) if flags else mmap.mmap(-1, size + _HUGE_PAGE)
    raw = np.frombuffer(region, dtype=np.uint8)
    start = -raw.ctypes.data % _HUGE_PAGE
    if hasattr(region, "madvise") and hasattr(mmap, "MADV_HUGEPAGE"):
        region.madvise(mmap.MADV_HUGEPAGE, start, size)
    mem = raw[start:start + size]
    mem[::4096] = 0  # touch every page now, so no step faults it in
    return mem


class DistributedDataParallel:
    """Wrap a ``Layer`` for data-parallel training (PyTorch's name).

    Args:
        model: the Layer to wrap; rank 0's parameters are broadcast to every rank here.
        bucket_mb: size of each flat gradient bucket all-reduced in one call, in MB (> 0).
        overlap: start each bucket's all-reduce during backward, as soon as its gradients are
            final (True), or all of them in ``sync_gradients()`` (False, the default).

    Per step: ``loss.backward(); ddp.sync_gradients(); optimizer.step()``. Attributes other
    than the ones below are the wrapped model's (``ddp.train()``, ``ddp.state_dict()``).
    """

    def __init__(self, model, bucket_mb: float = 25, overlap: bool = False):
        if not hasattr(model, "named_parameters"):
            raise TypeError(f"DistributedDataParallel: model must be a Layer, got {type(model).__name__}")
        if isinstance(bucket_mb, bool) or not (isinstance(bucket_mb, (int, float)) and bucket_mb > 0):
            raise ValueError(f"DistributedDataParallel: bucket_mb must be > 0, got {bucket_mb!r}")
        if not isinstance(overlap, bool):
            raise TypeError(f"DistributedDataParallel: overlap must be True or False, got {overlap!r}")
        self.module = model
        self.bucket_bytes = int(bucket_mb * 2 ** 20)
        self.overlap = overlap
        self._sync = True
        named = list(model.named_parameters())
        mine = [(n, tuple(p.data.shape), str(p.data.dtype), bool(p.requires_grad)) for n, p in named]
        ref = _pg.broadcast_object(mine)
        bad = _pg.all_gather(np.array([ref != mine], dtype=np.int8)).ravel()  # every rank learns of it
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            diff = next(((a, b) for a, b in zip(ref, mine) if a != b), None) if r == _pg.rank() else None
            if diff is None and r == _pg.rank():
                diff = (f"{len(ref)} parameters", f"{len(mine)} parameters")
            where = (f"rank 0 has {diff[0]}, rank {r} has {diff[1]}" if diff else
                     f"rank 0 and rank {r} differ (rank {r} names the first difference)")
            raise ValueError(f"DistributedDataParallel: parameters differ across ranks: {where}")
        for _, p in named:
            _pg.broadcast(p.data)
        self._trainable = [p for _, p in named if p.requires_grad]
        self.buckets = self._make_buckets()
        _pg.check_same("DistributedDataParallel: the gradient bucket layout",
                        [(len(b), sum(p.data.size for p in b), str(b[0].data.dtype)) for b in self.buckets])
        self._bucket_of = {id(p): i for i, b in enumerate(self.buckets) for p in b}
        # one buffer per bucket for the wrapper's life, all in one allocation, touched now
        # (zeros) so no step faults it in
        sizes = [(sum(p.data.size for p in b), b[0].data.dtype) for b in self.buckets]
        starts = np.cumsum([0] + [-(-n * dt.itemsize // _ALIGN) * _ALIGN for n, dt in sizes])
        memory = _bucket_memory(int(starts[-1]))
        self._flats = [memory[int(o):int(o) + n * dt.itemsize].view(dt) for o, (n, dt) in zip(starts, sizes)]
        self._scale = 1.0 / _pg.world_size()
        # parameters in bucket order, each with its place in its bucket's buffer (shaped like
        # it); bucket i's parameters start at position _param_start[i]
        self._order = [p for b in self.buckets for p in b]
        self._order_views = []
        for bucket, flat in zip(self.buckets, self._flats):
            off = 0
            for p in bucket:
                self._order_views.append(flat[off:off + p.data.size].reshape(p.data.shape))
                off += p.data.size
        self._position = {id(p): k for k, p in enumerate(self._order)}
        self._param_start = [int(k) for k in np.cumsum([0] + [len(b) for b in self.buckets])]
        self._sum_flats = _pg.bound_all_reduce_sum(self._flats)  # the blocking all-reduces
        self._reset_pass()
        self._hook_handles = []
        if _pg.world_size() > 1:
            for p in self._trainable:
                self._hook_handles.append(p.register_post_accumulate_grad_hook(self._grad_ready))

    def _make_buckets(self):
        buckets, cur, size = [], [], 0
        for p in reversed(self._trainable):  # backward finishes the last layers first
            nbytes = p.data.nbytes
            if cur and (size + nbytes > self.bucket_bytes or cur[0].data.dtype != p.data.dtype):
                buckets.append(cur)
                cur, size = [], 0
            cur.append(p)
            size += nbytes
        if cur:
            buckets.append(cur)
        return buckets

    def __getattr__(self, name):
        module = self.__dict__.get("module")
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)

    def __call__(self, *args, **kwargs):
        """Run the wrapped model's forward on this rank's ``args`` / ``kwargs``."""
        return self.module(*args, **kwargs)

    @property
    def bucket_buffers(self) -> list:
        """The flat gradient buffer of each bucket (the same arrays for the wrapper's life;
        after ``sync_gradients()`` every synchronised ``.grad`` is a view of one of them)."""
        return list(self._flats)

    def parameters(self):
        """The wrapped model's parameters (for the optimizer)."""
        return self.module.parameters()

    @contextlib.contextmanager
    def no_sync(self):
        """Inside this block gradients accumulate locally: no hook starts a reduction and
        ``sync_gradients()`` does nothing; the first synchronised step after it averages the
        accumulated sums."""
        old, self._sync = self._sync, False
        try:
            yield
        finally:
            self._sync = old

    # ------------------------------------------------------------------ one pass
    def _reset_pass(self) -> None:
        self._packed = [_UNPACKED] * len(self._order)  # per position: the .grad packed this pass
        self._count = [0] * len(self.buckets)  # parameters packed per bucket in this pass
        self._next = 0  # the next bucket to start (buckets start in index order on every rank)
        self._requests = []

    def _pack(self, p, k: int) -> None:
        """p's gradient (p at position k), times 1/N, into its place in its bucket's buffer
        (one pass)."""
        view, g = self._order_views[k], p.grad
        if g is None:
            view.fill(0)
        elif g is view:  # the averaged gradient of an earlier sync: scaled in place
            np.multiply(view, self._scale, out=view)
        else:
            np.multiply(np.asarray(g).reshape(view.shape), self._scale, out=view, casting="unsafe")

    def _start(self, i: int) -> None:
        req = _pg.iall_reduce_sum(self._flats[i])
        if req is not None:
            self._requests.append(req)

    def _grad_ready(self, p) -> None:
        """The post-accumulate-grad hook: p's gradient is final for this backward."""
        if not self._sync:
            return
        i = self._bucket_of[id(p)]
        if i < self._next:
            raise RuntimeError("DistributedDataParallel(overlap=True): a gradient changed after its bucket's "
                               "all-reduce started (two backward passes before sync_gradients()? run all but "
                               "the last inside ddp.no_sync())")
        k = self._position[id(p)]
        self._pack(p, k)
        if not self.overlap:  # the record sync_gradients checks (and clears)
            self._packed[k] = p.grad
            return
        if self._packed[k] is _UNPACKED:
            self._count[i] += 1
        self._packed[k] = p.grad
        while self._next < len(self.buckets) and self._count[self._next] == len(self.buckets[self._next]):
            self._start(self._next)
            self._next += 1
        if self._requests:
            from mpi4py import MPI
            MPI.Request.Testall(self._requests)  # progress the reductions already in flight

    def sync_gradients(self) -> None:
        """Average every trainable parameter's ``.grad`` over all ranks (with ``overlap``:
        start the buckets backward has not started, then wait for all)."""
        if not self._sync or self._scale == 1.0:  # world size 1: nothing to average
            return
        if self.overlap:
            self._sync_overlapped()
            return
        # What no hook packed (an unused parameter, no backward since the last sync, a .grad
        # replaced after backward) is packed now, and each .grad becomes its view (the
        # all-reduces below average the views in place). A pack that raises (a replaced .grad
        # of the wrong shape) gives every .grad back the array it had. Kept to one loop: for
        # a small model this Python, run cold right after a backward, is all DDP adds to the
        # all-reduce (the CNN's 36 KB: about 7 us of 70).
        packed, views, order, k = self._packed, self._order_views, self._order, 0
        try:
            for p in order:
                if p.grad is not packed[k]:
                    self._pack(p, k)
                    packed[k] = p.grad
                p.grad = views[k]
                k += 1
        except BaseException:
            for j in range(k):
                order[j].grad = packed[j]
            raise
        self._packed = [_UNPACKED] * k  # frees the engine's gradient arrays
        self._sum_flats()

    def _sync_overlapped(self) -> None:
        """sync_gradients with overlap: the buckets no hook started start now, then all wait."""
        try:
            packed, views, order = self._packed, self._order_views, self._order
            start = k = self._param_start[self._next]
            for p in order[start:]:
                if p.grad is not packed[k]:
                    self._pack(p, k)
                k += 1
            for p, view in zip(order, views):
                p.grad = view
            while self._next < len(self.buckets):
                self._start(self._next)
                self._next += 1
            if self._requests:
                from mpi4py import MPI
                MPI.Request.Waitall(self._requests)
        finally:
            self._reset_pass()
