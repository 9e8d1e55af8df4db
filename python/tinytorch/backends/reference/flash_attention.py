"""flash_attention: the tiled NumPy FlashAttention -- the teaching version, the test oracle,
and the NumPy back end's attention op (registered in reference/__init__.py; also importable
as tinytorch.backends.attention_reference).

The online-softmax equations written out line by line, tile by tile: per query a running
maximum m_i, a running sum l_i and an accumulator O_i rescaled whenever the maximum grows,
the final division by l_i; the FlashAttention-2 backward recomputes each block of
probabilities from the saved log-sum-exp (with D_i = rowsum(dO_i * O_i)). ``attention_naive``
is the textbook formula it must agree with. It lives with the back ends, not in the
extension (extensions/flash_attn.py re-exports it), so that the door's NumPy fallback can
use it without the core importing an extension. No S x S matrix is formed beyond one
block of scores.

Owns the tiled reference and its backward; assumes NumPy only.
"""
from __future__ import annotations

import numpy as np

from .. import record_path

__all__ = ["attention_forward_reference", "attention_backward_reference", "attention_naive",
           "attention", "attention_backward", "FALLBACK_BLOCK"]

# Block size of the reference when it serves as the door's fallback: large enough that the
# Python loop over tiles is cheap, small enough that a tile of scores stays O(block^2).
FALLBACK_BLOCK = 256

# --------------------------------------------------------------------------------------
# The tiled reference (NumPy): FlashAttention forward and FlashAttention-2 backward
# --------------------------------------------------------------------------------------

def _causal_code(causal) -> int:
    codes = {False: 0, True: 1, "top_left": 1, "bottom_right": 2, 0: 0, 1: 1, 2: 2}
    try:
        return codes[causal]
    except (KeyError, TypeError):
        raise ValueError(f"causal must be False, True, 'top_left' or 'bottom_right', "
                         f"got {causal!r}") from None


def _tile_scores(qi, kj, scale, i0, j0, code, offset, mask):
    """Scores of one tile, S = scale Q_i K_j^T, with the causal rule and the mask applied:
    masked scores are -inf (where a bool mask is False, or an additive -inf). ``mask`` is
    None or already broadcast to [..., L, S] (a view: nothing is materialised)."""
    s = (qi @ np.swapaxes(kj, -1, -2)) * np.asarray(scale, dtype=qi.dtype)
    if code:
        rows = np.arange(i0, i0 + s.shape[-2])[:, None]
        cols = np.arange(j0, j0 + s.shape[-1])[None, :]
        s = np.where(cols <= rows + offset, s, -np.inf)        # may query i see key j?
    if mask is not None:
        m = mask[..., i0:i0 + s.shape[-2], j0:j0 + s.shape[-1]]
        if m.dtype == np.bool_:
            s = np.where(m, s, -np.inf)
        else:
            s = s + m.astype(s.dtype, copy=False)
    return s.astype(qi.dtype, copy=False)


def _setup(q, k, v, causal, scale, mask):
    """Common dtype, broadcast views, sizes, scale and causal offset of the references."""
    code = _causal_code(causal)
    dtype = np.result_type(q.dtype, k.dtype, v.dtype, np.float32)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    q, k, v = (np.broadcast_to(np.asarray(x, dtype=dtype), batch + x.shape[-2:]) for x in (q, k, v))
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    scale = (1.0 / np.sqrt(d) if d > 0 else 1.0) if scale is None else float(scale)
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask), batch + (sq, sk))
    return q, k, v, code, dtype, batch, scale, (sk - sq if code == 2 else 0), mask


