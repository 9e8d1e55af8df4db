"""Upstream TinyTorch's module path ``tinytorch.perf.memoization`` (the KV cache module).

The cache is ``tinytorch.core.kv_cache.KVCache`` itself (``memoization.KVCache is
kv_cache.KVCache``): same constructor ``KVCache(batch_size, max_seq_len, num_layers,
num_heads, head_dim)``, ``update(layer_idx, key, value)``, ``get(layer_idx)``,
``advance()``, ``reset()``, ``seq_pos`` and ``get_memory_usage()``.

What this file owns (upstream's names, thin layers over core.kv_cache):
  enable_kv_cache(model)    builds a cache sized for the model, records it
      (``model._kv_cache``) and puts a ``CachedAttention`` around every block's attention,
      as upstream patches the model: then ``model.forward(ids, start_pos=cache.seq_pos)``
      followed by ``cache.advance()`` decodes one step into the recorded cache (GPT.forward
      routes it), with the logits of the full forward; a call without ``start_pos`` stays an
      ordinary full forward.
  disable_kv_cache(model)   puts the original attention layers back and forgets the cache.
  CachedAttention(attention, cache, layer_idx)   upstream's type for a block's attention
      while caching is on: it calls the wrapped layer with the cache view the model passes
      (``kv_cache=``, the attention layer's own path: no second attention implementation)
      and knows its cache and layer index.
  _cached_generate(model, prompt, max_new_tokens, temperature, cache)   upstream's decoding
      helper: a list of generated ids, through ``core.kv_cache.generate_with_cache`` (the one
      decode loop: one prefill, one token a step, the last sampled token never fed back).

``GPT.generate(..., use_cache=True)`` needs none of this (it builds its own cache).

What it assumes: a GPT-like model with ``embed_dim``, ``num_layers``, ``num_heads``,
``max_seq_len`` and ``blocks`` each holding an ``attn`` layer that accepts ``kv_cache=``
(core/attention.py's MultiHeadAttention); GPT.forward routes ``start_pos`` to the recorded
cache (core/transformers.py).
"""
from __future__ import annotations

import numpy as np

from ..core.kv_cache import KVCache, generate_with_cache
from ..core.layers import Layer
from ..core.transformers import sample_next_token

__all__ = ["KVCache", "CachedAttention", "enable_kv_cache", "disable_kv_cache"]


class CachedAttention(Layer):
    """A block's attention while caching is on: layer ``layer_idx`` of ``cache``.

    Args:
        attention: the wrapped attention layer (a ``MultiHeadAttention``; its parameters stay
            this layer's parameters).
        cache: the ``KVCache`` shared by all layers of the model.
        layer_idx: this layer's index in the cache.
    """

    def __init__(self, attention, cache: KVCache, layer_idx: int):
        if not isinstance(cache, KVCache):
            raise TypeError(f"CachedAttention: cache must be a KVCache, got {type(cache).__name__}")
        cache.layer(layer_idx)  # IndexError when out of range
        self.attention = attention
        self._cache, self.layer_idx = cache, int(layer_idx)

    @property
    def cache(self) -> KVCache:
        """The shared KVCache."""
        return self._cache

    def forward(self, x, *args, kv_cache=None, **kwargs):
        """The wrapped attention over ``x``; ``kv_cache`` is the ``LayerKVCache`` view the
        model passes for a decoding step (None for an ordinary forward)."""
        return self.attention(x, *args, kv_cache=kv_cache, **kwargs)


def _blocks_with_attention(model):
    blocks = list(model.blocks)
    for i, block in enumerate(blocks):
        if not hasattr(block, "attn"):
            raise ValueError(f"enable_kv_cache: block {i} has no attention layer 'attn'")
    return blocks


def enable_kv_cache(model, batch_size: int = 1) -> KVCache:
    """Build a ``KVCache`` sized for ``model``, record it on the model and wrap every
    block's attention in a ``CachedAttention`` on it; returns the cache.

    Args:
        model: a GPT-like model with embed_dim, num_layers, num_heads, max_seq_len and blocks
            (each with an ``attn``); ValueError naming the first missing attribute otherwise.
        batch_size: sequences decoded together (upstream always uses 1).
    """
    for attr in ("embed_dim", "num_layers", "num_heads", "max_seq_len", "blocks"):
        if not hasattr(model, attr):
            raise ValueError(f"enable_kv_cache: model has no attribute {attr!r} "
                             "(needs embed_dim, num_layers, num_heads, max_seq_len, blocks)")
    blocks = _blocks_with_attention(model)
    cache = KVCache.for_model(model, batch_size)
    for i, block in enumerate(blocks):
        inner = block.attn.attention if isinstance(block.attn, CachedAttention) else block.attn
        block.attn = CachedAttention(inner, cache, i)
    model._kv_cache = cache
    model._cache_enabled = True
    return cache


def disable_kv_cache(model) -> None:
    """Put back the attention layers ``enable_kv_cache`` wrapped and forget its cache
    (no-op for a model without one).

    Args:
        model: the model passed to ``enable_kv_cache``.
    """
    for block in getattr(model, "blocks", []):
        if isinstance(getattr(block, "attn", None), CachedAttention):
            block.attn = block.attn.attention
    if hasattr(model, "_kv_cache"):
        del model._kv_cache
    model._cache_enabled = False


def _cached_generate(model, prompt, max_new_tokens: int, temperature: float, cache: KVCache) -> list:
    """Upstream's cached decoding: the ``max_new_tokens`` ids sampled after ``prompt``, as a
    list of ints. ``cache`` is reset first, so every request starts afresh (positions too);
    afterwards it holds the prompt and every generated id but the last.

    Args:
        model: a GPT (cached or not: the cache is passed to its forward).
        prompt: a non-empty sequence of token ids.
        max_new_tokens: a non-negative int.
        temperature: a finite number >= 0 (0 = greedy).
        cache: the KVCache to decode into (e.g. the one ``enable_kv_cache`` returned).

    ValueError, before anything changes, for an empty prompt, a negative count or
    temperature, or a request needing more than ``max_seq_len`` positions.
    """
    ids = np.asarray(prompt)
    if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
        raise ValueError(f"_cached_generate: prompt must be a non-empty sequence of int ids, got {prompt!r}")
    if not isinstance(max_new_tokens, (int, np.integer)) or isinstance(max_new_tokens, bool) or max_new_tokens < 0:
        raise ValueError(f"_cached_generate: max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
    if not isinstance(temperature, (int, float, np.integer, np.floating)) or not np.isfinite(temperature) \
            or temperature < 0:
        raise ValueError(f"_cached_generate: temperature must be a finite number >= 0, got {temperature!r}")
    if not isinstance(cache, KVCache):
        raise TypeError(f"_cached_generate: cache must be a KVCache, got {type(cache).__name__}")
    needed = ids.size + max_new_tokens - 1  # the last sampled id is never fed back
    window = min(cache.max_seq_len, model.max_seq_len)
    if needed > window:
        raise ValueError(f"_cached_generate: {ids.size} prompt ids + {max_new_tokens} new ones need {needed} "
                         f"positions, more than max_seq_len={window}")
    was_training = model.training
    model.eval()
    try:
        out = generate_with_cache(model, ids[None, :].astype(np.int64), int(max_new_tokens),
                                  lambda logits: sample_next_token(logits, temperature), cache=cache)
    finally:
        model.train(was_training)
    return [int(t) for t in out[0, ids.size:]]
