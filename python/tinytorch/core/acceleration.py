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
  stable_sigmoid(z), promote_to_float(x)
                                   -> the activations' numerics: integer/bool in, float32 out
  attention(q, k, v, mask=None, causal=False, scale=None)
                                   -> (out, lse): softmax(scale q k^T [+ mask]) v and each
                                      query's log-sum-exp; q [..., L, d], k, v [..., S, d]
  attention_backward(q, k, v, out, lse, grad, mask=None, causal=False, scale=None,
                     need=(True, True, True))
                                   -> (grad_q, grad_k, grad_v), batch axes as broadcast
  layer_norm(x, gamma, beta, eps=1e-5)
                                   -> (y, mean, rstd): layer norm over the last axis of
                                      x [..., D], gamma / beta (D,) or None; mean, rstd [...]
  layer_norm_backward(x, gamma, mean, rstd, grad, need=(True, True, True))
                                   -> (grad_x, grad_gamma, grad_beta), None where not needed
  softmax(x, axis=-1), log_softmax(x, axis=-1)
                                   -> (log-)softmax along one axis (the native kernels serve
                                      the last axis of float32 arrays)
  softmax_backward(y, grad, axis=-1), log_softmax_backward(y, grad, axis=-1)
                                   -> dL/dx from the forward's output y and grad = dL/dy
  cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0)
                                   -> (loss, lse) per row of logits (M, C), target (M,)
  cross_entropy_backward(logits, target, lse, grad_rows, ignore_index=-100,
                         label_smoothing=0.0)
                                   -> dL/dlogits (M, C) of sum(grad_rows * loss)
  quantize_rows(x)                 -> (q uint8, scale, zero_point): dynamic per-row int8
                                      quantization of x (M, K) (tt_qgemm_quantize_rows)
  quantized_pack(weight_q, packs)  -> None: pack the (K, N) int8 weight once for the
                                      runtime's INT8 kernel into the dict ``packs``
  quantized_matmul(q, zero_point, weight_q, packs)
                                   -> int32 (q - zero_point) @ weight_q, exact
  quantized_linear(x, weight_q, weight_scale, bias, activation, packs)
                                   -> act((q - zx) @ w * sx * ws + bias), float32
    (the four INT8 calls take reduce_range=True for 7-bit activations in [0, 127],
    PyTorch's reduce_range: the vpmaddubsw kernel avx2_u7 on AVX2)
  quantized_path()                 -> (native?, why): where the INT8 calls go now
  last_path()                      -> what the calling thread's last call ran
Each takes ``any_size=True`` to send even tiny float32 problems to the native kernel
(the SIMD extension does: it exists to show the kernels, not to pick the fastest path).

The switch and the report (one of each for the whole package):
  use_native(False) / set_native_enabled(False) / TINYTORCH_DISABLE_NATIVE=1 turn every
  native path off, the extensions' included; native_library() gives the loaded library
  (None when off or missing) to code that times or probes a kernel itself: the
  scorecard's and the benchmarks' raw kernel timings (scorecard/gemm.py,
  benchmarks/_common.py) and upstream's helpers (extensions.simd_ops.compile_and_load_simd
  returns it, template_examples.has_custom_hardware looks up a symbol in it). No extension
  makes its own C call: one that needs a kernel adds a back end (backends/template/,
  docs/extending.md). record_native_path() / record_path() file a report in last_path()
  (the back ends' ops do, and compile_graph for its fused calls).

Which code runs: the back ends of tinytorch.backends, tried in priority order; the first
that does not decline a call serves it. Built in: the runtime's kernels (backends/cpu.py:
float32 and float16 calls above a size floor) and NumPy (backends/numpy_fallback.py: the
rest). ``tinytorch info`` lists every registered back end with its probe's reason.

The data path of ``Tensor @ Tensor``, in order:
  Tensor.__matmul__ (core/tensor.py) -> MatMul.apply / MatMul.forward (core/ops.py)
  -> acceleration.matmul (here) -> backends.routes("matmul") -> backends/cpu.py matmul
  -> _matmul_native -> _gemm_native or _batched_native -> _native.lib.tt_sgemm /
  tt_sgemm_strided_batched (the one ctypes binding) -> runtime/cpu/gemm.cpp (argument
  checks, blocking, packing, threads) -> the active ISA's micro-kernel.

GELU is the tanh approximation (formulas and limits: backends/numpy_fallback.py). Integer
input to an activation gives float32, never truncated integers.

What this file owns: the functions listed above and those the list leaves out (``adam_step``,
``embedding`` / ``embedding_backward``, ``conv_output_size``, ``im2col`` / ``col2im``,
``max_pool2d`` / ``max_pool2d_backward``, ``relu`` / ``relu_backward``), their argument
checks (``check_attention_args``, the INT8 limit ``QGEMM_MAX_K``), the routing of each call
to the back ends, and ``native_library`` / ``native_available`` / ``check_status``.

