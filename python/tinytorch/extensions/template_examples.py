"""The course template's four worked examples, written over this project's extension contract.

Upstream TinyTorch's ``extensions/template.py`` shows one example per extension seam; code
written against it imports these names from ``tinytorch.extensions.template`` (which
re-exports this module). Each is small and built from the package's own pieces:

  1. A differentiable Function: ``CustomScaledShift`` (``y = alpha * x + beta``) and its
     functional form ``custom_scaled_shift(x, alpha=2.0, beta=1.0)``. Forward and backward are
     written on arrays, ``Function.apply`` records the call, so gradients reach ``x``.
  2. A Layer: ``CustomResidualBlock(dim)``, ``y = x + x W + b`` with ``W`` (dim, dim) drawn
     from N(0, 1/dim) by the framework generator (``manual_seed`` makes it reproducible) and
     ``b`` zero. Both are Parameters, so ``parameters()``, optimizers and ``state_dict`` see them.
  3. A training hook: ``CustomGradientTransform(clip_value).transform_gradients(params)`` clips
     every gradient elementwise into [-clip_value, clip_value], in place, before
     ``optimizer.step()`` (for the global-norm variant use ``core.training.clip_grad_norm``).
  4. A hardware hook with a fallback: ``custom_accelerated_op(x)`` is ReLU.
     ``has_custom_hardware()`` answers whether a native ReLU kernel can run; libtinytorch ships
     none, so it is False and the op runs the package's one ReLU (``ReLUFunction``), reporting
     ``"numpy"`` through ``last_path()`` like every kernel-door call. A new kernel plugs in where
     the comment says, following the raw C-ABI call in ``scaled_matmul`` (template.py).

Interoperability (contract point 2): an ndarray in gives an ndarray out; a Tensor in gives a
Tensor on the autograd tape. Where upstream's examples return plain Tensors off the tape
(``custom_accelerated_op``), the ones here are differentiable too: gradients are the same
values upstream code would compute by hand, so nothing it relies on changes.

Assumes: the core's Function, Layer and Parameter, and the kernel door for the
accelerated example.
"""
from __future__ import annotations

import math

import numpy as np

from ..core import acceleration as _acc
from ..core.activation_ops import ReLUFunction
from ..core.autograd import Function
from ..core.layers import Layer, Parameter
from ..core.random import get_generator
from ..core.tensor import Tensor

__all__ = ["CustomScaledShift", "custom_scaled_shift", "CustomResidualBlock",
           "CustomGradientTransform", "has_custom_hardware", "custom_accelerated_op"]


