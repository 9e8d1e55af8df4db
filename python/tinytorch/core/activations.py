"""Activations: ReLU, Sigmoid, Tanh, GELU, SiLU, Softmax, LogSoftmax (functions and layers).

What this file owns: the functional forms (``relu(x)``, ``gelu(x, approximate="tanh")``,
``softmax(x, axis)``...), which accept a Tensor or anything ``Tensor()`` takes, and a
``Layer`` wrapper for each with PyTorch's class name. The differentiable work itself, the
dtype rule (integer input gives float32; ReLU keeps integers) and the numerics live in
activation_ops.py, whose Functions (and ``erf``) are re-exported here; ``Tensor.relu()``
and the other methods call the same Functions, so they need neither this file nor layers.

GELU: ``approximate="tanh"`` (the default here, so the fused kernels and the core agree)
goes through ``acceleration.bias_gelu``; ``approximate="none"`` is the exact erf form.
``GELUFunction`` is upstream TinyTorch's name at this path: the tanh GELU Function itself,
which upstream code may also build as a node, ``GELUFunction(x).backward(grad_output)``.

What it assumes: the Functions of activation_ops.py do all the arithmetic (this file adds
none); ``Layer`` (layers.py) and ``Tensor`` (tensor.py), whose constructor turns a
non-Tensor argument into a Tensor (float32 for Python numbers and lists).
"""
from __future__ import annotations

from .activation_ops import (GELUErfFunction, GELUTanhFunction, LogSoftmaxFunction,  # noqa: F401
                             ReLUFunction, SigmoidFunction, SiLUFunction, SoftmaxFunction,
                             TanhFunction, erf)
from .layers import Layer
from .tensor import Tensor

__all__ = ["ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Softmax", "LogSoftmax",
           "relu", "sigmoid", "tanh", "gelu", "silu", "softmax", "log_softmax", "erf",
           "GELUFunction"]


def _t(x):
    return x if isinstance(x, Tensor) else Tensor(x)


def relu(x):
    """``max(x, 0)`` elementwise. ``x``: a Tensor (or anything ``Tensor()`` accepts) of any
    shape; returns a Tensor of the same shape and dtype."""
    return ReLUFunction.apply(_t(x))


def sigmoid(x):
    """``1 / (1 + exp(-x))`` elementwise, computed stably. ``x``: a Tensor or array-like;
    integer input gives float32."""
    return SigmoidFunction.apply(_t(x))


def tanh(x):
    """Hyperbolic tangent of ``x`` (Tensor or array-like) elementwise; integer input gives
    float32."""
    return TanhFunction.apply(_t(x))


def gelu(x, approximate: str = "tanh"):
    """GELU of ``x`` (Tensor or array-like) elementwise.

    Args:
        x: input of any shape; integer input gives float32.
        approximate: ``"tanh"`` (default; the fused-kernel form
            ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``) or ``"none"`` (exact,
            ``x * Phi(x)``). Note that PyTorch's default is ``"none"``.
    """
    if approximate == "tanh":
        return GELUTanhFunction.apply(_t(x))
    if approximate == "none":
        return GELUErfFunction.apply(_t(x))
    raise ValueError(f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")


def silu(x):
    """SiLU / swish ``x * sigmoid(x)`` of ``x`` (Tensor or array-like) elementwise."""
    return SiLUFunction.apply(_t(x))


def softmax(x, axis: int = -1):
    """Softmax of ``x`` (Tensor or array-like, at least 1-D) along ``axis``: the entries
    along it are positive and sum to 1."""
    return SoftmaxFunction.apply(_t(x), axis=axis)


def log_softmax(x, axis: int = -1):
    """``log(softmax(x))`` along ``axis``, computed stably (no log of a rounded-to-zero
    probability). ``x``: a Tensor or array-like, at least 1-D."""
    return LogSoftmaxFunction.apply(_t(x), axis=axis)


class ReLU(Layer):
    """Layer form of ``relu``: ``max(x, 0)`` elementwise, any shape."""

    def forward(self, x):
        """``relu(x)`` for a Tensor ``x`` of any shape."""
        return relu(x)


class Sigmoid(Layer):
    """Layer form of ``sigmoid``, elementwise, any shape."""

    def forward(self, x):
        """``sigmoid(x)`` for a Tensor ``x`` of any shape."""
        return sigmoid(x)


class Tanh(Layer):
    """Layer form of ``tanh``, elementwise, any shape."""

    def forward(self, x):
        """``tanh(x)`` for a Tensor ``x`` of any shape."""
        return tanh(x)


class GELU(Layer):
    """Layer form of ``gelu``, elementwise, any shape.

    Args:
        approximate: ``"tanh"`` (default, the fused-kernel form) or ``"none"`` (exact erf
            form; PyTorch's default).
    """

    def __init__(self, approximate: str = "tanh"):
        if approximate not in ("tanh", "none"):
            raise ValueError(f"GELU: approximate must be 'tanh' or 'none', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        """``gelu(x, approximate)`` for a Tensor ``x`` of any shape."""
        return gelu(x, self.approximate)

    def extra_repr(self):
        """``approximate='tanh'`` (or ``'none'``), shown in repr()."""
        return f"approximate={self.approximate!r}"


class GELUFunction(GELUTanhFunction):
    """Upstream TinyTorch's GELU Function: this package's tanh GELU (``GELUTanhFunction``,
    the same forward and backward; upstream's is ``x * sigmoid(1.702 x)``, see
    docs/compat.md), also in upstream's node form.

    ``GELUFunction.apply(x)`` is ``gelu(x)``. ``GELUFunction(x)`` builds the node around the
    input as upstream's autograd does (``node.inputs``); its ``backward(grad_output)``
    returns one gradient per input, ``(grad_x,)``, as upstream's does.

    Args:
        inputs: the input, a Tensor or array-like (upstream's node form); nothing when
            ``apply`` builds the node.
    """

    def __init__(self, *inputs):
        self.inputs = inputs
        if inputs:
            (x,) = inputs
            self.forward(_t(x).data)  # saves what backward reads, as apply's forward does

    def backward(self, grad_output):
        """``(grad_output * GELU'(x),)``: the tanh GELU's gradient, as a one-element tuple.

        Args:
            grad_output: d loss / d output, an array of the output's shape.
        """
        return (super().backward(grad_output),)


class SiLU(Layer):
    """Layer form of ``silu`` (``x * sigmoid(x)``), elementwise, any shape."""

    def forward(self, x):
        """``silu(x)`` for a Tensor ``x`` of any shape."""
        return silu(x)


class Softmax(Layer):
    """Layer form of ``softmax``.

    Args:
        axis: the axis that sums to 1 (PyTorch's ``dim``); default the last.
    """

    def __init__(self, axis: int = -1):
        self.axis = axis

    def forward(self, x, dim: int | None = None):
        """``softmax(x, axis)`` for a Tensor ``x`` with at least one dimension; ``dim``
        (upstream TinyTorch's call-time axis, ``Softmax()(x, dim=-1)``) overrides ``axis``."""
        return softmax(x, self.axis if dim is None else dim)


class LogSoftmax(Layer):
    """Layer form of ``log_softmax``.

    Args:
        axis: the axis to normalise over (PyTorch's ``dim``); default the last.
    """

    def __init__(self, axis: int = -1):
        self.axis = axis

    def forward(self, x):
        """``log_softmax(x, axis)`` for a Tensor ``x`` with at least one dimension."""
        return log_softmax(x, self.axis)
