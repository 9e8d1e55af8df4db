"""Upstream attention / transformer calls (core/attention.py, core/transformer.py upstream):
the course's scaled_dot_product_attention (also tinytorch.compat's) and
tinytorch.core.transformer, checked against
PyTorch and against this project's own classes."""
import numpy as np
import pytest
import torch

import tinytorch
from tinytorch.core import transformers as ours
from tinytorch.core.tensor import Tensor


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_create_causal_mask_is_upstreams_float_mask():
    from tinytorch.core.transformer import create_causal_mask
    m = create_causal_mask(4)
    assert isinstance(m, Tensor) and m.shape == (1, 4, 4) and m.dtype == np.float32
    np.testing.assert_array_equal(m.data[0], np.tril(np.ones((4, 4))))
    assert tinytorch.create_causal_mask is create_causal_mask


@pytest.mark.parametrize("use_mask", [False, True])
def test_sdpa_returns_output_and_weights_like_upstream(use_mask):
    from tinytorch.compat import scaled_dot_product_attention
    from tinytorch.core.transformer import create_causal_mask
    q, k, v = f32(2, 5, 8, seed=1), f32(2, 5, 8, seed=2), f32(2, 5, 8, seed=3)
    mask = create_causal_mask(5) if use_mask else None
    Q = Tensor(q, requires_grad=True)
    out, weights = scaled_dot_product_attention(Q, Tensor(k), Tensor(v), mask=mask)
    tq = torch.tensor(q, dtype=torch.float64, requires_grad=True)
    scores = tq @ torch.tensor(k, dtype=torch.float64).transpose(-1, -2) / np.sqrt(8)
    if use_mask:
        scores = scores.masked_fill(torch.tensor(mask.data == 0), float("-inf"))
    w_ref = torch.softmax(scores, -1)
    o_ref = w_ref @ torch.tensor(v, dtype=torch.float64)
    np.testing.assert_allclose(out.data, o_ref.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(weights.data, w_ref.detach().numpy(), atol=1e-6)
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, atol=1e-6)
    out.sum().backward()  # differentiable, like upstream's
    o_ref.sum().backward()
    np.testing.assert_allclose(Q.grad, tq.grad.numpy(), atol=1e-4)


def test_sdpa_mask_meaning_one_attends_zero_masks():
    from tinytorch.compat import scaled_dot_product_attention
    q, k, v = f32(1, 3, 4), f32(1, 3, 4, seed=5), f32(1, 3, 4, seed=6)
    mask = Tensor(np.array([[[1, 0, 0], [1, 1, 0], [1, 1, 1]]], np.float32))
    _, w = scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), mask)
    assert np.all(w.data[mask.data == 0] == 0)
    # upstream's path and compat's name are one function; the engine's attention (PyTorch's
    # convention: a bool mask, the output only) gives the same output
    from tinytorch.core import attention as core_attention
    assert core_attention.scaled_dot_product_attention is scaled_dot_product_attention
    o = core_attention.attention(Tensor(q), Tensor(k), Tensor(v), mask=mask.data != 0)
    np.testing.assert_allclose(o.data, (w.data @ v), atol=1e-6)


def test_multihead_attention_upstream_call_matches_ours():
    from tinytorch.compat import MultiHeadAttention
    from tinytorch.core.attention import MultiHeadAttention as Ours
    from tinytorch.core.transformer import create_causal_mask
    mha = MultiHeadAttention(embed_dim=16, num_heads=4)
    assert mha.head_dim == 4 and len(mha.parameters()) == 8
    assert mha.q_proj.weight.shape == (16, 16)
    ref = Ours(16, 4)
    ref.load_state_dict(mha.state_dict())
    x = Tensor(f32(2, 6, 16))
    np.testing.assert_allclose(mha(x).data, ref(x).data, atol=1e-6)
    np.testing.assert_allclose(mha.forward(x, create_causal_mask(6)).data, ref(x, causal=True).data, atol=1e-5)
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 3)


def test_transformer_block_mask_and_layer_names():
    from tinytorch.core.transformer import LayerNorm, MLP, TransformerBlock, create_causal_mask
    tinytorch.manual_seed(0)
    block = TransformerBlock(embed_dim=16, num_heads=4)
    assert block.attention is block.attn and block.mlp.linear1 is block.mlp.fc1
    causal = ours.TransformerBlock(16, 4)
    full = ours.TransformerBlock(16, 4, causal=False)
    causal.load_state_dict(block.state_dict())
    full.load_state_dict(block.state_dict())
    x = Tensor(f32(2, 5, 16))
    np.testing.assert_allclose(block(x).data, full(x).data, atol=1e-6)            # no mask: full attention
    np.testing.assert_allclose(block(x, create_causal_mask(5)).data, causal(x).data, atol=1e-5)
    ln = LayerNorm(16)
    assert ln.gamma is ln.weight and ln.beta is ln.bias
    tln = torch.nn.LayerNorm(16)
    np.testing.assert_allclose(ln(x).data, tln(torch.tensor(x.data)).detach().numpy(), atol=1e-5)
    mlp = MLP(16)
    assert mlp.hidden_dim == 64 and len(mlp.parameters()) == 4
    h = torch.nn.functional.gelu(torch.tensor(x.data) @ torch.tensor(mlp.fc1.weight.data)
                                 + torch.tensor(mlp.fc1.bias.data), approximate="tanh")
    ref = h @ torch.tensor(mlp.fc2.weight.data) + torch.tensor(mlp.fc2.bias.data)
    np.testing.assert_allclose(mlp(x).data, ref.numpy(), atol=1e-5)


def test_gpt_upstream_defaults_float_tokens_and_generate():
    from tinytorch.core.transformer import GPT
    tinytorch.manual_seed(0)
    model = GPT(vocab_size=50, embed_dim=16, num_layers=2, num_heads=4)
    assert model.max_seq_len == 1024
    tokens = Tensor([[1, 2, 3], [4, 5, 6]])  # upstream: a float32 Tensor of ids
    logits = model(tokens)
    assert logits.shape == (2, 3, 50)
    ref = ours.GPT(50, 16, 2, 4, 1024)
    ref.load_state_dict(model.state_dict())
    np.testing.assert_allclose(logits.data, ref(np.array([[1, 2, 3], [4, 5, 6]])).data, atol=1e-5)
    out = model.generate(Tensor([[1, 2, 3]]), max_new_tokens=5, temperature=0.0)
    assert isinstance(out, Tensor) and out.shape == (1, 8)
    np.testing.assert_array_equal(out.data[0, :3], [1, 2, 3])
    assert model.generate(Tensor([[1, 2]])).shape == (1, 52)  # upstream default: 50 new tokens
