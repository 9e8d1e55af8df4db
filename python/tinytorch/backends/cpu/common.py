"""common: what every family of the CPU back end shares -- the size floors, dtypes, the
operand layouts of the C ABI and the symbol check.

Owns the routing thresholds (NATIVE_MIN_GEMM_WORK, NATIVE_MIN_ELEMENTS,
NATIVE_MIN_HALF_GEMM_WORK; the door re-exports them), the dtype constants, how a NumPy
matrix is described to the runtime (pointer, leading dimension, transpose flag: no copy for
row-major or column-major views) and ``has_symbol`` (the loaded runtime exports a function).
Assumes: the one binding, tinytorch._native; NumPy arrays only.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import _native

__all__ = ["NATIVE_MIN_GEMM_WORK", "NATIVE_MIN_ELEMENTS", "NATIVE_MIN_HALF_GEMM_WORK", "F32", "F16",
           "I64", "strided_layout", "address", "matrix_layout", "is_f16", "is_f32", "has_symbol"]

# Smallest problems sent to the native kernels (the routing rule: backends/cpu/__init__.py). Measured on the
# 2-core Zen 3 development machine (1 thread, both paths timed back to back): a native
# GEMM call costs ~5-10 us of fixed overhead (ctypes, packing), NumPy/OpenBLAS ~3 us, so
# NumPy wins for square GEMMs below n ~ 48 (~110k multiply-adds) and the native path above.
# The fused bias+GELU already wins at 64 elements (one pass instead of ~10 NumPy passes).
NATIVE_MIN_GEMM_WORK = 1 << 17
NATIVE_MIN_ELEMENTS = 256
# float16 has no BLAS in NumPy (it multiplies at well under 1 GFLOP/s), so the native
# half-precision GEMM wins from tiny sizes on.
NATIVE_MIN_HALF_GEMM_WORK = 1 << 10

F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)


I64 = np.dtype(np.int64)


# --------------------------------------------------------------------------------------
# Operand layouts
# --------------------------------------------------------------------------------------

def strided_layout(rows: int, cols: int, s0: int, s1: int):
    """(ld, transposed) for a rows x cols float32 matrix with byte strides (s0, s1), or
    None. Row-major storage gives (ld, False); column-major storage gives (ld, True): the
    C side then sees the transpose, row-major with leading dimension ld."""
    if cols <= 1:
        s1 = 4
    if rows <= 1:
        s0 = 4 * max(cols, 1)
    if s1 == 4 and s0 >= 4 * max(cols, 1) and s0 % 4 == 0:
        return s0 // 4, False
    if s0 == 4 and s1 >= 4 * max(rows, 1) and s1 % 4 == 0:
        return s1 // 4, True
    return None


_c_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof


def address(x: np.ndarray) -> int:
    """Address of x's first element. ``x.ctypes.data`` builds a helper object per call
    (~2-3 us, several times a small GEMM's fixed cost); borrowing the buffer of a writable
    C-contiguous array is ~4x cheaper. Read-only, empty or strided arrays take the slow way
    (asked first: a refused borrow costs a raised exception)."""
    if x.flags.c_contiguous:
        try:
            return _addressof(_c_char_from_buffer(x))
        except (TypeError, ValueError, BufferError):
            pass
    return x.ctypes.data


def batch_shape(*shapes) -> tuple:
    """The broadcast of the leading (batch) ``shapes``; equal shapes, the usual case, skip
    np.broadcast_shapes (~5 us a call, per attention or batched GEMM call)."""
    first = shapes[0]
    if all(s == first for s in shapes):
        return tuple(first)
    return np.broadcast_shapes(*shapes)


def matrix_layout(x: np.ndarray):
    """(array, ld, transposed) describing 2-D float32 ``x`` for the C ABI, without a copy
    when its storage is row- or column-major; otherwise a contiguous copy."""
    if x.flags.c_contiguous and x.flags.aligned:  # the common case, without stride checks
        return x, max(x.shape[1], 1), False
    layout = strided_layout(x.shape[0], x.shape[1], *x.strides) if x.flags.aligned else None
    if layout is None:
        x = np.ascontiguousarray(x)
        layout = (max(x.shape[1], 1), False)
    return x, layout[0], layout[1]


def is_f16(*arrays) -> bool:
    """True when every one of ``arrays`` is a plain float16 ndarray."""
    return all(type(a) is np.ndarray and a.dtype == F16 for a in arrays)


def is_f32(*arrays) -> bool:
    """True when every one of ``arrays`` is a plain float32 ndarray."""
    return all(type(a) is np.ndarray and a.dtype == F32 for a in arrays)


def has_symbol(name: str) -> bool:
    """True when the loaded runtime exports ``name`` (a library older than a kernel lacks it)."""
    return getattr(_native.lib, name, None) is not None
