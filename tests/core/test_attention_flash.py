"""Attention in the core takes FlashAttention when it applies: MultiHeadAttention's causal
self-attention and KV-cache prefill reach the runtime's kernel (the path report proves it),
give the stock path's values and gradients, and the stock path stays reachable (flash=False)."""
import numpy as np
import pytest

from tinytorch import native
from tinytorch.core import acceleration as acc
from tinytorch.core.attention import MultiHeadAttention, attention
from tinytorch.core.kv_cache import KVCache
from tinytorch.core.tensor import Tensor

RNG = np.random.default_rng(3)


def _qkv(*shape_q, s=None):
    b, h, l, d = shape_q
    s = l if s is None else s
    make = lambda *sh: RNG.standard_normal(sh).astype(np.float32)
    return make(b, h, l, d), make(b, h, s, d), make(b, h, s, d)


@pytest.mark.parametrize("causal", [False, True, "bottom_right"])
def test_flash_and_stock_agree_in_values_and_gradients(causal):
    q, k, v = _qkv(2, 3, 37, 16, s=53)
    results = {}
    for flash in (None, False):
        tq, tk, tv = (Tensor(x, requires_grad=True) for x in (q, k, v))
        out = attention(tq, tk, tv, causal=causal, flash=flash)
        forward_path = acc.last_path()
        (out * Tensor(np.cos(np.arange(out.data.size, dtype=np.float32)).reshape(out.shape))).sum().backward()
        results[flash] = (out.data, tq.grad, tk.grad, tv.grad, forward_path)
    for a, b in zip(results[None][:4], results[False][:4]):
        assert np.allclose(a, b, atol=2e-5, rtol=1e-4)
    if native.available():  # 2*3*37*53*16 multiply-adds: above the kernel's work floor
        assert results[None][4] == "native:attention_forward:" + native.isa()
    assert not results[False][4].startswith("native:attention")


def test_multihead_causal_self_attention_runs_the_kernel():
    if not native.available():
        pytest.skip("needs the runtime")
    mha = MultiHeadAttention(64, 4)
    x = Tensor(RNG.standard_normal((2, 128, 64)).astype(np.float32))
    seen = []
    original = acc.attention

    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        seen.append(acc.last_path())
        return result

    acc.attention = spy
    try:
        out = mha(x, causal=True)
    finally:
        acc.attention = original
    assert seen and seen[0] == "native:attention_forward:" + native.isa()
    ref = attention  # the same layer on the stock path must agree
    q = mha._split_heads(mha.q_proj(x))
    k = mha._split_heads(mha.k_proj(x))
    v = mha._split_heads(mha.v_proj(x))
    stock = ref(q, k, v, causal=True, flash=False).transpose(0, 2, 1, 3).reshape(2, 128, 64)
    assert np.allclose(out.data, mha.out_proj(stock).data, atol=1e-5)


def test_kv_cache_prefill_uses_bottom_right_causality():
    mha = MultiHeadAttention(32, 2)
    mha.eval()
    x = Tensor(RNG.standard_normal((1, 20, 32)).astype(np.float32))
    full = mha(x, causal=True).data
    cache = KVCache(num_layers=1, batch_size=1, num_heads=2, max_seq_len=32, head_dim=16)
    first = mha(Tensor(x.data[:, :12]), causal=True, kv_cache=cache.layer(0)).data
    cache.advance(12)
    rest = mha(Tensor(x.data[:, 12:]), causal=True, kv_cache=cache.layer(0)).data
    assert np.allclose(np.concatenate([first, rest], axis=1), full, atol=1e-5)


def test_flash_true_refuses_what_it_cannot_do():
    q, k, v = _qkv(1, 1, 4, 8)
    with pytest.raises(ValueError, match="flash=True"):
        attention(q, k, v, mask=np.ones((4, 4), bool), flash=True)
    with pytest.raises(ValueError, match="flash=True"):
        attention(q.astype(np.float64), k, v, flash=True)
