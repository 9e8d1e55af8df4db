"""Activations: ReLU, Sigmoid, Tanh, GELU, SiLU, Softmax, LogSoftmax (functions and layers).

What this file owns: one ``Function`` per activation with its derivative, a functional
form (``relu(x)``, ``gelu(x, approximate="tanh")``, ``softmax(x, axis)``...) and a
``Layer`` wrapper with PyTorch's class name.

Numerics: every form stays finite for |x| = 1e4. Sigmoid and SiLU only ever call
``exp`` on non-positive arguments; softmax subtracts the row maximum; log-softmax is
``x - max - log(sum(exp(x - max)))``.

GELU: ``approximate="tanh"`` (the default here, so the fused kernels and the core agree)
calls ``acceleration.bias_gelu`` / ``bias_gelu_backward`` with no bias, which is where
native kernels get routed in. ``approximate="none"`` is the exact form
``x * Phi(x)``, ``Phi(x) = (1 + erf(x / sqrt(2))) / 2``; erf is computed in NumPy with a
Chebyshev fit of erfc (fractional error below 1.2e-7 everywhere), since SciPy is not a
dependency.
"""
from __future__ import annotations

import numpy as np

from . import acceleration as _acc
from .autograd import Function
from .layers import Layer
from .tensor import Tensor

__all__ = ["ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Softmax", "LogSoftmax",
           "relu", "sigmoid", "tanh", "gelu", "silu", "softmax", "log_softmax", "erf"]


def _stable_sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(x.dtype, copy=False)


def erf(x: np.ndarray) -> np.ndarray:
    """Vectorised erf (float64 inside) via the erfc Chebyshev fit, |rel. error of erfc| < 1.2e-7."""
    x = np.asarray(x)
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    out = np.where(x >= 0, 1.0 - erfc, erfc - 1.0)
    return out.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)


_INV_SQRT2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


class ReLUFunction(Function):
    def forward(self, x):
        self.mask = x > 0
        return np.maximum(x, 0).astype(x.dtype, copy=False)

    def backward(self, g):
        return g * self.mask


class SigmoidFunction(Function):
    def forward(self, x):
        self.out = _stable_sigmoid(x)
        return self.out

    def backward(self, g):
        s = self.out
        return g * s * (1 - s)


class TanhFunction(Function):
    def forward(self, x):
        self.out = np.tanh(x)
        return self.out

    def backward(self, g):
        t = self.out
        return g * (1 - t * t)


class GELUTanhFunction(Function):
    def forward(self, x):
        self.x = x
        return _acc.bias_gelu(x, None)

    def backward(self, g):
        gx, _ = _acc.bias_gelu_backward(self.x, None, g)
        return gx


class GELUErfFunction(Function):
    def forward(self, x):
        self.x = x
        self.cdf = (0.5 * (1.0 + erf(x * _INV_SQRT2))).astype(x.dtype, copy=False)
        return x * self.cdf

    def backward(self, g):
        x = self.x
        with np.errstate(under="ignore"):
            pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
        return (g * (self.cdf + x * pdf)).astype(g.dtype, copy=False)


class SiLUFunction(Function):
    def forward(self, x):
        self.x = x
        self.s = _stable_sigmoid(x)
        return x * self.s

    def backward(self, g):
        s = self.s
        return g * (s * (1 + self.x * (1 - s)))


def _shift_by_max(x, axis):
    """x minus its maximum along axis, so exp never overflows. A size-0 tensor has no
    maximum to take (np.max raises) and nothing to shift: softmax of it is empty, as in PyTorch."""
    return x - np.max(x, axis=axis, keepdims=True) if x.size else x.copy()


class SoftmaxFunction(Function):
    def forward(self, x, axis):
        self.axis = axis
        e = np.exp(_shift_by_max(x, axis))
        self.out = e / np.sum(e, axis=axis, keepdims=True)
        return self.out

    def backward(self, g):
        s = self.out
        return s * (g - np.sum(g * s, axis=self.axis, keepdims=True))


class LogSoftmaxFunction(Function):
    def forward(self, x, axis):
        self.axis = axis
        shifted = _shift_by_max(x, axis)
        with np.errstate(divide="ignore"):  # log(0) only for an empty axis (the sum is >= 1 otherwise)
            out = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
        self.out = out
        return out

    def backward(self, g):
        return g - np.exp(self.out) * np.sum(g, axis=self.axis, keepdims=True)


def _t(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def _axis(x, axis):
    nd = x.data.ndim
    if nd == 0:
        raise ValueError("softmax: needs at least one dimension")
    if not -nd <= axis < nd:
        raise ValueError(f"softmax: axis {axis} is out of range for shape {x.shape}")
    return axis % nd


def relu(x):
    return ReLUFunction.apply(_t(x))


def sigmoid(x):
    return SigmoidFunction.apply(_t(x))


def tanh(x):
    return TanhFunction.apply(_t(x))


def gelu(x, approximate: str = "tanh"):
    if approximate == "tanh":
        return GELUTanhFunction.apply(_t(x))
    if approximate == "none":
        return GELUErfFunction.apply(_t(x))
    raise ValueError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")


def silu(x):
    return SiLUFunction.apply(_t(x))


def softmax(x, axis: int = -1):
    x = _t(x)
    return SoftmaxFunction.apply(x, axis=_axis(x, axis))


def log_softmax(x, axis: int = -1):
    x = _t(x)
    return LogSoftmaxFunction.apply(x, axis=_axis(x, axis))


class ReLU(Layer):
    def forward(self, x):
        return relu(x)


class Sigmoid(Layer):
    def forward(self, x):
        return sigmoid(x)


class Tanh(Layer):
    def forward(self, x):
        return tanh(x)


class GELU(Layer):
    def __init__(self, approximate: str = "tanh"):
        if approximate not in ("tanh", "none"):
            raise ValueError(f"GELU: approximate must be 'tanh' or 'none', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Layer):
    def forward(self, x):
        return silu(x)


class Softmax(Layer):
    def __init__(self, axis: int = -1):
        self.axis = axis

    def forward(self, x):
        return softmax(x, self.axis)


class LogSoftmax(Layer):
    def __init__(self, axis: int = -1):
        self.axis = axis

    def forward(self, x):
        return log_softmax(x, self.axis)
