"""attention_kernels: a FlashAttention forward kernel in Triton.

Owns: one @triton.jit kernel and its launcher. Imported only at call time, by
``backends/triton/attention.py`` once the registry allowed Triton (it imports triton at its
top; the package never does at import time).

The algorithm is the tiled reference's (``backends/attention_reference.py``,
``attention_forward_reference``), line for line, with one program per block of BLOCK_M
queries of one (batch, head) slice, walking the keys in blocks of BLOCK_N:

    S     = scale Q_i K_j^T           (masked to -inf past the causal horizon / the last key)
    m_new = max(m_i, rowmax(S)),  m_safe = m_new, or 0 where m_new = -inf
    alpha = exp(m_i - m_safe),    P = exp(S - m_safe)
    l_i   = alpha l_i + rowsum(P),  O_i = alpha O_i + P V_j,  m_i = m_new
    O_i  /= l_i (0 where l_i = 0),  lse_i = m_i + log(l_i) (-inf where l_i = 0)

Causal: query i sees key j when j <= i + offset (offset 0 "top_left", S - L
"bottom_right"); key blocks past the block's last horizon are never visited. Products use
``input_precision="ieee"`` (true float32, not TF32) so results match the float32 reference.
Head dims are padded to a power of two >= 16 (tl.dot's minimum) with masked loads.

Assumes: q [B, L, d], k [B, S, d], v [B, S, dv], o [B, L, dv] with unit stride in the last
dim (strides of the first two passed in); lse [B, L] contiguous; float32.
"""
from __future__ import annotations

import triton
import triton.language as tl

__all__ = ["launch_attention_forward"]


@triton.jit
def _flash_forward_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, L, S, D, DV, scale, offset,
                          sqb, sqm, skb, skn, svb, svn, sob, som,
                          CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dq = tl.arange(0, BLOCK_D)
    dv = tl.arange(0, BLOCK_DV)
    q = tl.load(q_ptr + bh * sqb + rows[:, None] * sqm + dq[None, :],
                mask=(rows[:, None] < L) & (dq[None, :] < D), other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    hi = S
    if CAUSAL:
        hi = tl.minimum(S, tl.maximum(0, (pid_m + 1) * BLOCK_M + offset))
    for j0 in range(0, hi, BLOCK_N):
        cols = j0 + tl.arange(0, BLOCK_N)
        k = tl.load(k_ptr + bh * skb + cols[:, None] * skn + dq[None, :],
                    mask=(cols[:, None] < S) & (dq[None, :] < D), other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="ieee") * scale
        visible = (cols[None, :] < S) & (rows[:, None] >= 0)
        if CAUSAL:
            visible = visible & (cols[None, :] <= rows[:, None] + offset)
        s = tl.where(visible, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        alpha = tl.exp(m_i - m_safe)
        p = tl.exp(s - m_safe[:, None])
        l_i = alpha * l_i + tl.sum(p, axis=1)
        v = tl.load(v_ptr + bh * svb + cols[:, None] * svn + dv[None, :],
                    mask=(cols[:, None] < S) & (dv[None, :] < DV), other=0.0)
        acc = alpha[:, None] * acc + tl.dot(p, v, input_precision="ieee")
        m_i = m_new
    empty = l_i == 0.0
    out = tl.where(empty[:, None], 0.0, acc / tl.where(empty, 1.0, l_i)[:, None])
    lse = tl.where(empty, -float("inf"), m_i + tl.log(tl.where(empty, 1.0, l_i)))
    tl.store(o_ptr + bh * sob + rows[:, None] * som + dv[None, :], out,
             mask=(rows[:, None] < L) & (dv[None, :] < DV))
    tl.store(lse_ptr + bh * L + rows, lse, mask=rows < L)


def launch_attention_forward(q, k, v, o, lse, B: int, L: int, S: int, D: int, DV: int,
                             scale: float, causal_offset, strides, block_m: int, block_n: int,
                             num_warps: int = 4) -> None:
    """out and lse of attention for B slices (see the module docstring).

    Args:
        q: [B, L, D] buffer.
        k: [B, S, D] buffer.
        v: [B, S, DV] buffer.
        o: [B, L, DV] output buffer.
        lse: [B, L] output buffer.
        B: number of (batch, head) slices.
        L: queries per slice.
        S: keys per slice.
        D: head dim of q and k.
        DV: head dim of v.
        scale: multiplier of the scores.
        causal_offset: None for no causal rule, else the offset (0 top-left, S - L bottom-right).
        strides: (q batch, q row, k batch, k row, v batch, v row, o batch, o row) in elements.
        block_m: queries per program.
        block_n: keys per step.
        num_warps: warps per program on a GPU.
    """
    block_d = max(16, triton.next_power_of_2(D))
    block_dv = max(16, triton.next_power_of_2(DV))
    grid = (triton.cdiv(L, block_m), B)
    _flash_forward_kernel[grid](q, k, v, o, lse, L, S, D, DV, float(scale),
                                0 if causal_offset is None else int(causal_offset), *strides,
                                causal_offset is not None, block_m, block_n, block_d, block_dv,
                                num_warps=num_warps)
