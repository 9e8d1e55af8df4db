"""relu_ops: ReLU of the CPU back end over the memory of any dense float32 array
(tt_relu_forward / tt_relu_backward).

Owns the density check (elements fill their memory in some order of the axes) and the two
calls. Assumes: float32; declines anything else.
"""
from __future__ import annotations


import numpy as np

from ... import _native
from .. import record_native_path
from .common import address, has_symbol, is_f32

__all__ = ["relu", "relu_backward"]

# --------------------------------------------------------------------------------------
# ReLU over the memory of any dense float32 array
# --------------------------------------------------------------------------------------

def _dense(x) -> bool:
    """True when x's elements fill its memory without gaps in some order of its axes, all
    strides positive (contiguous, or a transpose of a contiguous array): an elementwise
    kernel may then run over the raw buffer from x.ctypes.data, and np.empty_like(x) has the
    same element order."""
    if x.flags.c_contiguous:
        return True
    step = x.itemsize
    for size, stride in sorted(zip(x.shape, x.strides), key=lambda p: p[1]):
        if size == 1:
            continue
        if stride != step:
            return False
        step *= size
    return True


def relu(x):
    """``max(x, 0)`` through tt_relu_forward for a float32 array whose memory is dense (the
    result has x's layout); declines other dtypes and gapped views."""
    if not (has_symbol("tt_relu_forward") and is_f32(x) and x.flags.aligned and _dense(x)):
        return NotImplemented
    y = np.empty_like(x)
    _native.check(_native.lib.tt_relu_forward(address(x), address(y), x.size), "relu")
    record_native_path()
    return y


def relu_backward(y, grad):
    """dL/dx of ``relu`` from its float32 output ``y`` through tt_relu_backward (``grad``
    laid out like ``y``, or made so); declines other dtypes."""
    if not (has_symbol("tt_relu_backward") and is_f32(y, grad) and y.flags.aligned and _dense(y)):
        return NotImplemented
    if grad.strides != y.strides:
        g = np.empty_like(y)
        np.copyto(g, grad)
        grad = g
    gx = np.empty_like(y)
    _native.check(_native.lib.tt_relu_backward(address(y), address(grad), address(gx),
                                        y.size), "relu_backward")
    record_native_path()
    return gx
