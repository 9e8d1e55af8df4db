"""backends/reference: the NumPy back end ("numpy") -- every op of the door, in NumPy, for any
dtype: the package's formula library (also importable as tinytorch.backends.numpy_fallback).

It serves what the native back ends decline (float64, integers, tiny problems) and
everything when they are off or missing, so it never declines. It also holds the one
stable sigmoid of the package and the GELU formulas (tanh approximation):

  gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))) = u sigmoid(z),
  z = 2 sqrt(2/pi) (u + 0.044715 u^3)

evaluated in the sigmoid form so it never overflows. Attention's tiled FlashAttention
reference (the teaching version and test oracle) is flash_attention.py beside this file. Limits at infinity: gelu(+inf) = inf,
gelu(-inf) = -0, gelu'(+inf) = 1, gelu'(-inf) = 0; NaN propagates (the native kernels
follow the same rules, runtime/cpu/bias_gelu_kernels.h). Integer input gives float32.

Owns the NumPy formulas of the door's ops; assumes NumPy only (no runtime, no core).
"""
from __future__ import annotations

import math
import sys

import numpy as np

from .. import door_ops, record_path, register
from . import flash_attention as _attention

SQRT_2_OVER_PI = 0.7978845608028654
GELU_C = 0.044715


def _sigmoid_parts(z: np.ndarray):
    """(sigmoid(z), e = exp(-|z|)) for floating z: exp only ever sees non-positive values,
    so nothing overflows; e in [0, 1] is what derivatives of the sigmoid reuse."""
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)), e


def stable_sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)) for any z without overflow. Integer and boolean input is promoted
    to float32 (a sigmoid is never an integer); floating input keeps its dtype."""
    z = np.asarray(z)
    if z.dtype.kind not in "fc":
        z = z.astype(np.float32)
    return _sigmoid_parts(z)[0].astype(z.dtype, copy=False)


def promote_to_float(x) -> np.ndarray:
    """``x`` as an array, with integer or boolean input converted to float32 (activations of
    integers are never truncated integers); floating and complex input is returned as is."""
    x = np.asarray(x)
    return x if x.dtype.kind in "fc" else x.astype(np.float32)


def gemm(a, b, trans_a, trans_b, alpha, beta, out, any_size=False):
    """alpha op(a) @ op(b) + beta out in NumPy, for any dtype (the door's ``gemm``: ``a``,
    ``b`` 2-D, op a transpose when ``trans_a``/``trans_b``, ``alpha``/``beta`` scalars,
    ``out`` the optional accumulator and result). ``any_size`` is ignored: NumPy serves
    every size."""
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


def matmul(a, b, any_size=False):
    """``np.matmul(a, b)`` (the door's ``matmul``); ``any_size`` is ignored."""
    record_path("numpy")
    return np.matmul(a, b)


def bias_gelu(x, bias, any_size=False):
    """gelu_tanh(x + bias), bias broadcast over the last axis (None means no bias), in the
    overflow-free sigmoid form. ``any_size`` is ignored."""
    x = promote_to_float(x)
    u = x if bias is None else x + bias
    record_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        z = 2.0 * SQRT_2_OVER_PI * (u + GELU_C * u * u * u)
        y = u * stable_sigmoid(z)
        neg_inf = np.isneginf(u)
        if neg_inf.any():
            y = np.where(neg_inf, -0.0, y)  # the limit, not -inf * 0 = NaN
        return y.astype(u.dtype, copy=False)


def bias_gelu_backward(x, bias, grad, any_size=False):
    """Gradients of gelu_tanh(x + bias): (grad * gelu'(u), sum of that over leading axes;
    None when ``bias`` is None). ``any_size`` is ignored."""
    x = promote_to_float(x)
    u = x if bias is None else x + bias
    record_path("numpy")
    with np.errstate(over="ignore", invalid="ignore"):
        # d/du [u sigmoid(z)] = s + u z' s (1 - s), with s (1 - s) = e / (1 + e)^2 and
        # e = exp(-|z|) in [0, 1]: no cancellation (1 + tanh would lose everything below
        # u ~ -4 in float32) and no overflow. Where e underflows to 0 the second term is
        # exactly 0 (it would be inf * 0 for huge |u|).
        z = 2.0 * SQRT_2_OVER_PI * (u + GELU_C * u * u * u)
        s, e = _sigmoid_parts(z)
        slope = u * (2.0 * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_C * u * u)) * (e / ((1.0 + e) * (1.0 + e)))
        d = s + np.where(e == 0, 0.0, slope)
    gx = (grad * d).astype(u.dtype, copy=False)
    gb = None if bias is None else gx.reshape(-1, gx.shape[-1]).sum(axis=0).astype(bias.dtype, copy=False)
    return gx, gb


