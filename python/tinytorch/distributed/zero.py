"""ZeroRedundancyOptimizer: ZeRO stage 1, Adam/AdamW with 1/N of the moments on each rank.

What this file owns: the shard plan and the sharded step. The trainable parameters of one
dtype are laid end to end in a flat index space of T elements, padded to N * S (S = ceil(T/N));
rank r owns elements [r*S, (r+1)*S) and keeps only their ``exp_avg`` / ``exp_avg_sq`` (2 S
elements instead of 2 T: ``state_bytes()``). A step is

  1. reduce-scatter: every rank packs its local gradients into the flat buffer, and
     ``Reduce_scatter_block`` leaves on rank r the sum of its owned slice (divided by N: the
     mean DistributedDataParallel would give);
  2. the owned slice goes through the kernel door's one-call ``adam_step`` (the runtime's
     kernel for float32), one entry per piece of a parameter inside the slice: the pieces are
     views of ``p.data`` and of the moment shard, so the update is in place and each parameter
     keeps its own step count, as in Adam (the rule is elementwise, so the result is Adam's);
  3. all-gather: the owned slices of the updated parameters are gathered and copied back into
     every parameter (in place, array identity kept).

It assumes what data parallelism assumes: every rank has the same parameters (rank 0's are
broadcast here; the plan is hash-checked across ranks) and the same set of parameters with a
gradient at each step (a missing ``.grad`` is skipped, as Adam skips it, and reduced as zeros).
Use it instead of DistributedDataParallel's gradient averaging (or after it: averaging averaged
gradients changes nothing but wastes a collective). ``state_dict()`` is collective and gives
Adam's format (full moments per parameter position), so checkpoints move between ZeRO at any
world size and plain Adam.
"""
from __future__ import annotations

import numpy as np

from ..core import acceleration as _acc
from ..core.autograd import bump_version
from ..core.optimizers import Adam, param_list
from . import process_group as _pg

__all__ = ["ZeroRedundancyOptimizer"]


