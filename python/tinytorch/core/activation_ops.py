"""Activation ops: the differentiable nonlinearities, as Functions on arrays.

Each activation is one ``Function`` with its derivative (ReLU, Sigmoid, Tanh, GELU in
both forms, SiLU, Softmax, LogSoftmax), plus ``erf``. This module knows neither the
Tensor class nor layers, so both ``Tensor.relu()``/``.sigmoid()``/... (tensor.py) and the
functional forms and layers of activations.py call these same Functions without either
importing the other: autograd <- activation_ops <- tensor <- layers <- activations.

Dtypes: an activation of an integer or boolean array is float32 (``promote_to_float``,
the door's rule; PyTorch's ``torch.sigmoid`` of an int tensor is float too), never
truncated integers. ReLU alone keeps integers, like ``torch.relu``. Floating input keeps
its dtype.

Numerics: every form stays finite for |x| = 1e4. Sigmoid and SiLU use the package's one
stable sigmoid (``acceleration.stable_sigmoid``: ``exp`` only of non-positive values);
softmax subtracts the row maximum; log-softmax is ``x - max - log(sum(exp(x - max)))``.

GELU: the tanh approximation calls ``acceleration.bias_gelu`` / ``bias_gelu_backward``
with no bias, which is where native kernels get routed in. The exact form is
``x * Phi(x)``, ``Phi(x) = (1 + erf(x / sqrt(2))) / 2``; erf is computed in NumPy with a
Chebyshev fit of erfc (fractional error below 1.2e-7 everywhere), since SciPy is not a
dependency.

What this file owns: the activation Functions (``ReLUFunction``, ``SigmoidFunction``,
``TanhFunction``, ``GELUTanhFunction``, ``GELUErfFunction``, ``SiLUFunction``,
``SoftmaxFunction``, ``LogSoftmaxFunction``) with their derivatives, and ``erf``.

What it assumes: the engine's Function contract (autograd.py: arrays in, one array out, one
gradient per input); the kernel door (core/acceleration.py) for ``relu``, ``stable_sigmoid``,
``promote_to_float``, ``bias_gelu``, ``softmax`` and ``log_softmax`` and their backwards;
NumPy for the rest (tanh, the erf fit).
"""
from __future__ import annotations

import numpy as np

from . import acceleration as _acc
from .autograd import Function

__all__ = ["ReLUFunction", "SigmoidFunction", "TanhFunction", "GELUTanhFunction",
           "GELUErfFunction", "SiLUFunction", "SoftmaxFunction", "LogSoftmaxFunction", "erf"]

_INV_SQRT2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327


def erf(x: np.ndarray) -> np.ndarray:
    """Elementwise error function of the array ``x`` (float64 inside) via a Chebyshev fit
    of erfc, |rel. error of erfc| < 1.2e-7. Returns x's dtype for floating x, else float64."""
    x = np.asarray(x)
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    out = np.where(x >= 0, 1.0 - erfc, erfc - 1.0)
    return out.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)


class ReLUFunction(Function):
    """``max(x, 0)``; keeps x's dtype (integers too, like ``torch.relu``)."""

    def forward(self, x):
        """``max(x, 0)`` elementwise for the array ``x`` (the kernel door's ``relu``)."""
        self.out = _acc.relu(x)
        return self.out

    def backward(self, g):
        """0 where the output is <= 0 (0 at x == 0), ``g`` elsewhere (NaN passes, as in
        PyTorch), from the saved output."""
        return _acc.relu_backward(self.out, g)


class SigmoidFunction(Function):
    """``1 / (1 + exp(-x))`` through the stable sigmoid; integer input gives float32."""

    def forward(self, x):
        """The sigmoid of the array ``x`` (``exp`` only of non-positive values)."""
        self.out = _acc.stable_sigmoid(x)
        return self.out

    def backward(self, g):
        """``g * s * (1 - s)`` with s the saved output."""
        s = self.out
        return g * s * (1 - s)