def layer_norm(x, gamma, beta, eps, any_size=False):
    """(y, mean, rstd) of the layer norm of ``x`` (..., D) over its last axis: mean, biased
    variance, rstd = 1/sqrt(var + ``eps``), y = (x - mean) rstd gamma + beta (``gamma`` /
    ``beta`` (D,) or None: 1 and 0), in x's dtype (NumPy promotion with gamma's); mean and
    rstd have shape x.shape[:-1]. ``any_size`` is ignored."""
    record_path("numpy")
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    var = np.mean(xc * xc, axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(var + np.asarray(eps, dtype=var.dtype))
    y = xc * rstd
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y, mean[..., 0], rstd[..., 0]


def layer_norm_backward(x, gamma, mean, rstd, grad, need=(True, True, True), any_size=False):
    """(grad_x, grad_gamma, grad_beta) of ``layer_norm`` from ``x``, ``gamma`` (or None), the
    forward's ``mean`` and ``rstd`` and ``grad`` = dL/dy; None where ``need`` (three bools)
    says False, and grad_gamma None without gamma:
    grad_x = rstd (g - mean(g) - xhat mean(g xhat)) with g = grad gamma, xhat = (x - mean) rstd;
    grad_gamma = sum of grad xhat and grad_beta = sum of grad over the leading axes.
    ``any_size`` is ignored."""
    record_path("numpy")
    rstd = rstd[..., None]
    xhat = (x - mean[..., None]) * rstd
    gx = gg = gb = None
    if need[0]:
        dxh = grad if gamma is None else grad * gamma
        gx = rstd * (dxh - dxh.mean(axis=-1, keepdims=True)
                     - xhat * np.mean(dxh * xhat, axis=-1, keepdims=True))
    lead = tuple(range(grad.ndim - 1))
    if need[1] and gamma is not None:
        gg = np.sum(grad * xhat, axis=lead)
    if need[2]:
        gb = np.sum(grad, axis=lead)
    return gx, gg, gb


def _shift_by_max(x, axis):
    """x minus its maximum along axis, so exp never overflows. A size-0 array has no maximum
    to take (np.max raises) and nothing to shift: softmax of it is empty, as in PyTorch."""
    return x - np.max(x, axis=axis, keepdims=True) if x.size else x.copy()


def softmax(x, axis, any_size=False):
    """``exp(x) / sum(exp(x))`` along the non-negative int ``axis``, shifted by the maximum
    so exp never overflows. ``any_size`` is ignored."""
    record_path("numpy")
    e = np.exp(_shift_by_max(x, axis))
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis, any_size=False):
    """``x - max - log(sum(exp(x - max)))`` along the non-negative int ``axis``.
    ``any_size`` is ignored."""
    record_path("numpy")
    shifted = _shift_by_max(x, axis)
    with np.errstate(divide="ignore"):  # log(0) only for an empty axis (the sum is >= 1 otherwise)
        return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def softmax_backward(y, grad, axis, any_size=False):
    """``y * (grad - sum(grad * y))`` along ``axis``: dL/dx of ``softmax`` from its output
    ``y`` and ``grad`` = dL/dy. ``any_size`` is ignored."""
    record_path("numpy")
    return y * (grad - np.sum(grad * y, axis=axis, keepdims=True))


def log_softmax_backward(y, grad, axis, any_size=False):
    """``grad - exp(y) * sum(grad)`` along ``axis``: dL/dx of ``log_softmax`` from its output
    ``y`` and ``grad`` = dL/dy. ``any_size`` is ignored."""
    record_path("numpy")
    return grad - np.exp(y) * np.sum(grad, axis=axis, keepdims=True)


def cross_entropy(logits, target, ignore_index, label_smoothing, any_size=False):
    """(loss, lse) per row of ``logits`` (M, C) against integer ``target`` (M,): log-softmax
    shifted by the row maximum, loss = -log_probs[target] (with ``label_smoothing`` eps:
    (1 - eps) of that minus eps/C times the sum of log_probs), 0 where the target is
    ``ignore_index``; lse = log sum exp of the row. ``any_size`` is ignored."""
    record_path("numpy")
    m, c = logits.shape
    peak = logits.max(axis=1, keepdims=True) if m else np.zeros((0, 1), logits.dtype)
    shifted = logits - peak
    sum_exp = np.exp(shifted).sum(axis=1, keepdims=True)
    log_probs = shifted - np.log(sum_exp)
    valid = target != ignore_index
    safe_t = np.where(valid, target, 0)
    nll = -log_probs[np.arange(m), safe_t]
    if label_smoothing:
        nll = (1.0 - label_smoothing) * nll - (label_smoothing / c) * log_probs.sum(axis=1)
    loss = np.where(valid, nll, 0).astype(logits.dtype, copy=False)
    return loss, (peak + np.log(sum_exp))[:, 0].astype(logits.dtype, copy=False)


