"""Trainer: the training loop, evaluation and checkpoints.

What this file owns
  * ``Trainer(model, optimizer, loss_fn, scheduler=None, grad_clip_norm=None,
    progress=None, scheduler_interval="epoch")``
  * ``train_epoch(loader, accumulation_steps=1)`` -> mean loss over samples. Gradients of
    ``accumulation_steps`` micro-batches are summed before one optimizer step, each
    micro-batch's mean loss weighted by its sample count and the window divided by its
    samples, so a window (also a short last one, or unequal batches) makes the update of one
    batch of the same samples. A loss with ``reduction="sum"`` is summed unweighted.
  * ``evaluate(loader)`` -> ``(mean_loss, accuracy)``; accuracy is None unless outputs
    are class scores (N, C) with integer class ids (or whole-number floats, for
    ``CrossEntropyLoss``). The model is left in eval mode (``train_epoch`` switches back),
    as upstream TinyTorch does; ``training_mode`` says which mode the Trainer set last.
  * ``save_checkpoint(path)`` / ``load_checkpoint(path)``: model, optimizer, scheduler,
    counters, ``grad_clip_norm``, the training mode and the framework RNG state in one
    ``.npz`` archive written at exactly ``path`` (any suffix; parent folders are created;
    arrays stored as arrays, the rest as a JSON string; read back with ``allow_pickle=False``,
    never unpickled).
  * Upstream TinyTorch's names: ``step`` (= ``global_step``), ``history["learning_rates"]``
    (the rate each epoch trained at, when there is a scheduler), the private state
    accessors its tests call (``_get_model_state``/``_set_model_state``, keyed by parameter
    index, and ``_get_optimizer_state``/``_set_optimizer_state``).

Progress: a tqdm bar with loss and samples/s when stderr is a terminal (``progress=None``),
forced on or off with True/False; without tqdm a plain one-line counter is printed.

Batches from the loader are ``(inputs, targets)`` pairs of Tensors or arrays.

Ranks (``tinytorch.distributed``, looked up in ``sys.modules`` only: nothing is imported, and a
plain process is rank 0 of 1): with ``DistributedDataParallel`` as the model, backward runs
under its ``no_sync()`` except on the micro-batch before an optimizer step, and the gradients
are averaged (``sync_gradients``) when a window ends, before its rescaling, clipping and the step; the progress bar shows on rank 0
only; the loss (and accuracy) sums are all-reduced, so ``history`` is the global mean on every
rank; ``save_checkpoint`` gathers on every rank (a ZeRO optimizer's state is a collective) and
rank 0 alone writes the file (atomically), the others waiting for it at a barrier.

What it assumes: the model is a Layer (or an upstream-style object with ``forward``) with
``parameters()``, ``state_dict()`` / ``load_state_dict()``; the optimizer is an Optimizer of
optimizers.py (``params``, ``lr``, ``step``, ``zero_grad``, ``state_dict``); ``loss_fn``
returns a scalar Tensor whose ``backward()`` fills the gradients; checkpoints are written and
read through core/state_files.py.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

import math
import os

from . import random as tt_random
from .autograd import bump_version, no_grad
from .layers import set_training_mode
from .optimizers import CosineAnnealingLR, LRScheduler, clip_grad_norm_
from .state_files import checked_cast, load_arrays, save_arrays
from .tensor import Tensor

__all__ = ["Trainer", "CosineSchedule", "clip_grad_norm", "EpochScheduleLR",
           "DEFAULT_MAX_LR", "DEFAULT_MIN_LR", "DEFAULT_TOTAL_EPOCHS"]

# CosineSchedule's defaults, under upstream TinyTorch's names.
DEFAULT_MAX_LR = 0.1
DEFAULT_MIN_LR = 0.01
DEFAULT_TOTAL_EPOCHS = 100

try:  # optional dependency
    from tqdm.auto import tqdm as _tqdm
except ImportError:  # pragma: no cover - exercised when tqdm is absent
    _tqdm = None


class _PlainProgress:
    """Fallback progress line when tqdm is missing."""

    def __init__(self, total, desc, stream):
        self.total, self.desc, self.stream, self.n = total, desc, stream, 0
        self.postfix = ""

    def update(self, n=1):
        self.n += n
        self.stream.write(f"\r{self.desc} {self.n}/{self.total or '?'} {self.postfix}")
        self.stream.flush()

    def set_postfix_str(self, s):
        self.postfix = s

    def close(self):
        self.stream.write("\n")
        self.stream.flush()


class _NoProgress:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass


class Trainer:
    """The training loop: epochs over a loader, evaluation, gradient accumulation and
    clipping, learning-rate schedules, checkpoints.

    Args:
        model: the Layer to train; ``model(inputs)`` gives the outputs. Put in train mode
            for ``train_epoch`` and eval mode (restored afterwards) for ``evaluate``.
        optimizer: an Optimizer over the model's parameters (e.g. ``Adam(model.parameters())``).
        loss_fn: ``loss_fn(outputs, targets)`` returning a scalar Tensor, e.g.
            ``CrossEntropyLoss()`` (a reduction of "mean" or "sum", not "none").
        scheduler: optional LRScheduler on the same optimizer, stepped once per epoch or
            once per optimizer step (see ``scheduler_interval``).
        grad_clip_norm: if given (> 0), ``clip_grad_norm_`` the gradients to this total
            2-norm before every optimizer step.
        progress: show a progress bar (tqdm when installed, else a one-line counter):
            None shows it only when stderr is a terminal; True/False force it.
        scheduler_interval: ``"epoch"`` (default) or ``"step"``.

    Batches are ``(inputs, targets)`` pairs of Tensors or arrays, e.g. from a DataLoader.
    ``epoch``, ``global_step`` (optimizer steps) and ``history`` (lists ``train_loss``,
    ``eval_loss``, ``eval_accuracy``) record progress.

    Example::

        trainer = Trainer(model, Adam(model.parameters(), lr=1e-3), CrossEntropyLoss())
        for epoch in range(5):
            train_loss = trainer.train_epoch(train_loader)
            val_loss, val_acc = trainer.evaluate(val_loader)
    """

    def __init__(self, model, optimizer, loss_fn, scheduler=None, grad_clip_norm=None,
                 progress=None, scheduler_interval: str = "epoch"):
        if scheduler_interval not in ("epoch", "step"):
            raise ValueError(f"Trainer: scheduler_interval must be 'epoch' or 'step', got {scheduler_interval!r}")
        if grad_clip_norm is not None and not (grad_clip_norm > 0 and math.isfinite(grad_clip_norm)):
            raise ValueError(f"Trainer: grad_clip_norm must be finite and positive, got {grad_clip_norm}")
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        if scheduler is not None and not hasattr(scheduler, "step") and hasattr(scheduler, "get_lr"):
            scheduler = EpochScheduleLR(optimizer, scheduler)  # upstream-style get_lr(epoch) schedule
        self.scheduler, self.grad_clip_norm = scheduler, grad_clip_norm
        self.progress, self.scheduler_interval = progress, scheduler_interval
        self.epoch = 0
        self.global_step = 0
        self.training_mode = True
        self.history = {"train_loss": [], "eval_loss": [], "eval_accuracy": [], "learning_rates": []}

    @property
    def step(self) -> int:
        """Optimizer steps taken (upstream TinyTorch's name for ``global_step``)."""
        return self.global_step

    @step.setter
    def step(self, value: int) -> None:
        self.global_step = int(value)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _group():
        """tinytorch.distributed when this process joined a group of more than one rank, else None."""
        dist = sys.modules.get("tinytorch.distributed")
        return dist if dist is not None and dist.is_initialized() and dist.world_size() > 1 else None

    def _sum_over_ranks(self, *values):
        dist = self._group()
        if dist is None:
            return values
        return tuple(dist.all_reduce(np.array(values, dtype=np.float64)).tolist())

    def _progress(self, total, desc):
        stream = sys.stderr
        dist = self._group()
        if dist is not None and dist.rank() != 0:
            return _NoProgress()
        show = self.progress if self.progress is not None else bool(getattr(stream, "isatty", lambda: False)())
        if not show:
            return _NoProgress()
        if _tqdm is not None:
            return _tqdm(total=total, desc=desc, leave=False, file=stream, dynamic_ncols=True)
        return _PlainProgress(total, desc, stream)

    @staticmethod
    def _split(batch):
        if not isinstance(batch, (tuple, list)) or len(batch) != 2:
            raise ValueError("Trainer: each batch must be an (inputs, targets) pair")
        x, y = batch
        return (x if isinstance(x, Tensor) else Tensor(x)), y

    def _optimizer_step(self, micro_batches, accumulation_steps):
        params = self.optimizer.params
        if self.grad_clip_norm is not None:
            clip_grad_norm_(params, self.grad_clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.global_step += 1
        if self.scheduler is not None and self.scheduler_interval == "step":
            self.scheduler.step()

    # ------------------------------------------------------------------ loops
    def train_epoch(self, loader, accumulation_steps: int = 1) -> float:
        """Train one pass over ``loader`` and return the mean loss per sample.

        Args:
            loader: an iterable of ``(inputs, targets)`` batches (a DataLoader).
            accumulation_steps: a positive integer: micro-batches whose gradients make one
                optimizer step, weighted by their sample counts so the window (a short last
                one too) updates as one batch of its samples would.
        """
        if isinstance(accumulation_steps, (bool, np.bool_)) or not isinstance(accumulation_steps, (int, np.integer)) \
                or accumulation_steps < 1:
            raise ValueError(f"train_epoch: accumulation_steps must be a positive integer, got {accumulation_steps!r}")
        weighted = accumulation_steps > 1 and getattr(self.loss_fn, "reduction", "mean") != "sum"
        self._begin_epoch()
        set_training_mode(self.model, True)
        self.training_mode = True
        self.optimizer.zero_grad()
        total_loss, total_samples, pending, window_samples = 0.0, 0, 0, 0
        bar = self._progress(len(loader) if hasattr(loader, "__len__") else None, f"epoch {self.epoch + 1}")
        start = time.perf_counter()
        try:
            for batch in loader:
                x, y = self._split(batch)
                n = x.shape[0] if x.ndim else 1
                last = pending + 1 == accumulation_steps
                with (self.model.no_sync() if not last and hasattr(self.model, "no_sync") else _no_context()):
                    loss = _call(self.loss_fn, _call(self.model, x), y)
                    scaled = loss * float(n) if weighted else loss  # a sum over the micro-batch
                    scaled.backward()
                pending += 1
                window_samples += n
                value = float(loss.data)
                total_loss += value * n
                total_samples += n
                if pending == accumulation_steps:
                    self._end_window(weighted, window_samples)
                    self._optimizer_step(pending, accumulation_steps)
                    pending = window_samples = 0
                bar.update(1)
                rate = total_samples / max(time.perf_counter() - start, 1e-9)
                bar.set_postfix_str(f"loss={value:.4f} {rate:.0f} samples/s")
            if pending:
                self._end_window(weighted, window_samples)
                self._optimizer_step(pending, accumulation_steps)
        finally:
            bar.close()
        if self.scheduler is not None and self.scheduler_interval == "epoch" \
                and not isinstance(self.scheduler, EpochScheduleLR):
            self.scheduler.step()
        self.epoch += 1
        total_loss, total_samples = self._sum_over_ranks(total_loss, total_samples)
        mean = total_loss / total_samples if total_samples else float("nan")
        self.history["train_loss"].append(mean)
        return mean

    def _begin_epoch(self) -> None:
        """Set the epoch's learning rate where the schedule gives it per epoch (an upstream
        ``get_lr(epoch)`` schedule: epoch k trains at ``get_lr(k)``, and ``optimizer.lr``
        still reads it after the epoch) and record it in ``history["learning_rates"]``."""
        if isinstance(self.scheduler, EpochScheduleLR):
            self.scheduler.last_epoch = self.epoch
            self.optimizer.lr = float(self.scheduler.get_lr())
        if self.scheduler is not None:
            self.history.setdefault("learning_rates", []).append(float(self.optimizer.lr))

    def _end_window(self, weighted: bool, samples: int) -> None:
        """Divide the summed gradients of a window by its sample count (when weighted).
        DistributedDataParallel averages the window's sums over the ranks first (every rank's
        window holds the same number of samples, as DistributedSampler's shards do)."""
        if hasattr(self.model, "sync_gradients"):
            self.model.sync_gradients()
        if weighted and samples:
            for p in self.optimizer.params:
                if p.grad is not None:
                    p.grad *= np.asarray(1.0 / samples, dtype=p.grad.dtype)

    def evaluate(self, loader):
        """Evaluate on ``loader`` without recording gradients; returns
        ``(mean_loss, accuracy)``. Accuracy (argmax over axis 1) is reported when outputs
        are class scores (N, C) and targets class ids (N,) (integers, or whole-number floats
        for ``CrossEntropyLoss``), else None (a regression loss has no accuracy). The model
        is left in eval mode, as upstream TinyTorch's Trainer leaves it."""
        set_training_mode(self.model, False)
        self.training_mode = False
        total_loss, total, correct, classify = 0.0, 0, 0, True
        with no_grad():
            for batch in loader:
                x, y = self._split(batch)
                out = _call(self.model, x)
                loss = _call(self.loss_fn, out, y)
                n = x.shape[0] if x.ndim else 1
                total_loss += float(loss.data) * n
                total += n
                target = y.data if isinstance(y, Tensor) else np.asarray(y)
                if classify and out.ndim == 2 and _class_ids(target, self.loss_fn) and target.shape == out.shape[:1]:
                    correct += int((out.data.argmax(axis=1) == target).sum())
                else:
                    classify = False
        total_loss, total, correct, classify = self._sum_over_ranks(total_loss, total, correct, classify)
        classify = classify == (self._group().world_size() if self._group() else 1)
        mean = total_loss / total if total else float("nan")
        acc = correct / total if classify and total else None
        self.history["eval_loss"].append(mean)
        self.history["eval_accuracy"].append(acc)
        return mean, acc

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, path) -> None:
        """Write model parameters, optimizer state, scheduler state, the epoch and step
        counters, ``grad_clip_norm``, the training mode, the history and the framework RNG
        state to one ``.npz`` archive at exactly ``path`` (whatever its suffix, e.g. upstream's
        ``"ckpt.pkl"``: the format is still npz, never a pickle), creating parent folders."""
        arrays, meta = {}, {"epoch": self.epoch, "global_step": self.global_step,
                            "rng_state": tt_random.get_rng_state(), "history": self.history,
                            "grad_clip_norm": self.grad_clip_norm, "training_mode": self.training_mode}
        for name, value in self.model.state_dict().items():
            arrays[f"model/{name}"] = value
        opt = self.optimizer.state_dict()
        meta["optimizer"] = {"hyper": opt["hyper"], "step_count": opt["step_count"], "scalars": {}}
        for i, state in opt["state"].items():
            for key, value in state.items():
                if isinstance(value, np.ndarray):
                    arrays[f"optim/{i}/{key}"] = value
                else:
                    meta["optimizer"]["scalars"][f"{i}/{key}"] = value
        if self.scheduler is not None:
            meta["scheduler"] = self.scheduler.state_dict()
        arrays["meta"] = np.array(json.dumps(meta, default=_json_default))
        dist = self._group()
        if dist is None or dist.rank() == 0:
            folder = os.path.dirname(os.fspath(path))
            if folder:
                os.makedirs(folder, exist_ok=True)
            save_arrays(path, arrays, exact_path=True)
        if dist is not None:
            dist.barrier()  # every rank may read the file after this returns

    def load_checkpoint(self, path) -> None:
        """Restore everything ``save_checkpoint`` wrote to ``path`` (no pickles), so training
        continues exactly (dropout masks included). All or nothing: the file is parsed and
        checked first, and if applying any part still fails, model, optimizer, scheduler,
        counters and RNG are put back as they were before the call. ValueError if it is not
        a checkpoint (or not one of this model and optimizer)."""
        data = load_arrays(path, "load_checkpoint")
        if "meta" not in data:
            raise ValueError(f"load_checkpoint: {path} is not a Trainer checkpoint (no 'meta' entry)")
        try:
            meta = json.loads(str(data.pop("meta")))
            model_state = {k[len("model/"):]: v for k, v in data.items() if k.startswith("model/")}
            state = {}
            for k, v in data.items():
                if k.startswith("optim/"):
                    _, i, key = k.split("/", 2)
                    state.setdefault(int(i), {})[key] = v
            for k, v in meta["optimizer"]["scalars"].items():
                i, key = k.split("/", 1)
                state.setdefault(int(i), {})[key] = v
            optim_state = {"state": state, "hyper": meta["optimizer"]["hyper"],
                           "step_count": meta["optimizer"]["step_count"]}
            counters = (int(meta["epoch"]), int(meta["global_step"]))
            rng_state = meta["rng_state"]
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"load_checkpoint: {path} has a malformed checkpoint entry ({e!r})") from None
        params = self.optimizer.params
        for i, per_param in state.items():
            if not 0 <= i < len(params):
                raise ValueError(f"load_checkpoint: {path} has optimizer state for parameter {i}, "
                                 f"the optimizer has {len(params)}")
            for key, v in per_param.items():
                if isinstance(v, np.ndarray) and v.ndim:
                    per_param[key] = checked_cast(v, params[i].data.dtype,
                                                  f"load_checkpoint: optimizer state {i}/{key}")
        before = self._snapshot()
        try:
            self.model.load_state_dict(model_state)
            self.optimizer.load_state_dict(optim_state)
            if self.scheduler is not None and "scheduler" in meta:
                self.scheduler.load_state_dict(meta["scheduler"])
            tt_random.set_rng_state(rng_state)
        except BaseException:
            self._restore(before)
            raise
        self.epoch, self.global_step = counters
        self.history = meta.get("history", self.history)
        self.history.setdefault("learning_rates", [])
        if "grad_clip_norm" in meta:  # older checkpoints keep the current setting
            self.grad_clip_norm = meta["grad_clip_norm"]
        self.training_mode = bool(meta.get("training_mode", self.training_mode))
        set_training_mode(self.model, self.training_mode)

    # upstream TinyTorch's private state accessors (its tests and notebooks call them)
    def _get_model_state(self) -> dict:
        """``{parameter index: array copy}`` over ``model.parameters()``."""
        return {i: p.data.copy() for i, p in enumerate(self.model.parameters())}

    def _set_model_state(self, state: dict) -> None:
        """Copy ``{parameter index: array}`` into the model's parameters; the count and
        every shape are checked first (ValueError naming the parameter, nothing copied)."""
        params = list(self.model.parameters())
        if sorted(state) != list(range(len(params))):
            raise ValueError(f"Checkpoint parameters {sorted(state)} do not match the model's "
                             f"{len(params)} parameters")
        values = []
        for i, p in enumerate(params):
            v = np.asarray(state[i])
            if v.shape != p.data.shape:
                raise ValueError(f"Checkpoint parameter {i} has shape {v.shape}, the model's has {p.data.shape}")
            values.append(checked_cast(v, p.data.dtype, f"Checkpoint parameter {i}"))
        for p, v in zip(params, values):
            p.data[...] = v
            bump_version(p)

    def _get_optimizer_state(self) -> dict:
        """The optimizer's full ``state_dict()`` (moments, their ages, hyper-parameters)."""
        return self.optimizer.state_dict()

    def _set_optimizer_state(self, state: dict) -> None:
        """``optimizer.load_state_dict(state)``: the saved hyper-parameters win."""
        self.optimizer.load_state_dict(state)

    def _snapshot(self) -> tuple:
        """Everything ``load_checkpoint`` changes, copied (to undo a failed load)."""
        sched = None if self.scheduler is None else dict(self.scheduler.__dict__)
        return (self.model.state_dict(), self.optimizer.state_dict(), sched,
                tt_random.get_rng_state())

    def _restore(self, snapshot: tuple) -> None:
        model, optim, sched, rng = snapshot
        self.model.load_state_dict(model)
        self.optimizer.load_state_dict(optim)
        if sched is not None:
            self.scheduler.__dict__.clear()
            self.scheduler.__dict__.update(sched)
        tt_random.set_rng_state(rng)


