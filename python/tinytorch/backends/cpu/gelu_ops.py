"""gelu_ops: the fused bias + tanh-GELU of the CPU back end (runtime/cpu/bias_gelu*.cpp): the
door's "bias_gelu" and "bias_gelu_backward".

Owns the call of tt_bias_gelu_forward / _backward (the bias gradient summed in the same pass)
for float32 x (..., D) and bias (D,) or None. Assumes: the formula and its limits are
backends/numpy_fallback.py's; declines other dtypes and (without any_size) small inputs.
"""
from __future__ import annotations


import numpy as np

from ... import _native
from .. import record_native_path
from .common import F32, NATIVE_MIN_ELEMENTS, address, is_f32

__all__ = ["bias_gelu", "bias_gelu_backward"]

# --------------------------------------------------------------------------------------
# Fused bias + GELU
# --------------------------------------------------------------------------------------

def _gelu_native_ok(x, bias) -> bool:
    return (x.ndim >= 1 and is_f32(x) and
            (bias is None or (is_f32(bias) and bias.shape == x.shape[-1:])))


def _bias_gelu_native(lib, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    xc = np.ascontiguousarray(x)
    bc = None if bias is None else np.ascontiguousarray(bias)
    y = np.empty(x.shape, dtype=F32)
    cols = x.shape[-1]
    status = lib.tt_bias_gelu_forward(address(xc), None if bc is None else address(bc),
                                      address(y), x.size // max(cols, 1), cols)
    _native.check(status, "bias_gelu")
    record_native_path()
    return y


def _bias_gelu_backward_native(lib, x, bias, grad):
    xc = np.ascontiguousarray(x)
    gc = np.ascontiguousarray(grad)
    bc = None if bias is None else np.ascontiguousarray(bias)
    gx = np.empty(x.shape, dtype=F32)
    gb = None if bias is None else np.empty(bias.shape, dtype=F32)
    cols = x.shape[-1]
    status = lib.tt_bias_gelu_backward(address(xc), None if bc is None else address(bc),
                                       address(gc), address(gx),
                                       None if gb is None else address(gb),
                                       x.size // max(cols, 1), cols)
    _native.check(status, "bias_gelu_backward")
    record_native_path()
    return gx, gb


def bias_gelu(x, bias, any_size):
    """gelu_tanh(x + bias) through tt_bias_gelu_forward for float32 x (..., D) and bias (D,)
    or None; declines other dtypes and fewer than NATIVE_MIN_ELEMENTS elements unless
    any_size."""
    if (any_size or x.size >= NATIVE_MIN_ELEMENTS) and _gelu_native_ok(x, bias):
        return _bias_gelu_native(_native.lib, x, bias)
    return NotImplemented


def bias_gelu_backward(x, bias, grad, any_size):
    """(grad_x, grad_bias) of gelu_tanh(x + bias) through tt_bias_gelu_backward: x, bias and
    any_size as in ``bias_gelu``, grad the float32 gradient of the output (x's shape)."""
    if (any_size or x.size >= NATIVE_MIN_ELEMENTS) and _gelu_native_ok(x, bias) and \
            is_f32(grad) and grad.shape == x.shape:
        return _bias_gelu_backward_native(_native.lib, x, bias, grad)
    return NotImplemented
