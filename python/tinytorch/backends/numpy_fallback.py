"""numpy_fallback: the NumPy back end -- every op of the door, in NumPy, for any dtype.

It serves what the native back ends decline (float64, integers, tiny problems) and
everything when they are off or missing, so it never declines. It also holds the one
stable sigmoid of the package and the GELU formulas (tanh approximation):

  gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) = u sigmoid(z),
  z = 2 sqrt(2/pi) (u + 0.044715 u^3)

evaluated in the sigmoid form so it never overflows. Limits at infinity: gelu(+inf) = inf,
gelu(-inf) = -0, gelu'(+inf) = 1, gelu'(-inf) = 0; NaN propagates (the native kernels
follow the same rules, runtime/cpu/bias_gelu_kernels.h). Integer input gives float32.
"""
from __future__ import annotations

import numpy as np

from . import attention_reference as _attention
from . import record_path, register

_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715


def _sigmoid_parts(z: np.ndarray):
    """(sigmoid(z), e = exp(-|z|)) for floating z: exp only ever sees non-positive values,
    so nothing overflows; e in [0, 1] is what derivatives of the sigmoid reuse."""
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)), e


def stable_sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)) for any z without overflow. Integer and boolean input is promoted
    to float32 (a sigmoid is never an integer); floating input keeps its dtype."""
    z = np.asarray(z)
    if z.dtype.kind not in "fc":
        z = z.astype(np.float32)
    return _sigmoid_parts(z)[0].astype(z.dtype, copy=False)


def promote_to_float(x) -> np.ndarray:
    """``x`` as an array, with integer or boolean input converted to float32 (activations of
    integers are never truncated integers); floating and complex input is returned as is."""
    x = np.asarray(x)
    return x if x.dtype.kind in "fc" else x.astype(np.float32)


def gemm(a, b, trans_a, trans_b, alpha, beta, out, any_size=False):
    """alpha op(a) @ op(b) + beta out in NumPy, for any dtype (the door's ``gemm``: ``a``,
    ``b`` 2-D, op a transpose when ``trans_a``/``trans_b``, ``alpha``/``beta`` scalars,
    ``out`` the optional accumulator and result). ``any_size`` is ignored: NumPy serves
    every size."""
    record_path("numpy")
    a2 = a.T if trans_a else a
    b2 = b.T if trans_b else b
    if alpha == 1 and beta == 0:
        return np.matmul(a2, b2, out=out) if out is not None else a2 @ b2
    product = a2 @ b2
    product *= np.asarray(alpha, dtype=product.dtype)  # in place: no third array
    if out is None:
        return product
    if beta == 0:
        np.copyto(out, product)
    else:
        out *= beta
        out += product
    return out


def matmul(a, b, any_size=False):
    """``np.matmul(a, b)`` (the door's ``matmul``); ``any_size`` is ignored."""
    record_path("numpy")
    return np.matmul(a, b)


def bias_gelu(x, bias, any_size=False):
    """gelu_tanh(x + bias), bias broadcast over the last axis (None means no bias), in the
    overflow-free sigmoid form. ``any_size`` is ignored."""
    x = promote_to_float(x)
    u = x if bias is None else x + bias
    record_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        z = 2.0 * _SQRT_2_OVER_PI * (u + _GELU_C * u * u * u)
        y = u * stable_sigmoid(z)
        neg_inf = np.isneginf(u)
        if neg_inf.any():
            y = np.where(neg_inf, -0.0, y)  # the limit, not -inf * 0 = NaN
        return y.astype(u.dtype, copy=False)


def bias_gelu_backward(x, bias, grad, any_size=False):
    """Gradients of gelu_tanh(x + bias): (grad * gelu'(u), sum of that over leading axes;
    None when ``bias`` is None). ``any_size`` is ignored."""
    x = promote_to_float(x)
    u = x if bias is None else x + bias
    record_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        # d/du [u sigmoid(z)] = s + u z' s (1 - s), with s (1 - s) = e / (1 + e)^2 and
        # e = exp(-|z|) in [0, 1]: no cancellation (1 + tanh would lose everything below
        # u ~ -4 in float32) and no overflow. Where e underflows to 0 the second term is
        # exactly 0 (it would be inf * 0 for huge |u|).
        z = 2.0 * _SQRT_2_OVER_PI * (u + _GELU_C * u * u * u)
        s, e = _sigmoid_parts(z)
        slope = u * (2.0 * _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * u * u)) * (e / ((1.0 + e) * (1.0 + e)))
        d = s + np.where(e == 0, 0.0, slope)
    gx = (grad * d).astype(u.dtype, copy=False)
    gb = None if bias is None else gx.reshape(-1, gx.shape[-1]).sum(axis=0).astype(bias.dtype, copy=False)
    return gx, gb


register("numpy", probe=lambda: (True, f"NumPy {np.__version__}: serves every call the "
                                        "native back ends decline"),
         ops={"gemm": gemm, "matmul": matmul, "bias_gelu": bias_gelu,
              "bias_gelu_backward": bias_gelu_backward, "attention": _attention.attention,
              "attention_backward": _attention.attention_backward},
         priority=0, native=False, description="the NumPy fallback")