class _no_context:
    """A context manager that does nothing (backward outside DDP's no_sync)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _call(fn, *args):
    """``fn(*args)``, or ``fn.forward(*args)`` for an upstream-style object with only forward."""
    return fn(*args) if callable(fn) else fn.forward(*args)


def _class_ids(target: np.ndarray, loss_fn) -> bool:
    """True when ``target`` holds class ids: an integer array, or (for cross-entropy, which
    reads whole-number floats as ids) finite whole-number floats."""
    if target.dtype.kind in "iu":
        return True
    if target.dtype.kind != "f" or type(loss_fn).__name__ != "CrossEntropyLoss":
        return False
    return bool(np.all(np.isfinite(target)) and np.all(target == np.round(target)))


def _json_default(o):
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"checkpoint: cannot store a {type(o).__name__} in the metadata")


# ------------------------------------------------ upstream TinyTorch names (docs/compat.md)

class CosineSchedule:
    """Upstream TinyTorch's stateless cosine schedule: ``get_lr(epoch)`` goes from ``max_lr``
    at epoch 0 to ``min_lr`` at ``total_epochs`` and stays there. The rate is
    ``CosineAnnealingLR``'s formula (evaluated by that class, so there is one implementation);
    pass it to ``Trainer(scheduler=...)`` and epoch k trains at ``get_lr(k)``.

    Args:
        max_lr: the rate at epoch 0 (upstream default 0.1).
        min_lr: the final rate (default 0.01).
        total_epochs: length of the decay, > 0 (default 100).
    """

    def __init__(self, max_lr: float = DEFAULT_MAX_LR, min_lr: float = DEFAULT_MIN_LR,
                 total_epochs: int = DEFAULT_TOTAL_EPOCHS):
        if total_epochs <= 0:
            raise ValueError(f"CosineSchedule: total_epochs must be positive, got {total_epochs}")
        self.max_lr, self.min_lr, self.total_epochs = float(max_lr), float(min_lr), int(total_epochs)

    def get_lr(self, epoch: int) -> float:
        """The learning rate for ``epoch`` (>= 0; ``min_lr`` from ``total_epochs`` on).

        Args:
            epoch: the epoch index.
        """
        view = _CosineView(max(int(epoch), 0), self.total_epochs, self.min_lr, self.max_lr)
        return float(CosineAnnealingLR.get_lr(view))


class _CosineView:
    """The attributes ``CosineAnnealingLR.get_lr`` reads, for one epoch."""

    def __init__(self, last_epoch, T_max, eta_min, base_lr):
        self.last_epoch, self.T_max, self.eta_min, self.base_lr = last_epoch, T_max, eta_min, base_lr


class EpochScheduleLR(LRScheduler):
    """Drives ``optimizer.lr`` from any object with ``get_lr(epoch)`` (such as
    ``CosineSchedule``): epoch k uses ``schedule.get_lr(k)``. ``Trainer`` wraps such a
    schedule in this automatically.

    Args:
        optimizer: the Optimizer to drive.
        schedule: object whose ``get_lr(epoch)`` returns the rate for an epoch.
        last_epoch: see ``LRScheduler``.
    """

    def __init__(self, optimizer, schedule, last_epoch: int = -1):
        if not callable(getattr(schedule, "get_lr", None)):
            raise TypeError(f"EpochScheduleLR: schedule needs a get_lr(epoch) method, got {type(schedule).__name__}")
        self.schedule = schedule
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> float:
        """``schedule.get_lr(last_epoch)``."""
        return float(self.schedule.get_lr(self.last_epoch))

    def state_dict(self) -> dict:
        """The epoch and base rate (the schedule object itself is not saved)."""
        return {k: v for k, v in super().state_dict().items() if k != "schedule"}


def clip_grad_norm(parameters, max_norm: float = 1.0) -> float:
    """Upstream TinyTorch's name for ``clip_grad_norm_`` (global L2 norm, in place; returns
    the norm before clipping). A ``.grad`` that is a Tensor (as upstream code sometimes sets)
    is replaced by its array first, since gradients here are arrays. ``max_norm`` must be
    finite and nonnegative (ValueError otherwise).

    Args:
        parameters: Tensors (or a Layer) whose ``.grad`` to clip.
        max_norm: the largest allowed total norm (default 1.0).
    """
    if not (max_norm >= 0 and math.isfinite(max_norm)):
        raise ValueError(f"clip_grad_norm: max_norm must be finite and nonnegative, got {max_norm}")
    params = list(parameters.parameters()) if hasattr(parameters, "parameters") else list(parameters)
    return float(clip_grad_norm_(params, max_norm))
