"""Upstream TinyTorch conventions where this project's own name means something else.

Most upstream names import from their upstream paths unchanged (docs/compat.md lists them),
including ``tinytorch.core.attention.scaled_dot_product_attention`` (the course's contract:
``(output, weights)``, a 0/1 or bool mask). The one exception left is
``core.attention.MultiHeadAttention``, which follows PyTorch's ``nn.MultiheadAttention``
(``forward(query, key, value, attn_mask=...)``, bool True = may NOT attend); upstream's
``mha(x, mask)`` form is ``core.transformer.MultiHeadAttention``, re-exported here:

  scaled_dot_product_attention(Q, K, V, mask=None) -> (output, attention_weights)
      core.attention's (the same function object).
  MultiHeadAttention(embed_dim, num_heads)   ``forward(x, mask=None)``: self-attention with
      upstream's 0/1 mask ([T, T], [B, T, T] or [B, H, T, T]).

Port upstream code that builds MultiHeadAttention by importing from here (or from
``tinytorch.core.transformer``, upstream's module that also exports it):
    from tinytorch.compat import scaled_dot_product_attention, MultiHeadAttention

What this file owns: ``MASK_VALUE`` (upstream's additive constant, informational only) and
the two re-exports; it defines no attention of its own.

What it assumes: core/attention.py owns the course's ``scaled_dot_product_attention`` and
core/transformer.py upstream's MultiHeadAttention.
"""
from __future__ import annotations

from .core.attention import scaled_dot_product_attention
from .core.transformer import MultiHeadAttention  # MultiHeadAttention: upstream's, defined there

__all__ = ["MASK_VALUE", "scaled_dot_product_attention", "MultiHeadAttention"]

MASK_VALUE = -1e9  # upstream's additive mask constant (informational: masks here are exact)