def attention_forward_reference(q, k, v, causal=False, scale=None, mask=None, block_q=64,
                                block_k=64):
    """(out, lse) of softmax(scale q k^T + mask) v, FlashAttention style, in NumPy.

    q [..., L, d], k [..., S, d], v [..., S, dv] (batch dims broadcast), ``causal`` as in
    ``flash_attention`` (or its runtime code 0, 1, 2), ``scale`` (default 1/sqrt(d)), an
    optional bool/additive ``mask`` broadcastable to [..., L, S]; ``block_q`` queries x
    ``block_k`` keys per tile. Per query block Q_i, over the key blocks K_j, V_j:

        S     = scale Q_i K_j^T                 (one tile of scores, masked to -inf)
        m_new = max(m_i, rowmax(S))             running maximum
        alpha = exp(m_i - m_new)                how much the old terms shrink
        P     = exp(S - m_new)                  unnormalised probabilities of the tile
        l_i   = alpha l_i + rowsum(P)           running sum of exponentials
        O_i   = alpha O_i + P V_j               rescaled accumulator
        m_i   = m_new
    then O_i = O_i / l_i and lse_i = m_i + log(l_i). A query that sees no key has
    m_i = -inf and l_i = 0: its row is 0 and its lse -inf (exp is taken relative to 0 then,
    so -inf - -inf never appears). NaN propagates as in the naive formula.
    """
    q, k, v, code, dtype, batch, scale, offset, mask = _setup(q, k, v, causal, scale, mask)
    sq, sk, dv = q.shape[-2], k.shape[-2], v.shape[-1]
    out = np.zeros(batch + (sq, dv), dtype=dtype)
    lse = np.full(batch + (sq,), -np.inf, dtype=dtype)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for i0 in range(0, sq, block_q):
            i1 = min(i0 + block_q, sq)
            qi = q[..., i0:i1, :]
            m = np.full(batch + (i1 - i0,), -np.inf, dtype=dtype)   # m_i
            l = np.zeros(batch + (i1 - i0,), dtype=dtype)           # l_i
            acc = np.zeros(batch + (i1 - i0, dv), dtype=dtype)      # O_i (unnormalised)
            # causal: keys after the last query's horizon are never visited
            j_end = sk if not code else min(sk, max(0, i1 + offset))
            for j0 in range(0, j_end, block_k):
                j1 = min(j0 + block_k, j_end)
                s = _tile_scores(qi, k[..., j0:j1, :], scale, i0, j0, code, offset, mask)
                m_new = np.maximum(m, s.max(axis=-1))
                m_safe = np.where(m_new == -np.inf, 0.0, m_new).astype(dtype)
                alpha = np.exp(m - m_safe)
                p = np.exp(s - m_safe[..., None])
                l = alpha * l + p.sum(axis=-1)
                acc = alpha[..., None] * acc + p @ v[..., j0:j1, :]
                m = m_new
            out[..., i0:i1, :] = np.where(l[..., None] == 0, 0.0, acc / l[..., None])
            lse[..., i0:i1] = np.where(l == 0, -np.inf, m + np.log(l))
    return out, lse


