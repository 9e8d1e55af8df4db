"""Acceleration: the one dispatch point for the framework's heavy kernels.

Every matmul (forward and backward) and every bias+GELU in the core goes through the
functions below, so the native runtime serves them without touching tensor.py,
layers.py or activations.py.

Contract (arrays in, arrays out; no autograd here):
  gemm(a, b, trans_a=False, trans_b=False, out=None) -> op(a) @ op(b)   2-D float arrays
  matmul(a, b)                                        -> a @ b with NumPy batching rules
  bias_gelu(x, bias)                                  -> gelu_tanh(x + bias)   x: [..., D]
  bias_gelu_backward(x, bias, grad)                   -> (grad_x, grad_bias or None)
  last_path()                                         -> name of the path the last call took

Routing rule (which path runs):
  * native -- libtinytorch is loaded (``tinytorch._native.available()``), the native path
    is enabled, every operand is float32, and the work is large enough: at least
    ``NATIVE_MIN_GEMM_WORK`` multiply-adds for a GEMM and ``NATIVE_MIN_ELEMENTS`` elements
    for bias+GELU. Below those sizes the fixed cost of a ctypes call (~2-4 us) exceeds
    what the kernel saves, so NumPy runs (measured with benchmarks/bench_gemm.py and
    bench_gelu.py on the development machine; see the constants below).
  * native float16 -- float16 GEMMs and matmuls (both operands float16, at least
    ``NATIVE_MIN_HALF_GEMM_WORK`` multiply-adds) go to tt_hgemm: float16 storage, float32
    products and sums, result rounded to float16. NumPy has no BLAS for float16, so this
    is what makes float16 training usable. last_path() reads "native:hgemm:...".
  * numpy -- everything else: float64 (NumPy keeps its precision), integer inputs, mixed
    dtypes, tiny problems, no library, or the native path disabled.
  last_path() says what ran: "numpy", or "native:" + the runtime's own kernel-path
  report, e.g. "native:sgemm:avx2", "native:sgemm_strided_batched:avx2",
  "native:bias_gelu_forward:avx2". The runtime sets that report inside the kernel, so
  it proves which machine code executed.

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

Forcing NumPy: ``with use_native(False): ...``, ``set_native_enabled(False)``, or the
environment variable ``TINYTORCH_DISABLE_NATIVE=1`` (read at import).

GELU is the tanh approximation, gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))),
evaluated as u * sigmoid(2 sqrt(2/pi) (u + 0.044715 u^3)) so it never overflows. Both
paths use the limits at infinity: gelu(+inf) = inf, gelu(-inf) = -0, gelu'(+inf) = 1,
gelu'(-inf) = 0; NaN propagates.
"""
from __future__ import annotations

import ctypes
import os
from contextlib import contextmanager

import numpy as np

__all__ = ["gemm", "matmul", "bias_gelu", "bias_gelu_backward", "last_path", "use_native",
           "set_native_enabled", "native_enabled", "native_available",
           "NATIVE_MIN_GEMM_WORK", "NATIVE_MIN_ELEMENTS", "NATIVE_MIN_HALF_GEMM_WORK"]

_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_C = 0.044715

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
_last_path = "none"
_native_enabled = os.environ.get("TINYTORCH_DISABLE_NATIVE", "").strip().lower() not in (
    "1", "true", "yes", "on")


def last_path() -> str:
    """Which implementation the most recent gemm/matmul/bias_gelu call used."""
    return _last_path


def _set_path(name: str) -> None:
    global _last_path
    _last_path = name


def set_native_enabled(enabled: bool) -> None:
    """Allow (True) or forbid (False) the native kernels process-wide."""
    global _native_enabled
    _native_enabled = bool(enabled)


def native_enabled() -> bool:
    """True unless the native path was turned off (it may still be unavailable)."""
    return _native_enabled


@contextmanager
def use_native(enabled: bool = True):
    """``with use_native(False):`` runs the NumPy path (parity tests, benchmarks)."""
    previous = _native_enabled
    set_native_enabled(enabled)
    try:
        yield
    finally:
        set_native_enabled(previous)


# --------------------------------------------------------------------------------------
# The native entry points, bound with integer-address arguments
# --------------------------------------------------------------------------------------