class _Group:
    """The parameters of one dtype and this rank's slice of their flat index space."""

    def __init__(self, dtype, members, n, r):
        self.dtype, self.members = dtype, members  # members: [(param index, p, flat offset)]
        self.total = sum(p.data.size for _, p, _ in members)
        self.shard = -(-self.total // n) if self.total else 0
        lo, hi = r * self.shard, min((r + 1) * self.shard, self.total)
        self.pieces = []  # (param index, p, start in p, start in shard, length)
        for i, p, off in members:
            a, b = max(lo, off), min(hi, off + p.data.size)
            if a < b:
                self.pieces.append((i, p, a - off, a - lo, b - a))
        self.exp_avg = np.zeros(self.shard, dtype=dtype)
        self.exp_avg_sq = np.zeros(self.shard, dtype=dtype)


class ZeroRedundancyOptimizer:
    """Adam or AdamW whose moments are sharded over the ranks (ZeRO stage 1, PyTorch's name).

    Args:
        params: the Tensors to optimise (or a Layer); rank 0's values are broadcast here.
        optimizer_class: ``Adam`` or ``AdamW`` (or a subclass), the update rule.
        **defaults: that optimizer's hyper-parameters (``lr``, ``betas``, ``eps``,
            ``weight_decay``), validated by it.

    ``step()`` reduces the gradients itself (no DDP ``sync_gradients()`` needed);
    ``state_bytes()`` is this rank's optimizer-state memory.
    """

    def __init__(self, params, optimizer_class=Adam, **defaults):
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Adam)):
            raise TypeError("ZeroRedundancyOptimizer: optimizer_class must be Adam or AdamW (the sharded step "
                            f"is Adam's rule), got {optimizer_class!r}")
        self.params = param_list(params, "ZeroRedundancyOptimizer")
        rule = optimizer_class(self.params, **defaults)  # validates the hyper-parameters
        self.optimizer_class = optimizer_class
        self.hyper_names = rule.hyper_names
        self.lr, self.betas, self.eps = rule.lr, rule.betas, rule.eps
        self.weight_decay, self.decoupled = rule.weight_decay, rule.decoupled
        self.initial_lr = None  # as Optimizer: set by the first scheduler attached
        self.step_count = 0
        for i, p in enumerate(self.params):
            if not p.data.flags.c_contiguous:
                raise ValueError(f"ZeroRedundancyOptimizer: parameter {i} is not C-contiguous "
                                 f"(strides {p.data.strides}); its shard could not be updated in place")
            _pg.broadcast(p.data)
        self.world, self.rank = _pg.world_size(), _pg.rank()
        by_dtype = {}
        for i, p in enumerate(self.params):
            if p.requires_grad:
                by_dtype.setdefault(p.data.dtype, []).append((i, p))
        self.groups = []
        for dtype, items in by_dtype.items():
            members, off = [], 0
            for i, p in items:
                members.append((i, p, off))
                off += p.data.size
            self.groups.append(_Group(dtype, members, self.world, self.rank))
        self._steps = [0] * len(self.params)
        _pg.check_same("ZeroRedundancyOptimizer: the shard plan",
                        [(str(g.dtype), [(i, p.data.size) for i, p, _ in g.members]) for g in self.groups])

    # ------------------------------------------------------------------ memory
    def state_bytes(self) -> int:
        """Bytes of Adam moments held by this rank (``exp_avg`` + ``exp_avg_sq`` of its shard)."""
        return sum(g.exp_avg.nbytes + g.exp_avg_sq.nbytes for g in self.groups)

    def unsharded_state_bytes(self) -> int:
        """Bytes the same moments take in plain Adam on every rank (for comparison)."""
        return sum(2 * g.total * np.dtype(g.dtype).itemsize for g in self.groups)

    # ------------------------------------------------------------------ the step
    def zero_grad(self) -> None:
        """Set every parameter's ``.grad`` to None."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Reduce-scatter the gradients, Adam-step this rank's shard, all-gather the parameters."""
        self.step_count += 1
        n = self.world
        for g in self.groups:
            if not g.total:
                continue
            send = np.zeros(g.shard * n, dtype=g.dtype)
            has = {}
            for i, p, off in g.members:
                grad = p.grad
                if grad is None:
                    continue
                if grad.shape != p.data.shape:
                    raise ValueError(f"ZeroRedundancyOptimizer: grad shape {grad.shape} of parameter {i} does "
                                     f"not match its shape {p.data.shape}")
                send[off:off + p.data.size] = np.asarray(grad).reshape(-1)
                has[i] = True
            grad_shard = _pg.reduce_scatter(send, op="mean")
            todo = [(i, p, a, s, k) for i, p, a, s, k in g.pieces if i in has]
            for i in has:
                self._steps[i] += 1
            if todo:
                _acc.adam_step([p.data.reshape(-1)[a:a + k] for _, p, a, _, k in todo],
                               [grad_shard[s:s + k] for _, _, _, s, k in todo],
                               [g.exp_avg[s:s + k] for _, _, _, s, k in todo],
                               [g.exp_avg_sq[s:s + k] for _, _, _, s, k in todo],
                               [self._steps[i] for i, _, _, _, _ in todo],
                               self.lr, self.betas, self.eps, self.weight_decay, self.decoupled)
            self._gather_params(g)
            for i, p, _ in g.members:
                if i in has:
                    bump_version(p)

    def _gather_params(self, g: _Group) -> None:
        if self.world == 1:
            return  # the shard is everything and was updated in place
        mine = np.zeros(g.shard, dtype=g.dtype)
        for _, p, a, s, k in g.pieces:
            mine[s:s + k] = p.data.reshape(-1)[a:a + k]
        full = _pg.all_gather(mine).reshape(-1)
        for _, p, off in g.members:
            p.data.reshape(-1)[...] = full[off:off + p.data.size]

    # ------------------------------------------------------------------ state (Adam's format)
    def state_dict(self) -> dict:
        """Adam's ``state_dict`` (full moments by parameter position, hyper-parameters, step
        count), assembled from every rank's shard: a collective, every rank must call it."""
        per_param = {}
        for g in self.groups:
            m = _pg.all_gather(g.exp_avg).reshape(-1)
            v = _pg.all_gather(g.exp_avg_sq).reshape(-1)
            for i, p, off in g.members:
                if self._steps[i]:
                    k = p.data.size
                    per_param[i] = {"exp_avg": m[off:off + k].reshape(p.data.shape).copy(),
                                    "exp_avg_sq": v[off:off + k].reshape(p.data.shape).copy(),
                                    "step": self._steps[i]}
        return {"state": per_param, "hyper": {name: getattr(self, name) for name in self.hyper_names},
                "step_count": self.step_count}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take this rank's shard of an Adam-format ``state_dict`` (from plain Adam, or from
        this class at any world size). Shapes are checked before anything changes."""
        per_param = {int(k): s for k, s in state_dict.get("state", {}).items()}
        for i, s in per_param.items():
            if not 0 <= i < len(self.params):
                raise KeyError(f"load_state_dict: state for parameter {i}, but the optimizer has "
                               f"{len(self.params)} parameters")
            for name in ("exp_avg", "exp_avg_sq"):
                if name in s and np.shape(s[name]) != self.params[i].data.shape:
                    raise ValueError(f"load_state_dict: state {name!r} of parameter {i} has shape "
                                     f"{np.shape(s[name])} but the parameter has shape {self.params[i].data.shape}")
        self._steps = [int(per_param.get(i, {}).get("step", 0)) for i in range(len(self.params))]
        for g in self.groups:
            g.exp_avg[...] = 0
            g.exp_avg_sq[...] = 0
            for i, p, a, s, k in g.pieces:
                if i in per_param:
                    g.exp_avg[s:s + k] = np.asarray(per_param[i]["exp_avg"], dtype=g.dtype).reshape(-1)[a:a + k]
                    g.exp_avg_sq[s:s + k] = np.asarray(per_param[i]["exp_avg_sq"], dtype=g.dtype).reshape(-1)[a:a + k]
        for name, v in state_dict.get("hyper", {}).items():
            if name in self.hyper_names:
                setattr(self, name, tuple(v) if isinstance(v, (list, np.ndarray)) else v)
        self.step_count = int(state_dict.get("step_count", 0))

    def __repr__(self):
        return (f"ZeroRedundancyOptimizer({self.optimizer_class.__name__}, lr={self.lr}, rank {self.rank} of "
                f"{self.world}, {self.state_bytes()} state bytes)")
