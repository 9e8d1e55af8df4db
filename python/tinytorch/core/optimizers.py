"""Optimizers, learning-rate schedules and gradient clipping (the training-dynamics boundary).

What this file owns
  * ``Optimizer(params)``: ``.params`` (list of Tensors), ``.lr``, ``.state`` (dict keyed
    by the parameter Tensor, one dict of NumPy arrays per parameter), ``step()``,
    ``zero_grad()``, ``state_dict()``/``load_state_dict()``.
  * ``SGD`` (momentum, dampening, nesterov, weight_decay), ``Adam`` and ``AdamW``,
    with PyTorch's update rules (Adam's is one function, ``adam_update``, which other
    optimizers' Adam-style fallbacks call too); Adam's moments are named ``exp_avg``/``exp_avg_sq`` like
    PyTorch, so memory tools can measure optimizer state from them.
  * Schedules: ``StepLR``, ``CosineAnnealingLR``, ``LinearLR`` (linear warm-up),
    ``LambdaLR`` and ``SequentialLR`` (warm-up then cosine), each updating ``optimizer.lr``.
  * ``clip_grad_norm_(params, max_norm)``.
  * Upstream TinyTorch's named defaults (``DEFAULT_LEARNING_RATE_SGD`` ... ``DEFAULT_WEIGHT_DECAY_ADAMW``),
    which are the optimizers' default arguments. Upstream's ``DEFAULT_MOMENTUM`` (0.9) is not
    defined: SGD's default momentum here is 0 (PyTorch's, and upstream SGD's own default too),
    and no code here uses 0.9, so the constant would be a number nothing reads (docs/compat.md).

Rules every optimizer here keeps
  * A parameter whose ``.grad`` is None is skipped and no state is created for it, and so is
    a frozen ``Parameter`` (``requires_grad=False``), even with a stale ``.grad``. A plain
    Tensor with a ``.grad`` is updated whatever its ``requires_grad``: upstream TinyTorch code
    hands optimizers ``Tensor([1.0])`` and sets ``.grad`` by hand (``torch.optim`` too
    updates whatever has a ``.grad``). ``requires_grad`` is never changed. A ``.grad`` that is a Tensor (``p.grad = Tensor(...)``,
    as upstream TinyTorch code writes) is read through its array.
  * Hyper-parameters are checked before anything else: ``lr``, ``weight_decay``, ``momentum``,
    ``eps`` finite and >= 0, each beta finite in [0, 1); a bad one is a ValueError naming it.
  * ``update_counts``: per parameter, how many updates it has had (its own moment age for
    Adam, so a parameter that first gets a gradient late is bias-corrected from its own
    first step). ``get_momentum_state()``/``set_momentum_state()`` (upstream's buffer-only
    accessors) check every entry before changing anything.
  * Updates are in place on ``p.data`` (the array identity never changes), so layers,
    tied weights and native kernels holding the array see the new values.

What it assumes: parameters are Tensors (``Parameter`` from layers.py, or plain Tensors) whose
``.grad`` is an array or Tensor of the parameter's shape, or None; Adam and AdamW update every
parameter at once through the kernel door (``acceleration.adam_step``); in-place updates are
stamped with ``autograd.bump_version``; schedules assume an optimizer with a settable ``.lr``.
"""
from __future__ import annotations

import math

import numpy as np

from . import acceleration as _acc
from .autograd import bump_version
from .layers import Parameter
from .tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "adam_update", "LRScheduler", "StepLR", "CosineAnnealingLR",
           "LinearLR", "LambdaLR", "SequentialLR", "clip_grad_norm_",
           "DEFAULT_LEARNING_RATE_SGD", "DEFAULT_LEARNING_RATE_ADAM", "DEFAULT_BETA1", "DEFAULT_BETA2",
           "DEFAULT_EPS", "DEFAULT_WEIGHT_DECAY_ADAMW"]

# The optimizers' default arguments, under upstream TinyTorch's names and with its values
# (which are also PyTorch's defaults).
DEFAULT_LEARNING_RATE_SGD = 0.01   # SGD's lr
DEFAULT_LEARNING_RATE_ADAM = 0.001  # Adam's and AdamW's lr
DEFAULT_BETA1 = 0.9                # Adam's first-moment decay, betas[0]
DEFAULT_BETA2 = 0.999              # Adam's second-moment decay, betas[1]
DEFAULT_EPS = 1e-8                 # Adam's term added to sqrt(v_hat)
DEFAULT_WEIGHT_DECAY_ADAMW = 0.01  # AdamW's decoupled decay