What it assumes: NumPy arrays in (no Tensor, no autograd: the callers' Functions differentiate);
every back end returns NotImplemented for a call it declines and NumPy's declines none, so each
function answers without the runtime; the ctypes prototypes are declared in tinytorch._native
and the switch and the report live in tinytorch.backends (re-exported here).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _native
from .. import backends as _backends
from ..backends import (last_path, native_enabled, record_native_path, record_path,
                        set_native_enabled, use_native)
from ..backends.cpu import NATIVE_MIN_ELEMENTS, NATIVE_MIN_GEMM_WORK, NATIVE_MIN_HALF_GEMM_WORK
from ..backends.cpu.common import batch_shape
from ..backends.numpy_fallback import promote_to_float, stable_sigmoid

__all__ = ["gemm", "matmul", "matmul_backward", "bias_gelu", "bias_gelu_backward",
           "attention", "attention_backward", "check_attention_args", "layer_norm",
           "layer_norm_backward", "softmax",
           "log_softmax", "softmax_backward", "log_softmax_backward", "cross_entropy",
           "cross_entropy_backward", "adam_step", "embedding", "embedding_backward",
           "relu", "relu_backward", "quantize_rows", "quantized_pack", "quantized_matmul",
           "quantized_linear", "quantized_path", "conv_output_size", "im2col", "col2im", "max_pool2d", "max_pool2d_backward",
           "stable_sigmoid", "promote_to_float", "last_path", "record_path", "record_native_path",
           "use_native", "set_native_enabled", "native_enabled", "native_available", "native_library",
           "check_status", "NATIVE_MIN_GEMM_WORK", "NATIVE_MIN_ELEMENTS",
           "NATIVE_MIN_HALF_GEMM_WORK"]


def native_library():
    """The loaded libtinytorch (a ctypes.CDLL declared by tinytorch._native) when native
    kernels may run now, else None: turned off, or the library is missing."""
    return _native.lib if _backends.native_enabled() else None


def native_available() -> bool:
    """True when calls can take the native path now (library loaded and enabled)."""
    return _backends.native_enabled() and _native.lib is not None


# Raise the exception matching a non-OK tt_status, with the runtime's message (the one
# mapping, _native.check, under the door's name for extensions).
check_status = _native.check


def _route(op: str, *args):
    """Call the first back end that does not decline (NumPy never does)."""
    for impl in _backends.routes(op):
        result = impl(*args)
        if result is not NotImplemented:
            return result
    raise TypeError(f"{op}: no registered back end serves this call")


# --------------------------------------------------------------------------------------
# The kernel API
# --------------------------------------------------------------------------------------

def gemm(a: np.ndarray, b: np.ndarray, trans_a: bool = False, trans_b: bool = False,
         alpha: float = 1.0, beta: float = 0.0, out: np.ndarray | None = None,
         any_size: bool = False) -> np.ndarray:
    """alpha op(a) @ op(b) + beta out for 2-D arrays, op = transpose when asked (no copy
    is made). beta != 0 needs out, which is both read and written.

    ``trans_a`` / ``trans_b`` use a^T / b^T in place of a / b, so op(a) is (M, K) and
    op(b) is (K, N); ``out`` (M, N), when given, receives the result. ``any_size=True``
    sends even tiny float32 problems to the native kernel (by default they stay in NumPy,
    where the ctypes call would cost more than it saves)."""
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"gemm: a and b must be 2-D, got shapes {a.shape} and {b.shape}")
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    k2, n = (b.shape[1], b.shape[0]) if trans_b else b.shape
    if k != k2:
        raise ValueError(f"gemm: inner sizes differ: op(a) is {m} x {k}, op(b) is {k2} x {n}")
    if beta != 0 and out is None:
        raise ValueError("gemm: beta != 0 accumulates into out, so out must be given")
    return _route("gemm", a, b, trans_a, trans_b, alpha, beta, out, any_size)


def matmul(a: np.ndarray, b: np.ndarray, any_size: bool = False) -> np.ndarray:
    """a @ b with NumPy's batching and 1-D promotion rules. ``any_size`` as in ``gemm``."""
    return _route("matmul", a, b, any_size)