def cross_entropy_backward(logits, target, lse, grad_rows, ignore_index, label_smoothing,
                           any_size=False):
    """dL/dlogits of sum(``grad_rows`` * loss) for ``cross_entropy``: softmax minus the
    (smoothed) one-hot target, times each row's ``grad_rows``, 0 for rows whose ``target`` is
    ``ignore_index``; ``logits`` and ``label_smoothing`` as in ``cross_entropy``. The softmax
    is recomputed shifted by the row maximum (exact under shift): exp(logits - ``lse``)
    rounds log(sum) away once |logits| >> 1, so ``lse`` is accepted but not used.
    ``any_size`` is ignored."""
    record_path("numpy")
    m, c = logits.shape
    grad = np.exp(_shift_by_max(logits, 1))
    grad /= grad.sum(axis=1, keepdims=True)
    valid = target != ignore_index
    safe_t = np.where(valid, target, 0)
    if label_smoothing:
        grad -= label_smoothing / c
        grad[np.arange(m), safe_t] -= 1.0 - label_smoothing
    else:
        grad[np.arange(m), safe_t] -= 1.0
    grad *= valid[:, None] * grad_rows[:, None]
    return grad.astype(logits.dtype, copy=False)


def adam_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, betas, eps, weight_decay,
              decoupled):
    """Adam / AdamW (``decoupled``) in place on each array of ``params`` with its gradient
    in ``grads``, moments in ``exp_avgs`` / ``exp_avg_sqs`` and step count (after this
    update) in ``steps``: PyTorch's rule, the formula of tt_adam_step. ``lr``, ``betas``
    (beta1, beta2), ``eps`` and ``weight_decay`` are the hyper-parameters."""
    record_path("numpy")
    b1, b2 = betas
    for data, g, m, v, t in zip(params, grads, exp_avgs, exp_avg_sqs, steps):
        if weight_decay:
            if decoupled:
                data *= 1.0 - lr * weight_decay
            else:
                g = g + weight_decay * data
        # in place with one scratch buffer: ~10 passes over the parameter, no temporaries
        # (out= even for the first product: a ufunc on 0-d arrays returns a NumPy scalar)
        scratch = np.empty_like(data)
        # m = lerp(m, g, 1 - b1) exactly as PyTorch rounds it (its lerp switches form at 0.5)
        w = 1.0 - b1
        np.subtract(g, m, out=scratch, dtype=data.dtype)
        if w < 0.5:
            scratch *= w
            m += scratch
        else:
            scratch *= 1.0 - w
            np.subtract(g, scratch, out=m, dtype=data.dtype)
        np.multiply(g, g, out=scratch, dtype=data.dtype)
        scratch *= 1.0 - b2
        v *= b2
        v += scratch
        np.sqrt(v, out=scratch)
        scratch *= 1.0 / math.sqrt(1.0 - b2 ** t)
        scratch += eps
        np.divide(m, scratch, out=scratch)
        scratch *= lr / (1.0 - b1 ** t)
        data -= scratch


def embedding(weight, ids):
    """``weight[ids]``: rows of the (V, D) table picked by the integer array ``ids``."""
    record_path("numpy")
    return weight[ids]


def embedding_backward(grad, ids, vocab):
    """The (``vocab``, D) scatter-add of ``grad`` (ids.shape + (D,)) into the rows ``ids``
    picks (repeated ids add up: np.add.at)."""
    record_path("numpy")
    d = grad.shape[-1]
    out = np.zeros((vocab, d), dtype=grad.dtype)
    np.add.at(out, ids.reshape(-1), grad.reshape(-1, d))
    return out


def pad_nchw(x, ph, pw, value=0.0):
    """``x`` (N, C, H, W) with ``ph`` rows and ``pw`` columns of ``value`` added on each side
    (``x`` itself when both are 0)."""
    if ph == 0 and pw == 0:
        return x
    n, c, h, w = x.shape
    out = np.full((n, c, h + 2 * ph, w + 2 * pw), value, dtype=x.dtype)
    out[:, :, ph:ph + h, pw:pw + w] = x
    return out


