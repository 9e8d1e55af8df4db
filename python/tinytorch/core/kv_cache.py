"""KV cache: memoised keys and values for incremental (token-by-token) decoding.

The bottleneck it removes
  Without a cache, producing token t re-runs the model over all t previous tokens, so
  generating n tokens costs O(n^2) projections and O(n^3) attention work. The keys and values
  of earlier positions never change (attention is causal), so each layer can keep them and a
  decoding step only projects the one new token and attends over the stored keys: O(n) per step.

What this file owns
  KVCache(batch_size, max_seq_len, num_layers, num_heads, head_dim, dtype)
      preallocated arrays [layers, batch, heads, max_seq_len, head_dim] for keys and values;
      ``layer(i)`` is the view a ``MultiHeadAttention`` call uses: ``update(k_new, v_new)`` writes
      this call's keys/values after the cached ones and returns all of them; after every layer
      has run, the model calls ``advance(n)``. ``KVCache.for_model(gpt, batch_size)`` sizes one.
      Upstream TinyTorch's calls work on the cache itself: ``update(layer_idx, key, value)``,
      ``get(layer_idx)``, ``seq_pos`` and the argument-free ``advance()`` (it commits what the
      layers wrote; see its docstring).
  generate_with_cache(model, idx, max_new_tokens, sample, cache=None)   the loop behind
      ``GPT.generate(..., use_cache=True)`` and upstream's ``_cached_generate``: one prefill over
      the prompt, then one token per step, the last sampled token never fed back.
      When the context window is full the cache is rebuilt from the last ``max_seq_len`` tokens,
      which is exactly what the uncached loop sees, so both produce the same logits.
  incremental_logits(model, idx, prefill=1)   logits at every position computed incrementally
      (the check that the cache is exact).

What it assumes
  Inference only: cached arrays hold no autograd history (run under ``no_grad``). Positions are
  absolute, so a sequence may not outgrow ``max_seq_len`` within one cache.
"""
from __future__ import annotations

import numpy as np

from .autograd import no_grad
from .tensor import Tensor

__all__ = ["KVCache", "LayerKVCache", "generate_with_cache", "incremental_logits"]


class LayerKVCache:
    """One layer's window onto a KVCache (what ``MultiHeadAttention(kv_cache=...)`` sees).

    Args:
        cache: the KVCache holding every layer's arrays.
        index: this layer's index in it. Usually made by ``cache.layer(i)``.
    """

    __slots__ = ("cache", "index")

    def __init__(self, cache: "KVCache", index: int):
        self.cache, self.index = cache, index

    @property
    def length(self) -> int:
        """Tokens committed to the cache so far (the position of the next one)."""
        return self.cache.length

    def update(self, k, v):
        """``cache.update(index, k, v)``: store this call's k, v [batch, heads, n, head_dim]
        and return (all keys, all values) as Tensors [batch, heads, length + n, head_dim]."""
        return self.cache.update(self.index, k, v)


