"""Attention: scaled dot-product attention and multi-head attention.

What this file owns
  attention(q, k, v, mask=None, causal=False, scale=None, dropout_p=0.0, flash=None)
      the engine's attention, with PyTorch's ``F.scaled_dot_product_attention`` contract
      (returns the output only; the layers, models and benchmarks call it):
      softmax(q k^T * scale + mask) v over [..., seq, dim] (usually [batch, heads, seq, dim]),
      as one autograd Function: the forward keeps only the attention probabilities, the
      backward is the textbook one
          dV = P^T dO,   dP = dO V^T,   dS = P * (dP - rowsum(dP * P)),   dQ = dS K s,  dK = dS^T Q s
      Every product is a batched matmul through ``acceleration.matmul``.
      The softmax subtracts the row maximum first, so scores of any size never overflow; a row
      whose keys are all masked out gives zeros (not NaN) and passes no gradient.
      Masks follow PyTorch's ``scaled_dot_product_attention``: a bool mask is True where a query
      MAY attend; a float mask is added to the scores. ``causal=True`` lets query i see keys
      0..i (top-left aligned, like PyTorch's ``is_causal``).
  scaled_dot_product_attention(Q, K, V, mask=None, causal=False, scale=None)
      the course's function (upstream TinyTorch's module 12 contract, where course code
      imports it): returns ``(output, weights)``, both differentiable, from ONE call of the
      same Function over [V | I] (the weights are the output for V = I). Its mask is bool or
      binary (1 = may attend, 0 = masked); any other float is refused, so an additive mask
      can never be misread as a binary one (or the reverse), and so is a query with no
      allowed key.
  binary_mask(mask, who)  that mask rule, in one place (core/transformer.py's adapters use it).
  causal_mask(seq_len, kv_len=None)  bool [seq_len, kv_len], True where attention is allowed;
      with kv_len > seq_len the queries are the *last* seq_len positions (what incremental
      decoding with a KV cache needs).
  MultiHeadAttention(embed_dim, num_heads, bias=True, dropout=0.0)
      q_proj, k_proj, v_proj, out_proj are ordinary ``Linear`` layers (so tools can find and
      replace them by name). Inputs are batch-first [batch, seq, embed]. ``attn_mask`` and
      ``key_padding_mask`` follow ``nn.MultiheadAttention``: a bool True there means "may NOT
      attend" (the opposite of the SDPA convention, exactly as in PyTorch); float masks add.
      ``kv_cache`` (see kv_cache.py) appends this call's keys/values and attends over all of them.

What it never does
  It never materialises anything larger than the [..., seq_q, seq_k] probabilities, and it
  never edits its inputs.

What it assumes: q, k, v are Tensors or float arrays [..., seq, dim]
(``acceleration.check_attention_args`` checks shapes, mask and scale); the kernel door
(core/acceleration.py): ``acceleration.attention`` / ``attention_backward`` serve the default
FlashAttention path (float32, no mask, no dropout, v as wide as q; the score matrix is then
never kept), ``acceleration.matmul`` every product of the stock path; dropout masks from the
framework generator (core/random.py); the projections are layers.py's ``Linear``.
"""
from __future__ import annotations

import math

import numpy as np

from . import acceleration as _acc
from .autograd import Function
from .layers import Layer, Linear
from .random import get_generator
from .tensor import Tensor, concat

__all__ = ["attention", "scaled_dot_product_attention", "binary_mask", "ScaledDotProductAttention", "FlashAttention", "causal_mask",
           "MultiHeadAttention", "stable_softmax"]


