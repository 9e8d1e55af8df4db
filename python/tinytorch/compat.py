"""Upstream TinyTorch conventions where this project's own name means something else.

Most upstream names import from their upstream paths unchanged (docs/compat.md lists them).
Attention is the exception: ``tinytorch.core.attention`` follows PyTorch (the function
returns only the output; a bool mask is True where a query MAY attend and a float mask is
*added* to the scores; ``MultiHeadAttention.forward(query, key, value, attn_mask=...)``).
Upstream's contract differs, so its versions are exported here, as adapters over the one
implementation in ``tinytorch.core.attention`` (the MultiHeadAttention adapter is defined in
``tinytorch.core.transformer``, upstream's module that also exports it):

  scaled_dot_product_attention(Q, K, V, mask=None) -> (output, attention_weights)
      ``mask`` is upstream's float mask: 1 = may attend, 0 = masked (anything non-zero
      attends). A row with every key masked gives zeros here; upstream's -1e9 trick gives
      a uniform row.
  MultiHeadAttention(embed_dim, num_heads)   ``forward(x, mask=None)``: self-attention with
      upstream's float mask ([T, T], [B, T, T] or [B, H, T, T]).

Port upstream code by importing these two names from here:
    from tinytorch.compat import scaled_dot_product_attention, MultiHeadAttention

What this file owns: upstream's ``scaled_dot_product_attention`` adapter (the output and the
weights, both differentiable) and ``MASK_VALUE`` (upstream's additive constant, informational
only); MultiHeadAttention is re-exported here, not defined.

What it assumes: ``core.attention.scaled_dot_product_attention`` is the one implementation
(PyTorch's bool mask, True = may attend), so every non-zero entry of upstream's mask becomes
True; ``core.transformer`` defines upstream's MultiHeadAttention.
"""
from __future__ import annotations

import numpy as np

from .core import attention as _attn
from .core.tensor import Tensor
from .core.transformer import MultiHeadAttention  # MultiHeadAttention: upstream's, defined there

__all__ = ["MASK_VALUE", "scaled_dot_product_attention", "MultiHeadAttention"]

MASK_VALUE = -1e9  # upstream's additive mask constant (informational: masks here are exact)


def scaled_dot_product_attention(Q, K, V, mask=None):
    """Upstream's attention: ``(softmax(Q K^T / sqrt(d) on allowed keys) V, weights)``.

    Both results come from ``core.attention.scaled_dot_product_attention`` (the output with
    V, the weights with an identity as V), so both are differentiable.

    Args:
        Q: Tensor [..., L, d].
        K: Tensor [..., S, d].
        V: Tensor [..., S, dv].
        mask: optional float/bool mask broadcastable to [..., L, S]; non-zero = may attend.
    """
    Q, K, V = (t if isinstance(t, Tensor) else Tensor(t) for t in (Q, K, V))
    allowed = None
    if mask is not None:
        allowed = np.asarray(mask.data if isinstance(mask, Tensor) else mask) != 0
    out = _attn.scaled_dot_product_attention(Q, K, V, mask=allowed)
    eye = Tensor(np.eye(K.shape[-2], dtype=Q.dtype))
    weights = _attn.scaled_dot_product_attention(Q, K, eye, mask=allowed)
    return out, weights
