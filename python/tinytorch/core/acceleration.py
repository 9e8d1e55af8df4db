"""Acceleration: the one dispatch point for the framework's heavy kernels.

Every matmul (forward and backward) and every bias+GELU in the core goes through
the functions below, so the fast-kernel work can route them to the native runtime
without touching tensor.py, layers.py or activations.py.

Contract (arrays in, arrays out; no autograd here):
  gemm(a, b, trans_a=False, trans_b=False, out=None) -> op(a) @ op(b)   2-D float arrays
  matmul(a, b)                                        -> a @ b with NumPy batching rules
  bias_gelu(x, bias)                                  -> gelu_tanh(x + bias)   x: [..., D]
  bias_gelu_backward(x, bias, grad)                   -> (grad_x, grad_bias or None)
  last_path()                                         -> name of the path the last call took
                                                         ("numpy", "native:avx2", ...)

This version is the NumPy reference path. The GELU here is the tanh approximation
  gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
written as u * sigmoid(2 sqrt(2/pi)(u + 0.044715 u^3)) so it never overflows.
"""
from __future__ import annotations

import numpy as np

_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715

_last_path = "none"


def last_path() -> str:
    """Which implementation the most recent gemm/matmul/bias_gelu call used."""
    return _last_path


def _set_path(name: str) -> None:
    global _last_path
    _last_path = name


def gemm(a: np.ndarray, b: np.ndarray, trans_a: bool = False, trans_b: bool = False,
         out: np.ndarray | None = None) -> np.ndarray:
    """op(a) @ op(b) for 2-D arrays, op = transpose when asked (no copy is made)."""
    a2 = a.T if trans_a else a
    b2 = b.T if trans_b else b
    _set_path("numpy")
    if out is not None:
        return np.matmul(a2, b2, out=out)
    return a2 @ b2


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with NumPy's batching and 1-D promotion rules."""
    if a.ndim == 2 and b.ndim == 2:
        return gemm(a, b)
    _set_path("numpy")
    return np.matmul(a, b)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    # Stable for any z: exp only ever sees non-positive arguments.
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def bias_gelu(x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """gelu_tanh(x + bias), bias broadcast over the last axis (None means no bias)."""
    u = x if bias is None else x + bias
    _set_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        z = 2.0 * _SQRT_2_OVER_PI * (u + _GELU_C * u * u * u)
        return (u * _sigmoid(z)).astype(x.dtype, copy=False)


def bias_gelu_backward(x: np.ndarray, bias: np.ndarray | None, grad: np.ndarray):
    """Gradients of gelu_tanh(x + bias): (grad * gelu'(u), sum of that over leading axes)."""
    u = x if bias is None else x + bias
    _set_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        inner = _SQRT_2_OVER_PI * (u + _GELU_C * u * u * u)
        s = _sigmoid(2.0 * inner)
        t = 2.0 * s - 1.0  # tanh(inner)
        d = 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * u * u)
        # For huge |u| the polynomial overflows to inf and (1 - t^2) * inf is NaN; the true limit is 0.
        d = np.where(np.isfinite(d) | np.isnan(u), d, np.where(u > 0, 1.0, 0.0))
    gx = (grad * d).astype(x.dtype, copy=False)
    gb = None if bias is None else gx.reshape(-1, gx.shape[-1]).sum(axis=0).astype(bias.dtype, copy=False)
    return gx, gb
