"""KV cache: incremental logits equal full recomputation at every position; cached generation
equals uncached generation; the cache refuses to overflow or to be misused."""
import numpy as np
import pytest

from tinytorch.core.attention import MultiHeadAttention
from tinytorch.core.kv_cache import KVCache, incremental_logits
from tinytorch.core.random import manual_seed
from tinytorch.core.tensor import Tensor, no_grad
from tinytorch.core.transformers import GPT


def _gpt(seed=0, **kw):
    manual_seed(seed)
    args = dict(vocab_size=13, embed_dim=24, num_layers=3, num_heads=4, max_seq_len=10)
    args.update(kw)
    return GPT(**args)


@pytest.mark.parametrize("batch,t,prefill,step", [(1, 10, 1, 1), (3, 7, 3, 2), (2, 10, 10, 1), (2, 9, 4, 5),
                                                  (1, 1, 1, 1)])
def test_incremental_logits_match_full_recomputation(rng, batch, t, prefill, step):
    model = _gpt()
    idx = rng.integers(0, 13, size=(batch, t))
    full = model(idx).data
    inc = incremental_logits(model, idx, prefill=prefill, step=step)
    assert inc.shape == full.shape
    # every position, not just the last one
    np.testing.assert_allclose(inc, full, rtol=1e-5, atol=1e-5)


def test_incremental_logits_float64_agree_tightly(rng):
    model = _gpt(num_layers=2)
    for p in model.parameters():
        p.data = p.data.astype(np.float64)
    idx = rng.integers(0, 13, size=(2, 8))
    with no_grad():
        full = model(idx).data
    cache = KVCache.for_model(model, 2, dtype=np.float64)
    with no_grad():
        for pos in range(8):
            step = model(idx[:, pos:pos + 1], kv_cache=cache).data[:, 0]
            np.testing.assert_allclose(step, full[:, pos], rtol=1e-12, atol=1e-12)
    assert cache.length == 8


def test_mha_with_cache_matches_causal_attention(rng):
    mha = MultiHeadAttention(8, 2)
    x = rng.standard_normal((2, 6, 8)).astype(np.float32)
    full = mha(x, causal=True).data
    cache = KVCache(2, 6, 1, 2, 4)
    outs = []
    for pos in range(6):
        outs.append(mha(x[:, pos:pos + 1], causal=True, kv_cache=cache.layer(0)).data)
        cache.advance(1)
    np.testing.assert_allclose(np.concatenate(outs, axis=1), full, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("temperature,top_k,seed", [(0.0, None, None), (1.0, None, 11), (0.8, 3, 5)])
def test_cached_generation_equals_uncached(rng, temperature, top_k, seed):
    model = _gpt()
    prompt = rng.integers(0, 13, size=(2, 3))
    # 3 + 15 tokens > max_seq_len 10: the window slides and the cache is rebuilt
    a = model.generate(prompt, 15, temperature=temperature, top_k=top_k, seed=seed if seed else 0)
    b = model.generate(prompt, 15, temperature=temperature, top_k=top_k, seed=seed if seed else 0, use_cache=True)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (2, 18)


def test_cache_outputs_carry_no_gradient_history(rng):
    model = _gpt(num_layers=1)
    cache = KVCache.for_model(model, 1)
    with no_grad():
        out = model(rng.integers(0, 13, size=(1, 4)), kv_cache=cache)
    assert not out.requires_grad and out.grad_fn is None
    k, v = cache.update(0, np.ones((1, 4, 1, 6), np.float32), np.ones((1, 4, 1, 6), np.float32))
    assert isinstance(k, Tensor) and not k.requires_grad and k.shape == (1, 4, 5, 6)


def test_cache_memory_and_reset():
    cache = KVCache(batch_size=2, max_seq_len=16, num_layers=3, num_heads=4, head_dim=8)
    assert cache.memory_bytes() == 2 * 3 * 2 * 4 * 16 * 8 * 4  # keys + values, float32
    cache.update(0, np.zeros((2, 4, 5, 8), np.float32), np.zeros((2, 4, 5, 8), np.float32))
    with pytest.raises(RuntimeError, match="advance"):
        cache.advance(5)  # layers 1 and 2 have not written yet
    cache.reset()
    assert cache.length == 0


def test_cache_bad_use():
    model = _gpt()
    cache = KVCache.for_model(model, 1)
    with no_grad():
        model(np.zeros((1, 8), dtype=np.int64), kv_cache=cache)
        with pytest.raises(ValueError, match="after 8 cached tokens exceeds max_seq_len=10"):
            model(np.zeros((1, 3), dtype=np.int64), kv_cache=cache)
    small = KVCache(1, 4, 1, 2, 3)
    with pytest.raises(ValueError, match="must both be"):
        small.update(0, np.zeros((1, 2, 1, 4), np.float32), np.zeros((1, 2, 1, 4), np.float32))
    with pytest.raises(ValueError, match="exceed the cache's max_seq_len=4"):
        small.update(0, np.zeros((1, 2, 5, 3), np.float32), np.zeros((1, 2, 5, 3), np.float32))
    small.update(0, np.zeros((1, 2, 1, 3), np.float32), np.zeros((1, 2, 1, 3), np.float32))
    with pytest.raises(RuntimeError, match="already updated"):
        small.update(0, np.zeros((1, 2, 1, 3), np.float32), np.zeros((1, 2, 1, 3), np.float32))
    with pytest.raises(ValueError, match="batch_size"):
        KVCache(0, 4, 1, 2, 3)
    with pytest.raises(IndexError, match="layer 3"):
        small.layer(3)
    with pytest.raises(ValueError, match="prefill"):
        incremental_logits(model, np.zeros((1, 4), dtype=np.int64), prefill=5)