def attention_backward_reference(q, k, v, out, lse, grad, causal=False, scale=None, mask=None,
                                 need=(True, True, True), block_q=64, block_k=64):
    """(dq, dk, dv) of ``attention_forward_reference``, FlashAttention-2 style, in NumPy.

    ``q``, ``k``, ``v``, ``causal``, ``scale``, ``mask`` and the tile sizes ``block_q`` x
    ``block_k`` as in the forward; ``out`` and ``lse`` are the forward's results, ``grad`` =
    dL/d(out); ``need`` says which of dq, dk, dv to return (None otherwise). The
    probabilities are recomputed tile by tile from lse (never stored), with
    D_i = rowsum(dO_i * O_i) computed once:

        for each key block K_j, V_j:            (outer loop: dK_j, dV_j stay local)
          for each query block Q_i that sees some key of it:
            S    = scale Q_i K_j^T              (masked as in the forward)
            P    = exp(S - lse_i)               recomputed probabilities
            dV_j += P^T dO_i
            dP   = dO_i V_j^T
            dS   = P * (dP - D_i)               softmax backward, without the rowsum
            dQ_i += scale dS K_j
            dK_j += scale dS^T Q_i
    Gradients have the broadcast batch shape (the autograd engine sums broadcast axes).
    """
    q, k, v, code, dtype, batch, scale, offset, mask = _setup(q, k, v, causal, scale, mask)
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    out = np.broadcast_to(np.asarray(out, dtype=dtype), batch + (sq, dv))
    grad = np.broadcast_to(np.asarray(grad, dtype=dtype), batch + (sq, dv))
    lse = np.broadcast_to(np.asarray(lse, dtype=dtype), batch + (sq,))
    D = np.sum(grad * out, axis=-1)                                  # D_i = rowsum(dO_i * O_i)
    lse_safe = np.where(lse == -np.inf, np.inf, lse).astype(dtype)   # no key: P = exp(-inf) = 0
    dq = np.zeros(batch + (sq, d), dtype=dtype)
    dk = np.zeros(batch + (sk, d), dtype=dtype)
    dvv = np.zeros(batch + (sk, dv), dtype=dtype)
    sc = np.asarray(scale, dtype=dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        for j0 in range(0, sk, block_k):
            j1 = min(j0 + block_k, sk)
            kj, vj = k[..., j0:j1, :], v[..., j0:j1, :]
            dk_j = np.zeros(batch + (j1 - j0, d), dtype=dtype)
            dv_j = np.zeros(batch + (j1 - j0, dv), dtype=dtype)
            # causal: query blocks before the first query that sees key j0 are skipped
            i_start = 0 if not code else max(0, j0 - offset) // block_q * block_q
            for i0 in range(i_start, sq, block_q):
                i1 = min(i0 + block_q, sq)
                qi, doi = q[..., i0:i1, :], grad[..., i0:i1, :]
                s = _tile_scores(qi, kj, scale, i0, j0, code, offset, mask)
                p = np.exp(s - lse_safe[..., i0:i1, None])
                dv_j += np.swapaxes(p, -1, -2) @ doi
                dp = doi @ np.swapaxes(vj, -1, -2)
                ds = p * (dp - D[..., i0:i1, None])
                dq[..., i0:i1, :] += (ds @ kj) * sc
                dk_j += (np.swapaxes(ds, -1, -2) @ qi) * sc
            dk[..., j0:j1, :] = dk_j
            dvv[..., j0:j1, :] = dv_j
    grads = (dq, dk, dvv)
    return tuple(g if n else None for g, n in zip(grads, need))


def attention_naive(q, k, v, causal=False, scale=None, mask=None):
    """The textbook formula softmax(scale q k^T + mask) v, materialising every score (the
    oracle the tiled reference is tested against). ``q``, ``k``, ``v``, ``causal``, ``scale``
    and ``mask`` as in ``attention_forward_reference``; a query that sees no key gives a
    zero row."""
    q, k, v, code, dtype, batch, scale, offset, mask = _setup(q, k, v, causal, scale, mask)
    s = _tile_scores(q, k, scale, 0, 0, code, offset, mask)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = s.max(axis=-1, keepdims=True, initial=-np.inf)
        e = np.exp(s - np.where(m == -np.inf, 0.0, m))
        total = e.sum(axis=-1, keepdims=True)
        p = np.where(total == 0, 0.0, e / total)
    return p @ v


def attention(q, k, v, mask, causal, scale, any_size=False):
    """The NumPy back end's ``attention`` op (the door's signature, never declines): the
    tiled reference with FALLBACK_BLOCK tiles on q [..., L, d], k [..., S, d], v [..., S, dv]
    and an optional bool/additive mask; ``causal`` is the runtime's code (0, 1, 2), ``scale``
    already resolved; ``any_size`` is ignored. Returns (out, lse)."""
    record_path("numpy")
    return attention_forward_reference(q, k, v, causal=causal, scale=scale, mask=mask,
                                       block_q=FALLBACK_BLOCK, block_k=FALLBACK_BLOCK)


def attention_backward(q, k, v, out, lse, grad, mask, causal, scale, need, any_size=False):
    """The NumPy back end's ``attention_backward`` op: the tiled FlashAttention-2 backward.
    q, k, v, mask, causal (a code) and scale as in ``attention``; out and lse are what the
    forward returned, grad is dL/d(out), ``need`` a triple of bools for (q, k, v);
    ``any_size`` is ignored. Returns (grad_q, grad_k, grad_v)."""
    record_path("numpy")
    return attention_backward_reference(q, k, v, out, lse, grad, causal=causal, scale=scale,
                                        mask=mask, need=need, block_q=FALLBACK_BLOCK,
                                        block_k=FALLBACK_BLOCK)
