"""gemm_ops: float32 and float16 GEMMs and matmuls of the CPU back end (runtime/cpu/gemm.cpp,
hgemm.cpp): the door's "gemm" and "matmul".

Owns the call of tt_sgemm (a 2-D product, or a batch folded into rows),
tt_sgemm_strided_batched (batches that cannot be folded), tt_hgemm (float16 storage, float32
arithmetic), NumPy's 1-D promotion rules, and ``observe_gemms`` (the supported hook that
reports every native GEMM's shape). Assumes: the operands' dtypes and layouts are checked
here; a call that does not fit returns NotImplemented and NumPy serves it.
"""
from __future__ import annotations

import math
from contextlib import contextmanager

import numpy as np

from ... import _native
from .. import record_native_path
from .common import F16, F32, NATIVE_MIN_GEMM_WORK, NATIVE_MIN_HALF_GEMM_WORK, address, batch_shape, is_f16, is_f32, matrix_layout, strided_layout

__all__ = ["gemm", "observe_gemms", "matmul"]

# --------------------------------------------------------------------------------------
# GEMM and matmul
# --------------------------------------------------------------------------------------

def _gemm_native(lib, a, b, trans_a, trans_b, alpha, beta, out):
    """alpha op(a) @ op(b) + beta out through tt_sgemm; a, b are 2-D float32 (storage,
    before op). out (when given) is the accumulator of beta, and receives the result."""
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    a_arr, lda, a_flip = matrix_layout(a)
    b_arr, ldb, b_flip = matrix_layout(b)
    if out is None:  # the common case: a fresh row-major result
        target = np.empty((m, n), dtype=F32)
        status = lib.tt_sgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, alpha,
                              address(a_arr), lda, address(b_arr), ldb, 0.0,
                              address(target), max(n, 1))
        _native.check(status, "gemm")
        record_native_path()
        return target
    if out.dtype == F32 and out.shape == (m, n) and out.flags.writeable \
            and out.flags.aligned and (out.strides[1] == 4 or n <= 1) and \
            (m <= 1 or (out.strides[0] % 4 == 0 and out.strides[0] >= 4 * n)) and \
            not np.may_share_memory(out, a) and not np.may_share_memory(out, b):
        target = out
        ldc = max(n, 1) if m <= 1 else out.strides[0] // 4
    else:
        target = np.array(out, dtype=F32, copy=True) if beta != 0 else np.empty((m, n), F32)
        ldc = max(n, 1)
    status = lib.tt_sgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, alpha,
                          address(a_arr), lda, address(b_arr), ldb, beta,
                          address(target), ldc)
    _native.check(status, "gemm")
    record_native_path()
    if target is not out:
        np.copyto(out, target)
    return out


def gemm(a, b, trans_a, trans_b, alpha, beta, out, any_size):
    """alpha op(a) @ op(b) + beta out through tt_sgemm (float32) or tt_hgemm (float16, alpha
    1, beta 0); a, b 2-D with shapes already checked by the door, trans_a / trans_b as
    transpose flags (no copy), out an optional (M, N) accumulator and destination. Declines
    (NotImplemented) other dtypes and problems under the size floor unless any_size."""
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    if is_f32(a, b) and (out is None or out.dtype == F32) and \
            (any_size or m * n * k >= NATIVE_MIN_GEMM_WORK):
        return _gemm_native(_native.lib, a, b, trans_a, trans_b, float(alpha), float(beta), out)
    if is_f16(a, b) and alpha == 1 and beta == 0 and (out is None or out.dtype == F16) and \
            (any_size or m * n * k >= NATIVE_MIN_HALF_GEMM_WORK):
        result = _hgemm_native(_native.lib, a, b, trans_a, trans_b)
        if out is None:
            return result
        np.copyto(out, result)
        return out
    return NotImplemented


