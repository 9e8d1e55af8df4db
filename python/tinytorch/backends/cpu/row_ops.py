"""row_ops: the row kernels of the CPU back end (runtime/cpu/rownorm*.cpp): layer norm, softmax,
log-softmax (forward and backward, over the last axis) and cross-entropy fused with
log-softmax.

Owns the calls of tt_layernorm_* / tt_softmax_* / tt_log_softmax_* / tt_cross_entropy_*.
Assumes: float32 rows; gamma / beta float32 (D,) or None; integer targets.
"""
from __future__ import annotations

import math

import numpy as np

from ... import _native
from .. import record_native_path
from .common import F32, I64, NATIVE_MIN_ELEMENTS, address, is_f32

__all__ = ["layer_norm", "layer_norm_backward", "softmax", "log_softmax", "softmax_backward", "log_softmax_backward", "cross_entropy", "cross_entropy_backward"]

# --------------------------------------------------------------------------------------
# Row-wise normalisations over the last axis: layer norm, softmax, log-softmax
# (tt_layernorm_* / tt_softmax_* / tt_log_softmax_*, runtime/cpu/rownorm*.cpp)
# --------------------------------------------------------------------------------------

def _rows_cols(x: np.ndarray):
    cols = x.shape[-1]
    return math.prod(x.shape[:-1]), cols


def _vector_ok(v, cols) -> bool:
    return v is None or (is_f32(v) and v.shape == (cols,))


def _opt_address(v):
    return None if v is None else address(v)


