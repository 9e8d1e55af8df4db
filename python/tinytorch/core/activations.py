"""Activations: ReLU, Sigmoid, Tanh, GELU, SiLU, Softmax, LogSoftmax (functions and layers).

What this file owns: the functional forms (``relu(x)``, ``gelu(x, approximate="tanh")``,
``softmax(x, axis)``...), which accept a Tensor or anything ``Tensor()`` takes, and a
``Layer`` wrapper for each with PyTorch's class name. The differentiable work itself, the
dtype rule (integer input gives float32; ReLU keeps integers) and the numerics live in
activation_ops.py, whose Functions (and ``erf``) are re-exported here; ``Tensor.relu()``
and the other methods call the same Functions, so they need neither this file nor layers.

GELU: ``approximate="tanh"`` (the default here, so the fused kernels and the core agree)
goes through ``acceleration.bias_gelu``; ``approximate="none"`` is the exact erf form.
"""
from __future__ import annotations

from .activation_ops import (GELUErfFunction, GELUTanhFunction, LogSoftmaxFunction,  # noqa: F401
                             ReLUFunction, SigmoidFunction, SiLUFunction, SoftmaxFunction,
                             TanhFunction, erf)
from .layers import Layer
from .tensor import Tensor

__all__ = ["ReLU", "Sigmoid", "Tanh", "GELU", "SiLU", "Softmax", "LogSoftmax",
           "relu", "sigmoid", "tanh", "gelu", "silu", "softmax", "log_softmax", "erf"]


def _t(x):
    return x if isinstance(x, Tensor) else Tensor(x)


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
    return SoftmaxFunction.apply(_t(x), axis=axis)


def log_softmax(x, axis: int = -1):
    return LogSoftmaxFunction.apply(_t(x), axis=axis)


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
