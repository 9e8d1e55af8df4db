"""Embeddings: lookup with scatter-add gradient, learned and sinusoidal positions, bad ids."""
import math

import numpy as np
import pytest

from parity import assert_close, check_parity
from tinytorch.core.embeddings import (Embedding, EmbeddingFunction, PositionalEmbedding,
                                       SinusoidalPositionalEncoding)
from tinytorch.core.random import manual_seed
from tinytorch.core.tensor import Tensor

ID_SHAPES = [(0,), (1,), (7,), (3, 5), (2, 3, 4)]


@pytest.mark.parametrize("ids_shape", ID_SHAPES)
@pytest.mark.parametrize("vocab,dim", [(1, 3), (5, 1), (11, 7)])
def test_embedding_function_parity_with_duplicates(rng, ids_shape, vocab, dim):
    w = rng.standard_normal((vocab, dim))
    # Few distinct ids in many slots: most rows are picked several times (scatter-add).
    ids = rng.integers(0, vocab, size=ids_shape)
    check_parity(lambda w_, i_: EmbeddingFunction.apply(w_, i_), lambda w_, i_: w_[i_], [w, ids],
                 rng=rng, name="embedding")


def test_embedding_layer_gradient_counts_repeats(rng):
    emb = Embedding(6, 4)
    ids = np.array([[0, 2, 2], [5, 2, 0]])
    out = emb(ids)
    assert out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out.data, emb.weight.data[ids])
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    expected = np.zeros((6, 4), np.float32)
    for (b, t), i in np.ndenumerate(ids):
        expected[i] += g[b, t]
    assert_close(emb.weight.grad, expected, 1e-6, 1e-6, "embedding grad")
    assert not emb.weight.grad[[1, 3, 4]].any()


@pytest.mark.parametrize("bad", [7, -1, 100])
def test_embedding_out_of_range_names_index_and_vocab(bad):
    emb = Embedding(7, 3)
    with pytest.raises(ValueError, match=rf"index {bad} .*vocab size 7"):
        emb(np.array([0, bad, 1]))


def test_embedding_rejects_float_ids_and_bad_sizes():
    emb = Embedding(4, 2)
    with pytest.raises(TypeError, match="integers"):
        emb(np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="positive"):
        Embedding(0, 3)
    emb_t = emb(Tensor(np.array([1, 3])))  # integer Tensor ids work too
    np.testing.assert_array_equal(emb_t.data, emb.weight.data[[1, 3]])


def test_embedding_matches_torch(rng):
    torch = pytest.importorskip("torch")
    emb = Embedding(9, 5)
    ids = rng.integers(0, 9, size=(4, 6))
    ref = torch.nn.Embedding(9, 5)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(emb.weight.data))
    out = emb(ids)
    tout = ref(torch.from_numpy(ids))
    g = rng.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    tout.backward(torch.from_numpy(g))
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=0, atol=0)
    np.testing.assert_allclose(emb.weight.grad, ref.weight.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_init_is_reproducible():
    manual_seed(3)
    a = Embedding(5, 4).weight.data.copy()
    manual_seed(3)
    b = Embedding(5, 4).weight.data
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape,offset", [((2, 5, 4), 0), ((1, 1, 4), 7), ((3, 8, 4), 0), ((6, 4), 2)])
def test_positional_embedding_parity(rng, shape, offset):
    layer = PositionalEmbedding(8, 4)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((8, 4))
    t = shape[-2]

    def op(x_, w_):
        layer.weight = w_
        return layer(x_, offset=offset)

    check_parity(op, lambda x_, w_: x_ + w_[offset:offset + t], [x, w], rng=rng, name="pos_emb")


def test_positional_embedding_too_long_and_wrong_dim():
    layer = PositionalEmbedding(4, 3)
    with pytest.raises(ValueError, match="exceed max_seq_len=4"):
        layer(np.zeros((1, 5, 3), np.float32))
    with pytest.raises(ValueError, match="exceed max_seq_len=4"):
        layer(np.zeros((1, 2, 3), np.float32), offset=3)
    with pytest.raises(ValueError, match="embed_dim 3"):
        layer(np.zeros((1, 2, 5), np.float32))


@pytest.mark.parametrize("dim", [1, 4, 7])
def test_sinusoidal_table_by_formula(rng, dim):
    enc = SinusoidalPositionalEncoding(10, dim)
    assert enc.parameters() == []  # a constant, never trained
    expected = np.zeros((10, dim))
    for p in range(10):
        for i in range(dim):
            angle = p / (10000 ** ((i - i % 2) / dim))
            expected[p, i] = math.sin(angle) if i % 2 == 0 else math.cos(angle)
    np.testing.assert_allclose(enc.table, expected, rtol=1e-12, atol=1e-12)
    x = rng.standard_normal((2, 6, dim))
    check_parity(lambda x_: enc(x_, offset=3), lambda x_: x_ + expected[3:9], [x], rng=rng, name="sinusoidal")
    with pytest.raises(ValueError, match="exceed max_seq_len"):
        enc(np.zeros((1, 11, dim), np.float32))