class KVCache:
    """Keys and values of every layer for the tokens decoded so far, preallocated as
    ``keys``/``values`` arrays [num_layers, batch_size, num_heads, max_seq_len, head_dim].

    Args:
        batch_size: sequences decoded together.
        max_seq_len: the most tokens the cache can hold (the model's context window).
        num_layers: number of attention layers.
        num_heads: heads per layer.
        head_dim: size of each head (embed_dim // num_heads).
        dtype: dtype of the stored keys and values (float32).

    Inference only: nothing stored carries autograd history.
    """

    def __init__(self, batch_size: int, max_seq_len: int, num_layers: int, num_heads: int, head_dim: int,
                 dtype=np.float32):
        for name, value in (("batch_size", batch_size), ("max_seq_len", max_seq_len),
                            ("num_heads", num_heads), ("head_dim", head_dim)):
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"KVCache: {name} must be a positive int, got {value!r}")
        if not isinstance(num_layers, (int, np.integer)) or num_layers < 0:
            raise ValueError(f"KVCache: num_layers must be a non-negative int, got {num_layers!r}")
        shape = (num_layers, batch_size, num_heads, max_seq_len, head_dim)
        self.keys = np.zeros(shape, dtype=dtype)
        self.values = np.zeros(shape, dtype=dtype)
        self.batch_size, self.max_seq_len, self.num_layers = int(batch_size), int(max_seq_len), int(num_layers)
        self.num_heads, self.head_dim = int(num_heads), int(head_dim)
        self.length = 0
        self._written = np.zeros(num_layers, dtype=np.int64)  # tokens written per layer this step

    @classmethod
    def for_model(cls, model, batch_size: int, dtype=np.float32) -> "KVCache":
        """A cache sized for ``model`` (a GPT: its max_seq_len, num_layers, num_heads and
        embed_dim) and ``batch_size`` sequences, of ``dtype``."""
        return cls(batch_size, model.max_seq_len, model.num_layers, model.num_heads,
                   model.embed_dim // model.num_heads, dtype)

    def layer(self, index: int) -> LayerKVCache:
        """The ``LayerKVCache`` view of layer ``index``; IndexError when out of range."""
        if not 0 <= index < self.num_layers:
            raise IndexError(f"KVCache: layer {index} out of range for {self.num_layers} layers")
        return LayerKVCache(self, index)

    def _check_layer(self, layer_idx, who: str) -> int:
        if not isinstance(layer_idx, (int, np.integer)) or not 0 <= layer_idx < self.num_layers:
            raise ValueError(f"KVCache.{who}: layer index {layer_idx!r} out of range for "
                             f"{self.num_layers} layers (Layer index must be 0..{self.num_layers - 1})")
        return int(layer_idx)

    def update(self, layer_idx: int, key, value):
        """Store key, value [batch, heads, n, head_dim] of attention layer ``layer_idx`` after
        the cached tokens; return all keys/values so far as Tensors. Each layer may be
        updated once per step, then ``advance(n)`` commits the step.

        Args:
            layer_idx: the attention layer, 0 .. num_layers - 1 (ValueError otherwise).
            key, value: this step's keys and values (Tensors or arrays).
        """
        layer = self._check_layer(layer_idx, "update")
        k = key.data if isinstance(key, Tensor) else np.asarray(key)
        v = value.data if isinstance(value, Tensor) else np.asarray(value)
        expected = (self.batch_size, self.num_heads)
        if k.shape != v.shape or k.ndim != 4 or k.shape[:2] != expected or k.shape[3] != self.head_dim:
            raise ValueError(f"KVCache.update: k {k.shape} and v {v.shape} must both be "
                             f"[{self.batch_size}, {self.num_heads}, n, {self.head_dim}]")
        n = k.shape[2]
        start, end = self.length, self.length + n
        if end > self.max_seq_len:
            raise ValueError(f"KVCache.update: {end} tokens exceed the cache's max_seq_len={self.max_seq_len} "
                             f"(Sequence position {start} + {n}: the cache is full)")
        if self._written[layer]:
            raise RuntimeError(f"KVCache.update: layer {layer} was already updated in this step; "
                               "call advance() after each forward pass")
        self.keys[layer, :, :, start:end] = k
        self.values[layer, :, :, start:end] = v
        self._written[layer] = n
        return (Tensor._make(self.keys[layer, :, :, :end], False, None),
                Tensor._make(self.values[layer, :, :, :end], False, None))

    def advance(self, n: int | None = None) -> None:
        """Commit ``n`` tokens once every layer has stored them.

        ``n=None`` is upstream TinyTorch's argument-free ``advance()``: it commits the tokens
        the layers wrote this step (none for a step that wrote nothing, e.g. after a forward
        that advanced the cache itself). Layers that wrote nothing in the step hold zeros at
        those positions, as in upstream's zero-initialised cache; layers that wrote different
        counts are an error either way."""
        if n is None:
            wrote = {int(w) for w in self._written if w}
            if len(wrote) > 1:
                raise RuntimeError(f"KVCache.advance(): layers wrote {self._written.tolist()} tokens")
            n = wrote.pop() if wrote else 0
            if self.length + n > self.max_seq_len:
                raise ValueError(f"KVCache.advance: Sequence position {self.length + n} exceeds "
                                 f"max_seq_len={self.max_seq_len} (the cache is full)")
            idle = self._written == 0
            self.keys[idle, :, :, self.length:self.length + n] = 0
            self.values[idle, :, :, self.length:self.length + n] = 0
        elif np.any(self._written != n):
            raise RuntimeError(f"KVCache.advance({n}): layers wrote {self._written.tolist()} tokens")
        self.length += int(n)
        self._written[:] = 0

    def reset(self) -> None:
        """Forget every cached token (the arrays are kept and overwritten)."""
        self.length = 0
        self._written[:] = 0

    def memory_bytes(self) -> int:
        """Bytes held by the preallocated key and value arrays."""
        return int(self.keys.nbytes + self.values.nbytes)

    # Upstream TinyTorch's names for the same cache (tinytorch.perf.memoization, docs/compat.md).
    @property
    def seq_pos(self) -> int:
        """Tokens committed so far (``length``)."""
        return self.length

    def get(self, layer_idx: int):
        """(keys, values) of layer ``layer_idx`` for the committed tokens, Tensors
        [batch, heads, seq_pos, head_dim] without autograd history; ValueError when out of range.

        Args:
            layer_idx: the attention layer, 0 .. num_layers - 1.
        """
        layer_idx = self._check_layer(layer_idx, "get")
        end = self.length
        return (Tensor._make(self.keys[layer_idx, :, :, :end], False, None),
                Tensor._make(self.values[layer_idx, :, :, :end], False, None))

    def get_memory_usage(self) -> dict:
        """``memory_bytes()`` in upstream's report: total_mb, per_layer_mb, cache_tensors
        (2 per layer) and total_elements."""
        total_mb = self.memory_bytes() / (1024 * 1024)
        return {"total_mb": total_mb, "per_layer_mb": total_mb / self.num_layers if self.num_layers else 0.0,
                "cache_tensors": 2 * self.num_layers, "total_elements": int(self.keys.size + self.values.size)}


def _forward_cached(model, ids: np.ndarray, cache: KVCache) -> np.ndarray:
    return model(ids, kv_cache=cache).data


def generate_with_cache(model, idx: np.ndarray, max_new_tokens: int, sample, cache: KVCache | None = None) -> np.ndarray:
    """Autoregressive decoding with a KV cache; returns ids [B, T + max_new_tokens].

    The last sampled token is never fed back (its logits would go unused), so after the call
    the cache holds every token but the last one.

    Args:
        model: a GPT-like model taking ``(ids, kv_cache=...)`` and with ``max_seq_len``,
            ``num_layers``, ``num_heads``, ``embed_dim``.
        idx: prompt token ids, an integer array [B, T].
        max_new_tokens: how many tokens to append.
        sample: ``sample(logits [B, V]) -> ids [B]``, e.g. greedy argmax or
            ``sample_next_token``.
        cache: the KVCache to decode into (reset first); default a new one sized for model.
    """
    out = np.asarray(idx, dtype=np.int64)
    if cache is None:
        cache = KVCache.for_model(model, out.shape[0])
    cache.reset()
    if max_new_tokens == 0:
        return out
    window = model.max_seq_len
    with no_grad():
        logits = _forward_cached(model, out[:, -window:], cache)[:, -1, :]
        for step in range(max_new_tokens):
            nxt = np.asarray(sample(logits), dtype=np.int64)
            out = np.concatenate([out, nxt[:, None]], axis=1)
            if step == max_new_tokens - 1:
                break
            if cache.length >= window:
                # The window slides: every position shifts, so rebuild from the last `window`
                # tokens (what the uncached loop does anyway).
                cache.reset()
                logits = _forward_cached(model, out[:, -window:], cache)[:, -1, :]
            else:
                logits = _forward_cached(model, nxt[:, None], cache)[:, -1, :]
    return out


def incremental_logits(model, idx, prefill: int = 1, step: int = 1) -> np.ndarray:
    """Logits [B, T, V] computed with a cache: ``prefill`` tokens at once, then ``step`` at a time.

    ``model`` is a GPT-like model (run in eval mode here, then restored) and ``idx`` the
    token ids [B, T]; the result should equal ``model(idx)`` up to rounding."""
    arr = idx.data if isinstance(idx, Tensor) else np.asarray(idx)
    b, t = arr.shape
    if not 1 <= prefill <= t or step < 1:
        raise ValueError(f"incremental_logits: need 1 <= prefill <= {t} and step >= 1, got {prefill}, {step}")
    cache = KVCache.for_model(model, b)
    parts = []
    was_training = model.training
    model.eval()  # dropout would make the two computations differ
    try:
        with no_grad():
            parts.append(_forward_cached(model, arr[:, :prefill], cache))
            for s in range(prefill, t, step):
                parts.append(_forward_cached(model, arr[:, s:s + step], cache))
    finally:
        model.train(was_training)
    return np.concatenate(parts, axis=1)