class _Kernels:
    """ctypes prototypes of the kernels taking raw addresses (c_void_p accepts a Python
    int, which is several times cheaper than building POINTER(c_float) objects per call).
    They are bound to the same symbols that tinytorch._native declares."""

    def __init__(self, lib):
        i64, f32, vp, c_int = ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int

        def bind(name, *argtypes):
            return ctypes.CFUNCTYPE(c_int, *argtypes)((name, lib))

        self.sgemm = bind("tt_sgemm", c_int, c_int, i64, i64, i64, f32, vp, i64, vp, i64, f32,
                          vp, i64)
        self.sgemm_batched = bind("tt_sgemm_strided_batched", c_int, c_int, i64, i64, i64, f32,
                                  vp, i64, i64, vp, i64, i64, f32, vp, i64, i64, i64)
        self.gelu_forward = bind("tt_bias_gelu_forward", vp, vp, vp, i64, i64)
        self.gelu_backward = bind("tt_bias_gelu_backward", vp, vp, vp, vp, vp, i64, i64)
        self.hgemm = bind("tt_hgemm", c_int, c_int, i64, i64, i64, f32, vp, i64, vp, i64, f32,
                          vp, i64)
        self.kernel_path = lib.tt_last_kernel_path


_kernels = None
_kernels_tried = False


def _runtime():
    """(bound kernels, the _native module) when the native path may run, else None.
    Resolved lazily so importing this module never loads or requires the library."""
    global _kernels, _kernels_tried
    if not _native_enabled:
        return None
    if not _kernels_tried:
        _kernels_tried = True
        try:
            from .. import _native
            if _native.available():
                _kernels = (_Kernels(_native.lib), _native)
        except Exception:  # noqa: BLE001 - any failure to bind means "NumPy only"
            _kernels = None
    return _kernels


def native_available() -> bool:
    """True when calls can take the native path now (library loaded and enabled)."""
    return _runtime() is not None


_path_names: dict = {}


def _report(kernels) -> None:
    global _last_path
    raw = kernels.kernel_path()
    name = _path_names.get(raw)
    if name is None:
        name = _path_names[raw] = "native:" + raw.decode()
    _last_path = name


def _check(native, status: int, what: str) -> None:
    if status != 0:
        native.check(status, what)


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
# GEMM
# --------------------------------------------------------------------------------------

def _gemm_native(kernels, native, a, b, trans_a, trans_b, out):
    """op(a) @ op(b) through tt_sgemm; a, b are 2-D float32 (storage, before op)."""
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    a_arr, lda, a_flip = _matrix_layout(a)
    b_arr, ldb, b_flip = _matrix_layout(b)
    if out is None:  # the common case: a fresh row-major result
        target = np.empty((m, n), dtype=_F32)
        status = kernels.sgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, 1.0,
                               _address(a_arr), lda, _address(b_arr), ldb, 0.0,
                               _address(target), max(n, 1))
        _check(native, status, "gemm")
        _report(kernels)
        return target
    if out.dtype == _F32 and out.shape == (m, n) and out.flags.writeable \
            and out.flags.aligned and (out.strides[1] == 4 or n <= 1) and \
            (m <= 1 or (out.strides[0] % 4 == 0 and out.strides[0] >= 4 * n)) and \
            not np.may_share_memory(out, a) and not np.may_share_memory(out, b):
        target = out
        ldc = max(n, 1) if m <= 1 else out.strides[0] // 4
    else:
        target = np.empty((m, n), dtype=_F32)
        ldc = max(n, 1)
    status = kernels.sgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, 1.0,
                           a_arr.ctypes.data, lda, b_arr.ctypes.data, ldb, 0.0,
                           target.ctypes.data, ldc)
    _check(native, status, "gemm")
    _report(kernels)
    if out is not None and target is not out:
        np.copyto(out, target)
        return out
    return target