def matmul_backward(a: np.ndarray, b: np.ndarray, grad: np.ndarray, need=(True, True),
                    any_size: bool = False):
    """Gradients of ``a @ b`` (NumPy rules) given the gradient of the result:
    (grad @ b^T, a^T @ grad), None where ``need`` says False. Transposes reach the GEMM
    as flags, never as copies. A 1-D operand's gradient has its shape; batch axes are
    left as broadcast (the autograd engine sums them to each operand's shape).
    ``need`` is a pair of bools for (a, b); ``any_size`` as in ``gemm``."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
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
        rows = math.prod(g.shape[:-1])  # not reshape(-1, n): ambiguous for n == 0
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


def bias_gelu(x: np.ndarray, bias: np.ndarray | None, any_size: bool = False) -> np.ndarray:
    """gelu_tanh(x + bias), bias broadcast over the last axis (None means no bias).

    ``x`` is (..., D), ``bias`` (D,) or None; integer ``x`` gives float32. ``any_size``
    as in ``gemm``."""
    return _route("bias_gelu", promote_to_float(x), bias, any_size)


def bias_gelu_backward(x: np.ndarray, bias: np.ndarray | None, grad: np.ndarray,
                       any_size: bool = False):
    """Gradients of gelu_tanh(x + bias): (grad * gelu'(u), sum of that over leading axes).

    ``grad`` is the gradient of the output (x's shape); the bias gradient is None when
    ``bias`` is None. ``any_size`` as in ``gemm``."""
    return _route("bias_gelu_backward", promote_to_float(x), bias, grad, any_size)


# --------------------------------------------------------------------------------------
# Attention (FlashAttention in the runtime; the tiled NumPy reference otherwise)
# --------------------------------------------------------------------------------------

# Causal modes (the runtime's tt_attention_causal): False; True or "top_left" (PyTorch's
# is_causal: query i sees keys j <= i); "bottom_right" (query i sees keys j <= i + S - L:
# the queries are the last L positions, as in KV-cache decoding).
_CAUSAL = {False: 0, True: 1, "top_left": 1, "bottom_right": 2}


def check_attention_args(q, k, v, mask, causal, scale, who):
    """The argument rules of attention, in one place (the door and core/attention.py use it):
    q [..., L, d], k [..., S, d], v [..., S, dv] with broadcasting batch dims, an optional
    bool/float ``mask`` that broadcasts to the scores [..., L, S], ``causal`` one of False,
    True, "top_left", "bottom_right", and a finite ``scale`` (None: 1/sqrt(d)). Raises
    ValueError/TypeError naming the shapes, prefixed by ``who``; returns (causal code, scale)."""
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"{who}: q, k, v must be [..., seq, dim], got q {q.shape}, k {k.shape}, "
                         f"v {v.shape}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"{who}: q and k must share the last dim, got q {q.shape} and k {k.shape}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{who}: k and v must have the same number of keys, got k {k.shape} and "
                         f"v {v.shape}")
    try:
        batch = batch_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    except ValueError:
        raise ValueError(f"{who}: batch dims do not broadcast: q {q.shape}, k {k.shape}, "
                         f"v {v.shape}") from None
    if mask is not None:
        scores = batch + (q.shape[-2], k.shape[-2])
        try:
            fits = np.broadcast_shapes(mask.shape, scores) == scores
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"{who}: mask of shape {mask.shape} does not broadcast to the "
                             f"scores {scores}")
        if mask.dtype != np.bool_ and mask.dtype.kind != "f":
            raise TypeError(f"{who}: mask must be bool or float, got {mask.dtype}")
    try:
        code = _CAUSAL[causal]
    except (KeyError, TypeError):
        raise ValueError(f"{who}: causal must be False, True, 'top_left' or 'bottom_right', "
                         f"got {causal!r}") from None
    d = q.shape[-1]
    scale = (1.0 / float(np.sqrt(d)) if d > 0 else 1.0) if scale is None else float(scale)
    if not np.isfinite(scale):
        raise ValueError(f"{who}: scale must be finite, got {scale}")
    return code, scale


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None,
              causal=False, scale: float | None = None, any_size: bool = False):
    """(out, lse): out = softmax(scale q k^T + mask) v for q [..., L, d], k [..., S, d],
    v [..., S, dv] (batch dims broadcast); lse = each query's log-sum-exp of its scores,
    [..., L] (-inf where a query sees no key; its output row is 0). scale defaults to
    1/sqrt(d). A bool mask is True where a query may attend, a float mask is added (PyTorch's
    SDPA convention). causal: False, True / "top_left" (query i sees keys j <= i) or
    "bottom_right" (j <= i + S - L). Served by the runtime's FlashAttention kernel (float32,
    no mask, dv == d; any_size sends even tiny problems there), the rest (float64, masks) by
    the tiled NumPy reference (backends/attention_reference.py)."""
    code, scale = check_attention_args(q, k, v, mask, causal, scale, "attention")
    return _route("attention", q, k, v, mask, code, scale, any_size)


def attention_backward(q: np.ndarray, k: np.ndarray, v: np.ndarray, out: np.ndarray,
                       lse: np.ndarray, grad: np.ndarray, mask: np.ndarray | None = None,
                       causal=False, scale: float | None = None, need=(True, True, True),
                       any_size: bool = False):
    """(grad_q, grad_k, grad_v) of ``attention(q, k, v, mask, causal, scale)`` given its out
    and lse and grad = dL/d(out); None where ``need`` says False; batch axes as broadcast
    (the autograd engine sums them); any_size as in ``attention``. FlashAttention-2: the
    probabilities are recomputed from lse block by block, never stored."""
    code, scale = check_attention_args(q, k, v, mask, causal, scale, "attention_backward")
    need = tuple(bool(n) for n in need)
    return _route("attention_backward", q, k, v, out, lse, grad, mask, code, scale, need, any_size)


# --------------------------------------------------------------------------------------
# Row-wise normalisations: layer norm, softmax, log-softmax (runtime/cpu/rownorm*.cpp)
# --------------------------------------------------------------------------------------

def _last_axis_vector(v, d, name, who):
    if v is not None and v.shape != (d,):
        raise ValueError(f"{who}: {name} must have shape ({d},) (the last axis), got {v.shape}")


def layer_norm(x: np.ndarray, gamma: np.ndarray | None = None, beta: np.ndarray | None = None,
               eps: float = 1e-5, any_size: bool = False):
    """(y, mean, rstd): the layer norm of ``x`` (..., D) over its last axis,
    y = (x - mean) * rstd * gamma + beta with the biased variance and
    rstd = 1 / sqrt(var + eps); ``gamma`` and ``beta`` are (D,) or None (1 and 0); mean and
    rstd have shape x.shape[:-1] (what the backward needs). The runtime's kernel serves
    float32 (one pass for the statistics); ``any_size`` as in ``gemm``."""
    x = promote_to_float(x)
    if x.ndim < 1:
        raise ValueError("layer_norm: x needs at least one dimension")
    _last_axis_vector(gamma, x.shape[-1], "gamma", "layer_norm")
    _last_axis_vector(beta, x.shape[-1], "beta", "layer_norm")
    eps = float(eps)
    if not (np.isfinite(eps) and eps >= 0):
        raise ValueError(f"layer_norm: eps must be finite and >= 0, got {eps}")
    return _route("layer_norm", x, gamma, beta, eps, any_size)


def layer_norm_backward(x: np.ndarray, gamma: np.ndarray | None, mean: np.ndarray,
                        rstd: np.ndarray, grad: np.ndarray, need=(True, True, True),
                        any_size: bool = False):
    """(grad_x, grad_gamma, grad_beta) of ``layer_norm(x, gamma, beta, eps)`` from ``x``,
    ``gamma``, the forward's ``mean`` and ``rstd`` and ``grad`` = dL/dy (x's shape); None
    where ``need`` (three bools, for x, gamma, beta) says False, grad_gamma None when
    ``gamma`` is None. The parameter gradients are summed over all leading axes.
    ``any_size`` as in ``gemm``."""
    x = promote_to_float(x)
    if x.ndim < 1 or grad.shape != x.shape or mean.shape != x.shape[:-1] or \
            rstd.shape != x.shape[:-1]:
        raise ValueError(f"layer_norm_backward: x {x.shape} needs grad of its shape and mean, "
                         f"rstd of shape {x.shape[:-1]}, got grad {grad.shape}, mean "
                         f"{mean.shape}, rstd {rstd.shape}")
    _last_axis_vector(gamma, x.shape[-1], "gamma", "layer_norm_backward")
    need = tuple(bool(n) for n in need)
    return _route("layer_norm_backward", x, gamma, mean, rstd, grad, need, any_size)


def _axis(x, axis, who):
    if x.ndim == 0:
        raise ValueError(f"{who}: needs at least one dimension")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{who}: axis {axis} is out of range for shape {x.shape}")
    return axis % x.ndim


def softmax(x: np.ndarray, axis: int = -1, any_size: bool = False) -> np.ndarray:
    """``exp(x) / sum(exp(x))`` along ``axis`` (shifted by the maximum: never overflows);
    integer ``x`` gives float32. The runtime's kernel serves the last axis of float32
    arrays; ``any_size`` as in ``gemm``."""
    x = promote_to_float(x)
    return _route("softmax", x, _axis(x, axis, "softmax"), any_size)


def log_softmax(x: np.ndarray, axis: int = -1, any_size: bool = False) -> np.ndarray:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``; as ``softmax`` otherwise
    (``any_size`` likewise)."""
    x = promote_to_float(x)
    return _route("log_softmax", x, _axis(x, axis, "log_softmax"), any_size)


