"""Upstream TinyTorch's module path ``tinytorch.perf.memoization`` (the KV cache module).

The cache is ``tinytorch.core.kv_cache.KVCache`` itself (``memoization.KVCache is
kv_cache.KVCache``): same constructor ``KVCache(batch_size, max_seq_len, num_layers,
num_heads, head_dim)``, ``update(layer_idx, key, value)``, ``get(layer_idx)``,
``advance()``, ``reset()``, ``seq_pos`` and ``get_memory_usage()``.

``enable_kv_cache(model)`` / ``disable_kv_cache(model)`` are adapters: upstream patches the
model's attention layers; here attention takes the cache as an argument, so enabling only
builds a cache sized for the model and records it on the model (``model._kv_cache``,
``model._cache_enabled``). Use it as ``model(ids, kv_cache=cache)`` followed by
``cache.advance()``, or call ``model.generate(..., use_cache=True)`` (see docs/compat.md).
"""
from __future__ import annotations

from ..core.kv_cache import KVCache

__all__ = ["KVCache", "enable_kv_cache", "disable_kv_cache"]


def enable_kv_cache(model, batch_size: int = 1) -> KVCache:
    """Build a ``KVCache`` sized for ``model`` and record it on the model; returns it.

    Args:
        model: a GPT-like model with embed_dim, num_layers, num_heads, max_seq_len (and
            blocks); ValueError naming the first missing attribute otherwise.
        batch_size: sequences decoded together (upstream always uses 1).
    """
    for attr in ("embed_dim", "num_layers", "num_heads", "max_seq_len", "blocks"):
        if not hasattr(model, attr):
            raise ValueError(f"enable_kv_cache: model has no attribute {attr!r} "
                             "(needs embed_dim, num_layers, num_heads, max_seq_len, blocks)")
    cache = KVCache.for_model(model, batch_size)
    model._kv_cache = cache
    model._cache_enabled = True
    return cache


def disable_kv_cache(model) -> None:
    """Forget the cache ``enable_kv_cache`` recorded on ``model`` (no-op when none).

    Args:
        model: the model passed to ``enable_kv_cache``.
    """
    if hasattr(model, "_kv_cache"):
        del model._kv_cache
    model._cache_enabled = False
