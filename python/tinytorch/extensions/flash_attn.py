"""FlashAttention: ``flash_attention(q, k, v, causal=False, scale=None, mask=None)``.

Bottleneck it removes (memory boundary): the textbook attention
``softmax(q k^T / sqrt(d)) v`` writes the whole [..., L, S] score matrix to memory, reads
it back for the softmax, writes the probabilities, and keeps them for the backward pass:
at S = 4096 with 8 heads that is 512 MiB of float32 per layer, streamed through DRAM
several times, while the arithmetic per score is only 2d multiply-adds. FlashAttention
(Dao et al., 2022) never forms that matrix. It walks the keys in blocks and keeps, per
query, a running maximum m_i, a running sum l_i and an accumulator O_i that is rescaled
whenever the maximum grows ("online softmax"); one block of scores lives in L1/L2 and is
gone before the next. The backward (FlashAttention-2, Dao 2023) recomputes each block of
probabilities from the saved log-sum-exp instead of storing them, so memory is O(L d)
rather than O(L S). The native kernel (runtime/cpu/attention*.cpp) does this in SIMD at
~80% of the FMA peak: on one thread of the development machine (8 heads, d = 64 and 128,
S = 512 to 4096) 1.9-3.9x PyTorch's CPU scaled_dot_product_attention forward and 2.1-4.2x
its forward + backward; 4.0-10x (forward) and 2.4-6.7x (forward + backward) the stock
attention of tinytorch.core at d = 64, whose forward + backward at S = 4096 holds 2 GiB of
scores where this holds 48 MiB (benchmarks/results/bench_attention.md).

Contract (docs/extending.md):
  * ndarray in -> ndarray out; any Tensor in -> Tensor out, recorded for backward
    (``FlashAttentionFunction``); gradients reach q, k and v (a mask gets none).
  * Shapes: q [..., L, d], k [..., S, d], v [..., S, dv]; leading (batch, head) dims
    broadcast; S may differ from L. ``causal``: False, True (= "top_left": query i sees
    keys j <= i, PyTorch's is_causal) or "bottom_right" (query i sees keys j <= i + S - L:
    the queries are the last L positions, as in KV-cache decoding). ``mask``: bool (True
    where a query may attend) or float (added to the scores), broadcast to [..., L, S]. A
    query that sees no key gets a zero output row (and no gradient). Mismatched shapes raise
    ValueError naming them.
  * dtype rule: float32 runs natively; float64 runs the tiled NumPy reference below in
    float64 (so gradcheck works); other real dtypes become float32.
  * Fallback, chosen at call time and reported: the runtime's kernel for float32 without a
    mask (and v as wide as q); everything else, and everything inside
    ``use_native(False)``, runs ``attention_forward_reference`` /
    ``attention_backward_reference``. ``last_path()`` names what ran
    ("native:attention_forward:avx512", "native:attention_backward:avx2", "numpy").

The tiled reference, re-exported here (``attention_forward_reference``,
``attention_backward_reference``), is the teaching version and the test oracle: the
online-softmax equations written out line by line, tile by tile, in
``tinytorch/backends/attention_reference.py`` (it lives with the back ends because it is also
the door's NumPy fallback, and the core must not import an extension).
``attention_naive`` is the textbook formula it must agree with. Everything goes through the kernel door
(``tinytorch.core.acceleration.attention`` / ``attention_backward``).

Owns the user-facing API (argument contract, autograd); assumes the door's attention and
attention_backward (the runtime's kernel, or the NumPy reference of backends/reference/).
"""
from __future__ import annotations

import numpy as np

from ..core import acceleration as _acc
from ..core.acceleration import last_path
from ..core.autograd import Function
from ..core.tensor import Tensor
from .contract import any_tensor, array_of, as_tensor, kernel_dtype

__all__ = ["flash_attention", "FlashAttentionFunction", "attention_forward_reference",
           "attention_backward_reference", "attention_naive", "last_path", "FALLBACK_BLOCK"]

from ..backends.attention_reference import (FALLBACK_BLOCK, attention_backward_reference,  # noqa: E402
                                            attention_forward_reference, attention_naive)

# --------------------------------------------------------------------------------------
# Autograd
# --------------------------------------------------------------------------------------

class FlashAttentionFunction(Function):
    """out = softmax(scale q k^T + mask) v as one differentiable operation, through the
    kernel door: the forward keeps only out and the per-query log-sum-exp (O(L) extra), the
    backward recomputes the probabilities (FlashAttention-2)."""

    def forward(self, q, k, v, mask=None, causal=False, scale=None):
        """Arrays q [..., L, d], k [..., S, d], v [..., S, dv]; an optional ``mask``, the
        ``causal`` mode and ``scale`` as in ``flash_attention``. Returns out."""
        out, lse = _acc.attention(q, k, v, mask=mask, causal=causal, scale=scale, any_size=True)
        self.q, self.k, self.v, self.out, self.lse = q, k, v, out, lse
        self.mask, self.causal, self.scale = mask, causal, scale
        return out

    def backward(self, grad_output):
        """(dq, dk, dv) for ``grad_output`` = dL/d(out) (None for inputs that need none)."""
        g = np.asarray(grad_output, dtype=self.out.dtype)
        return _acc.attention_backward(self.q, self.k, self.v, self.out, self.lse, g,
                                       mask=self.mask, causal=self.causal, scale=self.scale,
                                       need=self.needs_input_grad[:3], any_size=True)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------

def flash_attention(q, k, v, causal=False, scale=None, mask=None):
    """softmax(scale q k^T + mask) v without materialising the scores.

    q [..., L, d], k [..., S, d], v [..., S, dv] (Tensors or ndarrays; batch and head dims
    lead and broadcast). ``causal``: False, True / "top_left" (query i sees keys j <= i) or
    "bottom_right" (query i sees keys j <= i + S - L). ``scale`` defaults to 1/sqrt(d).
    ``mask``: None, bool (True = may attend) or float (added), broadcastable to
    [..., L, S]; a mask is served by the NumPy reference, not the native kernel. ndarray
    inputs give an ndarray; any Tensor input gives a Tensor on the autograd tape."""
    q_arr = kernel_dtype(array_of(q, "flash_attention", "q"), "flash_attention", "q")
    k_arr = kernel_dtype(array_of(k, "flash_attention", "k"), "flash_attention", "k")
    v_arr = kernel_dtype(array_of(v, "flash_attention", "v"), "flash_attention", "v")
    m_arr = None
    if mask is not None:
        m_arr = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if len({q_arr.dtype, k_arr.dtype, v_arr.dtype}) > 1:  # mixed precisions: float64
        q_arr, k_arr, v_arr = (a.astype(np.float64) for a in (q_arr, k_arr, v_arr))
    # The door validates shapes (ValueError naming them) and the causal mode.
    if any_tensor(q, k, v):
        return FlashAttentionFunction.apply(as_tensor(q, q_arr), as_tensor(k, k_arr),
                                            as_tensor(v, v_arr), mask=m_arr, causal=causal,
                                            scale=scale)
    out, _ = _acc.attention(q_arr, k_arr, v_arr, mask=m_arr, causal=causal, scale=scale,
                            any_size=True)
    return out
