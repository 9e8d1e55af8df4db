"""cpu: the native CPU back end -- the runtime's kernels, through the one binding (_native).

Registered once per instruction set (cpu:scalar, cpu:avx2, cpu:avx512, cpu:neon); the
entry of the runtime's active ISA is the usable one (the runtime picks the micro-kernels;
these functions are the same for all). Each op returns NotImplemented to decline a call,
and the NumPy back end then serves it.

Routing rule (which calls run here):
  * float32 -- every operand float32, and the work large enough: at least
    NATIVE_MIN_GEMM_WORK multiply-adds for a GEMM and NATIVE_MIN_ELEMENTS elements for
    bias+GELU, unless the caller passed any_size=True. Below those sizes the fixed cost of
    a ctypes call (~2-4 us) exceeds what the kernel saves, so NumPy runs (measured with
    benchmarks/bench_gemm.py and bench_gelu.py on the development machine).
  * float16 -- float16 GEMMs and matmuls (both operands float16, at least
    NATIVE_MIN_HALF_GEMM_WORK multiply-adds, alpha 1 and beta 0) go to tt_hgemm: float16
    storage, float32 products and sums, result rounded to float16. NumPy has no BLAS for
    float16, so this is what makes float16 training usable.
  * attention -- float32 q, k, v (v as wide as q), no mask, at least
    NATIVE_MIN_ATTENTION_WORK multiply-adds: tt_attention_forward / _backward (FlashAttention:
    tiled, online softmax). Batch dims are folded into the runtime's [batch][heads] with
    strides (broadcast and transposed-head layouts need no copy).
  * layer norm, softmax, log-softmax (forward and backward) -- over the last axis of a
    float32 array of at least NATIVE_MIN_ELEMENTS elements (gamma / beta float32 (D,) or
    None): tt_layernorm_* / tt_softmax_* / tt_log_softmax_* (one row kernel per ISA);
    cross-entropy of float32 logits (M, C) without label smoothing: tt_cross_entropy_*.
  * everything else (float64, integers, mixed dtypes, tiny problems) is declined.
Every call files the runtime's own kernel-path report ("native:sgemm:avx2",
"native:sgemm_strided_batched:avx2", "native:bias_gelu_forward:avx2", "native:hgemm:...",
"native:attention_forward:avx2", "native:layernorm_forward:avx2", "native:softmax_forward:avx2").

Layouts: operands are passed by pointer with a leading dimension. A row-major view with
any row stride is passed as is, and a transposed view (column-major storage, e.g. ``x.T``
or ``np.swapaxes(x, -1, -2)``) is passed as the transpose flag of the untransposed
storage: no copy. Anything else (negative or odd strides, unaligned data) is copied once
to a contiguous array. ``out=`` receives the result directly when it is a row-major
float32 array that does not overlap an input; otherwise through a temporary.

Output allocation is part of the cost: results are fresh ``np.empty`` arrays, and NumPy
already asks Linux for transparent huge pages on large allocations (madvise), so a fresh
40 MB output takes ~20 page faults rather than ~10,000. A caller that repeats a shape can
still skip the allocation with ``gemm(..., out=buffer)``; benchmarks/bench_gemm.py and
bench_gelu.py report both ("fresh output" columns).
"""
from __future__ import annotations

import ctypes
from contextlib import contextmanager

import numpy as np

from .. import _native
from . import record_native_path, register

# Smallest problems sent to the native kernels (see the routing rule above). Measured on the
# 2-core Zen 3 development machine (1 thread, both paths timed back to back): a native
# GEMM call costs ~5-10 us of fixed overhead (ctypes, packing), NumPy/OpenBLAS ~3 us, so
# NumPy wins for square GEMMs below n ~ 48 (~110k multiply-adds) and the native path above.
# The fused bias+GELU already wins at 64 elements (one pass instead of ~10 NumPy passes).
NATIVE_MIN_GEMM_WORK = 1 << 17
NATIVE_MIN_ELEMENTS = 256
# float16 has no BLAS in NumPy (it multiplies at well under 1 GFLOP/s), so the native
# half-precision GEMM wins from tiny sizes on.
NATIVE_MIN_HALF_GEMM_WORK = 1 << 10

_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)


# --------------------------------------------------------------------------------------
# Operand layouts
# --------------------------------------------------------------------------------------

def _strided_layout(rows: int, cols: int, s0: int, s1: int):
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


def _address(x: np.ndarray) -> int:
    """Address of x's first element. ``x.ctypes.data`` builds a helper object per call
    (~2-3 us, several times a small GEMM's fixed cost); borrowing the buffer of a writable
    C-contiguous array is ~4x cheaper. Read-only, empty or strided arrays take the slow way."""
    try:
        return _addressof(_c_char_from_buffer(x))
    except (TypeError, ValueError, BufferError):
        return x.ctypes.data


