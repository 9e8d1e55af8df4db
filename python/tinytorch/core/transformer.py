"""Upstream TinyTorch's module path ``tinytorch.core.transformer`` (singular).

The transformer here lives in ``tinytorch.core.transformers``; this module gives upstream
code its names and call conventions as thin adapters over those classes (one
implementation; see docs/compat.md):

  create_causal_mask(seq_len)   float Tensor (1, T, T): 1 where a query may attend, 0 not
  LayerNorm(normalized_shape, eps)                  ours, plus ``gamma``/``beta`` names
  MLP(embed_dim, hidden_dim=None, dropout_prob=0.0) ours with upstream's argument order
  TransformerBlock(embed_dim, num_heads, mlp_ratio=4, dropout_prob=0.0)
      ours, non-causal unless given a mask; ``forward(x, mask=None)`` takes upstream's
      float mask (1 = attend, 0 = masked)
  MultiHeadAttention(embed_dim, num_heads)         ours, called ``mha(x, mask)`` with upstream's
                                                   float mask (``tinytorch.compat`` exports it)
  GPT(vocab_size, embed_dim, num_layers, num_heads, max_seq_len=1024)
      ours (causal); ``forward``/``generate`` also accept integral-valued float token
      Tensors (upstream's Tensor is always float32); ``generate`` defaults to 50 tokens

Upstream's ``dropout_prob`` defaults (0.1) were never applied by its layers, so the default
here is 0.0: the same numbers as upstream; pass a value to get real dropout.

What this file owns: upstream's ``create_causal_mask`` and the adapter classes above (their
argument orders, defaults and float-mask conversion); the layers themselves are
core/transformers.py's and core/attention.py's.

What it assumes: upstream's masks are float arrays or Tensors, 1 = may attend and 0 = masked,
converted to our MultiHeadAttention's ``attn_mask`` (bool, True = may NOT attend, as in
``nn.MultiheadAttention``); token ids given as floats hold whole numbers.
"""
from __future__ import annotations

import numpy as np

from . import transformers as _tf
from . import attention as _attn_mod
from .attention import causal_mask
from .tensor import BYTES_PER_FLOAT32, MB_TO_BYTES, Tensor  # the one definition

__all__ = ["BYTES_PER_FLOAT32", "MB_TO_BYTES", "create_causal_mask", "LayerNorm", "MLP",
           "TransformerBlock", "GPT", "MultiHeadAttention"]



def create_causal_mask(seq_len: int) -> Tensor:
    """Upstream's causal mask: float32 Tensor (1, seq_len, seq_len), 1.0 on and below the
    diagonal (may attend), 0.0 above; built from ``attention.causal_mask``.

    Args:
        seq_len: sequence length T.
    """
    return Tensor(causal_mask(int(seq_len)).astype(np.float32)[None])


def _attend_mask(mask) -> np.ndarray:
    """Upstream float mask (1 = attend) [T, T] / [B, T, T] / [B, H, T, T] -> our
    MultiHeadAttention ``attn_mask`` (bool True = may NOT attend) [B or 1, 1 or H, T, T]."""
    blocked = ~_attn_mod.binary_mask(mask, "mask")  # 0/1 only: one rule with scaled_dot_product_attention
    if blocked.ndim == 2:
        return blocked
    if blocked.ndim == 3:
        return blocked[:, None]
    if blocked.ndim == 4:
        return blocked
    raise ValueError(f"mask must be [T, T], [B, T, T] or [B, H, T, T], got shape {blocked.shape}")


def _token_ids(tokens):
    """Integral-valued float ids (upstream's float32 Tensor) as int64; others unchanged."""
    arr = tokens.data if isinstance(tokens, Tensor) else np.asarray(tokens)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)
        return Tensor(arr) if isinstance(tokens, Tensor) else arr
    return tokens


class MultiHeadAttention(_attn_mod.MultiHeadAttention):
    """``core.attention.MultiHeadAttention`` called the upstream way: ``mha(x, mask)`` (also
    ``tinytorch.compat.MultiHeadAttention``, the same class).

    Args:
        embed_dim: model width (must be divisible by num_heads).
        num_heads: attention heads.
    """

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__(embed_dim, num_heads)

    def forward(self, x, mask=None):
        """Self-attention over ``x`` [B, T, E] -> [B, T, E]; ``mask`` upstream float mask
        (1 = may attend), [T, T], [B, T, T] or [B, H, T, T]."""
        if mask is None:
            return super().forward(x)
        return super().forward(x, attn_mask=_attend_mask(mask))