class TanhFunction(Function):
    """Hyperbolic tangent; integer input gives float32."""

    def forward(self, x):
        """``np.tanh(x)`` for the array ``x``."""
        self.out = np.tanh(_acc.promote_to_float(x))
        return self.out

    def backward(self, g):
        """``g * (1 - tanh(x)**2)``."""
        t = self.out
        return g * (1 - t * t)


class GELUTanhFunction(Function):
    """GELU, tanh approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``, through
    ``acceleration.bias_gelu`` (the door native kernels are routed through)."""

    def forward(self, x):
        """GELU of the array ``x`` (``bias_gelu`` with no bias)."""
        self.x = x
        return _acc.bias_gelu(x, None)

    def backward(self, g):
        """``g * GELU'(x)`` from ``bias_gelu_backward``."""
        gx, _ = _acc.bias_gelu_backward(self.x, None, g)
        return gx


class GELUErfFunction(Function):
    """Exact GELU ``x * Phi(x)``, ``Phi`` the standard normal CDF (via ``erf``)."""

    def forward(self, x):
        """``x * Phi(x)`` for the array ``x``; integer input gives float32."""
        x = self.x = _acc.promote_to_float(x)
        self.cdf = (0.5 * (1.0 + erf(x * _INV_SQRT2))).astype(x.dtype, copy=False)
        return x * self.cdf

    def backward(self, g):
        """``g * (Phi(x) + x * phi(x))``, phi the standard normal density."""
        x = self.x
        with np.errstate(under="ignore"):
            pdf = _INV_SQRT_2PI * np.exp(-0.5 * x * x)
        return (g * (self.cdf + x * pdf)).astype(g.dtype, copy=False)


class SiLUFunction(Function):
    """SiLU (swish) ``x * sigmoid(x)``; integer input gives float32."""

    def forward(self, x):
        """``x * sigmoid(x)`` for the array ``x``, with the stable sigmoid."""
        x = self.x = _acc.promote_to_float(x)
        self.s = _acc.stable_sigmoid(x)
        return x * self.s

    def backward(self, g):
        """``g * s * (1 + x (1 - s))`` with s = sigmoid(x)."""
        s = self.s
        return g * (s * (1 + self.x * (1 - s)))


def _softmax_axis(x: np.ndarray, axis: int) -> int:
    """The axis as a non-negative int, or a ValueError naming it and the shape."""
    nd = x.ndim
    if nd == 0:
        raise ValueError("softmax: needs at least one dimension")
    if not -nd <= axis < nd:
        raise ValueError(f"softmax: axis {axis} is out of range for shape {x.shape}")
    return axis % nd


class SoftmaxFunction(Function):
    """Softmax along one axis, shifted by the maximum so ``exp`` never overflows
    (``acceleration.softmax``: the runtime's kernel for the last axis of float32)."""

    def forward(self, x, axis):
        """``exp(x) / sum(exp(x))`` along the int ``axis`` (negative counts from the end);
        ValueError for a 0-d x or an axis out of range."""
        x = _acc.promote_to_float(x)
        axis = self.axis = _softmax_axis(x, axis)
        self.out = _acc.softmax(x, axis)
        return self.out

    def backward(self, g):
        """``s * (g - sum(g * s))`` along the axis, s the saved softmax."""
        return _acc.softmax_backward(self.out, g, self.axis)


class LogSoftmaxFunction(Function):
    """``log(softmax(x))`` along one axis, as ``x - max - log(sum(exp(x - max)))``
    (``acceleration.log_softmax``)."""

    def forward(self, x, axis):
        """Log-softmax of the array ``x`` along the int ``axis`` (negative from the end)."""
        x = _acc.promote_to_float(x)
        axis = self.axis = _softmax_axis(x, axis)
        self.out = _acc.log_softmax(x, axis)
        return self.out

    def backward(self, g):
        """``g - softmax(x) * sum(g)`` along the axis."""
        return _acc.log_softmax_backward(self.out, g, self.axis)