def _matrix_layout(x: np.ndarray):
    """(array, ld, transposed) describing 2-D float32 ``x`` for the C ABI, without a copy
    when its storage is row- or column-major; otherwise a contiguous copy."""
    if x.flags.c_contiguous and x.flags.aligned:  # the common case, without stride checks
        return x, max(x.shape[1], 1), False
    layout = _strided_layout(x.shape[0], x.shape[1], *x.strides) if x.flags.aligned else None
    if layout is None:
        x = np.ascontiguousarray(x)
        layout = (max(x.shape[1], 1), False)
    return x, layout[0], layout[1]


def _is_f16(*arrays) -> bool:
    return all(type(a) is np.ndarray and a.dtype == _F16 for a in arrays)


def _is_f32(*arrays) -> bool:
    return all(type(a) is np.ndarray and a.dtype == _F32 for a in arrays)


# --------------------------------------------------------------------------------------
# GEMM and matmul
# --------------------------------------------------------------------------------------

def _gemm_native(lib, a, b, trans_a, trans_b, alpha, beta, out):
    """alpha op(a) @ op(b) + beta out through tt_sgemm; a, b are 2-D float32 (storage,
    before op). out (when given) is the accumulator of beta, and receives the result."""
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    a_arr, lda, a_flip = _matrix_layout(a)
    b_arr, ldb, b_flip = _matrix_layout(b)
    if out is None:  # the common case: a fresh row-major result
        target = np.empty((m, n), dtype=_F32)
        status = lib.tt_sgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, alpha,
                              _address(a_arr), lda, _address(b_arr), ldb, 0.0,
                              _address(target), max(n, 1))
        _native.check(status, "gemm")
        record_native_path()
        return target
    if out.dtype == _F32 and out.shape == (m, n) and out.flags.writeable \
            and out.flags.aligned and (out.strides[1] == 4 or n <= 1) and \
            (m <= 1 or (out.strides[0] % 4 == 0 and out.strides[0] >= 4 * n)) and \
            not np.may_share_memory(out, a) and not np.may_share_memory(out, b):
        target = out
        ldc = max(n, 1) if m <= 1 else out.strides[0] // 4
    else:
        target = np.array(out, dtype=_F32, copy=True) if beta != 0 else np.empty((m, n), _F32)
        ldc = max(n, 1)
    status = lib.tt_sgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, alpha,
                          a_arr.ctypes.data, lda, b_arr.ctypes.data, ldb, beta,
                          target.ctypes.data, ldc)
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
    if _is_f32(a, b) and (out is None or out.dtype == _F32) and \
            (any_size or m * n * k >= NATIVE_MIN_GEMM_WORK):
        return _gemm_native(_native.lib, a, b, trans_a, trans_b, float(alpha), float(beta), out)
    if _is_f16(a, b) and alpha == 1 and beta == 0 and (out is None or out.dtype == _F16) and \
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
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    count = int(np.prod(batch, dtype=np.int64))
    m, k = a.shape[-2:]
    n = b.shape[-1]
    operands = []
    for x in (a, b):
        x3 = np.broadcast_to(x, batch + x.shape[-2:]).reshape((count,) + x.shape[-2:])
        rows, cols = x3.shape[1:]
        layout = _strided_layout(rows, cols, x3.strides[1], x3.strides[2]) \
            if x3.flags.aligned else None
        stride = x3.strides[0] if count > 1 else 0
        if layout is None or stride < 0 or stride % 4:
            x3 = np.ascontiguousarray(x3)
            layout = (max(cols, 1), False)
            stride = x3.strides[0] if count > 1 else 0
        operands.append((x3, layout[0], layout[1], stride // 4))
    (a3, lda, a_flip, sa), (b3, ldb, b_flip, sb) = operands
    out = np.empty(batch + (m, n), dtype=_F32)
    if count == 0:
        return out
    status = lib.tt_sgemm_strided_batched(int(a_flip), int(b_flip), m, n, k, 1.0,
                                          a3.ctypes.data, lda, sa, b3.ctypes.data, ldb, sb, 0.0,
                                          out.ctypes.data, max(n, 1), m * n, count)
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
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        on_batched(int(np.prod(batch)), a.shape[-2], b.shape[-1], a.shape[-1])
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
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    return int(np.prod(batch, dtype=np.int64)) * m * n * k


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
    if _is_f32(a, b):
        work = _matmul_work(a, b)
        if work is not None and (any_size or work >= NATIVE_MIN_GEMM_WORK):
            return _matmul_native(_native.lib, a, b)
    elif _is_f16(a, b):
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
    out = np.empty((m, n), dtype=_F16)
    status = lib.tt_hgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, 1.0,
                          a_arr.ctypes.data, lda, b_arr.ctypes.data, ldb, 0.0,
                          out.ctypes.data, max(n, 1))
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
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        a3 = np.broadcast_to(a2, batch + (m, k)).reshape((-1, m, k))
        b3 = np.broadcast_to(b2, batch + (k, n)).reshape((-1, k, n))
        out = np.empty((a3.shape[0], m, n), dtype=_F16)
        for i in range(a3.shape[0]):
            out[i] = _hgemm_native(lib, a3[i], b3[i], False, False)
        out = out.reshape(batch + (m, n))
    return _demote(out, a, b)


# --------------------------------------------------------------------------------------
# Fused bias + GELU
# --------------------------------------------------------------------------------------

def _gelu_native_ok(x, bias) -> bool:
    return (x.ndim >= 1 and _is_f32(x) and
            (bias is None or (_is_f32(bias) and bias.shape == x.shape[-1:])))


def _bias_gelu_native(lib, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    xc = np.ascontiguousarray(x)
    bc = None if bias is None else np.ascontiguousarray(bias)
    y = np.empty(x.shape, dtype=_F32)
    cols = x.shape[-1]
    status = lib.tt_bias_gelu_forward(xc.ctypes.data, None if bc is None else bc.ctypes.data,
                                      y.ctypes.data, x.size // max(cols, 1), cols)
    _native.check(status, "bias_gelu")
    record_native_path()
    return y


def _bias_gelu_backward_native(lib, x, bias, grad):
    xc = np.ascontiguousarray(x)
    gc = np.ascontiguousarray(grad)
    bc = None if bias is None else np.ascontiguousarray(bias)
    gx = np.empty(x.shape, dtype=_F32)
    gb = None if bias is None else np.empty(bias.shape, dtype=_F32)
    cols = x.shape[-1]
    status = lib.tt_bias_gelu_backward(xc.ctypes.data, None if bc is None else bc.ctypes.data,
                                       gc.ctypes.data, gx.ctypes.data,
                                       None if gb is None else gb.ctypes.data,
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
            _is_f32(grad) and grad.shape == x.shape:
        return _bias_gelu_backward_native(_native.lib, x, bias, grad)
    return NotImplemented


# --------------------------------------------------------------------------------------
# Attention: tt_attention_forward / tt_attention_backward (FlashAttention, tiled)
# --------------------------------------------------------------------------------------

# Smallest attention (batch*heads*sq*sk*d multiply-adds) sent to the native kernel unless
# any_size=True: below it the ctypes call and the stride folding (~30 us) cost more than
# NumPy's two batched matmuls and a softmax.
NATIVE_MIN_ATTENTION_WORK = 1 << 16


def _merge_dims(shape, strides):
    """The stride of dims `shape` (byte strides `strides`) folded into one, or None when
    they are not one arithmetic progression. Size-1 dims are ignored; no dims -> 0."""
    merged = None
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if merged is None:
            merged, span = s, n
        elif s == merged * span:
            span *= n
        else:
            return None
    return 0 if merged is None else merged


def _fold_batch(arrays, batch):
    """Views of float32 `arrays` ([..., rows, d], leading dims broadcast to `batch`) as the
    runtime's [B][H][rows][d] with per-operand element strides (s_b, s_h, s_row), without
    copies when the layouts allow. Returns (B, H, [(array, strides), ...])."""
    n = len(batch)
    views = []
    for x in arrays:
        if not x.flags.aligned or (x.shape[-1] > 1 and x.strides[-1] != 4) or \
                any(s < 0 or s % 4 for s in x.strides):
            x = np.ascontiguousarray(x)
        views.append(np.broadcast_to(x, batch + x.shape[-2:]))
    for split in range(n + 1):
        folded = []
        for x in views:
            s_b = _merge_dims(batch[:split], x.strides[:split])
            s_h = _merge_dims(batch[split:], x.strides[split:n])
            if s_b is None or s_h is None:
                break
            folded.append((x, (s_b // 4, s_h // 4, x.strides[-2] // 4)))
        else:
            b = int(np.prod(batch[:split], dtype=np.int64))
            h = int(np.prod(batch[split:], dtype=np.int64))
            return b, h, folded
    # no common split: copy (materialising broadcasts) and fold everything into heads
    copies = [np.ascontiguousarray(x) for x in views]
    h = int(np.prod(batch, dtype=np.int64))
    return 1, h, [(x, (0, x.shape[-2] * x.shape[-1], x.shape[-1])) for x in copies]


def _strides_arg(strides):
    return (ctypes.c_int64 * 3)(*strides)


def _empty_like_heads(like, shape):
    """A float32 result of ``shape`` (B, H, rows, d), laid out like ``like``: when ``like``
    is the head split of a [B, rows, H*d] projection (a transposed view whose rows are
    farther apart than its heads), the result lives in [B, rows, H, d] memory and is returned
    as the same kind of view, so merging the heads back (transpose + reshape) copies nothing;
    otherwise contiguous."""
    if like.ndim == 4 and len(shape) == 4 and like.strides[1] < like.strides[2]:
        b, h, rows, d = shape
        return np.empty((b, rows, h, d), dtype=_F32).transpose(0, 2, 1, 3)
    return np.empty(shape, dtype=_F32)


def _attention_ok(q, k, v, mask, work, any_size) -> bool:
    return (mask is None and _is_f32(q, k, v) and q.ndim >= 2 and k.ndim >= 2 and v.ndim >= 2
            and v.shape[-1] == q.shape[-1] and (any_size or work >= NATIVE_MIN_ATTENTION_WORK))


def _attention_work(q, k):
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    return int(np.prod(batch, dtype=np.int64)) * q.shape[-2] * k.shape[-2] * q.shape[-1]


def attention(q, k, v, mask, causal, scale, any_size):
    """(out, lse) of softmax(scale q k^T) v through tt_attention_forward, for float32 q, k,
    v (v as wide as q) and no mask (the door passes masks to the NumPy reference); causal is
    the runtime's code (0 none, 1 top-left, 2 bottom-right). Declines problems below
    NATIVE_MIN_ATTENTION_WORK multiply-adds unless any_size."""
    if not _attention_ok(q, k, v, mask, _attention_work(q, k), any_size):
        return NotImplemented
    lib = _native.lib
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    out = _empty_like_heads(q, batch + (sq, d))
    b, h, ((q3, sq_), (k3, sk_), (v3, sv_), (o3, so_)) = _fold_batch([q, k, v, out], batch)
    if o3.ctypes.data != out.ctypes.data:  # folded through copies: write a contiguous result
        out = np.empty(batch + (sq, d), dtype=_F32)
        b, h, ((q3, sq_), (k3, sk_), (v3, sv_), (o3, so_)) = _fold_batch([q, k, v, out], batch)
    lse = np.empty(batch + (sq,), dtype=_F32)
    status = lib.tt_attention_forward(q3.ctypes.data, _strides_arg(sq_), k3.ctypes.data,
                                      _strides_arg(sk_), v3.ctypes.data, _strides_arg(sv_),
                                      o3.ctypes.data, _strides_arg(so_), lse.ctypes.data, b, h,
                                      sq, sk, d, float(scale), int(causal))
    _native.check(status, "attention")
    record_native_path()
    return out, lse


def attention_backward(q, k, v, out, lse, grad, mask, causal, scale, need, any_size):
    """(dq, dk, dv) of ``attention`` (None where need says False), batch axes as broadcast,
    through tt_attention_backward, from q, k, v, the forward's out and lse and grad =
    dL/d(out); mask, causal, scale and any_size as in ``attention``."""
    if not (_attention_ok(q, k, v, mask, _attention_work(q, k), any_size)
            and _is_f32(out, lse, grad)):
        return NotImplemented
    lib = _native.lib
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    grads = [_empty_like_heads(x, batch + (rows, d)) if wanted else None
             for wanted, x, rows in zip(need, (q, k, v), (sq, sk, sk))]
    wanted = [g for g in grads if g is not None]
    b, h, folded = _fold_batch([q, k, v, out, grad] + wanted, batch)
    if any(f[0].ctypes.data != g.ctypes.data for f, g in zip(folded[5:], wanted)):
        # folded through copies: write contiguous gradients instead
        grads = [None if g is None else np.empty(g.shape, dtype=_F32) for g in grads]
        wanted = [g for g in grads if g is not None]
        b, h, folded = _fold_batch([q, k, v, out, grad] + wanted, batch)
    (q3, s_q), (k3, s_k), (v3, s_v), (o3, s_o), (g3, s_g) = folded[:5]
    results = iter(folded[5:])
    lse = np.ascontiguousarray(np.broadcast_to(lse, batch + (sq,)))
    args = []
    for g in grads:
        if g is None:
            args += [None, None]
        else:
            g3_, strides = next(results)
            args += [g3_.ctypes.data, _strides_arg(strides)]
    status = lib.tt_attention_backward(q3.ctypes.data, _strides_arg(s_q), k3.ctypes.data,
                                       _strides_arg(s_k), v3.ctypes.data, _strides_arg(s_v),
                                       o3.ctypes.data, _strides_arg(s_o), g3.ctypes.data,
                                       _strides_arg(s_g), lse.ctypes.data, *args, b, h, sq, sk,
                                       d, float(scale), int(causal))
    _native.check(status, "attention_backward")
    record_native_path()
    return tuple(grads)


# --------------------------------------------------------------------------------------
# Row-wise normalisations over the last axis: layer norm, softmax, log-softmax
# (tt_layernorm_* / tt_softmax_* / tt_log_softmax_*, runtime/cpu/rownorm*.cpp)
# --------------------------------------------------------------------------------------

def _rows_cols(x: np.ndarray):
    cols = x.shape[-1]
    return int(np.prod(x.shape[:-1], dtype=np.int64)), cols


def _vector_ok(v, cols) -> bool:
    return v is None or (_is_f32(v) and v.shape == (cols,))


def _opt_address(v):
    return None if v is None else v.ctypes.data


def layer_norm(x, gamma, beta, eps, any_size):
    """(y, mean, rstd) of the layer norm of float32 ``x`` (..., D) over its last axis with
    float32 ``gamma`` / ``beta`` (D,) or None and the float ``eps``, through
    tt_layernorm_forward; mean and rstd are float32 (...,). Declines other dtypes and fewer
    than NATIVE_MIN_ELEMENTS elements unless ``any_size``."""
    if not (x.ndim >= 1 and _is_f32(x) and (any_size or x.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(x)
    if not (_vector_ok(gamma, cols) and _vector_ok(beta, cols)):
        return NotImplemented
    xc = np.ascontiguousarray(x)
    g = None if gamma is None else np.ascontiguousarray(gamma)
    b = None if beta is None else np.ascontiguousarray(beta)
    y = np.empty(x.shape, dtype=_F32)
    mean = np.empty(x.shape[:-1], dtype=_F32)
    rstd = np.empty(x.shape[:-1], dtype=_F32)
    status = _native.lib.tt_layernorm_forward(xc.ctypes.data, _opt_address(g), _opt_address(b),
                                              y.ctypes.data, mean.ctypes.data, rstd.ctypes.data,
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
    if not (x.ndim >= 1 and _is_f32(x, mean, rstd, grad) and grad.shape == x.shape and
            mean.shape == x.shape[:-1] and rstd.shape == x.shape[:-1] and
            (any_size or x.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(x)
    if not _vector_ok(gamma, cols):
        return NotImplemented
    xc, gc = np.ascontiguousarray(x), np.ascontiguousarray(grad)
    mc, rc = np.ascontiguousarray(mean), np.ascontiguousarray(rstd)
    g = None if gamma is None else np.ascontiguousarray(gamma)
    gx = np.empty(x.shape, dtype=_F32) if need[0] else None
    gg = np.empty((cols,), dtype=_F32) if need[1] and gamma is not None else None
    gb = np.empty((cols,), dtype=_F32) if need[2] else None
    status = _native.lib.tt_layernorm_backward(xc.ctypes.data, _opt_address(g), mc.ctypes.data,
                                               rc.ctypes.data, gc.ctypes.data, _opt_address(gx),
                                               _opt_address(gg), _opt_address(gb), rows, cols)
    _native.check(status, "layer_norm_backward")
    record_native_path()
    return gx, gg, gb


def _softmax_forward(x, axis, any_size, log):
    if not (x.ndim >= 1 and axis == x.ndim - 1 and _is_f32(x) and
            (any_size or x.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(x)
    xc = np.ascontiguousarray(x)
    y = np.empty(x.shape, dtype=_F32)
    fn = _native.lib.tt_log_softmax_forward if log else _native.lib.tt_softmax_forward
    _native.check(fn(xc.ctypes.data, y.ctypes.data, None, rows, cols),
           "log_softmax" if log else "softmax")
    record_native_path()
    return y


def _softmax_backward(y, grad, axis, any_size, log):
    if not (y.ndim >= 1 and axis == y.ndim - 1 and _is_f32(y, grad) and grad.shape == y.shape
            and (any_size or y.size >= NATIVE_MIN_ELEMENTS)):
        return NotImplemented
    rows, cols = _rows_cols(y)
    yc, gc = np.ascontiguousarray(y), np.ascontiguousarray(grad)
    gx = np.empty(y.shape, dtype=_F32)
    fn = _native.lib.tt_log_softmax_backward if log else _native.lib.tt_softmax_backward
    _native.check(fn(yc.ctypes.data, gc.ctypes.data, gx.ctypes.data, rows, cols),
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


_I64 = np.dtype(np.int64)


def _ce_ok(logits, target, label_smoothing, any_size) -> bool:
    return (label_smoothing == 0 and logits.ndim == 2 and _is_f32(logits) and
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
    tc = np.ascontiguousarray(target, dtype=_I64)
    loss = np.empty((m,), dtype=_F32)
    lse = np.empty((m,), dtype=_F32)
    _native.check(_native.lib.tt_cross_entropy_forward(xc.ctypes.data, tc.ctypes.data, loss.ctypes.data,
                                                lse.ctypes.data, m, c, int(ignore_index)),
           "cross_entropy")
    record_native_path()
    return loss, lse


def cross_entropy_backward(logits, target, lse, grad_rows, ignore_index, label_smoothing,
                           any_size):
    """dL/dlogits of sum(grad_rows * loss) through tt_cross_entropy_backward, from the
    forward's ``lse`` (float32 (M,)) and ``grad_rows`` (float32 (M,)); ``logits``,
    ``target``, ``ignore_index``, ``label_smoothing`` and ``any_size`` as in
    ``cross_entropy`` (declined alike)."""
    if not (_ce_ok(logits, target, label_smoothing, any_size) and _is_f32(lse, grad_rows)):
        return NotImplemented
    m, c = logits.shape
    xc = np.ascontiguousarray(logits)
    tc = np.ascontiguousarray(target, dtype=_I64)
    lc, gc = np.ascontiguousarray(lse), np.ascontiguousarray(grad_rows)
    grad = np.empty((m, c), dtype=_F32)
    _native.check(_native.lib.tt_cross_entropy_backward(xc.ctypes.data, tc.ctypes.data, lc.ctypes.data,
                                                 gc.ctypes.data, grad.ctypes.data, m, c,
                                                 int(ignore_index)),
           "cross_entropy_backward")
    record_native_path()
    return grad


# --------------------------------------------------------------------------------------
# Training-step kernels: Adam / AdamW over all parameters, embedding gather / scatter-add
# --------------------------------------------------------------------------------------

def _has(name: str) -> bool:
    return getattr(_native.lib, name, None) is not None


def _pointers(arrays):
    return (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])


def _f32_buffer(a, writeable: bool) -> bool:
    return (type(a) is np.ndarray and a.dtype == _F32 and a.flags.c_contiguous and
            (a.flags.writeable or not writeable))


def adam_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, betas, eps, weight_decay,
              decoupled):
    """Adam / AdamW over every tensor in one tt_adam_step call: ``params``, ``grads``,
    ``exp_avgs``, ``exp_avg_sqs`` and ``steps`` are aligned lists, ``lr``, ``betas``,
    ``eps``, ``weight_decay`` and ``decoupled`` as in the NumPy back end's ``adam_step``.
    Declines unless every array is float32, C-contiguous and each tensor's four arrays have
    one size (the parameter and moments writeable)."""
    if not _has("tt_adam_step") or not params:
        return NotImplemented
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if not (_f32_buffer(p, True) and _f32_buffer(g, False) and _f32_buffer(m, True) and
                _f32_buffer(v, True) and p.size == g.size == m.size == v.size):
            return NotImplemented
    count = len(params)
    numel = (ctypes.c_int64 * count)(*[p.size for p in params])
    step_counts = (ctypes.c_int64 * count)(*[int(t) for t in steps])
    _native.check(_native.lib.tt_adam_step(count, _pointers(params), _pointers(grads), _pointers(exp_avgs),
                                    _pointers(exp_avg_sqs), numel, step_counts, float(lr),
                                    float(betas[0]), float(betas[1]), float(eps),
                                    float(weight_decay), int(bool(decoupled))),
           "adam_step")
    record_native_path()
    return None


def embedding(weight, ids):
    """``weight[ids]`` (``weight`` a float32 C-contiguous (V, D) table, ``ids`` integers)
    through tt_embedding_forward; declines other dtypes and layouts."""
    if not (_has("tt_embedding_forward") and _f32_buffer(weight, False) and weight.ndim == 2):
        return NotImplemented
    flat = np.ascontiguousarray(ids, dtype=_I64).reshape(-1)
    v, d = weight.shape
    out = np.empty(ids.shape + (d,), dtype=_F32)
    _native.check(_native.lib.tt_embedding_forward(weight.ctypes.data, v, d, flat.ctypes.data, flat.size,
                                            out.ctypes.data), "embedding")
    record_native_path()
    return out


def embedding_backward(grad, ids, vocab):
    """The (``vocab``, D) scatter-add of float32 ``grad`` (ids.shape + (D,)) into the rows
    ``ids`` picks, through tt_embedding_backward (threads split the columns); declines
    other dtypes."""
    if not (_has("tt_embedding_backward") and type(grad) is np.ndarray and grad.dtype == _F32):
        return NotImplemented
    d = grad.shape[-1]
    g = np.ascontiguousarray(grad).reshape(-1, d)
    flat = np.ascontiguousarray(ids, dtype=_I64).reshape(-1)
    out = np.empty((vocab, d), dtype=_F32)
    _native.check(_native.lib.tt_embedding_backward(g.ctypes.data, flat.ctypes.data, flat.size, d,
                                             out.ctypes.data, vocab, 0), "embedding_backward")
    record_native_path()
    return out


# --------------------------------------------------------------------------------------
# Convolution's unfold and max pooling (NCHW float32)
# --------------------------------------------------------------------------------------

def _geometry(kh, kw, sh, sw, ph, pw):
    return [int(v) for v in (kh, kw, sh, sw, ph, pw)]


def im2col(x, kh, kw, sh, sw, ph, pw, oh, ow):
    """cols (C*KH*KW, N*OH*OW) of float32 NCHW ``x`` through tt_im2col (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``);
    declines other dtypes."""
    if not (_has("tt_im2col") and _is_f32(x)):
        return NotImplemented
    xc = np.ascontiguousarray(x)
    n, c, h, w = xc.shape
    cols = np.empty((c * kh * kw, n * oh * ow), dtype=_F32)
    _native.check(_native.lib.tt_im2col(xc.ctypes.data, n, c, h, w, *_geometry(kh, kw, sh, sw, ph, pw),
                                 cols.ctypes.data), "im2col")
    record_native_path()
    return cols


def col2im(cols, x_shape, kh, kw, sh, sw, ph, pw, oh, ow):
    """The adjoint of ``im2col`` through tt_col2im: float32 ``cols`` summed into an
    ``x_shape`` array (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``); declines other dtypes."""
    if not (_has("tt_col2im") and _is_f32(cols)):
        return NotImplemented
    cc = np.ascontiguousarray(cols)
    n, c, h, w = x_shape
    gx = np.empty(x_shape, dtype=_F32)
    _native.check(_native.lib.tt_col2im(cc.ctypes.data, n, c, h, w, *_geometry(kh, kw, sh, sw, ph, pw),
                                 gx.ctypes.data), "col2im")
    record_native_path()
    return gx


def max_pool2d(x, kh, kw, sh, sw, ph, pw, oh, ow):
    """(y, argmax) through tt_maxpool2d_forward for float32 ``x`` whose H x W planes are
    contiguous in any plane order (a convolution's (C, N, H, W) output seen as NCHW is read
    in place) (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``). Declines other dtypes."""
    if not (_has("tt_maxpool2d_forward") and _is_f32(x)):
        return NotImplemented
    n, c, h, w = x.shape
    st = x.strides
    if not (x.flags.aligned and st[3] == 4 and st[2] == 4 * w and st[0] >= 0 and st[1] >= 0
            and st[0] % 4 == 0 and st[1] % 4 == 0):
        x = np.ascontiguousarray(x)
        st = x.strides
    y = np.empty((n, c, oh, ow), dtype=_F32)
    argmax = np.empty((n, c, oh, ow), dtype=_I64)
    _native.check(_native.lib.tt_maxpool2d_forward(x.ctypes.data, n, c, h, w, st[0] // 4, st[1] // 4,
                                            *_geometry(kh, kw, sh, sw, ph, pw), y.ctypes.data,
                                            argmax.ctypes.data), "max_pool2d")
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
    if not (_has("tt_maxpool2d_backward") and _is_f32(grad)):
        return NotImplemented
    gc = np.ascontiguousarray(grad)
    ac = np.ascontiguousarray(argmax, dtype=_I64)
    n, c, h, w = x_shape
    strides = _plane_strides(x_shape, x_strides)
    if strides is None or n * c * h * w == 0:
        gx = np.empty(x_shape, dtype=_F32)
        strides = gx.strides
        base = gx
    else:
        base = np.empty(n * c * h * w, dtype=_F32)
        gx = np.lib.stride_tricks.as_strided(base, shape=x_shape, strides=strides)
    _native.check(_native.lib.tt_maxpool2d_backward(gc.ctypes.data, ac.ctypes.data, n, c, h, w,
                                             gc.shape[2], gc.shape[3], base.ctypes.data,
                                             strides[0] // 4, strides[1] // 4),
           "max_pool2d_backward")
    record_native_path()
    return gx


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
    if not (_has("tt_relu_forward") and _is_f32(x) and x.flags.aligned and _dense(x)):
        return NotImplemented
    y = np.empty_like(x)
    _native.check(_native.lib.tt_relu_forward(x.ctypes.data, y.ctypes.data, x.size), "relu")
    record_native_path()
    return y


def relu_backward(y, grad):
    """dL/dx of ``relu`` from its float32 output ``y`` through tt_relu_backward (``grad``
    laid out like ``y``, or made so); declines other dtypes."""
    if not (_has("tt_relu_backward") and _is_f32(y, grad) and y.flags.aligned and _dense(y)):
        return NotImplemented
    if grad.strides != y.strides:
        g = np.empty_like(y)
        np.copyto(g, grad)
        grad = g
    gx = np.empty_like(y)
    _native.check(_native.lib.tt_relu_backward(y.ctypes.data, grad.ctypes.data, gx.ctypes.data,
                                        y.size), "relu_backward")
    record_native_path()
    return gx


# --------------------------------------------------------------------------------------
# Registration: one entry per instruction set, the active one usable
# --------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------
# INT8 inference: tt_qgemm_* (runtime/cpu/qgemm.cpp)
# --------------------------------------------------------------------------------------

_ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2}
_QGEMM_MAX_K = 65793  # TT_QGEMM_MAX_K: the largest K whose int32 sums are exact


def _qgemm_ready(k: int) -> bool:
    return _native.has_qgemm() and k <= _QGEMM_MAX_K


def _pack_for(lib, weight_q, packs):
    """(address, bytes) of the pack of ``weight_q`` for the runtime's active INT8 kernel,
    made once and kept in the layer's ``packs`` dict (kernel -> (buffer, offset, bytes)); a
    buffer that lost its 64-byte alignment (a copy of the layer) is packed again."""
    kernel = lib.tt_qgemm_kernel_active()
    entry = packs.get(kernel)
    if entry is not None:
        buf, offset, nbytes = entry
        address = buf.ctypes.data + offset
        if address % 64 == 0:
            return address, nbytes
    k, n = weight_q.shape
    size = ctypes.c_int64()
    _native.check(lib.tt_qgemm_pack_size(k, n, kernel, ctypes.byref(size)), "quantized_pack")
    buf = np.empty(size.value + 64, dtype=np.uint8)
    offset = (-buf.ctypes.data) % 64
    w = np.ascontiguousarray(weight_q, dtype=np.int8)
    _native.check(lib.tt_qgemm_pack(kernel, k, n, w.ctypes.data, max(n, 1), buf.ctypes.data + offset,
                             size.value), "quantized_pack")
    packs[kernel] = (buf, offset, size.value)
    return buf.ctypes.data + offset, size.value


def quantized_pack(weight_q, packs):
    """Pack the (K, N) int8 weight ``weight_q`` for the active INT8 kernel into the dict
    ``packs`` (done once, when a QuantizedLinear is built); declines where the runtime has no
    tt_qgemm_*."""
    if not _qgemm_ready(weight_q.shape[0]):
        return NotImplemented
    _pack_for(_native.lib, weight_q, packs)
    return None


def quantize_rows(x):
    """tt_qgemm_quantize_rows on ``x``, a float32 (M, K) array: (q uint8, scale, zero_point)."""
    if not _native.has_qgemm() or x.dtype != _F32:
        return NotImplemented
    x = np.ascontiguousarray(x)
    m, k = x.shape
    q = np.empty((m, k), np.uint8)
    scale = np.empty(m, np.float32)
    zp = np.empty(m, np.int32)
    _native.check(_native.lib.tt_qgemm_quantize_rows(m, k, x.ctypes.data, max(k, 1), q.ctypes.data,
                                              max(k, 1), scale.ctypes.data, zp.ctypes.data),
           "quantize_rows")
    record_native_path()
    return q, scale, zp


def quantized_matmul(q, zero_point, weight_q, packs):
    """Exact int32 ``(q - zero_point[:, None]) @ weight_q`` through tt_qgemm_u8s8s32 (q uint8
    (M, K)); the zero point is folded in with the weight's column sums, in int32 (exact:
    the result is bounded by K * 255 * 128 < 2^31). ``packs`` caches the packed weight."""
    k, n = weight_q.shape
    if not _qgemm_ready(k) or q.dtype != np.uint8:
        return NotImplemented
    lib = _native.lib
    q = np.ascontiguousarray(q)
    m = q.shape[0]
    address, nbytes = _pack_for(lib, weight_q, packs)
    out = np.empty((m, n), np.int32)
    _native.check(lib.tt_qgemm_u8s8s32(m, n, k, q.ctypes.data, max(k, 1), address, nbytes,
                                out.ctypes.data, max(n, 1)), "quantized_matmul")
    record_native_path()
    colsum = weight_q.sum(axis=0, dtype=np.int32)
    zp = np.asarray(zero_point, np.int32)[:, None]
    with np.errstate(over="ignore"):
        return out - zp * colsum[None, :]


def quantized_linear(x, weight_q, weight_scale, bias, activation, packs):
    """act(float(sum (q - zx) w) * (sx * ws) + bias) in one tt_qgemm_f32 call (quantization,
    exact int32 product and epilogue in the runtime) for float32 x (M, K): w is ``weight_q``,
    ws ``weight_scale``, act the ``activation`` (None, "relu", "gelu"); ``packs`` caches the
    packed weight."""
    k, n = weight_q.shape
    if not _qgemm_ready(k) or x.dtype != _F32:
        return NotImplemented
    lib = _native.lib
    x = np.ascontiguousarray(x)
    m = x.shape[0]
    address, nbytes = _pack_for(lib, weight_q, packs)
    out = np.empty((m, n), np.float32)
    _native.check(lib.tt_qgemm_f32(m, n, k, x.ctypes.data, max(k, 1), address, nbytes,
                            weight_scale.ctypes.data, None if bias is None else bias.ctypes.data,
                            _ACTIVATIONS[activation], out.ctypes.data, max(n, 1)),
           "quantized_linear")
    record_native_path()
    return out


def _probe(isa: str):
    if not _native.available():
        return False, _native.reason()
    info = _native.build_info()
    if isa not in info["isas_compiled"]:
        return False, f"this build has no {isa} kernels"
    if isa not in info["isa_detected"]:
        return False, f"this CPU does not support {isa}"
    if info["isa_active"] != isa:
        why = f"; {info['isa_env_error']}" if info.get("isa_env_error") else ""
        return False, f"supported, but the active ISA is {info['isa_active']} " \
                      f"(tinytorch.native.set_isa({isa!r}) switches){why}"
    return True, f"active: libtinytorch {info['version']} kernels for {isa}, " \
                 f"{info['threads']} thread(s)"


OPS = {"gemm": gemm, "matmul": matmul, "bias_gelu": bias_gelu,
       "bias_gelu_backward": bias_gelu_backward, "attention": attention,
       "attention_backward": attention_backward, "layer_norm": layer_norm,
       "layer_norm_backward": layer_norm_backward, "softmax": softmax,
       "log_softmax": log_softmax, "softmax_backward": softmax_backward,
       "log_softmax_backward": log_softmax_backward, "cross_entropy": cross_entropy,
       "cross_entropy_backward": cross_entropy_backward, "adam_step": adam_step,
       "embedding": embedding, "embedding_backward": embedding_backward, "im2col": im2col,
       "col2im": col2im, "max_pool2d": max_pool2d, "max_pool2d_backward": max_pool2d_backward,
       "relu": relu, "relu_backward": relu_backward, "quantize_rows": quantize_rows,
       "quantized_pack": quantized_pack, "quantized_matmul": quantized_matmul,
       "quantized_linear": quantized_linear}

for _isa in ("avx512", "avx2", "neon", "scalar"):
    register(f"cpu:{_isa}", probe=lambda isa=_isa: _probe(isa), ops=OPS, priority=100,
             description=f"the runtime's {_isa} kernels")