def window_slice(i, j, oh, ow, sh, sw):
    """Index of the padded input pixels kernel offset (``i``, ``j``) touches, one per output
    pixel of an ``oh`` x ``ow`` output with strides ``sh``, ``sw``."""
    return (slice(None), slice(None), slice(i, i + (oh - 1) * sh + 1, sh), slice(j, j + (ow - 1) * sw + 1, sw))


def im2col(x, kh, kw, sh, sw, ph, pw, oh, ow):
    """cols (C*KH*KW, N*OH*OW) of the NCHW array ``x`` for kernel ``kh`` x ``kw``, strides
    ``sh``, ``sw``, zero padding ``ph``, ``pw``, output size ``oh`` x ``ow``: one strided
    copy of whole rows per kernel offset (the layout of tt_im2col)."""
    record_path("numpy")
    n, c = x.shape[:2]
    xp = pad_nchw(x, ph, pw)
    cols = np.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, i, j] = xp[window_slice(i, j, oh, ow, sh, sw)].transpose(1, 0, 2, 3)
    return cols.reshape(c * kh * kw, n * oh * ow)


def col2im(cols, x_shape, kh, kw, sh, sw, ph, pw, oh, ow):
    """The adjoint of ``im2col``: ``cols`` summed back into an ``x_shape`` (N, C, H, W) array
    (overlapping windows add up) (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``)."""
    record_path("numpy")
    n, c, h, w = x_shape
    cols = cols.reshape(c, kh, kw, n, oh, ow)
    gx = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            gx[window_slice(i, j, oh, ow, sh, sw)] += cols[:, i, j].transpose(1, 0, 2, 3)
    return gx[:, :, ph:ph + h, pw:pw + w]


def max_pool2d(x, kh, kw, sh, sw, ph, pw, oh, ow):
    """(y, argmax) of max pooling the NCHW array ``x`` (kernel ``kh`` x ``kw``, strides ``sh``, ``sw``, padding ``ph``, ``pw``, output ``oh`` x ``ow``) (padding never wins): each window's first maximum in window order and its index
    ih*W + iw in its plane; a NaN wins and propagates (the rule of tt_maxpool2d_forward)."""
    record_path("numpy")
    n, c, h, w = x.shape
    xp = pad_nchw(x, ph, pw, -np.inf)
    rows, cols = np.arange(oh) * sh - ph, np.arange(ow) * sw - pw
    best = idx = have = None
    for i in range(kh):
        for j in range(kw):
            part = xp[window_slice(i, j, oh, ow, sh, sw)]
            iy, ix = rows[:, None] + i, cols[None, :] + j
            inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
            flat = np.where(inside, iy * w + ix, -1)
            if best is None:
                best, idx, have = part.copy(), np.broadcast_to(flat, part.shape).copy(), inside
                continue
            take = inside & (~have | (part > best) | (np.isnan(part) & ~np.isnan(best)))
            best = np.where(take, part, best)
            idx = np.where(take, flat, idx)
            have = have | inside
    return best, idx.astype(np.int64, copy=False)


def max_pool2d_backward(grad, argmax, x_shape, x_strides=None):
    """dL/dx of ``max_pool2d``: each ``grad`` entry added at its window's ``argmax`` in an
    ``x_shape`` (N, C, H, W) array of zeros (-1 entries skipped); contiguous whatever
    ``x_strides`` (the forward input's layout, a hint the runtime's kernel follows) says."""
    record_path("numpy")
    n, c, h, w = x_shape
    planes = n * c
    if planes == 0:
        return np.zeros(x_shape, dtype=grad.dtype)
    a = argmax.reshape(planes, -1)
    flat = (a + (np.arange(planes, dtype=np.int64) * (h * w))[:, None])[a >= 0]
    out = np.bincount(flat, weights=grad.reshape(planes, -1)[a >= 0], minlength=planes * h * w)
    return out.reshape(x_shape).astype(grad.dtype, copy=False)


def relu(x):
    """``max(x, 0)`` elementwise (NaN stays NaN), in x's dtype."""
    record_path("numpy")
    return np.maximum(x, 0).astype(x.dtype, copy=False)


def relu_backward(y, grad):
    """dL/dx of ``relu`` from its output ``y``: 0 where y <= 0, else ``grad`` (a NaN passes
    its gradient, as in PyTorch)."""
    record_path("numpy")
    return np.where(y <= 0, 0, grad).astype(grad.dtype, copy=False)


# --------------------------------------------------------------------------------------
# INT8 inference (the runtime's tt_qgemm_*, step by step in NumPy)
# --------------------------------------------------------------------------------------

