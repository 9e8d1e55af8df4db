"""Acceleration: the one door to the kernels.

Every heavy array operation of the core, the layers and every shipped extension goes
through the functions below; nothing else calls the runtime's kernels. The binding
itself (every C prototype, declared once) is ``tinytorch._native``; this module decides
which path runs, calls it, and says what ran.

Contract (arrays in, arrays out; no autograd here):
  gemm(a, b, trans_a=False, trans_b=False, alpha=1, beta=0, out=None)
                                   -> alpha op(a) @ op(b) + beta out      2-D arrays
  matmul(a, b)                     -> a @ b with NumPy batching and 1-D rules
  matmul_backward(a, b, grad, need=(True, True))
                                   -> (grad_a, grad_b) of a @ b (None where not needed),
                                      batch axes as broadcast (the autograd engine sums)
  bias_gelu(x, bias)               -> gelu_tanh(x + bias)   x: [..., D], bias (D,) or None
  bias_gelu_backward(x, bias, grad)-> (grad_x, grad_bias or None)
  last_path()                      -> what the calling thread's last call ran
Each takes ``any_size=True`` to send even tiny float32 problems to the native kernel
(the SIMD extension does: it exists to show the kernels, not to pick the fastest path).

The switch and the report (one of each for the whole package):
  use_native(False) / set_native_enabled(False) / TINYTORCH_DISABLE_NATIVE=1 turn every
  native path off, the extensions' included; native_library() gives an extension that
  makes its own raw C call the loaded library (None when off or missing), and
  record_native_path() / record_path() file its report in last_path().

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
import threading
from contextlib import contextmanager

import numpy as np

from .. import _native

__all__ = ["gemm", "matmul", "matmul_backward", "bias_gelu", "bias_gelu_backward",
           "last_path", "record_path", "record_native_path", "use_native",
           "set_native_enabled", "native_enabled", "native_available", "native_library",
           "check_status", "NATIVE_MIN_GEMM_WORK", "NATIVE_MIN_ELEMENTS",
           "NATIVE_MIN_HALF_GEMM_WORK"]

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
_native_enabled = os.environ.get("TINYTORCH_DISABLE_NATIVE", "").strip().lower() not in (
    "1", "true", "yes", "on")

# --------------------------------------------------------------------------------------
# The switch and the report
# --------------------------------------------------------------------------------------

_report_state = threading.local()


def last_path() -> str:
    """What the calling thread's most recent kernel call ran: "numpy", or "native:" + the
    runtime's own kernel-path report ("native:sgemm:avx2", ...); "none" before any call."""
    return getattr(_report_state, "path", "none")


def record_path(name: str) -> None:
    """File ``name`` as this thread's last path (extensions with a path of their own)."""
    _report_state.path = name


_path_names: dict = {}


def record_native_path() -> None:
    """File the runtime's report of the kernel that just ran on this thread."""
    raw = _native.lib.tt_last_kernel_path()
    name = _path_names.get(raw)
    if name is None:
        name = _path_names[raw] = "native:" + raw.decode()
    _report_state.path = name


def set_native_enabled(enabled: bool) -> None:
    """Allow (True) or forbid (False) every native kernel, process-wide."""
    global _native_enabled
    _native_enabled = bool(enabled)


def native_enabled() -> bool:
    """True unless the native path was turned off (it may still be unavailable)."""
    return _native_enabled


@contextmanager
def use_native(enabled: bool = True):
    """``with use_native(False):`` runs the NumPy path everywhere (parity tests, benchmarks)."""
    previous = _native_enabled
    set_native_enabled(enabled)
    try:
        yield
    finally:
        set_native_enabled(previous)


def native_library():
    """The loaded libtinytorch (a ctypes.CDLL declared by tinytorch._native) when native
    kernels may run now, else None: turned off, or the library is missing."""
    return _native.lib if _native_enabled else None


def native_available() -> bool:
    """True when calls can take the native path now (library loaded and enabled)."""
    return _native_enabled and _native.lib is not None


def check_status(status: int, what: str) -> None:
    """Raise the exception matching a non-OK tt_status, with the runtime's message."""
    if status != 0:
        _native.check(status, what)


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
        check_status(status, "gemm")
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
    check_status(status, "gemm")
    record_native_path()
    if target is not out:
        np.copyto(out, target)
    return out


def _gemm_shape(a, b, trans_a, trans_b):
    """(m, k, n) of op(a) @ op(b), or ValueError naming the mismatch."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm: a and b must be 2-D, got shapes {a.shape} and {b.shape}")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    k2, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != k2:
        raise ValueError(f"gemm: inner sizes differ: op(a) is {m} x {k}, op(b) is {k2} x {n}")
    return m, k, n


def gemm(a: np.ndarray, b: np.ndarray, trans_a: bool = False, trans_b: bool = False,
         alpha: float = 1.0, beta: float = 0.0, out: np.ndarray | None = None,
         any_size: bool = False) -> np.ndarray:
    """alpha op(a) @ op(b) + beta out for 2-D arrays, op = transpose when asked (no copy
    is made). beta != 0 needs out, which is both read and written."""
    m, k, n = _gemm_shape(a, b, trans_a, trans_b)
    if beta != 0 and out is None:
        raise ValueError("gemm: beta != 0 accumulates into out, so out must be given")
    lib = native_library()
    if lib is not None and _is_f32(a, b) and (out is None or out.dtype == _F32) and \
            (any_size or m * n * k >= NATIVE_MIN_GEMM_WORK):
        return _gemm_native(lib, a, b, trans_a, trans_b, float(alpha), float(beta), out)
    if lib is not None and _is_f16(a, b) and alpha == 1 and beta == 0 and \
            (out is None or out.dtype == _F16) and \
            (any_size or m * n * k >= NATIVE_MIN_HALF_GEMM_WORK):
        result = _hgemm_native(lib, a, b, trans_a, trans_b)
        if out is not None:
            np.copyto(out, result)
            return out
        return result
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
    check_status(status, "matmul")
    record_native_path()
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


def matmul(a: np.ndarray, b: np.ndarray, any_size: bool = False) -> np.ndarray:
    """a @ b with NumPy's batching and 1-D promotion rules."""
    lib = native_library()
    if lib is not None and _is_f32(a, b):
        work = _matmul_work(a, b)
        if work is not None and (any_size or work >= NATIVE_MIN_GEMM_WORK):
            return _matmul_native(lib, a, b)
    elif lib is not None and _is_f16(a, b):
        work = _matmul_work(a, b)
        if work is not None and (any_size or work >= NATIVE_MIN_HALF_GEMM_WORK):
            return _matmul_half(lib, a, b)
    record_path("numpy")
    return np.matmul(a, b)


