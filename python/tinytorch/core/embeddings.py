"""Embeddings: token lookup tables and position encodings.

What this file owns
  EmbeddingFunction   rows of a table picked by integer ids (the kernel door's ``embedding``);
                      the backward is a scatter-add (``embedding_backward``), because one id may appear many times in a batch and every
                      occurrence contributes to the same row's gradient.
  Embedding(num_embeddings, embedding_dim)   the learned table, initialised N(0, 1) like PyTorch.
  PositionalEmbedding(max_seq_len, embed_dim) a learned table indexed by position; ``forward(x)``
                      adds the encoding of positions ``offset .. offset+T-1`` to ``x`` [B, T, D].
  SinusoidalPositionalEncoding(max_seq_len, embed_dim)   the fixed sin/cos table of the original
                      transformer, stored as a NumPy constant (not a parameter).

What it assumes
  Ids are integer arrays (or integer Tensors) of any shape; an id outside [0, num_embeddings)
  raises ``ValueError`` naming the id and the vocabulary size, so a tokenizer/model mismatch is
  caught at the first batch instead of producing garbage (NumPy would wrap negative ids).

Upstream TinyTorch's memory units ``BYTES_PER_FLOAT32`` and ``MB_TO_BYTES`` are exported from
here too, as imports of ``core.tensor``'s (the package's one definition).
"""
from __future__ import annotations

import math

import numpy as np

from . import acceleration as _acc
from .autograd import Function
from .layers import Layer, Parameter
from .random import get_generator
from .tensor import BYTES_PER_FLOAT32, MB_TO_BYTES, Tensor  # the one definition

__all__ = ["EmbeddingFunction", "Embedding", "PositionalEmbedding", "SinusoidalPositionalEncoding",
           "sinusoidal_table", "check_token_ids", "TokenIdError", "PositionalEncoding", "create_sinusoidal_embeddings", "EmbeddingLayer",
           "BYTES_PER_FLOAT32", "MB_TO_BYTES"]


class TokenIdError(TypeError, ValueError):
    """Token ids that are not integers (a float array, or a float Tensor holding fractional,
    NaN or inf values): a TypeError, as this project raised first, and a ValueError, as
    upstream TinyTorch raises."""


def check_token_ids(ids, num_embeddings: int, who: str = "Embedding") -> np.ndarray:
    """Return ``ids`` (a Tensor or array-like) as an integer array, or raise naming the
    first bad id: ``TokenIdError`` for ids that are not integers, ValueError for an id
    outside [0, ``num_embeddings``). ``who`` names the caller in the message.

    A float *Tensor* of whole numbers is read as int64 ids: upstream TinyTorch's Tensor is
    always float32, and ``Tensor([1, 2])`` is float32 here too. A float ndarray, or a Tensor
    with fractional, NaN or inf values, is refused (no silent truncation)."""
    arr = ids.data if isinstance(ids, Tensor) else np.asarray(ids)
    if isinstance(ids, Tensor) and arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise TokenIdError(f"{who}: token ids must be finite integers, got values such as "
                               f"{arr[~(np.isfinite(arr) & (arr == np.round(arr)))].ravel()[0]!r}")
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise TokenIdError(f"{who}: token ids must be finite integers, got dtype {arr.dtype}")
    if arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi >= num_embeddings:
            bad = int(lo) if lo < 0 else int(hi)
            raise ValueError(f"{who}: index {bad} is out of range for vocab size {num_embeddings} "
                             f"(valid ids are 0..{num_embeddings - 1})")
    return arr


class EmbeddingFunction(Function):
    """out[...] = weight[ids[...]]; grad_weight = scatter-add of grad_out into the picked rows."""

    def forward(self, weight, ids):
        """``weight[ids]``: table (V, D), integer ``ids`` of any shape -> ids.shape + (D,)
        (the kernel door's ``embedding``)."""
        self.ids, self.shape = ids, weight.shape
        return _acc.embedding(weight, ids)

    def backward(self, grad_output):
        """Scatter-add of ``grad_output`` into the picked rows of a zero table (the door's
        ``embedding_backward``: the runtime's kernel for float32, ``np.add.at`` otherwise);
        None for ids."""
        grad = _acc.embedding_backward(grad_output, self.ids, self.shape[0])
        return grad.astype(grad_output.dtype, copy=False), None


def _one_size(value, alias, name: str, alias_name: str) -> int:
    """``value`` or its upstream keyword ``alias`` (exactly one of them given)."""
    if (value is None) == (alias is None):
        raise TypeError(f"Embedding: give {name} (or upstream's {alias_name}) exactly once")
    return value if alias is None else alias


