"""Lion and Muon: two update rules at the optimizer boundary.

Bottleneck they address: optimizer state and the conditioning of the update.
  * Lion keeps one moment per weight instead of Adam's two (4 bytes/weight of state
    instead of 8 in float32) and applies ``sign(.)`` updates, whose magnitude is the same
    for every coordinate, so no second-moment estimate is needed.
  * Muon (for 2-D weight matrices) replaces the momentum matrix by the nearest
    semi-orthogonal matrix before applying it, computed with a few Newton-Schulz
    iterations (five GEMM-heavy steps, no SVD). All singular directions of the update then
    move at the same rate, instead of a few dominant ones; one moment per weight.

Lion (Chen et al., 2023, "Symbolic Discovery of Optimization Algorithms")::

    c = beta1 * m + (1 - beta1) * g
    p = p * (1 - lr * wd) - lr * sign(c)
    m = beta2 * m + (1 - beta2) * g            # state "exp_avg"

Muon (as in ``torch.optim.Muon``)::

    buf = momentum * buf + (1 - momentum) * g                  # state "momentum_buffer"
    u   = (1 - momentum) * g + momentum * buf  if nesterov else buf
    X   = u / max(||u||_F, eps)   (transposed so that rows <= columns)
    repeat ns_steps:  A = X X^T;  X = a X + (b A + c A A) X    # (a, b, c) = ns_coefficients
    p   = p * (1 - lr * wd) - lr * sqrt(max(1, fan_out / fan_in)) * X

The shape factor uses fan_out / fan_in; TinyTorch's ``Linear`` stores weights as
(in, out), so that is ``shape[1] / shape[0]`` here (PyTorch's (out, in) weights give the
same factor). ``adjust_lr_fn="match_rms_adamw"`` uses ``0.2 * sqrt(max(fan_in, fan_out))``.

Fallback for other shapes (documented, since Muon is defined for matrices): parameters
with more than two axes (convolution filters) are orthogonalised as (shape[0], rest)
matrices; parameters with fewer than two axes (biases, norms, scalars) get an AdamW update
(``fallback_lr``, ``fallback_betas``, ``fallback_eps``, the same ``weight_decay``), the usual
companion of Muon for those parameters: the core's ``adam_update``, so exactly ``AdamW``'s.

No native path: the GEMMs of the Newton-Schulz iteration go through
``core.acceleration.gemm``, so they run on the runtime's GEMM when it is routed there.

Owns Lion and Muon; assumes the core's Optimizer base class (parameter list, state) and
``adam_update``.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import acceleration as _acc
from ..core.optimizers import Optimizer, adam_update

__all__ = ["Lion", "Muon", "newton_schulz_orthogonalize"]


class Lion(Optimizer):
    """Lion: sign of an interpolated momentum, decoupled weight decay (see module docstring).

    Args:
        params: Tensors (or a Layer) to optimise.
        lr: learning rate (default 1e-4; Lion wants ~3-10x less than AdamW).
        betas: (beta1, beta2): beta1 interpolates the update direction, beta2 is the
            momentum decay; each in [0, 1].
        weight_decay: decoupled decay, ``p *= 1 - lr * weight_decay``.
    """

    hyper_names = ("lr", "betas", "weight_decay")

    def __init__(self, params, lr: float = 1e-4, betas=(0.9, 0.99), weight_decay: float = 0.0):
        super().__init__(params, lr)
        b1, b2 = betas
        if not (0.0 <= b1 <= 1.0 and 0.0 <= b2 <= 1.0):
            raise ValueError(f"Lion: betas must be in [0, 1], got {betas}")
        if weight_decay < 0:
            raise ValueError(f"Lion: weight_decay must be >= 0, got {weight_decay}")
        self.betas = (float(b1), float(b2))
        self.weight_decay = float(weight_decay)

    def _update(self, p, g, state):
        b1, b2 = self.betas
        data = p.data
        m = state.get("exp_avg")
        if m is None:
            m = state["exp_avg"] = np.zeros_like(data)
        if self.weight_decay:
            data *= 1.0 - self.lr * self.weight_decay
        c = m * b1
        c += (1.0 - b1) * g
        data -= self.lr * np.sign(c).astype(data.dtype, copy=False)
        m *= b2
        m += (1.0 - b2) * g


def newton_schulz_orthogonalize(u: np.ndarray, steps: int = 5,
                                coefficients=(3.4445, -4.775, 2.0315), eps: float = 1e-7) -> np.ndarray:
    """Approximate the semi-orthogonal factor of a 2-D ``u`` (U V^T of its SVD) with the
    quintic Newton-Schulz iteration; the result has singular values near 1.

    ``steps`` iterations of ``X = a X + (b A + c A A) X`` with A = X X^T and
    (a, b, c) = ``coefficients``, after normalising u by max(||u||_F, ``eps``)."""
    if u.ndim != 2:
        raise ValueError(f"newton_schulz_orthogonalize: expected a matrix, got shape {u.shape}")
    a, b, c = coefficients
    transposed = u.shape[0] > u.shape[1]
    x = u.T if transposed else u
    x = x / max(float(np.linalg.norm(x)), eps)
    x = np.ascontiguousarray(x)
    for _ in range(steps):
        gram = _acc.gemm(x, x, trans_b=True)            # A = X X^T  (rows x rows, the small side)
        poly = b * gram + c * _acc.gemm(gram, gram)      # b A + c A A
        x = a * x + _acc.gemm(poly, x)
    return x.T if transposed else x


class Muon(Optimizer):
    """Muon: momentum orthogonalised by Newton-Schulz, for 2-D weights (see module docstring).

    Args:
        params: Tensors (or a Layer) to optimise.
        lr: learning rate of the matrix updates.
        momentum: momentum factor in [0, 1).
        nesterov: use the Nesterov form of the momentum.
        ns_steps: Newton-Schulz iterations per step (0 skips orthogonalisation).
        weight_decay: decoupled decay for every parameter (matrices and fallback).
        ns_coefficients: (a, b, c) of the quintic iteration.
        eps: floor of the Frobenius norm when normalising the update.
        adjust_lr_fn: None or "original" (lr * sqrt(max(1, fan_out / fan_in))) or
            "match_rms_adamw" (lr * 0.2 * sqrt(max(fan_in, fan_out))).
        fallback_lr: AdamW learning rate for parameters with fewer than two axes.
        fallback_betas: AdamW betas for those parameters.
        fallback_eps: AdamW eps for those parameters.
    """

    hyper_names = ("lr", "momentum", "nesterov", "ns_steps", "weight_decay", "ns_coefficients", "eps",
                   "fallback_lr", "fallback_betas", "fallback_eps")

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.95, nesterov: bool = True,
                 ns_steps: int = 5, weight_decay: float = 0.1, ns_coefficients=(3.4445, -4.775, 2.0315),
                 eps: float = 1e-7, adjust_lr_fn=None, fallback_lr: float = 3e-4,
                 fallback_betas=(0.9, 0.95), fallback_eps: float = 1e-8):
        super().__init__(params, lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"Muon: momentum must be in [0, 1), got {momentum}")
        if isinstance(ns_steps, bool) or not isinstance(ns_steps, (int, np.integer)) or ns_steps < 0:
            raise ValueError(f"Muon: ns_steps must be a non-negative int, got {ns_steps!r}")
        if weight_decay < 0 or eps <= 0 or fallback_lr < 0:
            raise ValueError("Muon: weight_decay and fallback_lr must be >= 0 and eps > 0")
        if adjust_lr_fn not in (None, "original", "match_rms_adamw"):
            raise ValueError(f"Muon: adjust_lr_fn must be None, 'original' or 'match_rms_adamw', "
                             f"got {adjust_lr_fn!r}")
        if len(tuple(ns_coefficients)) != 3:
            raise ValueError(f"Muon: ns_coefficients must be three numbers, got {ns_coefficients!r}")
        self.momentum, self.nesterov = float(momentum), bool(nesterov)
        self.ns_steps, self.weight_decay = int(ns_steps), float(weight_decay)
        self.ns_coefficients = tuple(float(v) for v in ns_coefficients)
        self.eps, self.adjust_lr_fn = float(eps), adjust_lr_fn
        self.fallback_lr = float(fallback_lr)
        self.fallback_betas = tuple(float(v) for v in fallback_betas)
        self.fallback_eps = float(fallback_eps)

    def _lr_for(self, shape) -> float:
        fan_in, fan_out = shape[0], int(np.prod(shape[1:]))  # (in, out) weights
        if self.adjust_lr_fn == "match_rms_adamw":
            return self.lr * 0.2 * math.sqrt(max(fan_in, fan_out))
        return self.lr * math.sqrt(max(1.0, fan_out / fan_in))

    def _update(self, p, g, state):
        data = p.data
        if data.ndim < 2:  # the core's one Adam step, decoupled (AdamW), with the fallback settings
            return adam_update(data, g, state, self.fallback_lr, self.fallback_betas, self.fallback_eps,
                               self.weight_decay, decoupled=True)
        mu = self.momentum
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = np.zeros_like(data)
        buf *= mu
        buf += (1.0 - mu) * g
        u = (1.0 - mu) * g + mu * buf if self.nesterov else buf
        matrix = u.reshape(u.shape[0], -1).astype(np.float32 if u.dtype == np.float16 else u.dtype)
        ortho = newton_schulz_orthogonalize(matrix, self.ns_steps, self.ns_coefficients, self.eps)
        if self.weight_decay:
            data *= 1.0 - self.lr * self.weight_decay
        data -= (self._lr_for(data.shape) * ortho).reshape(data.shape).astype(data.dtype, copy=False)