def softmax_backward(y: np.ndarray, grad: np.ndarray, axis: int = -1,
                     any_size: bool = False) -> np.ndarray:
    """dL/dx = y * (grad - sum(grad * y)) of ``y = softmax(x, axis)``, from its output ``y``
    and ``grad`` = dL/dy; ``any_size`` as in ``gemm``."""
    return _route("softmax_backward", y, grad, _axis(y, axis, "softmax_backward"), any_size)


def log_softmax_backward(y: np.ndarray, grad: np.ndarray, axis: int = -1,
                         any_size: bool = False) -> np.ndarray:
    """dL/dx = grad - exp(y) * sum(grad) of ``y = log_softmax(x, axis)``, from its output
    ``y`` and ``grad`` = dL/dy; ``any_size`` as in ``gemm``."""
    return _route("log_softmax_backward", y, grad, _axis(y, axis, "log_softmax_backward"),
                  any_size)


# --------------------------------------------------------------------------------------
# Cross-entropy fused with log-softmax (the log-probabilities are never stored)
# --------------------------------------------------------------------------------------

def _ce_args(logits, target, who):
    if logits.ndim != 2 or target.shape != logits.shape[:1]:
        raise ValueError(f"{who}: logits must be (M, C) and target (M,), got {logits.shape} "
                         f"and {target.shape}")
    if target.dtype.kind not in "iu":
        raise TypeError(f"{who}: target must hold integer class indices, got {target.dtype}")