class Embedding(Layer):
    """Lookup table: ``Embedding(vocab, dim)(ids)`` has shape ``ids.shape + (dim,)``.

    Args:
        num_embeddings: vocabulary size V; ids must be in [0, V) (keyword ``vocab_size`` too,
            upstream TinyTorch's name).
        embedding_dim: size D of each vector (keyword ``embed_dim`` too).
        dtype: dtype of the table (float32 by default); initialised N(0, 1) like PyTorch.
    """

    def __init__(self, num_embeddings: int | None = None, embedding_dim: int | None = None, dtype=np.float32,
                 *, vocab_size: int | None = None, embed_dim: int | None = None):
        num_embeddings = _one_size(num_embeddings, vocab_size, "num_embeddings", "vocab_size")
        embedding_dim = _one_size(embedding_dim, embed_dim, "embedding_dim", "embed_dim")
        if num_embeddings < 1 or embedding_dim < 1:
            raise ValueError(f"Embedding: sizes must be positive, got ({num_embeddings}, {embedding_dim})")
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.weight = Parameter(get_generator().standard_normal((num_embeddings, embedding_dim)).astype(dtype))

    @property
    def vocab_size(self) -> int:
        """``num_embeddings``."""
        return self.num_embeddings

    def forward(self, ids):
        """The rows of ``weight`` for integer ``ids`` (Tensor or array, any shape)."""
        arr = check_token_ids(ids, self.num_embeddings, "Embedding")
        return EmbeddingFunction.apply(self.weight, arr)

    def extra_repr(self):
        """``num_embeddings, embedding_dim`` for repr()."""
        return f"{self.num_embeddings}, {self.embedding_dim}"


def _check_positions(x, max_seq_len: int, offset: int, who: str) -> int:
    if x.ndim < 2:
        raise ValueError(f"{who}: expected input of shape [..., seq, dim], got {x.shape}")
    t = x.shape[-2]
    if offset < 0:
        raise ValueError(f"{who}: offset must be non-negative, got {offset}")
    if offset + t > max_seq_len:
        raise ValueError(f"{who}: positions {offset}..{offset + t - 1} exceed max_seq_len={max_seq_len} "
                         f"(sequence length {t})")
    return t


class PositionalEmbedding(Layer):
    """Learned absolute positions: ``forward(x, offset=0) = x + weight[offset:offset+T]``.

    Args:
        max_seq_len: number of positions in the table.
        embed_dim: width D (the last axis of the input).
        dtype: dtype of the table (float32); initialised N(0, 0.02^2).
    """

    def __init__(self, max_seq_len: int, embed_dim: int, dtype=np.float32):
        if max_seq_len < 1 or embed_dim < 1:
            raise ValueError(f"PositionalEmbedding: sizes must be positive, got ({max_seq_len}, {embed_dim})")
        self.max_seq_len, self.embed_dim = int(max_seq_len), int(embed_dim)
        # Small init (GPT-2 uses std 0.01-0.02) so positions do not swamp the token signal.
        self.weight = Parameter((0.02 * get_generator().standard_normal((max_seq_len, embed_dim))).astype(dtype))

    def forward(self, x, offset: int = 0):
        """``x`` [..., T, D] plus the rows for positions ``offset`` .. offset+T-1 (offset is
        the number of tokens already processed, e.g. cached)."""
        if not isinstance(x, Tensor):
            x = Tensor(x)
        t = _check_positions(x, self.max_seq_len, offset, "PositionalEmbedding")
        if x.shape[-1] != self.embed_dim:
            raise ValueError(f"PositionalEmbedding: input dim {x.shape[-1]} != embed_dim {self.embed_dim}")
        return x + self.weight[offset:offset + t]

    def extra_repr(self):
        """``max_seq_len=..., embed_dim=...`` for repr()."""
        return f"max_seq_len={self.max_seq_len}, embed_dim={self.embed_dim}"