def layer_norm(x, gamma, beta, eps, any_size):
    """(y, mean, rstd) of the layer norm of float32 ``x`` (..., D) over its last axis with
    float32 ``gamma`` / ``beta`` (D,) or None and the float ``eps``, through
    tt_layernorm_forward; mean and rstd are float32 (...,). Declines other dtypes and fewer
    than NATIVE_MIN_ELEMENTS elements unless ``any_size``."""
    if not (x.ndim >= 1 and is_f32(x) and (any_size or x.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(x)
    if not (_vector_ok(gamma, cols) and _vector_ok(beta, cols)):
        return NotImplemented
    xc = np.ascontiguousarray(x)
    g = None if gamma is None else np.ascontiguousarray(gamma)
    b = None if beta is None else np.ascontiguousarray(beta)
    y = np.empty(x.shape, dtype=F32)
    mean = np.empty(x.shape[:-1], dtype=F32)
    rstd = np.empty(x.shape[:-1], dtype=F32)
    status = _native.lib.tt_layernorm_forward(address(xc), _opt_address(g), _opt_address(b),
                                              address(y), address(mean), address(rstd),
                                              rows, cols, float(eps))
    _native.check(status, "layer_norm")
    record_native_path()
    return y, mean, rstd


def layer_norm_backward(x, gamma, mean, rstd, grad, need, any_size):
    """(grad_x, grad_gamma, grad_beta) of ``layer_norm`` through tt_layernorm_backward, from
    float32 ``x``, ``gamma`` (or None), the forward's ``mean`` and ``rstd`` and ``grad`` =
    dL/dy; ``need`` (three bools) says which to compute (grad_gamma is None without gamma).
    Declines what ``layer_norm`` declines (``any_size`` likewise), and any operand that is
    not float32."""
    if not (x.ndim >= 1 and is_f32(x, mean, rstd, grad) and grad.shape == x.shape and
            mean.shape == x.shape[:-1] and rstd.shape == x.shape[:-1] and
            (any_size or x.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(x)
    if not _vector_ok(gamma, cols):
        return NotImplemented
    xc, gc = np.ascontiguousarray(x), np.ascontiguousarray(grad)
    mc, rc = np.ascontiguousarray(mean), np.ascontiguousarray(rstd)
    g = None if gamma is None else np.ascontiguousarray(gamma)
    gx = np.empty(x.shape, dtype=F32) if need[0] else None
    gg = np.empty((cols,), dtype=F32) if need[1] and gamma is not None else None
    gb = np.empty((cols,), dtype=F32) if need[2] else None
    status = _native.lib.tt_layernorm_backward(address(xc), _opt_address(g), address(mc),
                                               address(rc), address(gc), _opt_address(gx),
                                               _opt_address(gg), _opt_address(gb), rows, cols)
    _native.check(status, "layer_norm_backward")
    record_native_path()
    return gx, gg, gb


def _softmax_forward(x, axis, any_size, log):
    if not (x.ndim >= 1 and axis == x.ndim - 1 and is_f32(x) and
            (any_size or x.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(x)
    xc = np.ascontiguousarray(x)
    y = np.empty(x.shape, dtype=F32)
    fn = _native.lib.tt_log_softmax_forward if log else _native.lib.tt_softmax_forward
    _native.check(fn(address(xc), address(y), None, rows, cols),
           "log_softmax" if log else "softmax")
    record_native_path()
    return y


def _softmax_backward(y, grad, axis, any_size, log):
    if not (y.ndim >= 1 and axis == y.ndim - 1 and is_f32(y, grad) and grad.shape == y.shape
            and (any_size or y.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(y)
    yc, gc = np.ascontiguousarray(y), np.ascontiguousarray(grad)
    gx = np.empty(y.shape, dtype=F32)
    fn = _native.lib.tt_log_softmax_backward if log else _native.lib.tt_softmax_backward
    _native.check(fn(address(yc), address(gc), address(gx), rows, cols),
           "log_softmax_backward" if log else "softmax_backward")
    record_native_path()
    return gx


def softmax(x, axis, any_size):
    """Softmax of float32 ``x`` along ``axis`` (a non-negative int; only the last axis is
    served) through tt_softmax_forward; declines other axes and dtypes, and fewer than
    NATIVE_MIN_ELEMENTS elements unless ``any_size``."""
    return _softmax_forward(x, axis, any_size, False)


def log_softmax(x, axis, any_size):
    """Log-softmax of float32 ``x`` along ``axis`` through tt_log_softmax_forward; declines
    as ``softmax`` does (``any_size`` likewise)."""
    return _softmax_forward(x, axis, any_size, True)


def softmax_backward(y, grad, axis, any_size):
    """dL/dx of ``softmax`` from its output ``y`` and ``grad`` = dL/dy (float32, same shape)
    along ``axis`` through tt_softmax_backward; declines as ``softmax`` does (``any_size``
    likewise)."""
    return _softmax_backward(y, grad, axis, any_size, False)


def log_softmax_backward(y, grad, axis, any_size):
    """dL/dx of ``log_softmax`` from its output ``y`` and ``grad`` = dL/dy along ``axis``
    through tt_log_softmax_backward; declines as ``softmax`` does (``any_size`` likewise)."""
    return _softmax_backward(y, grad, axis, any_size, True)




def _ce_ok(logits, target, label_smoothing, any_size) -> bool:
    return (label_smoothing == 0 and logits.ndim == 2 and is_f32(logits) and
            type(target) is np.ndarray and target.dtype.kind in "iu" and
            target.shape == logits.shape[:1] and (any_size or logits.size >= NATIVE_MIN_ELEMENTS))


def cross_entropy(logits, target, ignore_index, label_smoothing, any_size):
    """(loss, lse) per row of float32 ``logits`` (M, C) against integer ``target`` (M,)
    through tt_cross_entropy_forward: loss = lse - logits[target], 0 where the target is
    ``ignore_index``. Declines ``label_smoothing`` != 0, other dtypes, and fewer than
    NATIVE_MIN_ELEMENTS logits unless ``any_size``."""
    if not _ce_ok(logits, target, label_smoothing, any_size):
        return NotImplemented
    m, c = logits.shape
    xc = np.ascontiguousarray(logits)
    tc = np.ascontiguousarray(target, dtype=I64)
    loss = np.empty((m,), dtype=F32)
    lse = np.empty((m,), dtype=F32)
    _native.check(_native.lib.tt_cross_entropy_forward(address(xc), address(tc), address(loss),
                                                address(lse), m, c, int(ignore_index)),
           "cross_entropy")
    record_native_path()
    return loss, lse


def cross_entropy_backward(logits, target, lse, grad_rows, ignore_index, label_smoothing,
                           any_size):
    """dL/dlogits of sum(grad_rows * loss) through tt_cross_entropy_backward, from the
    forward's ``lse`` (float32 (M,)) and ``grad_rows`` (float32 (M,)); ``logits``,
    ``target``, ``ignore_index``, ``label_smoothing`` and ``any_size`` as in
    ``cross_entropy`` (declined alike)."""
    if not (_ce_ok(logits, target, label_smoothing, any_size) and is_f32(lse, grad_rows)):
        return NotImplemented
    m, c = logits.shape
    xc = np.ascontiguousarray(logits)
    tc = np.ascontiguousarray(target, dtype=I64)
    lc, gc = np.ascontiguousarray(lse), np.ascontiguousarray(grad_rows)
    grad = np.empty((m, c), dtype=F32)
    _native.check(_native.lib.tt_cross_entropy_backward(address(xc), address(tc), address(lc),
                                                 address(gc), address(grad), m, c,
                                                 int(ignore_index)),
           "cross_entropy_backward")
    record_native_path()
    return grad