_QMAGIC = np.float32(12582912.0)  # 1.5 * 2^23: (v + m) - m rounds half to even for |v| < 2^22


def _qmax(reduce_range: bool) -> int:
    """The largest activation: 127 for 7-bit (reduce_range, TT_QGEMM_REDUCE_RANGE), else 255."""
    return 127 if reduce_range else 255


def quantize_rows(x, reduce_range=False):
    """(q uint8 (M, K), scale float32 (M,), zero_point int32 (M,)): the runtime's dynamic
    per-row asymmetric quantization (tt_qgemm_quantize_rows_ex; runtime/cpu/qgemm_rows.h), every
    step in float32 in the same order, so both give the same bits: with qmax = 255, or 127 when
    ``reduce_range``, lo / hi = min / max of the row and 0, scale = hi / qmax - lo / qmax (1 for
    an all-zero row), zp = clamp(rne(-lo / scale), 0, qmax), q = clamp(rne(x / scale) + zp, 0,
    qmax), each division as a multiply by 1 / scale."""
    record_path("numpy")
    qmax = _qmax(reduce_range)
    top = np.float32(qmax)
    x = np.asarray(x, dtype=np.float32)
    m, k = x.shape
    if m and not np.all(np.isfinite(x)):
        bad = int(np.argmin(np.isfinite(x).all(axis=1)))
        raise ValueError(f"quantize_rows: row {bad} of x holds inf or NaN")
    zero = np.zeros(m, np.float32)
    lo = np.minimum(x.min(axis=1), zero) if k else zero
    hi = np.maximum(x.max(axis=1), zero) if k else zero
    scale = hi / top - lo / top
    scale = np.where(scale > 0, scale, np.float32(1.0)).astype(np.float32)
    inv = (np.float32(1.0) / scale).astype(np.float32)
    zp = np.clip((-lo * inv + _QMAGIC) - _QMAGIC, 0, qmax).astype(np.float32)
    q = (x * inv[:, None] + _QMAGIC) - _QMAGIC + zp[:, None]
    return np.clip(q, 0, qmax).astype(np.uint8), scale, zp.astype(np.int32)


def quantized_pack(weight_q, packs, reduce_range=False):
    """Nothing to pack: NumPy multiplies the (K, N) int8 ``weight_q`` as it is (``packs``
    stays empty; ``reduce_range`` changes nothing here: it is the activations' range)."""
    return None


def quantized_matmul(q, zero_point, weight_q, packs, reduce_range=False):
    """int32 ``(q - zero_point[:, None]) @ weight_q``, exact: summed in int64 (NumPy's
    integer matmul has no BLAS; this is the slow, always-available path). ``packs`` is
    unused here. With ``reduce_range`` an activation above 127 is refused, as the runtime
    refuses it on a reduce_range pack."""
    record_path("numpy")
    if reduce_range and q.size and int(q.max()) > 127:
        i, j = np.argwhere(q > 127)[0]
        raise ValueError(f"quantized_matmul: q[{i}][{j}] = {q[i, j]} is above 127, the largest "
                         "activation with reduce_range=True")
    a = q.astype(np.int64) - np.asarray(zero_point, np.int64)[:, None]
    return (a @ weight_q.astype(np.int64)).astype(np.int32)


def quantized_linear(x, weight_q, weight_scale, bias, activation, packs, reduce_range=False):
    """The runtime's tt_qgemm_f32 in NumPy: quantize the rows of x (float32 (M, K); to 7 bits
    with ``reduce_range``), the exact int32 product with ``weight_q``, then float32
    ``acc * (sx * weight_scale) + bias`` and the ``activation`` (None, "relu" or "gelu", the
    tanh GELU of ``bias_gelu``); ``packs`` is unused here."""
    q, sx, zx = quantize_rows(x, reduce_range)
    acc = quantized_matmul(q, zx, weight_q, packs, reduce_range)
    pre = acc.astype(np.float32) * (sx[:, None] * weight_scale[None, :])
    if activation == "gelu":
        out = bias_gelu(pre, bias)
    else:
        out = pre if bias is None else pre + bias
        if activation == "relu":
            out = np.where(out < 0, np.float32(0.0), out)
    record_path("numpy")
    return out.astype(np.float32, copy=False)


register("numpy", probe=lambda: (True, f"NumPy {np.__version__}: serves every call the "
                                        "native back ends decline"),
         ops=door_ops(sys.modules[__name__], _attention),
         priority=0, native=False, description="the NumPy fallback")