def gemm(a: np.ndarray, b: np.ndarray, trans_a: bool = False, trans_b: bool = False,
         out: np.ndarray | None = None) -> np.ndarray:
    """op(a) @ op(b) for 2-D arrays, op = transpose when asked (no copy is made)."""
    rt = _runtime()
    if rt is not None and a.ndim == 2 and b.ndim == 2 and _is_f32(a, b):
        m = a.shape[1] if trans_a else a.shape[0]
        k = a.shape[0] if trans_a else a.shape[1]
        k2 = b.shape[1] if trans_b else b.shape[0]
        n = b.shape[0] if trans_b else b.shape[1]
        if k == k2 and m * n * k >= NATIVE_MIN_GEMM_WORK:
            return _gemm_native(rt[0], rt[1], a, b, trans_a, trans_b, out)
    elif rt is not None and a.ndim == 2 and b.ndim == 2 and _is_f16(a, b) and \
            (out is None or out.dtype == _F16):
        m = a.shape[1] if trans_a else a.shape[0]
        k = a.shape[0] if trans_a else a.shape[1]
        k2 = b.shape[1] if trans_b else b.shape[0]
        n = b.shape[0] if trans_b else b.shape[1]
        if k == k2 and m * n * k >= NATIVE_MIN_HALF_GEMM_WORK:
            result = _hgemm_native(rt[0], rt[1], a, b, trans_a, trans_b)
            if out is not None:
                np.copyto(out, result)
                return out
            return result
    a2 = a.T if trans_a else a
    b2 = b.T if trans_b else b
    _set_path("numpy")
    if out is not None:
        return np.matmul(a2, b2, out=out)
    return a2 @ b2


def _batched_native(kernels, native, a, b):
    """a @ b for float32 a: (..., M, K), b: (..., K, N), both at least 3-D after
    promotion, through one strided-batched call; None when the layouts do not allow it."""
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
    status = kernels.sgemm_batched(int(a_flip), int(b_flip), m, n, k, 1.0,
                                   a3.ctypes.data, lda, sa, b3.ctypes.data, ldb, sb, 0.0,
                                   out.ctypes.data, max(n, 1), m * n, count)
    _check(native, status, "matmul")
    _report(kernels)
    return out


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