def sinusoidal_table(max_seq_len: int, embed_dim: int) -> np.ndarray:
    """The (``max_seq_len``, ``embed_dim``) float64 table of the original transformer:
    PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D)), D = embed_dim."""
    pos = np.arange(max_seq_len, dtype=np.float64)[:, None]
    i = np.arange(0, embed_dim, 2, dtype=np.float64)
    freq = np.exp(-math.log(10000.0) * i / embed_dim)
    table = np.zeros((max_seq_len, embed_dim))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq[: embed_dim // 2])
    return table


class SinusoidalPositionalEncoding(Layer):
    """Fixed sin/cos positions added to ``x`` [..., T, D]; no parameters.

    Args:
        max_seq_len: number of positions in the table.
        embed_dim: width D (the last axis of the input).
    """

    def __init__(self, max_seq_len: int, embed_dim: int):
        if max_seq_len < 1 or embed_dim < 1:
            raise ValueError(f"SinusoidalPositionalEncoding: sizes must be positive, got ({max_seq_len}, {embed_dim})")
        self.max_seq_len, self.embed_dim = int(max_seq_len), int(embed_dim)
        self.table = sinusoidal_table(max_seq_len, embed_dim)  # ndarray: a constant, not a parameter

    def forward(self, x, offset: int = 0):
        """``x`` [..., T, D] plus the table rows ``offset`` .. offset+T-1, in x's dtype."""
        if not isinstance(x, Tensor):
            x = Tensor(x)
        t = _check_positions(x, self.max_seq_len, offset, "SinusoidalPositionalEncoding")
        if x.shape[-1] != self.embed_dim:
            raise ValueError(f"SinusoidalPositionalEncoding: input dim {x.shape[-1]} != embed_dim {self.embed_dim}")
        return x + self.table[offset:offset + t].astype(x.dtype)

    def extra_repr(self):
        """``max_seq_len=..., embed_dim=...`` for repr()."""
        return f"max_seq_len={self.max_seq_len}, embed_dim={self.embed_dim}"


# ------------------------------------------------ upstream TinyTorch names (docs/compat.md)

PositionalEncoding = PositionalEmbedding  # upstream's learned positional encoding: x + rows


def create_sinusoidal_embeddings(max_seq_len: int, embed_dim: int) -> Tensor:
    """Upstream TinyTorch's name: ``sinusoidal_table`` as a float32 Tensor (max_seq_len,
    embed_dim), sin in even columns and cos in odd ones.

    Args:
        max_seq_len: number of positions (rows).
        embed_dim: width of each row.
    """
    return Tensor(sinusoidal_table(max_seq_len, embed_dim).astype(np.float32))


class EmbeddingLayer(Layer):
    """Upstream TinyTorch's token + position embedding: ``Embedding`` then (optionally)
    ``PositionalEmbedding`` (``"learned"``) or ``SinusoidalPositionalEncoding``
    (``"sinusoidal"``) or nothing (None). A 1-D ``tokens`` [T] gives [T, D].

    Args:
        vocab_size: number of token ids.
        embed_dim: embedding width.
        max_seq_len: longest sequence the positional part covers (default 512).
        pos_encoding: ``"learned"`` (default), ``"sinusoidal"`` or None.
        scale_embeddings: multiply token embeddings by sqrt(embed_dim) first.
    """

    def __init__(self, vocab_size: int, embed_dim: int, max_seq_len: int = 512,
                 pos_encoding: str | None = "learned", scale_embeddings: bool = False):
        if pos_encoding not in ("learned", "sinusoidal", None):
            raise ValueError(f"EmbeddingLayer: pos_encoding must be 'learned', 'sinusoidal' or None, "
                             f"got {pos_encoding!r}")
        self.vocab_size, self.embed_dim, self.max_seq_len = vocab_size, embed_dim, max_seq_len
        self.pos_encoding_type, self.scale_embeddings = pos_encoding, bool(scale_embeddings)
        self.token_embedding = Embedding(vocab_size, embed_dim)
        if pos_encoding == "learned":
            self.pos_encoding = PositionalEmbedding(max_seq_len, embed_dim)
        elif pos_encoding == "sinusoidal":
            self.pos_encoding = SinusoidalPositionalEncoding(max_seq_len, embed_dim)
        else:
            self.pos_encoding = None

    def forward(self, tokens, start_pos: int = 0):
        """Integer ids ``tokens`` [B, T] or [T] -> embeddings [B, T, D] or [T, D]; the
        positions are ``start_pos .. start_pos + T - 1`` (a non-negative int; ValueError when
        they leave the table)."""
        if not isinstance(start_pos, (int, np.integer)) or isinstance(start_pos, bool) or start_pos < 0:
            raise ValueError(f"EmbeddingLayer: start_pos must be a non-negative int, got {start_pos!r}")
        x = self.token_embedding(tokens)
        if self.scale_embeddings:
            x = x * math.sqrt(self.embed_dim)
        return x if self.pos_encoding is None else self.pos_encoding(x, offset=int(start_pos))
