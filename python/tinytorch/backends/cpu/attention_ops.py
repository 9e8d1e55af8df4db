"""attention_ops: FlashAttention of the CPU back end (runtime/cpu/attention*.cpp): the door's
"attention" and "attention_backward".

Owns the folding of batch dims into the runtime's [batch][heads] with strides (broadcast and
transposed-head layouts need no copy) and the calls of tt_attention_forward / _backward.
Assumes: float32 q, k, v (v as wide as q), no mask; the door validated shapes and the causal
mode.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

from ... import _native
from .. import record_native_path
from .common import F32, address, batch_shape, is_f32

__all__ = ["attention", "attention_backward", "NATIVE_MIN_ATTENTION_WORK"]

# --------------------------------------------------------------------------------------
# Attention: tt_attention_forward / tt_attention_backward (FlashAttention, tiled)
# --------------------------------------------------------------------------------------

# Smallest attention (batch*heads*sq*sk*d multiply-adds) sent to the native kernel unless
# any_size=True. 0: since the [B, H, rows, d] layouts fold without building broadcast views,
# the native call, Python and ctypes included, is no slower than the NumPy reference at every
# shape under the old floor of 2^16 multiply-adds that benchmarks/bench_attention_door.py
# measures, down to 1 query x 1 key (forward 1.6-6.2x, forward + backward 1.9-3.2x on a
# 2-vCPU Zen 3: benchmarks/results/bench_attention_door.md), so every float32 attention
# without a mask goes native (KV-cache decoding: one query a call).
NATIVE_MIN_ATTENTION_WORK = 0


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
    if n == 2:  # the common [B, H, rows, d] layouts (heads split or transposed, KV-cache views):
        strided = [(x, (x.strides[0] // 4, x.strides[1] // 4, x.strides[2] // 4)) for x in arrays
                   if x.shape[:2] == batch and x.flags.aligned and (x.shape[-1] == 1 or x.strides[-1] == 4)
                   and min(x.strides) >= 0 and not (x.strides[0] | x.strides[1] | x.strides[2]) % 4]
        if len(strided) == len(arrays):  # read in place, no broadcast views to build
            return batch[0], batch[1], strided
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
            b = math.prod(batch[:split])
            h = math.prod(batch[split:])
            return b, h, folded
    # no common split: copy (materialising broadcasts) and fold everything into heads
    copies = [np.ascontiguousarray(x) for x in views]
    h = math.prod(batch)
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
        return np.empty((b, rows, h, d), dtype=F32).transpose(0, 2, 1, 3)
    return np.empty(shape, dtype=F32)


def _attention_ok(q, k, v, mask, work, any_size) -> bool:
    return (mask is None and is_f32(q, k, v) and q.ndim >= 2 and k.ndim >= 2 and v.ndim >= 2
            and v.shape[-1] == q.shape[-1] and (any_size or work >= NATIVE_MIN_ATTENTION_WORK))


def _attention_work(q, k):
    batch = batch_shape(q.shape[:-2], k.shape[:-2])
    return math.prod(batch) * q.shape[-2] * k.shape[-2] * q.shape[-1]


def attention(q, k, v, mask, causal, scale, any_size):
    """(out, lse) of softmax(scale q k^T) v through tt_attention_forward, for float32 q, k,
    v (v as wide as q) and no mask (the door passes masks to the NumPy reference); causal is
    the runtime's code (0 none, 1 top-left, 2 bottom-right). Declines problems below
    NATIVE_MIN_ATTENTION_WORK multiply-adds unless any_size."""
    if not _attention_ok(q, k, v, mask, _attention_work(q, k), any_size):
        return NotImplemented
    lib = _native.lib
    batch = batch_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    out = _empty_like_heads(q, batch + (sq, d))
    b, h, ((q3, sq_), (k3, sk_), (v3, sv_), (o3, so_)) = _fold_batch([q, k, v, out], batch)
    if address(o3) != address(out):  # folded through copies: write a contiguous result
        out = np.empty(batch + (sq, d), dtype=F32)
        b, h, ((q3, sq_), (k3, sk_), (v3, sv_), (o3, so_)) = _fold_batch([q, k, v, out], batch)
    lse = np.empty(batch + (sq,), dtype=F32)
    status = lib.tt_attention_forward(address(q3), _strides_arg(sq_), address(k3),
                                      _strides_arg(sk_), address(v3), _strides_arg(sv_),
                                      address(o3), _strides_arg(so_), address(lse), b, h,
                                      sq, sk, d, float(scale), int(causal))
    _native.check(status, "attention")
    record_native_path()
    return out, lse


def attention_backward(q, k, v, out, lse, grad, mask, causal, scale, need, any_size):
    """(dq, dk, dv) of ``attention`` (None where need says False), batch axes as broadcast,
    through tt_attention_backward, from q, k, v, the forward's out and lse and grad =
    dL/d(out); mask, causal, scale and any_size as in ``attention``."""
    if not (_attention_ok(q, k, v, mask, _attention_work(q, k), any_size)
            and is_f32(out, lse, grad)):
        return NotImplemented
    lib = _native.lib
    batch = batch_shape(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    grads = [_empty_like_heads(x, batch + (rows, d)) if wanted else None
             for wanted, x, rows in zip(need, (q, k, v), (sq, sk, sk))]
    wanted = [g for g in grads if g is not None]
    b, h, folded = _fold_batch([q, k, v, out, grad] + wanted, batch)
    if any(address(f[0]) != address(g) for f, g in zip(folded[5:], wanted)):
        # folded through copies: write contiguous gradients instead
        grads = [None if g is None else np.empty(g.shape, dtype=F32) for g in grads]
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
            args += [address(g3_), _strides_arg(strides)]
    status = lib.tt_attention_backward(address(q3), _strides_arg(s_q), address(k3),
                                       _strides_arg(s_k), address(v3), _strides_arg(s_v),
                                       address(o3), _strides_arg(s_o), address(g3),
                                       _strides_arg(s_g), address(lse), *args, b, h, sq, sk,
                                       d, float(scale), int(causal))
    _native.check(status, "attention_backward")
    record_native_path()
    return tuple(grads)