def _matmul_native(kernels, native, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b (NumPy rules) for float32 arrays whose shapes match (see _matmul_work)."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    k, n = b2.shape[-2:]
    if a2.ndim == 2 and b2.ndim == 2:
        out = _gemm_native(kernels, native, a2, b2, False, False, None)
    elif b2.ndim == 2 and a2.flags.c_contiguous:
        # (..., M, K) @ (K, N): fold the batch into the rows, one GEMM.
        out = _gemm_native(kernels, native, a2.reshape(-1, k), b2, False, False,
                           None).reshape(a2.shape[:-1] + (n,))
    else:
        out = _batched_native(kernels, native, a2, b2)
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with NumPy's batching and 1-D promotion rules."""
    rt = _runtime()
    if rt is not None and _is_f32(a, b):
        work = _matmul_work(a, b)
        if work is not None and work >= NATIVE_MIN_GEMM_WORK:
            return _matmul_native(rt[0], rt[1], a, b)
    elif rt is not None and _is_f16(a, b):
        work = _matmul_work(a, b)
        if work is not None and work >= NATIVE_MIN_HALF_GEMM_WORK:
            return _matmul_half(rt[0], rt[1], a, b)
    _set_path("numpy")
    return np.matmul(a, b)


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


def _hgemm_native(kernels, native, a, b, trans_a, trans_b):
    """op(a) @ op(b) through tt_hgemm; a, b are 2-D float16 (storage, before op)."""
    m = a.shape[1] if trans_a else a.shape[0]
    k = a.shape[0] if trans_a else a.shape[1]
    n = b.shape[0] if trans_b else b.shape[1]
    a_arr, lda, a_flip = _half_layout(a)
    b_arr, ldb, b_flip = _half_layout(b)
    out = np.empty((m, n), dtype=_F16)
    status = kernels.hgemm(int(trans_a != a_flip), int(trans_b != b_flip), m, n, k, 1.0,
                           a_arr.ctypes.data, lda, b_arr.ctypes.data, ldb, 0.0,
                           out.ctypes.data, max(n, 1))
    _check(native, status, "gemm (float16)")
    _report(kernels)
    return out


def _matmul_half(kernels, native, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b (NumPy rules) for float16 arrays with matching shapes: batches become one
    GEMM when b is a matrix, else one tt_hgemm call per matrix of the broadcast batch."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    m, k = a2.shape[-2:]
    n = b2.shape[-1]
    if b2.ndim == 2:
        out = _hgemm_native(kernels, native, a2.reshape(-1, k), b2, False, False)
        out = out.reshape(a2.shape[:-1] + (n,))
    else:
        batch = np.broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        a3 = np.broadcast_to(a2, batch + (m, k)).reshape((-1, m, k))
        b3 = np.broadcast_to(b2, batch + (k, n)).reshape((-1, k, n))
        out = np.empty((a3.shape[0], m, n), dtype=_F16)
        for i in range(a3.shape[0]):
            out[i] = _hgemm_native(kernels, native, a3[i], b3[i], False, False)
        out = out.reshape(batch + (m, n))
    if a.ndim == 1:
        out = out[..., 0, :]
    if b.ndim == 1:
        out = out[..., 0]
    return out


# --------------------------------------------------------------------------------------
# Fused bias + GELU
# --------------------------------------------------------------------------------------

def _sigmoid(z: np.ndarray) -> np.ndarray:
    # Stable for any z: exp only ever sees non-positive arguments.
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _gelu_native_ok(x, bias) -> bool:
    return (x.ndim >= 1 and _is_f32(x) and
            (bias is None or (_is_f32(bias) and bias.shape == x.shape[-1:])))


def _bias_gelu_native(kernels, native, x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    xc = np.ascontiguousarray(x)
    bc = None if bias is None else np.ascontiguousarray(bias)
    y = np.empty(x.shape, dtype=_F32)
    cols = x.shape[-1]
    status = kernels.gelu_forward(xc.ctypes.data, None if bc is None else bc.ctypes.data,
                                  y.ctypes.data, x.size // max(cols, 1), cols)
    _check(native, status, "bias_gelu")
    _report(kernels)
    return y


def _bias_gelu_backward_native(kernels, native, x, bias, grad):
    xc = np.ascontiguousarray(x)
    gc = np.ascontiguousarray(grad)
    bc = None if bias is None else np.ascontiguousarray(bias)
    gx = np.empty(x.shape, dtype=_F32)
    gb = None if bias is None else np.empty(bias.shape, dtype=_F32)
    cols = x.shape[-1]
    status = kernels.gelu_backward(xc.ctypes.data, None if bc is None else bc.ctypes.data,
                                   gc.ctypes.data, gx.ctypes.data,
                                   None if gb is None else gb.ctypes.data,
                                   x.size // max(cols, 1), cols)
    _check(native, status, "bias_gelu_backward")
    _report(kernels)
    return gx, gb


def bias_gelu(x: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """gelu_tanh(x + bias), bias broadcast over the last axis (None means no bias)."""
    rt = _runtime()
    if rt is not None and x.size >= NATIVE_MIN_ELEMENTS and _gelu_native_ok(x, bias):
        return _bias_gelu_native(rt[0], rt[1], x, bias)
    u = x if bias is None else x + bias
    _set_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        z = 2.0 * _SQRT_2_OVER_PI * (u + _GELU_C * u * u * u)
        y = u * _sigmoid(z)
        neg_inf = np.isneginf(u)
        if neg_inf.any():
            y = np.where(neg_inf, -0.0, y)  # the limit, not -inf * 0 = NaN
        return y.astype(x.dtype, copy=False)


def bias_gelu_backward(x: np.ndarray, bias: np.ndarray | None, grad: np.ndarray):
    """Gradients of gelu_tanh(x + bias): (grad * gelu'(u), sum of that over leading axes)."""
    rt = _runtime()
    if rt is not None and x.size >= NATIVE_MIN_ELEMENTS and _gelu_native_ok(x, bias) and \
            _is_f32(grad) and grad.shape == x.shape:
        return _bias_gelu_backward_native(rt[0], rt[1], x, bias, grad)
    u = x if bias is None else x + bias
    _set_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        # d/du [u sigmoid(z)] = s + u z' s (1 - s), with s (1 - s) = e / (1 + e)^2 and
        # e = exp(-|z|) in [0, 1]: no cancellation (1 + tanh would lose everything below
        # u ~ -4 in float32) and no overflow. Where e underflows to 0 the second term is
        # exactly 0 (it would be inf * 0 for huge |u|).
        z = 2.0 * _SQRT_2_OVER_PI * (u + _GELU_C * u * u * u)
        e = np.exp(-np.abs(z))
        s = np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        slope = u * (2.0 * _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_C * u * u)) * (e / ((1.0 + e) * (1.0 + e)))
        d = s + np.where(e == 0, 0.0, slope)
    gx = (grad * d).astype(x.dtype, copy=False)
    gb = None if bias is None else gx.reshape(-1, gx.shape[-1]).sum(axis=0).astype(bias.dtype, copy=False)
    return gx, gb