class LayerNorm(_tf.LayerNorm):
    """``transformers.LayerNorm`` with upstream's arguments; upstream's parameter names
    ``gamma`` (= ``weight``) and ``beta`` (= ``bias``) are the base class's.

    Args:
        normalized_shape: the trailing shape to normalise (usually embed_dim).
        eps: added to the variance (default 1e-5).
    """

    def __init__(self, normalized_shape, eps: float = 1e-5):
        super().__init__(normalized_shape, eps=eps)


class MLP(_tf.MLP):
    """``transformers.MLP`` (Linear -> GELU(tanh) -> Linear) with upstream's arguments.

    Args:
        embed_dim: input and output width.
        hidden_dim: hidden width (default 4 * embed_dim).
        dropout_prob: dropout after the second Linear (default 0.0; see the module docstring).
    """

    def __init__(self, embed_dim: int, hidden_dim: int | None = None, dropout_prob: float = 0.0):
        super().__init__(embed_dim, hidden_dim, bias=True, dropout=dropout_prob)

    @property
    def linear1(self):
        """The expanding Linear (``fc1``)."""
        return self.fc1

    @property
    def linear2(self):
        """The projecting Linear (``fc2``)."""
        return self.fc2


class TransformerBlock(_tf.TransformerBlock):
    """``transformers.TransformerBlock`` with upstream's call: ``block(x, mask)``.

    Upstream's block attends everywhere unless given a mask, so this one is built
    non-causal; ``mask`` is upstream's float mask (1 = attend, 0 = masked), e.g.
    ``create_causal_mask(T)``.

    Args:
        embed_dim: model width.
        num_heads: attention heads (must divide embed_dim).
        mlp_ratio: MLP hidden width is mlp_ratio * embed_dim.
        dropout_prob: dropout probability (default 0.0; see the module docstring).
        ff_dim: the MLP's hidden width, overriding mlp_ratio.
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: int = 4, dropout_prob: float = 0.0,
                 ff_dim: int | None = None):
        super().__init__(embed_dim, num_heads, mlp_ratio=int(mlp_ratio), dropout=dropout_prob, causal=False,
                         ff_dim=ff_dim)
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        # the same sub-layers, as the adapters above (upstream's linear1/linear2)
        self.ln1, self.ln2 = LayerNorm(embed_dim), LayerNorm(embed_dim)
        self.mlp = MLP(embed_dim, self.mlp.hidden_dim, dropout_prob)

    def forward(self, x, mask=None):
        """``x`` [B, T, D] -> [B, T, D]; ``mask`` (optional) upstream float mask, 1 = attend."""
        if mask is None:
            return super().forward(x)
        x = x + self.resid_dropout(self.attn(self.ln1(x), attn_mask=_attend_mask(mask)))
        return x + self.resid_dropout(self.mlp(self.ln2(x)))


class GPT(_tf.GPT):
    """``transformers.GPT`` (causal decoder) with upstream's defaults and token handling.

    Args:
        vocab_size: number of token ids.
        embed_dim: model width.
        num_layers: transformer blocks.
        num_heads: attention heads per block.
        max_seq_len: longest context (default 1024, upstream's).
    """

    def __init__(self, vocab_size: int, embed_dim: int, num_layers: int, num_heads: int,
                 max_seq_len: int = 1024):
        super().__init__(vocab_size, embed_dim, num_layers, num_heads, max_seq_len)

    def forward(self, tokens, kv_cache=None, start_pos: int | None = None):
        """Logits [B, T, vocab] for ids ``tokens`` [B, T] (ints, or integral floats);
        ``kv_cache`` and ``start_pos`` as in ``transformers.GPT.forward``."""
        return super().forward(_token_ids(tokens), kv_cache=kv_cache, start_pos=start_pos)

    def generate(self, prompt_tokens, max_new_tokens: int = 50, temperature: float = 1.0, **kwargs):
        """Upstream's ``generate(prompt_tokens, max_new_tokens=50, temperature=1.0)``: the
        prompt followed by sampled ids (the same kind as the prompt; int64 values).

        Args:
            prompt_tokens: ids [B, T] or [T], Tensor or array (integral floats accepted).
            max_new_tokens: how many ids to append (default 50).
            temperature: sampling temperature (0 = greedy).
        """
        return super().generate(_token_ids(prompt_tokens), max_new_tokens, temperature=temperature, **kwargs)