def stable_softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax of the array ``scores`` along ``axis`` that tolerates +-large and -inf
    scores; an all -inf row becomes zeros, and so does attention over zero keys (an empty
    softmax axis), as in PyTorch."""
    m = np.max(scores, axis=axis, keepdims=True, initial=-np.inf)  # initial: zero keys give zeros
    m = np.where(np.isfinite(m), m, 0.0).astype(scores.dtype, copy=False)
    e = np.exp(scores - m)
    s = np.sum(e, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = e / s
    return np.where(s > 0, p, 0.0).astype(scores.dtype, copy=False)


def causal_mask(seq_len: int, kv_len: int | None = None) -> np.ndarray:
    """Bool [seq_len, kv_len]: True where query i may attend key j (j <= i + kv_len - seq_len)."""
    if not isinstance(seq_len, (int, np.integer)) or seq_len < 0:
        raise ValueError(f"causal_mask: seq_len must be a non-negative int, got {seq_len!r}")
    kv_len = seq_len if kv_len is None else kv_len
    if kv_len < seq_len:
        raise ValueError(f"causal_mask: kv_len ({kv_len}) must be >= seq_len ({seq_len})")
    return np.tril(np.ones((seq_len, kv_len), dtype=bool), k=kv_len - seq_len)


def _swap(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


class ScaledDotProductAttention(Function):
    """The whole of softmax(q k^T s + mask) v as one differentiable operation."""

    def forward(self, q, k, v, mask, causal, scale, dropout_p):
        """Arrays q [..., L, d], k [..., S, d], v [..., S, dv] -> [..., L, dv].

        ``mask``: None, bool (True = may attend) or float (added), broadcastable to
        [..., L, S]; ``causal``: bool, top-left triangle; ``scale``: float multiplying the
        scores; ``dropout_p``: probability of dropping an attention weight (0 = none).
        """
        scores = _acc.matmul(q, _swap(k))
        scores *= np.asarray(scale, dtype=scores.dtype)
        if mask is not None:
            if mask.dtype == np.bool_:
                scores = np.where(mask, scores, -np.inf).astype(scores.dtype, copy=False)
            else:
                scores = scores + mask.astype(scores.dtype, copy=False)
        if causal:
            l, s = scores.shape[-2], scores.shape[-1]
            scores = np.where(np.tril(np.ones((l, s), dtype=bool)), scores, -np.inf).astype(scores.dtype, copy=False)
        p = stable_softmax(scores)
        if dropout_p > 0.0:
            keep = get_generator().random(p.shape, dtype=np.float32) >= dropout_p
            self.drop = keep.astype(p.dtype) * np.asarray(1.0 / (1.0 - dropout_p), dtype=p.dtype)
            p_used = p * self.drop
        else:
            self.drop = None
            p_used = p
        self.q, self.k, self.v, self.p, self.p_used, self.scale = q, k, v, p, p_used, scale
        return _acc.matmul(p_used, v)

    def backward(self, grad_output):
        """(dq, dk, dv) from ``grad_output`` [..., L, dv] through the saved probabilities;
        None for mask and the other non-tensor inputs."""
        need = self.needs_input_grad
        p, scale = self.p, self.scale
        dq = dk = dv = None
        if need[2]:
            dv = _acc.matmul(_swap(self.p_used), grad_output)
        if need[0] or need[1]:
            dp = _acc.matmul(grad_output, _swap(self.v))
            if self.drop is not None:
                dp = dp * self.drop
            ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True))
            ds *= np.asarray(scale, dtype=ds.dtype)
            if need[0]:
                dq = _acc.matmul(ds, self.k)
            if need[1]:
                dk = _acc.matmul(_swap(ds), self.q)
        return dq, dk, dv


class FlashAttention(Function):
    """out = softmax(scale q k^T) v through the door's ``attention`` (the runtime's
    FlashAttention kernel for float32, the tiled NumPy reference otherwise): no score matrix
    is kept; the backward recomputes the probabilities from the saved log-sum-exp."""

    def forward(self, q, k, v, causal, scale):
        """q [..., L, d], k [..., S, d], v [..., S, d]; ``causal`` False, True (top-left) or
        "bottom_right" (the queries are the last L positions); ``scale`` multiplies q k^T."""
        out, lse = _acc.attention(q, k, v, causal=causal, scale=scale)
        self.q, self.k, self.v, self.out, self.lse = q, k, v, out, lse
        self.causal, self.scale = causal, scale
        return out

    def backward(self, grad_output):
        """(grad_q, grad_k, grad_v) from ``grad_output`` = dL/d(out), FlashAttention-2 style."""
        g = grad_output.astype(self.out.dtype, copy=False)
        return _acc.attention_backward(self.q, self.k, self.v, self.out, self.lse, g,
                                       causal=self.causal, scale=self.scale,
                                       need=self.needs_input_grad[:3])


def _as_tensor(x, name):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return Tensor(x, dtype=x.dtype if x.dtype.kind == "f" else None)  # arrays keep their float dtype
    raise TypeError(f"attention: {name} must be a Tensor or ndarray, got {type(x).__name__}")


def attention(q, k, v, mask=None, causal: bool = False, scale: float | None = None,
              dropout_p: float = 0.0, flash: bool | None = None):
    """softmax(q k^T / sqrt(d) + mask) v for q [..., L, d], k [..., S, d], v [..., S, dv],
    with the conventions of PyTorch's ``F.scaled_dot_product_attention``.

    Tensors in give a Tensor out (differentiable in q, k, v); arrays in give an array out.
    Batch dims (usually [batch, heads]) broadcast; the result is [..., L, dv].

    Args:
        q, k, v: queries, keys and values (Tensors or float arrays).
        mask: None, a bool mask (True where a query MAY attend, PyTorch's SDPA convention)
            or a float mask added to the scores; broadcastable to [..., L, S].
        causal: query i sees keys 0..i only (top-left aligned, PyTorch's ``is_causal``);
            "bottom_right" aligns the queries with the last L keys (KV-cache decoding).
        scale: multiplies q k^T; default 1/sqrt(d).
        dropout_p: probability in [0, 1) of dropping each attention weight (pass 0.0 in
            evaluation; masks come from the framework generator).
        flash: None (default) takes FlashAttention (``FlashAttention``: tiled, no score
            matrix, the runtime's kernel) whenever it applies -- no mask, no dropout,
            float32, v as wide as q -- and the stock path otherwise; False always takes the
            stock path (``ScaledDotProductAttention``: the textbook formula, kept for
            teaching and parity); True requires FlashAttention (ValueError if it cannot).
    """
    arrays_in = not isinstance(q, Tensor)
    q, k, v = _as_tensor(q, "q"), _as_tensor(k, "k"), _as_tensor(v, "v")
    if mask is not None:
        mask = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"attention: dropout_p must be in [0, 1), got {dropout_p}")
    _, scale = _acc.check_attention_args(q, k, v, mask, causal, scale, "attention")
    l, s = q.shape[-2], k.shape[-2]
    flash_applies = mask is None and dropout_p == 0.0 and v.shape[-1] == q.shape[-1] and \
        q.dtype == k.dtype == v.dtype == np.float32
    if flash and not flash_applies:
        raise ValueError("attention: flash=True needs float32 q, k, v with v as wide as q, no mask "
                         f"and no dropout (got {q.dtype}/{k.dtype}/{v.dtype}, v width {v.shape[-1]}, "
                         f"mask {'given' if mask is not None else 'none'}, dropout_p {dropout_p})")
    if causal == "bottom_right":
        if not flash_applies or flash is False:
            # the stock path knows only top-left causality: spell the rule out as a mask
            allowed = causal_mask(l, s)
            mask = allowed if mask is None else _and_mask(mask, allowed)
            causal = False
        else:
            return _result(FlashAttention.apply(q, k, v, causal="bottom_right", scale=scale), arrays_in)
    if flash_applies and flash is not False:
        out = FlashAttention.apply(q, k, v, causal=bool(causal), scale=scale)
    else:
        out = ScaledDotProductAttention.apply(q, k, v, mask=mask, causal=bool(causal), scale=scale,
                                              dropout_p=float(dropout_p))
    return _result(out, arrays_in)


def _result(out, arrays_in):
    return out.data if arrays_in else out


def binary_mask(mask, who: str = "attention") -> np.ndarray | None:
    """The course's mask as bool (True = may attend): bool as is; numbers must be 0 or 1
    (ValueError naming the first other value, prefixed by ``who``); None stays None."""
    if mask is None:
        return None
    m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
    if m.dtype == np.bool_:
        return m
    if m.dtype.kind not in "fiu":
        raise TypeError(f"{who}: mask must be bool or numeric 0/1, got {m.dtype}")
    odd = m[(m != 0) & (m != 1)]  # NaN lands here too
    if odd.size:
        raise ValueError(f"{who}: mask must hold only 1 (may attend) and 0 (masked), got "
                         f"{odd.flat[0]!r}; an additive float mask (0 / -inf) goes to "
                         "core.attention.attention")
    return m == 1


def scaled_dot_product_attention(Q, K, V, mask=None, causal: bool = False, scale: float | None = None):
    """The course's attention: ``(output, weights)`` with weights = softmax(Q K^T / sqrt(d)) on
    the allowed keys and output = weights V, for Q [..., L, d], K [..., S, d], V [..., S, dv].

    Both come from one call of ``ScaledDotProductAttention`` over [V | I] (the identity's
    columns give the weights), so both are differentiable and share one score matrix.
    Tensors in give Tensors out; arrays in give arrays out. The engine's output-only
    version with PyTorch's mask conventions is ``attention``.

    Args:
        Q, K, V: queries, keys and values (Tensors or float arrays).
        mask: None, bool, or numbers 0/1 (1 = may attend) broadcastable to [..., L, S]; any
            other value is refused (ValueError), and so is a query with no allowed key.
        causal: query i sees keys 0..i only (top-left), or "bottom_right".
        scale: multiplies Q K^T; default 1/sqrt(d).
    """
    who = "scaled_dot_product_attention"
    arrays_in = not isinstance(Q, Tensor)
    q, k, v = _as_tensor(Q, "Q"), _as_tensor(K, "K"), _as_tensor(V, "V")
    allowed = binary_mask(mask, who)
    _, scale = _acc.check_attention_args(q, k, v, allowed, causal, scale, who)
    l, s = q.shape[-2], k.shape[-2]
    if causal == "bottom_right":
        allowed = causal_mask(l, s) if allowed is None else _and_mask(allowed, causal_mask(l, s))
        causal = False
    seen = allowed
    if causal:  # top-left: query i sees keys 0..i
        tri = np.tril(np.ones((l, s), dtype=bool))
        seen = tri if allowed is None else allowed & tri
    if s == 0 or (seen is not None and not seen.any(axis=-1).all()):
        raise ValueError(f"{who}: every query needs at least one allowed key (a row of the mask "
                         f"is all 0, or there are {s} keys)")
    dv = v.shape[-1]
    eye = Tensor(np.broadcast_to(np.eye(s, dtype=v.dtype), v.shape[:-1] + (s,)), dtype=v.dtype)
    both = ScaledDotProductAttention.apply(q, k, concat([v, eye], axis=-1), mask=allowed,
                                           causal=bool(causal), scale=scale, dropout_p=0.0)
    out, weights = both[..., :dv], both[..., dv:]
    return (out.data, weights.data) if arrays_in else (out, weights)


class MultiHeadAttention(Layer):
    """Multi-head attention with separate q/k/v/out projections (all ``Linear``), batch-first
    like ``nn.MultiheadAttention(batch_first=True)``.

    Args:
        embed_dim: model width E; input and output are [batch, seq, E].
        num_heads: number of heads; must divide embed_dim (head_dim = E // num_heads).
        bias: whether the four projections have a bias.
        dropout: dropout probability on the attention weights (training mode only).
    """

    def __init__(self, embed_dim: int, num_heads: int, bias: bool = True, dropout: float = 0.0):
        if not isinstance(embed_dim, (int, np.integer)) or embed_dim < 1:
            raise ValueError(f"MultiHeadAttention: embed_dim must be a positive int, got {embed_dim!r}")
        if not isinstance(num_heads, (int, np.integer)) or num_heads < 1:
            raise ValueError(f"MultiHeadAttention: num_heads must be a positive int, got {num_heads!r}")
        if embed_dim % num_heads != 0:
            raise ValueError(f"MultiHeadAttention: embed_dim {embed_dim} is not divisible by num_heads "
                             f"{num_heads}")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = self.embed_dim // self.num_heads
        self.dropout = float(dropout)
        self.q_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)

    def _split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        return x.reshape(b, t, self.num_heads, self.head_dim).transpose(0, 2, 1, 3)

    @staticmethod
    def _pytorch_mask(attn_mask, key_padding_mask, b, l, s):
        """Combine PyTorch-style masks (bool True = blocked) into one SDPA mask, or None."""
        combined = None
        if attn_mask is not None:
            m = attn_mask.data if isinstance(attn_mask, Tensor) else np.asarray(attn_mask)
            if m.shape not in ((l, s),) and not (m.ndim == 4 and m.shape[-2:] == (l, s)):
                raise ValueError(f"MultiHeadAttention: attn_mask must be [{l}, {s}] or [B, H, {l}, {s}], "
                                 f"got {m.shape}")
            combined = ~m if m.dtype == np.bool_ else m.astype(np.float32)
        if key_padding_mask is not None:
            kp = key_padding_mask.data if isinstance(key_padding_mask, Tensor) else np.asarray(key_padding_mask)
            if kp.shape != (b, s):
                raise ValueError(f"MultiHeadAttention: key_padding_mask must be [{b}, {s}], got {kp.shape}")
            kp = kp[:, None, None, :]
            kp = ~kp if kp.dtype == np.bool_ else kp.astype(np.float32)
            if combined is None:
                combined = kp
            elif combined.dtype == np.bool_ and kp.dtype == np.bool_:
                combined = combined & kp
            else:
                to_float = lambda a: np.where(a, 0.0, -np.inf).astype(np.float32) if a.dtype == np.bool_ else a
                combined = to_float(combined) + to_float(kp)
        return combined

    def forward(self, query, key=None, value=None, attn_mask=None, key_padding_mask=None,
                causal: bool = False, need_weights: bool = False, kv_cache=None):
        """query [B, L, E]; key/value default to query (self-attention). Returns [B, L, E]
        (and the head-averaged attention weights [B, L, S] when ``need_weights``).

        Args:
            query, key, value: Tensors [B, L, E] and [B, S, E]; value defaults to key.
            attn_mask: [L, S] or [B, H, L, S]; bool True means "may NOT attend" (PyTorch's
                ``nn.MultiheadAttention`` convention, the opposite of SDPA's); float adds.
            key_padding_mask: [B, S]; bool True marks padding keys to ignore.
            causal: each query attends only to keys at or before its position (with a
                cache, relative to the cached length).
            need_weights: also return the head-averaged weights (no gradient through them).
            kv_cache: a ``LayerKVCache``; this call's keys/values are appended and the
                queries attend over everything cached.
        """
        if not isinstance(query, Tensor):
            query = Tensor(query)
        key = query if key is None else (key if isinstance(key, Tensor) else Tensor(key))
        value = key if value is None else (value if isinstance(value, Tensor) else Tensor(value))
        for name, t in (("query", query), ("key", key), ("value", value)):
            if t.ndim != 3 or t.shape[-1] != self.embed_dim:
                hint = (" (upstream's mha(x, mask) call is core.transformer.MultiHeadAttention's)"
                        if name == "key" and value is key else "")
                raise ValueError(f"MultiHeadAttention: {name} must be [batch, seq, {self.embed_dim}], "
                                 f"got {t.shape}{hint}")
        if key.shape[:2] != value.shape[:2] or key.shape[0] != query.shape[0]:
            raise ValueError(f"MultiHeadAttention: batch/seq mismatch: query {query.shape}, key {key.shape}, "
                             f"value {value.shape}")
        b, l, _ = query.shape
        q = self._split_heads(self.q_proj(query))
        k = self._split_heads(self.k_proj(key))
        v = self._split_heads(self.v_proj(value))
        past = 0
        if kv_cache is not None:
            past = kv_cache.length
            k, v = kv_cache.update(k, v)
        s = k.shape[-2]
        mask = self._pytorch_mask(attn_mask, key_padding_mask, b, l, s)
        sdpa_causal = False
        if causal:
            if past == 0 and l == s:
                sdpa_causal = mask is None  # fast path: the Function builds the triangle itself
                if mask is not None:
                    mask = _and_mask(mask, causal_mask(l, s))
            elif l > 1:
                # the new queries are the last l positions: bottom-right causality
                if mask is None:
                    sdpa_causal = "bottom_right"
                else:
                    mask = _and_mask(mask, causal_mask(l, s))
            # l == 1 with a cache: the single new query may see every cached key.
        drop = self.dropout if self.training else 0.0
        if need_weights:
            out, weights = self._attend_with_weights(q, k, v, mask, sdpa_causal, drop)
        else:
            out = attention(q, k, v, mask=mask, causal=sdpa_causal, dropout_p=drop)
        out = out.transpose(0, 2, 1, 3).reshape(b, l, self.embed_dim)
        out = self.out_proj(out)
        if need_weights:
            return out, weights
        return out

    def _attend_with_weights(self, q, k, v, mask, causal, drop):
        out = attention(q, k, v, mask=mask, causal=causal, dropout_p=drop)
        # Recompute the probabilities for reporting only (no gradient through them).
        scores = _acc.matmul(q.data, _swap(k.data)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf) if mask.dtype == np.bool_ else scores + mask
        if causal:
            scores = np.where(causal_mask(scores.shape[-2], scores.shape[-1]), scores, -np.inf)
        weights = stable_softmax(scores).mean(axis=1)
        return out, Tensor(weights, dtype=weights.dtype)

    def extra_repr(self):
        """``embed_dim=..., num_heads=...`` for repr()."""
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _and_mask(mask: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Intersect an SDPA mask (bool allowed, or float additive) with a bool 'allowed' mask."""
    if mask.dtype == np.bool_:
        return mask & allowed
    return mask + np.where(allowed, 0.0, -np.inf).astype(mask.dtype)