def _batched_native(lib, a, b):
    """a @ b for float32 a: (..., M, K), b: (..., K, N), both at least 3-D after
    promotion, through one strided-batched call."""
    batch = batch_shape(a.shape[:-2], b.shape[:-2])
    count = math.prod(batch)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    operands = []
    for x in (a, b):
        x3 = np.broadcast_to(x, batch + x.shape[-2:]).reshape((count,) + x.shape[-2:])
        rows, cols = x3.shape[1:]
        layout = strided_layout(rows, cols, x3.strides[1], x3.strides[2]) \
            if x3.flags.aligned else None
        stride = x3.strides[0] if count > 1 else 0
        if layout is None or stride < 0 or stride % 4:
            x3 = np.ascontiguousarray(x3)
            layout = (max(cols, 1), False)
            stride = x3.strides[0] if count > 1 else 0
        operands.append((x3, layout[0], layout[1], stride // 4))
    (a3, lda, a_flip, sa), (b3, ldb, b_flip, sb) = operands
    out = np.empty(batch + (m, n), dtype=F32)
    if count == 0:
        return out
    status = lib.tt_sgemm_strided_batched(int(a_flip), int(b_flip), m, n, k, 1.0,
                                          address(a3), lda, sa, address(b3), ldb, sb, 0.0,
                                          address(out), max(n, 1), m * n, count)
    _native.check(status, "matmul")
    record_native_path()
    return out


@contextmanager
def observe_gemms(on_gemm, on_batched):
    """Inside the block, every native GEMM this module runs is reported before it runs:
    ``on_gemm(trans_a, trans_b, m, n, k)`` for a tt_sgemm call and ``on_batched(batch, m, n,
    k)`` for a tt_sgemm_strided_batched one (benchmarks/bench_model_gemms.py records a
    training step's shapes this way). Outside it the entry points are the plain ones, so
    the hook costs nothing when unused; not for concurrent use from several threads.

    Args:
        on_gemm: callable(trans_a: bool, trans_b: bool, m, n, k).
        on_batched: callable(batch: int, m, n, k).
    """
    global _gemm_native, _batched_native
    plain, batched = _gemm_native, _batched_native

    def gemm_seen(lib, a, b, trans_a, trans_b, alpha, beta, out):
        m = a.shape[1] if trans_a else a.shape[0]
        k = a.shape[0] if trans_a else a.shape[1]
        n = b.shape[0] if trans_b else b.shape[1]
        on_gemm(bool(trans_a), bool(trans_b), m, n, k)
        return plain(lib, a, b, trans_a, trans_b, alpha, beta, out)

    def batched_seen(lib, a, b):
        batch = batch_shape(a.shape[:-2], b.shape[:-2])
        on_batched(math.prod(batch), a.shape[-2], b.shape[-1], a.shape[-1])
        return batched(lib, a, b)

    _gemm_native, _batched_native = gemm_seen, batched_seen
    try:
        yield
    finally:
        _gemm_native, _batched_native = plain, batched


def _matmul_work(a: np.ndarray, b: np.ndarray):
    """Multiply-adds of a @ b under NumPy's rules, or None when the shapes do not match."""
    if a.ndim == 0 or b.ndim == 0:
        return None
    m, k = (1, a.shape[0]) if a.ndim == 1 else a.shape[-2:]
    k2, n = (b.shape[0], 1) if b.ndim == 1 else b.shape[-2:]
    if k != k2:
        return None
    try:
        batch = batch_shape(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    return math.prod(batch) * m * n * k


def _promote(a: np.ndarray, b: np.ndarray):
    """NumPy's 1-D promotion: a vector a is a row (1, K), a vector b a column (K, 1)."""
    return (a[None, :] if a.ndim == 1 else a), (b[:, None] if b.ndim == 1 else b)


def _demote(out: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Drop the axes _promote added."""
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def _matmul_native(lib, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b (NumPy rules) for float32 arrays whose shapes match (see _matmul_work)."""
    a2, b2 = _promote(a, b)
    k, n = b2.shape[-2:]
    if a2.ndim == 2 and b2.ndim == 2:
        out = _gemm_native(lib, a2, b2, False, False, 1.0, 0.0, None)
    elif b2.ndim == 2 and a2.flags.c_contiguous:
        # (..., M, K) @ (K, N): fold the batch into the rows, one GEMM.
        out = _gemm_native(lib, a2.reshape(-1, k), b2, False, False, 1.0, 0.0,
                           None).reshape(a2.shape[:-1] + (n,))
    else:
        out = _batched_native(lib, a2, b2)
    return _demote(out, a, b)


def matmul(a, b, any_size):
    """a @ b with NumPy's batching and 1-D promotion rules, for float32 (one GEMM, a folded
    batch or one strided-batched call) or float16 operands; declines other dtypes and work
    under the size floor unless any_size."""
    if is_f32(a, b):
        work = _matmul_work(a, b)
        if work is not None and (any_size or work >= NATIVE_MIN_GEMM_WORK):
            return _matmul_native(_native.lib, a, b)
    elif is_f16(a, b):
        work = _matmul_work(a, b)
        if work is not None and (any_size or work >= NATIVE_MIN_HALF_GEMM_WORK):
            return _matmul_half(_native.lib, a, b)
    return NotImplemented


# --------------------------------------------------------------------------------------
# float16 GEMM: float16 storage, float32 arithmetic (tt_hgemm)
# --------------------------------------------------------------------------------------

def _half_layout(x: np.ndarray):
    """(array, ld, transposed) for a 2-D float16 array: row-major storage as is, a
    transposed view of row-major storage as the transpose flag, anything else copied."""
    if x.flags.c_contiguous:
        return x, max(x.shape[1], 1), False
    if x.T.flags.c_contiguous:
        return x.T, max(x.shape[0], 1), True
    x = np.ascontiguousarray(x)
    return x, max(x.shape[1], 1), False


def _hgemm_native(lib, a, b, trans_a, trans_b):
    """op(a) @ op(b) through tt_hgemm; a, b are 2-D float16 (storage, before op)."""
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    a_arr, lda, a_flip = _half_layout(a)
    b_arr, ldb, b_flip = _half_layout(b)
    out = np.empty((m, n), dtype=F16)
    status = lib.tt_hgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, 1.0,
                          address(a_arr), lda, address(b_arr), ldb, 0.0,
                          address(out), max(n, 1))
    _native.check(status, "gemm (float16)")
    record_native_path()
    return out


def _matmul_half(lib, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b (NumPy rules) for float16 arrays with matching shapes: batches become one
    GEMM when b is a matrix, else one tt_hgemm call per matrix of the broadcast batch."""
    a2, b2 = _promote(a, b)
    m, k = a2.shape[-2:]
    n = b2.shape[-1]
    if b2.ndim == 2:
        out = _hgemm_native(lib, a2.reshape(-1, k), b2, False, False)
        out = out.reshape(a2.shape[:-1] + (n,))
    else:
        batch = batch_shape(a2.shape[:-2], b2.shape[:-2])
        a3 = np.broadcast_to(a2, batch + (m, k)).reshape((-1, m, k))
        b3 = np.broadcast_to(b2, batch + (k, n)).reshape((-1, k, n))
        out = np.empty((a3.shape[0], m, n), dtype=F16)
        for i in range(a3.shape[0]):
            out[i] = _hgemm_native(lib, a3[i], b3[i], False, False)
        out = out.reshape(batch + (m, n))
    return _demote(out, a, b)