def cross_entropy(logits: np.ndarray, target: np.ndarray, ignore_index: int = -100,
                  label_smoothing: float = 0.0, any_size: bool = False):
    """(loss, lse) per row: loss = -log_softmax(logits)[target] (with ``label_smoothing``
    eps, (1 - eps) of it minus eps/C times the row's sum of log-probabilities), 0 where
    ``target`` is ``ignore_index``; lse = the row's log-sum-exp (what the backward needs).
    ``logits`` (M, C) floating, ``target`` (M,) integers in [0, C) or ignore_index (callers
    check the range; the runtime refuses a bad one). The runtime's kernel serves float32
    without label smoothing; ``any_size`` as in ``gemm``."""
    _ce_args(logits, target, "cross_entropy")
    return _route("cross_entropy", logits, target, int(ignore_index), float(label_smoothing),
                  any_size)


def cross_entropy_backward(logits: np.ndarray, target: np.ndarray, lse: np.ndarray,
                           grad_rows: np.ndarray, ignore_index: int = -100,
                           label_smoothing: float = 0.0, any_size: bool = False) -> np.ndarray:
    """dL/dlogits (M, C) of sum(grad_rows * loss) for ``cross_entropy(logits, target,
    ignore_index, label_smoothing)``, from its ``lse`` (M,) and the per-row upstream
    gradient ``grad_rows`` (M,): grad_rows * (softmax - smoothed one-hot), 0 for ignored
    rows. ``any_size`` as in ``gemm``."""
    _ce_args(logits, target, "cross_entropy_backward")
    if lse.shape != target.shape or grad_rows.shape != target.shape:
        raise ValueError(f"cross_entropy_backward: lse and grad_rows must be {target.shape}, got "
                         f"{lse.shape} and {grad_rows.shape}")
    return _route("cross_entropy_backward", logits, target, lse, grad_rows, int(ignore_index),
                  float(label_smoothing), any_size)


# --------------------------------------------------------------------------------------
# Training-step kernels
# --------------------------------------------------------------------------------------