def _scalar(value, name: str, who: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{who}: {name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{who}: {name} must be finite, got {value}")
    return value


class CustomScaledShift(Function):
    """``y = alpha * x + beta`` with ``dy/dx = alpha``: the template's custom autograd op.

    Called the upstream way, ``CustomScaledShift.apply(x, alpha=2.0, beta=1.0)``; ``x`` a
    floating Tensor. The result keeps ``x``'s dtype.
    """

    def forward(self, x, alpha: float = 2.0, beta: float = 1.0):
        """``alpha * x + beta`` for the array ``x`` (in its own dtype).

        Args:
            x: floating array.
            alpha: scale, a real number (default 2.0).
            beta: shift, a real number (default 1.0).
        """
        x = _acc.promote_to_float(x)  # an integer input is float32 (the door's rule), never truncated
        self.alpha = alpha
        out = x * np.asarray(alpha, dtype=x.dtype)
        out += np.asarray(beta, dtype=x.dtype)
        return out

    def backward(self, grad_output):
        """``(alpha * grad_output,)``: the shift has no gradient w.r.t. ``x``.

        Args:
            grad_output: gradient of the loss w.r.t. the output.
        """
        return (grad_output * np.asarray(self.alpha, dtype=grad_output.dtype),)


def custom_scaled_shift(x, alpha: float = 2.0, beta: float = 1.0):
    """``alpha * x + beta``: a Tensor ``x`` gives a Tensor on the tape, an array-like gives an
    ndarray (float32 for non-floating input, as upstream).

    Args:
        x: Tensor or array-like.
        alpha: scale, a real number (default 2.0).
        beta: shift, a real number (default 1.0).
    """
    alpha = _scalar(alpha, "alpha", "custom_scaled_shift")
    beta = _scalar(beta, "beta", "custom_scaled_shift")
    arr = x.data if isinstance(x, Tensor) else np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"custom_scaled_shift: expected a Tensor or numeric array, got dtype {arr.dtype}")
    if isinstance(x, Tensor):
        return CustomScaledShift.apply(x, alpha=alpha, beta=beta)
    return CustomScaledShift().forward(arr, alpha=alpha, beta=beta)


class CustomResidualBlock(Layer):
    """``y = x + x W + b``: the template's custom Layer (a residual around a square Linear).

    Args:
        dim: feature size of the input's last axis (>= 1); ``W`` is (dim, dim), ``b`` (dim,).
    """

    def __init__(self, dim: int):
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
            raise ValueError(f"CustomResidualBlock: dim must be a positive int, got {dim!r}")
        self.dim = int(dim)
        std = 1.0 / math.sqrt(self.dim)
        self.weight = Parameter((get_generator().standard_normal((self.dim, self.dim)) * std).astype(np.float32))
        self.bias = Parameter(np.zeros(self.dim, dtype=np.float32))

    def forward(self, x):
        """``x + x @ weight + bias`` for ``x`` (..., dim).

        Args:
            x: Tensor (or array) whose last axis has ``dim`` features.
        """
        x = x if isinstance(x, Tensor) else Tensor(x)
        if x.ndim < 1 or x.shape[-1] != self.dim:
            raise ValueError(f"CustomResidualBlock: expected input (..., {self.dim}), got shape {x.shape}")
        return x + x.matmul(self.weight) + self.bias

    def extra_repr(self):
        """``dim=...`` for repr()."""
        return f"dim={self.dim}"


class CustomGradientTransform:
    """Clips every gradient elementwise into [-clip_value, clip_value] before the step.

    Args:
        clip_value: positive bound (default 1.0).
    """

    def __init__(self, clip_value: float = 1.0):
        clip_value = _scalar(clip_value, "clip_value", "CustomGradientTransform")
        if clip_value <= 0:
            raise ValueError(f"CustomGradientTransform: clip_value must be positive, got {clip_value}")
        self.clip_value = clip_value

    def transform_gradients(self, parameters) -> None:
        """Clip each ``p.grad`` in place (parameters without a gradient are skipped). A
        Tensor-valued ``.grad`` (as upstream code sometimes sets) becomes its clipped array.

        Args:
            parameters: iterable of Tensors/Parameters (e.g. ``model.parameters()``).
        """
        c = self.clip_value
        for p in parameters:
            g = p.grad
            if g is None:
                continue
            if isinstance(g, Tensor):
                p.grad = np.clip(g.data, -c, c)
            else:
                np.clip(g, -c, c, out=g)


def has_custom_hardware() -> bool:
    """Whether ``custom_accelerated_op`` runs a native kernel: True when the runtime with its
    ReLU kernel (tt_relu_forward) is loaded and the native path is on."""
    lib = _acc.native_library()
    return lib is not None and getattr(lib, "tt_relu_forward", None) is not None


def custom_accelerated_op(x):
    """ReLU, ``max(0, x)``, through the hardware hook with its fallback: the kernel door's
    ``relu`` (the runtime's kernel for dense float32, NumPy otherwise). A Tensor gives a
    differentiable Tensor; an array-like gives an ndarray of the same dtype.
    ``last_path()`` names what ran ("native:relu:<isa>" or "numpy").

    Args:
        x: Tensor or numeric array-like.
    """
    is_tensor = isinstance(x, Tensor)
    arr = x.data if is_tensor else np.asarray(x)
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"custom_accelerated_op: expected a numeric Tensor or array, got dtype {arr.dtype}")
    # The seam: ReLUFunction calls the door, which takes the runtime's kernel when
    # has_custom_hardware() and the array suits it, and records the path either way.
    if is_tensor:
        return ReLUFunction.apply(x)
    return ReLUFunction().forward(arr)