def param_list(params, who):
    """The parameters an optimizer (or ``clip_grad_norm_``) was given, as a list of Tensors:
    a model's ``parameters()``, a single Tensor, or an iterable; TypeError for a non-Tensor,
    ValueError for a parameter listed twice (it would be updated twice per step).

    Args:
        params: a model, a Tensor or an iterable of Tensors.
        who: the caller's name, for the messages.
    """
    if hasattr(params, "parameters") and callable(params.parameters):
        params = params.parameters()
    if isinstance(params, Tensor):
        params = [params]
    params = list(params)
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"{who}: parameter {i} is a {type(p).__name__}, not a Tensor")
    if len({id(p) for p in params}) != len(params):
        raise ValueError(f"{who}: the parameter list has duplicates (the same parameter appears "
                         "more than once, so it would be updated twice per step)")
    return params


def _check_hyper(who: str, name: str, value, upper: float | None = None) -> float:
    """``value`` as a float when it is a finite number >= 0 (and < ``upper`` when given);
    else a ValueError that names the hyper-parameter."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: {name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < 0 or (upper is not None and v >= upper):
        bound = f"in [0, {upper:g})" if upper is not None else ">= 0"
        raise ValueError(f"{who}: {name} must be finite and {bound}, got {value!r}")
    return v


def _grad_array(g):
    """A gradient as an array: upstream code assigns ``p.grad = Tensor(...)``."""
    return g.data if isinstance(g, Tensor) else g


class Optimizer:
    """Base class of the optimizers: subclasses implement ``_update(p, grad, state)``.

    Args:
        params: the Tensors to update: an iterable of Tensors, one Tensor, or a Layer
            (its ``parameters()``). Each may appear once; an empty list is allowed (a model
            without parameters: ``step()`` does nothing), as upstream.
        lr: learning rate, finite and >= 0 (schedulers rewrite ``optimizer.lr``).

    ``state`` maps each parameter to a dict of NumPy arrays (its moments); ``step_count``
    counts ``step()`` calls.
    """

    hyper_names: tuple = ("lr",)

    def __init__(self, params, lr: float):
        self.lr = _check_hyper(type(self).__name__, "lr (the learning rate)", lr)
        self.params = param_list(params, type(self).__name__)
        for p in self.params:
            try:
                p.grad
            except AttributeError:  # a student's `del p.grad`: give the slot back, as upstream
                p.grad = None
        self.initial_lr = None  # set by the first scheduler attached, so chained schedules agree
        self.state = {}
        self.step_count = 0

    def zero_grad(self) -> None:
        """Set every parameter's ``.grad`` to None (call before each backward)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Update every parameter that has a ``.grad``, in place on ``p.data``; the others
        are skipped without creating state."""
        self.step_count += 1
        state = self.state
        for p, g in self._with_grads():
            s = state.get(p)
            if s is None:
                s = state[p] = {}
            self._update(p, g, s)
            s["update_count"] = s.get("update_count", 0) + 1
            bump_version(p)  # updated in place: a graph that saved p must not backward now

    def _with_grads(self):
        """(parameter, gradient array) of every parameter to update (a ``.grad``, not a frozen
        Parameter), in ``params`` order; ValueError when a gradient's shape differs from its parameter's."""
        pairs = []
        for p in self.params:
            g = _grad_array(p.grad)
            if g is None or (not p.requires_grad and isinstance(p, Parameter)):
                continue
            if g.shape != p.data.shape:
                raise ValueError(f"{type(self).__name__}: grad shape {g.shape} does not match "
                                 f"parameter shape {p.data.shape}")
            pairs.append((p, g))
        return pairs

    def _update(self, p, grad, state):
        raise NotImplementedError

    @property
    def update_counts(self) -> list:
        """Per parameter (``params`` order) the number of updates it has had (a parameter
        without a ``.grad`` at a step is not updated and not counted)."""
        return [int(s.get("update_count", s.get("step", 0))) for s in
                (self.state.get(p, {}) for p in self.params)]

    # state dicts use parameter positions, not identities, so they survive a rebuild
    def state_dict(self) -> dict:
        """``{"state": {param index: {name: array}}, "hyper": {...}, "step_count": n}``,
        with copies; keyed by position so it loads into a rebuilt model's optimizer."""
        per_param = {}
        for i, p in enumerate(self.params):
            if p in self.state:
                per_param[i] = {k: (v.copy() if isinstance(v, np.ndarray) else v)
                                for k, v in self.state[p].items()}
        hyper = {name: getattr(self, name) for name in self.hyper_names}
        return {"state": per_param, "hyper": hyper, "step_count": self.step_count}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a ``state_dict`` from an optimizer over the same parameters (in the same
        order): moments, hyper-parameters and the step count. Shapes are checked first."""
        per_param = state_dict.get("state", {})
        for key, s in per_param.items():
            i = int(key)
            if not 0 <= i < len(self.params):
                raise KeyError(f"load_state_dict: state for parameter {i}, but the optimizer has "
                               f"{len(self.params)} parameters")
            p = self.params[i]
            for name, v in s.items():
                if isinstance(v, np.ndarray) and v.ndim and v.shape != p.data.shape:
                    raise ValueError(f"load_state_dict: state {name!r} of parameter {i} has shape "
                                     f"{v.shape} but the parameter has shape {p.data.shape}")
        self.state = {}
        for key, s in per_param.items():
            p = self.params[int(key)]
            self.state[p] = {k: (np.array(v, dtype=p.data.dtype) if isinstance(v, np.ndarray) and v.ndim
                                 else (v.item() if isinstance(v, np.ndarray) else v))
                             for k, v in s.items()}
        for name, v in state_dict.get("hyper", {}).items():
            if name in self.hyper_names:
                setattr(self, name, tuple(v) if isinstance(v, (list, np.ndarray)) else v)
        self.step_count = int(state_dict.get("step_count", 0))

    def __repr__(self):
        hyper = ", ".join(f"{n}={getattr(self, n)}" for n in self.hyper_names)
        return f"{type(self).__name__}({len(self.params)} params, {hyper})"


class SGD(Optimizer):
    """Stochastic gradient descent with PyTorch's update rule::

        g += weight_decay * p
        buf = momentum * buf + (1 - dampening) * g      (buf = g on the first step)
        p -= lr * (g + momentum * buf if nesterov else buf)

    Args:
        params: Tensors (or a Layer) to optimise.
        lr: learning rate (default ``DEFAULT_LEARNING_RATE_SGD``, 0.01).
        momentum: momentum factor, >= 0 (0 disables the buffer).
        dampening: dampening of the momentum (0 by default).
        nesterov: Nesterov momentum (needs momentum > 0 and dampening 0).
        weight_decay: L2 penalty added to the gradient.
    """

    hyper_names = ("lr", "momentum", "dampening", "nesterov", "weight_decay")

    def __init__(self, params, lr: float = DEFAULT_LEARNING_RATE_SGD, momentum: float = 0.0,
                 dampening: float = 0.0, nesterov: bool = False, weight_decay: float = 0.0):
        momentum = _check_hyper("SGD", "momentum", momentum)
        dampening = _check_hyper("SGD", "dampening", dampening)
        weight_decay = _check_hyper("SGD", "weight_decay", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: nesterov needs momentum > 0 and dampening = 0")
        super().__init__(params, lr)
        self.momentum, self.dampening = momentum, dampening
        self.nesterov, self.weight_decay = bool(nesterov), weight_decay

    def _update(self, p, g, state):
        if self.weight_decay:
            g = g + self.weight_decay * p.data
        if self.momentum:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = np.array(g, dtype=p.data.dtype)
            else:
                buf *= self.momentum
                buf += (1.0 - self.dampening) * g
            g = g + self.momentum * buf if self.nesterov else buf
        p.data -= self.lr * g

    # Upstream TinyTorch's explicit state accessors, views of ``self.state`` (docs/compat.md).
    def has_momentum(self) -> bool:
        """True when this optimizer keeps a momentum buffer (momentum > 0)."""
        return self.momentum > 0

    @property
    def momentum_buffers(self) -> list:
        """Per parameter (in ``params`` order) its momentum buffer array, or None before
        its first update; the arrays are the live state."""
        return [self.state.get(p, {}).get("momentum_buffer") for p in self.params]

    def get_momentum_state(self):
        """Copies of the momentum buffers (list aligned with ``params``, None where not yet
        created), or None when momentum is off."""
        if not self.has_momentum():
            return None
        return [None if b is None else b.copy() for b in self.momentum_buffers]

    def set_momentum_state(self, state) -> None:
        """Restore buffers from ``get_momentum_state()``'s list (copied in); a None entry
        clears that parameter's buffer (it had none when the state was taken). Every entry
        is checked first (count, shapes), so a bad state changes nothing.

        Args:
            state: list of arrays or None, or None (ignored, as upstream; also ignored when
                momentum is off).
        """
        if state is None or not self.has_momentum():
            return
        bufs = _checked_buffers("SGD", self.params, state, lambda entry: (entry,))
        for p, (buf,) in zip(self.params, bufs):
            if buf is None:
                self.state.get(p, {}).pop("momentum_buffer", None)
            else:
                self.state.setdefault(p, {})["momentum_buffer"] = buf


def _checked_buffers(who: str, params, state, split) -> list:
    """Per parameter the entries of a ``set_momentum_state`` list (``split(entry)`` gives the
    tuple of arrays or Nones of one entry) as copies of the parameter's dtype, after checking
    the count and every shape; ValueError (naming it) before anything changes."""
    state = list(state)
    if len(state) != len(params):
        raise ValueError(f"{who}.set_momentum_state: length mismatch, {len(state)} entries for "
                         f"{len(params)} parameters")
    out = []
    for i, (p, entry) in enumerate(zip(params, state)):
        arrays = []
        for a in split(entry):
            if a is not None:
                a = np.asarray(a.data if isinstance(a, Tensor) else a)
                if a.shape != p.data.shape:
                    raise ValueError(f"{who}.set_momentum_state: entry {i} has shape {a.shape}, "
                                     f"its parameter has shape {p.data.shape}")
                a = np.array(a, dtype=p.data.dtype)
            arrays.append(a)
        out.append(tuple(arrays))
    return out


def adam_update(data: np.ndarray, g: np.ndarray, state: dict, lr: float, betas, eps: float,
                weight_decay: float, decoupled: bool) -> None:
    """One Adam step on ``data`` in place (PyTorch's rule, the kernel door's ``adam_step``),
    the one entry that Adam, AdamW and other optimizers' Adam-style fallbacks (Muon's) call
    for a single tensor. ``state`` holds ``exp_avg``, ``exp_avg_sq`` and ``step`` (created
    on the first call). ``decoupled``: AdamW's ``data *= 1 - lr * weight_decay``; otherwise
    weight decay is L2 added to ``g``.

    ``g`` is the gradient (same shape as ``data``), ``lr`` the learning rate, ``betas``
    the pair (beta1, beta2) of moment decay rates and ``eps`` the term added to
    sqrt(v_hat) in the denominator."""
    m, v, t = _adam_moments(data, state)
    _acc.adam_step([data], [g], [m], [v], [t], lr, betas, eps, weight_decay, decoupled)


def _adam_moments(data, state):
    """(exp_avg, exp_avg_sq, step after this update) of one parameter, created at zero on
    its first update; advances state["step"]."""
    m = state.get("exp_avg")
    if m is None:
        m = state["exp_avg"] = np.zeros_like(data)
        state["exp_avg_sq"] = np.zeros_like(data)
        state["step"] = 0
    state["step"] += 1
    return m, state["exp_avg_sq"], state["step"]


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's rule with bias correction.

    Args:
        params: Tensors (or a Layer) to optimise.
        lr: learning rate (default ``DEFAULT_LEARNING_RATE_ADAM``, 1e-3).
        betas: (beta1, beta2), decay rates of the first and second moment, each in [0, 1)
            (default ``(DEFAULT_BETA1, DEFAULT_BETA2)``, (0.9, 0.999)).
        eps: added to the denominator for numerical stability (default ``DEFAULT_EPS``, 1e-8).
        weight_decay: L2 penalty added to the gradient (for decoupled decay use AdamW).

    The moments are ``state[p]["exp_avg"]`` and ``["exp_avg_sq"]``, of p's shape and dtype.
    """

    hyper_names = ("lr", "betas", "eps", "weight_decay")
    decoupled = False

    def __init__(self, params, lr: float = DEFAULT_LEARNING_RATE_ADAM, betas=(DEFAULT_BETA1, DEFAULT_BETA2),
                 eps: float = DEFAULT_EPS, weight_decay: float = 0.0):
        who = type(self).__name__
        try:
            b1, b2 = betas
        except (TypeError, ValueError):
            raise ValueError(f"{who}: betas must be a pair (beta1, beta2), got {betas!r}") from None
        b1 = _check_hyper(who, "betas[0] (beta1)", b1, upper=1.0)
        b2 = _check_hyper(who, "betas[1] (beta2)", b2, upper=1.0)
        eps = _check_hyper(who, "eps", eps)
        weight_decay = _check_hyper(who, "weight_decay", weight_decay)
        super().__init__(params, lr)
        self.betas = (b1, b2)
        self.eps, self.weight_decay = eps, weight_decay

    def step(self) -> None:
        """Update every parameter that requires grad and has a ``.grad``: all of them in one
        call of the kernel door's ``adam_step`` (one pass over each tensor, the runtime's
        kernel for float32)."""
        self.step_count += 1
        todo = [(p, g, _adam_moments(p.data, self.state.setdefault(p, {})))
                for p, g in self._with_grads()]
        if not todo:
            return
        _acc.adam_step([p.data for p, _, _ in todo], [g for _, g, _ in todo],
                       [s[0] for _, _, s in todo], [s[1] for _, _, s in todo],
                       [s[2] for _, _, s in todo], self.lr, self.betas, self.eps,
                       self.weight_decay, self.decoupled)
        for p, _, _ in todo:
            bump_version(p)  # updated in place: a graph that saved p must not backward now

    def _update(self, p, g, state):
        adam_update(p.data, g, state, self.lr, self.betas, self.eps, self.weight_decay, self.decoupled)

    # Upstream TinyTorch's names for the same state (docs/compat.md).
    @property
    def beta1(self) -> float:
        """``betas[0]``, the first-moment decay."""
        return self.betas[0]

    @property
    def beta2(self) -> float:
        """``betas[1]``, the second-moment decay."""
        return self.betas[1]

    @property
    def m_buffers(self) -> list:
        """Per parameter (``params`` order) the live first moment ``exp_avg``, or None."""
        return [self.state.get(p, {}).get("exp_avg") for p in self.params]

    @property
    def v_buffers(self) -> list:
        """Per parameter (``params`` order) the live second moment ``exp_avg_sq``, or None."""
        return [self.state.get(p, {}).get("exp_avg_sq") for p in self.params]

    def has_momentum(self) -> bool:
        """Always True: Adam keeps two moments per parameter (upstream's accessor)."""
        return True

    def get_momentum_state(self) -> list:
        """Copies of the moments, one ``(m, v)`` pair per parameter (``(None, None)`` before
        its first update). The moment ages (``update_counts``) are not part of it, as
        upstream: ``state_dict()`` (or a Trainer checkpoint) keeps everything."""
        return [(None, None) if m is None else (m.copy(), v.copy())
                for m, v in zip(self.m_buffers, self.v_buffers)]

    def set_momentum_state(self, state) -> None:
        """Restore ``get_momentum_state()``'s pairs (copied in): both moments, or
        ``(None, None)`` to clear them; a pair with only one moment, a count or a shape that
        does not match is a ValueError before anything changes. A parameter keeps its moment
        age (0 when it had none).

        Args:
            state: list of (m, v) pairs, or None (ignored).
        """
        if state is None:
            return
        who = type(self).__name__

        def split(entry):
            try:
                m, v = entry
            except (TypeError, ValueError):
                raise ValueError(f"{who}.set_momentum_state: each entry must be an (m, v) pair, "
                                 f"got {entry!r}") from None
            if (m is None) != (v is None):
                raise ValueError(f"{who}.set_momentum_state: an entry needs both moments (m and v) "
                                 "or neither")
            return m, v

        pairs = _checked_buffers(who, self.params, state, split)
        for p, (m, v) in zip(self.params, pairs):
            if m is None:
                self.state.pop(p, None)
            else:
                s = self.state.setdefault(p, {})
                s["exp_avg"], s["exp_avg_sq"] = m, v
                s.setdefault("step", 0)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam step.

    Args:
        params: Tensors (or a Layer) to optimise.
        lr: learning rate (default ``DEFAULT_LEARNING_RATE_ADAM``, 1e-3).
        betas: (beta1, beta2) moment decay rates.
        eps: added to the denominator for numerical stability.
        weight_decay: decoupled decay coefficient (default ``DEFAULT_WEIGHT_DECAY_ADAMW``, 0.01,
            as in PyTorch).
    """

    decoupled = True

    def __init__(self, params, lr: float = DEFAULT_LEARNING_RATE_ADAM, betas=(DEFAULT_BETA1, DEFAULT_BETA2),
                 eps: float = DEFAULT_EPS, weight_decay: float = DEFAULT_WEIGHT_DECAY_ADAMW):
        super().__init__(params, lr, betas, eps, weight_decay)


# ============================================================================ clipping

def clip_grad_norm_(params, max_norm: float, norm_type: float = 2.0) -> float:
    """Scale all gradients in place so their joint norm is at most ``max_norm``; returns the
    norm before clipping (PyTorch semantics: coefficient max_norm / (norm + 1e-6)).

    Args:
        params: Tensors (or a Layer) whose ``.grad`` to clip; those without one are skipped.
        max_norm: the largest allowed total norm, >= 0.
        norm_type: the p of the p-norm over all gradients together (2 by default;
            ``float("inf")`` for the max-abs norm).
    """
    params = param_list(params, "clip_grad_norm_")
    if not max_norm >= 0:  # NaN too
        raise ValueError(f"clip_grad_norm_: max_norm must be nonnegative, got {max_norm}")
    for p in params:
        if isinstance(p.grad, Tensor):  # upstream code assigns Tensor gradients
            p.grad = np.array(p.grad.data, dtype=p.data.dtype)
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    norm_type = float(norm_type)
    if math.isinf(norm_type):
        total = max(float(np.max(np.abs(g))) if g.size else 0.0 for g in grads)
    else:
        total = sum(float(np.sum(np.abs(g.astype(np.float64)) ** norm_type)) for g in grads) ** (1.0 / norm_type)
    coef = max_norm / (total + 1e-6)
    if coef < 1.0:
        for g in grads:
            g *= np.asarray(coef, dtype=g.dtype)
    return total


# ============================================================================ schedules

class LRScheduler:
    """Base class of the schedules: sets ``optimizer.lr = base_lr * factor(epoch)``;
    ``step()`` advances one epoch (or one iteration, if called per batch).

    Args:
        optimizer: the Optimizer whose ``lr`` to drive. ``base_lr`` is its learning rate
            when the first scheduler was attached.
        last_epoch: index of the last epoch done (-1: start from scratch). The
            constructor steps once, so the optimizer holds the epoch-0 rate afterwards.
    """

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: expected an Optimizer, got {type(optimizer).__name__}")
        self.optimizer = optimizer
        if optimizer.initial_lr is None:
            optimizer.initial_lr = optimizer.lr
        self.base_lr = optimizer.initial_lr
        self.last_epoch = last_epoch
        self.step()

    def get_lr(self) -> float:
        """The learning rate for epoch ``last_epoch``; subclasses define it."""
        raise NotImplementedError

    def step(self) -> None:
        """Advance one epoch and write the new rate into ``optimizer.lr``."""
        self.last_epoch += 1
        self.optimizer.lr = float(self.get_lr())

    def get_last_lr(self):
        """The current learning rate, in a one-element list (PyTorch's return type)."""
        return [self.optimizer.lr]

    def state_dict(self) -> dict:
        """The scheduler's plain attributes (epoch, base_lr, hyper-parameters), without
        the optimizer and callables."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer" and not callable(v)
                and not isinstance(v, (list, LRScheduler))}

    def load_state_dict(self, state: dict) -> None:
        """Restore ``state`` from ``state_dict()`` and set ``optimizer.lr`` to match."""
        self.__dict__.update(state)
        self.optimizer.lr = float(self.get_lr())


class StepLR(LRScheduler):
    """Multiply the rate by ``gamma`` every ``step_size`` epochs:
    ``lr = base_lr * gamma ** (epoch // step_size)``.

    Args:
        optimizer: the Optimizer to drive.
        step_size: epochs between decays, > 0.
        gamma: decay factor (default 0.1).
        last_epoch: see ``LRScheduler``.
    """

    def __init__(self, optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be positive, got {step_size}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """``base_lr * gamma ** (last_epoch // step_size)``."""
        return self.base_lr * self.gamma ** (self.last_epoch // self.step_size)


class CosineAnnealingLR(LRScheduler):
    """Cosine decay from base_lr to ``eta_min`` over ``T_max`` epochs, then flat:
    ``lr = eta_min + (base_lr - eta_min) (1 + cos(pi t / T_max)) / 2`` with t capped at T_max
    (PyTorch's formula; past T_max PyTorch follows the cosine back up, this stays at eta_min).

    Args:
        optimizer: the Optimizer to drive.
        T_max: length of the decay in epochs, > 0.
        eta_min: the final learning rate.
        last_epoch: see ``LRScheduler``.
    """

    def __init__(self, optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The cosine-annealed rate at ``min(last_epoch, T_max)``."""
        t = min(self.last_epoch, self.T_max)
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * t / self.T_max)) / 2


class LinearLR(LRScheduler):
    """Factor goes linearly from ``start_factor`` to ``end_factor`` over ``total_iters``
    epochs, then stays at end_factor (a warm-up).

    Args:
        optimizer: the Optimizer to drive.
        start_factor: multiplier of base_lr at epoch 0, in (0, 1].
        end_factor: multiplier reached at ``total_iters``, in [0, 1].
        total_iters: length of the ramp, >= 0 (0: end_factor at once).
        last_epoch: see ``LRScheduler``.
    """

    def __init__(self, optimizer, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError(f"LinearLR: factors must be in (0, 1], got {start_factor}, {end_factor}")
        if total_iters < 0:
            raise ValueError(f"LinearLR: total_iters must be >= 0, got {total_iters}")
        self.start_factor, self.end_factor, self.total_iters = float(start_factor), float(end_factor), int(total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """``base_lr`` times the interpolated factor at ``last_epoch``."""
        if self.total_iters == 0:
            return self.base_lr * self.end_factor
        frac = min(self.last_epoch, self.total_iters) / self.total_iters
        return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * frac)


class LambdaLR(LRScheduler):
    """``lr = base_lr * lr_lambda(epoch)`` for any function of the epoch.

    Args:
        optimizer: the Optimizer to drive.
        lr_lambda: callable taking the epoch index (int) and returning the factor.
        last_epoch: see ``LRScheduler``.
    """

    def __init__(self, optimizer, lr_lambda, last_epoch: int = -1):
        if not callable(lr_lambda):
            raise TypeError("LambdaLR: lr_lambda must be callable")
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """``base_lr * lr_lambda(last_epoch)``."""
        return self.base_lr * self.lr_lambda(self.last_epoch)


class SequentialLR(LRScheduler):
    """Runs schedulers one after another; ``milestones[i]`` is where scheduler i+1 starts
    (e.g. ``LinearLR`` warm-up then ``CosineAnnealingLR``). Each scheduler sees epochs
    counted from its own start.

    Args:
        optimizer: the Optimizer all ``schedulers`` drive.
        schedulers: the schedulers, in order, already constructed on ``optimizer``.
        milestones: len(schedulers) - 1 increasing epoch indices.
    """

    def __init__(self, optimizer, schedulers, milestones):
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need {len(schedulers) - 1} "
                             f"milestones, got {len(milestones)}")
        self.schedulers, self.milestones = list(schedulers), list(milestones)
        self.base_lr = self.schedulers[0].base_lr
        self.optimizer = optimizer
        self.last_epoch = 0
        for s in self.schedulers:  # each constructor stepped once; rewind them all
            s.last_epoch = 0
        optimizer.lr = float(self.schedulers[0].get_lr())

    def _active(self):
        i = sum(1 for m in self.milestones if self.last_epoch >= m)
        start = self.milestones[i - 1] if i else 0
        return self.schedulers[i], self.last_epoch - start

    def get_lr(self):
        """The active scheduler's rate at its local epoch."""
        sched, local = self._active()
        sched.last_epoch = local
        return sched.get_lr()

    def step(self):
        """Advance one epoch, switching scheduler at a milestone, and set ``optimizer.lr``."""
        self.last_epoch += 1
        self.optimizer.lr = float(self.get_lr())