def matmul_backward(a: np.ndarray, b: np.ndarray, grad: np.ndarray, need=(True, True),
                    any_size: bool = False):
    """Gradients of ``a @ b`` (NumPy rules) given the gradient of the result:
    (grad @ b^T, a^T @ grad), None where ``need`` says False. Transposes reach the GEMM
    as flags, never as copies. A 1-D operand's gradient has its shape; batch axes are
    left as broadcast (the autograd engine sums them to each operand's shape)."""
    a2, b2 = _promote(a, b)
    g = grad
    if b.ndim == 1:
        g = np.expand_dims(g, -1)
    if a.ndim == 1:
        g = np.expand_dims(g, -2)
    ga = gb = None
    if a2.ndim == 2 and b2.ndim == 2:
        if need[0]:
            ga = gemm(g, b2, trans_b=True, any_size=any_size)
        if need[1]:
            gb = gemm(a2, g, trans_a=True, any_size=any_size)
    elif b2.ndim == 2:
        # batched x @ weight: fold the batch into rows, one GEMM each way
        k, n = b2.shape
        rows = int(np.prod(g.shape[:-1], dtype=np.int64))  # not reshape(-1, n): ambiguous for n == 0
        g2 = g.reshape(rows, n)
        if need[0]:
            ga = gemm(g2, b2, trans_b=True, any_size=any_size).reshape(g.shape[:-1] + (k,))
        if need[1]:
            a_rows = np.broadcast_to(a2, g.shape[:-1] + (k,)).reshape(rows, k)
            gb = gemm(a_rows, g2, trans_a=True, any_size=any_size)
    else:
        if need[0]:
            ga = matmul(g, np.swapaxes(b2, -1, -2), any_size=any_size)
        if need[1]:
            gb = matmul(np.swapaxes(a2, -1, -2), g, any_size=any_size)
    # a 1-D operand was promoted to a matrix: drop that axis and sum the batch axes
    # (sum, not reshape(-1, k): that is ambiguous when k == 0)
    if ga is not None and a.ndim == 1:
        ga = ga.sum(axis=tuple(range(ga.ndim - 1)))
    if gb is not None and b.ndim == 1:
        gb = gb.sum(axis=tuple(range(gb.ndim - 2)) + (gb.ndim - 1,))
    return ga, gb


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
    check_status(status, "gemm (float16)")
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

def stable_sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)) for any z without overflow: exp only sees non-positive values.
    Integer and boolean input is promoted to float32 (a sigmoid is never an integer);
    floating input keeps its dtype."""
    z = np.asarray(z)
    if z.dtype.kind not in "fc":
        z = z.astype(np.float32)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(z.dtype, copy=False)


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
    check_status(status, "bias_gelu")
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
    check_status(status, "bias_gelu_backward")
    record_native_path()
    return gx, gb


def _float(x: np.ndarray) -> np.ndarray:
    """GELU of an integer or boolean array is a float32 array, never a truncated integer."""
    return x if x.dtype.kind in "fc" else x.astype(np.float32)


def bias_gelu(x: np.ndarray, bias: np.ndarray | None, any_size: bool = False) -> np.ndarray:
    """gelu_tanh(x + bias), bias broadcast over the last axis (None means no bias)."""
    x = _float(np.asarray(x))
    lib = native_library()
    if lib is not None and (any_size or x.size >= NATIVE_MIN_ELEMENTS) and _gelu_native_ok(x, bias):
        return _bias_gelu_native(lib, x, bias)
    u = x if bias is None else x + bias
    record_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        z = 2.0 * _SQRT_2_OVER_PI * (u + _GELU_C * u * u * u)
        y = u * stable_sigmoid(z)
        neg_inf = np.isneginf(u)
        if neg_inf.any():
            y = np.where(neg_inf, -0.0, y)  # the limit, not -inf * 0 = NaN
        return y.astype(u.dtype, copy=False)


def bias_gelu_backward(x: np.ndarray, bias: np.ndarray | None, grad: np.ndarray,
                       any_size: bool = False):
    """Gradients of gelu_tanh(x + bias): (grad * gelu'(u), sum of that over leading axes)."""
    x = _float(np.asarray(x))
    lib = native_library()
    if lib is not None and (any_size or x.size >= NATIVE_MIN_ELEMENTS) and \
            _gelu_native_ok(x, bias) and _is_f32(grad) and grad.shape == x.shape:
        return _bias_gelu_backward_native(lib, x, bias, grad)
    u = x if bias is None else x + bias
    record_path("numpy")
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
    gx = (grad * d).astype(u.dtype, copy=False)
    gb = None if bias is None else gx.reshape(-1, gx.shape[-1]).sum(axis=0).astype(bias.dtype, copy=False)
    return gx, gb
