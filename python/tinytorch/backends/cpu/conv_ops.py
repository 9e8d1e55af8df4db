"""conv_ops: convolution's unfold and max pooling of the CPU back end (runtime/cpu/conv.cpp):
im2col, col2im, max_pool2d and its backward, NCHW float32.

Owns the geometry arguments and the calls of tt_im2col / tt_col2im / tt_maxpool2d_*.
Assumes: float32 arrays whose H x W planes are dense (declines anything else).
"""
from __future__ import annotations


import numpy as np

from ... import _native
from .. import record_native_path
from .common import F32, I64, address, has_symbol, is_f32

__all__ = ["im2col", "col2im", "max_pool2d", "max_pool2d_backward"]

# --------------------------------------------------------------------------------------
# Convolution's unfold and max pooling (NCHW float32)
# --------------------------------------------------------------------------------------

def _geometry(kh, kw, sh, sw, ph, pw):
    return [int(v) for v in (kh, kw, sh, sw, ph, pw)]


def im2col(x, kh, kw, sh, sw, ph, pw, oh, ow):
    """cols (C*KH*KW, N*OH*OW) of float32 NCHW ``x`` through tt_im2col (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``);
    declines other dtypes."""
    if not (has_symbol("tt_im2col") and is_f32(x)):
        return NotImplemented
    xc = np.ascontiguousarray(x)
    n, c, h, w = xc.shape
    cols = np.empty((c * kh * kw, n * oh * ow), dtype=F32)
    _native.check(_native.lib.tt_im2col(address(xc), n, c, h, w, *_geometry(kh, kw, sh, sw, ph, pw),
                                 address(cols)), "im2col")
    record_native_path()
    return cols


def col2im(cols, x_shape, kh, kw, sh, sw, ph, pw, oh, ow):
    """The adjoint of ``im2col`` through tt_col2im: float32 ``cols`` summed into an
    ``x_shape`` array (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``); declines other dtypes."""
    if not (has_symbol("tt_col2im") and is_f32(cols)):
        return NotImplemented
    cc = np.ascontiguousarray(cols)
    n, c, h, w = x_shape
    gx = np.empty(x_shape, dtype=F32)
    _native.check(_native.lib.tt_col2im(address(cc), n, c, h, w, *_geometry(kh, kw, sh, sw, ph, pw),
                                 address(gx)), "col2im")
    record_native_path()
    return gx


def max_pool2d(x, kh, kw, sh, sw, ph, pw, oh, ow):
    """(y, argmax) through tt_maxpool2d_forward for float32 ``x`` whose H x W planes are
    contiguous in any plane order (a convolution's (C, N, H, W) output seen as NCHW is read
    in place) (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``). Declines other dtypes."""
    if not (has_symbol("tt_maxpool2d_forward") and is_f32(x)):
        return NotImplemented
    n, c, h, w = x.shape
    st = x.strides
    if not (x.flags.aligned and st[3] == 4 and st[2] == 4 * w and st[0] >= 0 and st[1] >= 0
            and st[0] % 4 == 0 and st[1] % 4 == 0):
        x = np.ascontiguousarray(x)
        st = x.strides
    y = np.empty((n, c, oh, ow), dtype=F32)
    argmax = np.empty((n, c, oh, ow), dtype=I64)
    _native.check(_native.lib.tt_maxpool2d_forward(address(x), n, c, h, w, st[0] // 4, st[1] // 4,
                                            *_geometry(kh, kw, sh, sw, ph, pw), address(y),
                                            address(argmax)), "max_pool2d")
    record_native_path()
    return y, argmax


def _plane_strides(shape, strides):
    """``strides`` when they lay (N, C, H, W) out as dense contiguous H x W planes in NCHW or
    CNHW order (a convolution's output seen as NCHW), else None."""
    n, c, h, w = shape
    if strides is None or len(strides) != 4 or strides[3] != 4 or strides[2] != 4 * w:
        return None
    plane = 4 * h * w
    if (strides[1] == plane and strides[0] == c * plane) or (strides[0] == plane and strides[1] == n * plane):
        return tuple(strides)
    return None


def max_pool2d_backward(grad, argmax, x_shape, x_strides=None):
    """dL/dx of ``max_pool2d`` through tt_maxpool2d_backward: float32 ``grad`` added at
    ``argmax`` in an ``x_shape`` array of zeros, laid out like the forward's input when
    ``x_strides`` (its strides) describe NCHW or CNHW planes; declines other dtypes."""
    if not (has_symbol("tt_maxpool2d_backward") and is_f32(grad)):
        return NotImplemented
    gc = np.ascontiguousarray(grad)
    ac = np.ascontiguousarray(argmax, dtype=I64)
    n, c, h, w = x_shape
    strides = _plane_strides(x_shape, x_strides)
    if strides is None or n * c * h * w == 0:
        gx = np.empty(x_shape, dtype=F32)
        strides = gx.strides
        base = gx
    else:
        base = np.empty(n * c * h * w, dtype=F32)
        gx = np.lib.stride_tricks.as_strided(base, shape=x_shape, strides=strides)
    _native.check(_native.lib.tt_maxpool2d_backward(address(gc), address(ac), n, c, h, w,
                                             gc.shape[2], gc.shape[3], address(base),
                                             strides[0] // 4, strides[1] // 4),
           "max_pool2d_backward")
    record_native_path()
    return gx