def adam_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr: float, betas=(0.9, 0.999),
              eps: float = 1e-8, weight_decay: float = 0.0, decoupled: bool = True) -> None:
    """Adam (``decoupled=False``: weight decay as L2 on the gradient) or AdamW (decoupled:
    ``p *= 1 - lr * weight_decay``) in place on every array of ``params`` at once,
    PyTorch's rule: ``grads``, ``exp_avgs``, ``exp_avg_sqs`` are aligned lists (the moments
    updated in place) and ``steps`` the step count of each tensor *after* this update
    (>= 1). The runtime's kernel serves float32 (one call and one pass over every tensor);
    other dtypes take the NumPy rule. ``lr``, ``betas``, ``eps`` as in torch.optim.Adam.

    Args:
        params: parameter arrays, updated in place.
        grads: their gradients (same shapes).
        exp_avgs: first moments, updated in place.
        exp_avg_sqs: second moments, updated in place.
        steps: per tensor, its step count after this update.
        lr: learning rate.
        betas: (beta1, beta2).
        eps: added to the denominator.
        weight_decay: decay coefficient.
        decoupled: AdamW's decoupled decay (True) or Adam's L2 (False).
    """
    lists = (params, grads, exp_avgs, exp_avg_sqs, steps)
    if len({len(x) for x in lists}) != 1:
        raise ValueError("adam_step: params, grads, exp_avgs, exp_avg_sqs and steps must have one length")
    for i, (p, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if not (p.shape == g.shape == m.shape == v.shape):
            raise ValueError(f"adam_step: tensor {i}: shapes {p.shape}, {g.shape}, {m.shape}, {v.shape} differ")
    if any(int(t) < 1 for t in steps):
        raise ValueError("adam_step: every step count must be >= 1 (the count after this update)")
    b1, b2 = betas
    if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
        raise ValueError(f"adam_step: betas must be in [0, 1), got {betas}")
    _route("adam_step", list(params), list(grads), list(exp_avgs), list(exp_avg_sqs),
           [int(t) for t in steps], float(lr), (float(b1), float(b2)), float(eps),
           float(weight_decay), bool(decoupled))


def embedding(weight: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``weight[ids]``: the rows of a (V, D) table picked by an integer array ``ids`` of any
    shape (result ids.shape + (D,)); ValueError for an id outside [0, V).

    Args:
        weight: the (V, D) table.
        ids: integer ids.
    """
    ids = _embedding_ids(ids, weight.shape[0], "embedding")
    return _route("embedding", weight, ids)


def embedding_backward(grad: np.ndarray, ids: np.ndarray, vocab: int) -> np.ndarray:
    """The gradient of ``embedding`` w.r.t. the table: a (``vocab``, D) array holding, in
    each row, the sum of the rows of ``grad`` (ids.shape + (D,)) whose id picks it.

    Args:
        grad: gradient of the lookup's output.
        ids: the ids of the forward.
        vocab: rows of the table.
    """
    ids = _embedding_ids(ids, vocab, "embedding_backward")
    if grad.shape[:-1] != ids.shape:
        raise ValueError(f"embedding_backward: grad {grad.shape} does not match ids {ids.shape} + (D,)")
    return _route("embedding_backward", grad, ids, int(vocab))


def _embedding_ids(ids, vocab, who):
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{who}: ids must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= vocab):
        bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
        raise ValueError(f"{who}: id {bad} is outside [0, {vocab})")
    return ids


# --------------------------------------------------------------------------------------
# Convolution's unfold and max pooling (NCHW)
# --------------------------------------------------------------------------------------

def conv_output_size(size: int, kernel: int, stride: int, padding: int, who: str) -> int:
    """(size + 2 padding - kernel) // stride + 1, PyTorch's output size of a convolution or
    pooling window along one axis; ValueError (naming ``who``) when the padded input is
    smaller than the kernel.

    Args:
        size: input size along the axis.
        kernel: window size.
        stride: step between windows.
        padding: zeros (or -inf) added on each side.
        who: the caller's name for the message.
    """
    out = (size + 2 * padding - kernel) // stride + 1
    if size + 2 * padding < kernel or out <= 0:
        raise ValueError(f"{who}: input size {size} with padding {padding} is smaller than the kernel {kernel}")
    return out


def _window_geometry(x_shape, kernel, stride, padding, who):
    if len(x_shape) != 4:
        raise ValueError(f"{who}: expected an NCHW array, got shape {tuple(x_shape)}")
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{who}: kernel {kernel} and stride {stride} must be >= 1, padding {padding} >= 0")
    oh = conv_output_size(x_shape[2], kh, sh, ph, who)
    ow = conv_output_size(x_shape[3], kw, sw, pw, who)
    return int(kh), int(kw), int(sh), int(sw), int(ph), int(pw), oh, ow


def im2col(x: np.ndarray, kernel, stride=(1, 1), padding=(0, 0)):
    """(cols, OH, OW): the NCHW array ``x`` unfolded into cols of shape (C*KH*KW, N*OH*OW),
    row (c, i, j) holding the input pixel kernel offset (i, j) touches for every output
    pixel (zero padding), so a convolution is ``W.reshape(OC, -1) @ cols``.

    Args:
        x: (N, C, H, W) input.
        kernel: (KH, KW).
        stride: (sh, sw).
        padding: (ph, pw) zeros on each side.
    """
    geom = _window_geometry(x.shape, kernel, stride, padding, "im2col")
    return _route("im2col", x, *geom), geom[6], geom[7]


def col2im(cols: np.ndarray, x_shape, kernel, stride=(1, 1), padding=(0, 0)) -> np.ndarray:
    """The adjoint of ``im2col``: cols (C*KH*KW, N*OH*OW) summed back into an ``x_shape``
    (N, C, H, W) array (overlapping windows add up).

    Args:
        cols: the unfolded gradient.
        x_shape: (N, C, H, W) of the unpadded input.
        kernel: (KH, KW).
        stride: (sh, sw).
        padding: (ph, pw).
    """
    geom = _window_geometry(tuple(x_shape), kernel, stride, padding, "col2im")
    n, c = x_shape[:2]
    want = (c * geom[0] * geom[1], n * geom[6] * geom[7])
    if cols.shape != want and cols.size == want[0] * want[1]:
        cols = cols.reshape(want)
    if cols.shape != want:
        raise ValueError(f"col2im: cols has shape {cols.shape}, expected {want}")
    return _route("col2im", cols, tuple(int(v) for v in x_shape), *geom)


def max_pool2d(x: np.ndarray, kernel, stride, padding=(0, 0)):
    """(y, argmax): max pooling of the NCHW array ``x`` (padding never wins), y of shape
    (N, C, OH, OW) and argmax the int64 index ih*W + iw (in its H x W plane) of each
    window's first maximum; a NaN wins and propagates, like PyTorch.

    Args:
        x: (N, C, H, W) input.
        kernel: (KH, KW).
        stride: (sh, sw).
        padding: (ph, pw) on each side.
    """
    geom = _window_geometry(x.shape, kernel, stride, padding, "max_pool2d")
    return _route("max_pool2d", x, *geom)


def max_pool2d_backward(grad: np.ndarray, argmax: np.ndarray, x_shape, x_strides=None) -> np.ndarray:
    """dL/dx of ``max_pool2d``: an ``x_shape`` array of zeros with each entry of ``grad``
    added at its window's ``argmax``. With ``x_strides`` (the forward input's strides) the
    runtime writes the result in that layout when it is NCHW or CNHW planes, so the
    gradient meets the saved activations of a convolution's output without a copy.

    Args:
        grad: (N, C, OH, OW) gradient of the pooled output.
        argmax: the forward's argmax.
        x_shape: (N, C, H, W) of the input.
        x_strides: the input's strides, or None (contiguous result).
    """
    if grad.shape != argmax.shape or len(x_shape) != 4 or tuple(grad.shape[:2]) != tuple(x_shape[:2]):
        raise ValueError(f"max_pool2d_backward: grad {grad.shape}, argmax {argmax.shape} and input "
                         f"{tuple(x_shape)} do not match")
    return _route("max_pool2d_backward", grad, argmax, tuple(int(v) for v in x_shape),
                  None if x_strides is None else tuple(int(v) for v in x_strides))


def relu(x: np.ndarray) -> np.ndarray:
    """``max(x, 0)`` elementwise, in x's dtype and layout (NaN stays NaN): the runtime's kernel
    for float32, NumPy otherwise.

    Args:
        x: the input array.
    """
    return _route("relu", np.asarray(x))


def relu_backward(y: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """dL/dx of ``relu`` from its output ``y``: 0 where y <= 0, else ``grad`` (a NaN passes
    its gradient, as in PyTorch).

    Args:
        y: the forward's output.
        grad: dL/dy, y's shape.
    """
    if grad.shape != y.shape:
        raise ValueError(f"relu_backward: grad {grad.shape} and y {y.shape} differ")
    return _route("relu_backward", y, grad)


# --------------------------------------------------------------------------------------
# INT8 inference (runtime/cpu/qgemm.cpp; NumPy step by step otherwise)
# --------------------------------------------------------------------------------------

QGEMM_MAX_K = 65793  # tinytorch.h TT_QGEMM_MAX_K: K * 255 * 128 < 2^31, so int32 sums are exact
_QUANT_ACTIVATIONS = (None, "relu", "gelu")


def quantized_path(reduce_range: bool = False) -> tuple:
    """(True, "qgemm:<kernel>") when INT8 calls (7-bit ones with ``reduce_range``) run on the
    runtime's kernels now, else (False, why NumPy serves them: native kernels off, the library
    missing, or a library built without tt_qgemm_* or without its reduce_range calls)."""
    if not _backends.native_enabled():
        return False, "native kernels are turned off (use_native(False) or TINYTORCH_DISABLE_NATIVE=1)"
    if _native.lib is None:
        return False, f"libtinytorch is not loaded: {_native.reason()}"
    if not _native.has_qgemm():
        return False, "the loaded libtinytorch has no tt_qgemm_* (built before the INT8 GEMM)"
    lib = _native.lib
    if reduce_range:
        if not _native.has_qgemm_reduce_range():
            return False, "the loaded libtinytorch has no tt_qgemm_*_ex (built before reduce_range)"
        return True, "qgemm:" + lib.tt_qgemm_kernel_name(lib.tt_qgemm_kernel_for(1)).decode()
    return True, "qgemm:" + lib.tt_qgemm_kernel_name(lib.tt_qgemm_kernel_active()).decode()


def _rows_f32(x, who):
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"{who}: x must be 2-D (rows, features), got shape {x.shape}")
    if x.dtype.kind != "f":
        raise TypeError(f"{who}: x must be floating point, got {x.dtype}")
    return x.astype(np.float32, copy=False)


def _int8_weight(weight_q, who):
    if weight_q.ndim != 2 or weight_q.dtype != np.int8:
        raise TypeError(f"{who}: weight_q must be a 2-D int8 array (K, N), got {weight_q.dtype} "
                        f"{weight_q.shape}")
    if weight_q.shape[0] > QGEMM_MAX_K:
        raise ValueError(f"{who}: K={weight_q.shape[0]} exceeds {QGEMM_MAX_K}, the largest K whose "
                         "int32 sums are exact")


def quantize_rows(x: np.ndarray, reduce_range: bool = False):
    """(q uint8 (M, K), scale float32 (M,), zero_point int32 (M,)): each row of the float
    array ``x`` (M, K) mapped onto [0, 255] asymmetrically ([0, 127] when ``reduce_range``),
    x ~ (q - zero_point) * scale. The formula (float32, round half to even) is tinytorch.h's
    tt_qgemm_quantize_rows_ex; the runtime and NumPy give the same bits. ValueError for a row
    holding inf or NaN."""
    return _route("quantize_rows", _rows_f32(x, "quantize_rows"), bool(reduce_range))


def quantized_pack(weight_q: np.ndarray, packs: dict, reduce_range: bool = False) -> None:
    """Pack the int8 weight ``weight_q`` (K, N) for the runtime's active INT8 kernel into
    ``packs`` (a dict the caller keeps with the weight; kernel -> pack). Done once; the
    multiply calls repack only after the ISA changed or a copy lost the pack's alignment.
    ``reduce_range`` makes a 7-bit pack (TT_QGEMM_REDUCE_RANGE: avx2_u7 on AVX2); the calls
    that use it must pass the same ``reduce_range``. Nothing to do on the NumPy path."""
    _int8_weight(weight_q, "quantized_pack")
    _route("quantized_pack", weight_q, packs, bool(reduce_range))


def quantized_matmul(q: np.ndarray, zero_point: np.ndarray, weight_q: np.ndarray,
                     packs: dict | None = None, reduce_range: bool = False) -> np.ndarray:
    """int32 ``(q - zero_point[:, None]) @ weight_q``, exact, for uint8 ``q`` (M, K), int32
    ``zero_point`` (M,) and the int8 weight (K, N) (``packs`` as in ``quantized_pack``).
    With ``reduce_range`` a q above 127 raises ValueError (never a saturated result)."""
    _int8_weight(weight_q, "quantized_matmul")
    q = np.asarray(q)
    if q.dtype != np.uint8 or q.ndim != 2 or q.shape[1] != weight_q.shape[0]:
        raise ValueError(f"quantized_matmul: q must be uint8 (M, {weight_q.shape[0]}), got "
                         f"{q.dtype} {q.shape}")
    zero_point = np.asarray(zero_point, dtype=np.int32).reshape(-1)
    if zero_point.shape != (q.shape[0],):
        raise ValueError(f"quantized_matmul: zero_point must have {q.shape[0]} values, got "
                         f"{zero_point.shape}")
    return _route("quantized_matmul", q, zero_point, weight_q, {} if packs is None else packs,
                  bool(reduce_range))


def quantized_linear(x: np.ndarray, weight_q: np.ndarray, weight_scale: np.ndarray,
                     bias: np.ndarray | None = None, activation: str | None = None,
                     packs: dict | None = None, reduce_range: bool = False) -> np.ndarray:
    """The int8 Linear layer: each row of ``x`` (M, K) quantized as ``quantize_rows`` does
    (sx, zx; 7-bit with ``reduce_range``), the exact product with the int8 weight ``weight_q``
    (K, N), then float32
    ``pre = (sum (q - zx) w) * (sx * weight_scale) ``, ``y = act(pre + bias)``; activation
    None, "relu" or "gelu" (the tanh GELU of ``bias_gelu``), fused into the runtime's call.
    ``weight_scale`` has N per-output-channel scales; ``packs`` as in ``quantized_pack``."""
    x = _rows_f32(x, "quantized_linear")
    _int8_weight(weight_q, "quantized_linear")
    k, n = weight_q.shape
    if x.shape[1] != k:
        raise ValueError(f"quantized_linear: x has {x.shape[1]} features, the weight {k}")
    if activation not in _QUANT_ACTIVATIONS:
        raise ValueError(f"quantized_linear: activation must be None, 'relu' or 'gelu', got {activation!r}")
    weight_scale = np.ascontiguousarray(weight_scale, dtype=np.float32).reshape(-1)
    if weight_scale.shape != (n,):
        raise ValueError(f"quantized_linear: weight_scale must have {n} values, got {weight_scale.shape}")
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype=np.float32).reshape(-1)
        if bias.shape != (n,):
            raise ValueError(f"quantized_linear: bias must have {n} values, got {bias.shape}")
    return _route("quantized_linear", x, weight_q, weight_scale, bias, activation,
                  {} if packs is None else packs, bool(reduce_range))
