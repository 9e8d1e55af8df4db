"""Upstream TinyTorch course code, modules 10-13 and 18, second round (#31): tokens,
embeddings, transformers and the KV cache, each behaviour adapted so that upstream's own tests
run, checked here by our own tests against hand-computed values, a float64 reference or the
uncached model (upstream's tests themselves are not part of this repository)."""
import numpy as np
import pytest

import tinytorch
from tinytorch import compat
from tinytorch.core import transformer as upstream_tf
from tinytorch.core.embeddings import Embedding, EmbeddingLayer, TokenIdError
from tinytorch.core.kv_cache import KVCache
from tinytorch.core.tensor import Tensor
from tinytorch.core.tokenization import CharTokenizer, tokenize_dataset
from tinytorch.core.transformers import GPT, MLP, LayerNorm, TransformerBlock
from tinytorch.perf.memoization import CachedAttention, _cached_generate, disable_kv_cache, enable_kv_cache


def _gpt(**kw):
    tinytorch.manual_seed(0)
    args = dict(vocab_size=13, embed_dim=12, num_layers=3, num_heads=3, max_seq_len=9)
    args.update(kw)
    return GPT(**args)


# ------------------------------------------------------------------ KV cache (module 18)
def test_kv_cache_update_takes_upstream_keywords_and_names_bad_layers():
    cache = KVCache(1, 3, 2, 2, 4)
    k = np.arange(8, dtype=np.float32).reshape(1, 2, 1, 4)
    keys, values = cache.update(layer_idx=1, key=Tensor(k), value=Tensor(-k))
    np.testing.assert_array_equal(keys.data, k)
    np.testing.assert_array_equal(values.data, -k)
    for bad in (2, -1, 0.5):
        with pytest.raises(ValueError, match="layer index"):
            cache.update(layer_idx=bad, key=k, value=k)
        with pytest.raises(ValueError, match="[Ll]ayer index"):
            cache.get(bad)


def test_argument_free_advance_commits_what_was_written_and_zero_fills_idle_layers():
    cache = KVCache(1, 4, 3, 1, 2)
    cache.keys[:] = 7.0  # stale contents from an earlier request
    cache.update(0, np.ones((1, 1, 1, 2), np.float32), np.ones((1, 1, 1, 2), np.float32))
    cache.advance()
    assert cache.seq_pos == 1
    np.testing.assert_array_equal(cache.get(0)[0].data, np.ones((1, 1, 1, 2)))
    np.testing.assert_array_equal(cache.get(2)[0].data, np.zeros((1, 1, 1, 2)))  # not the stale 7s
    cache.advance()  # a step that wrote nothing commits nothing
    assert cache.seq_pos == 1
    cache.update(0, np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 2, 2), np.float32))
    cache.update(1, np.ones((1, 1, 1, 2), np.float32), np.ones((1, 1, 1, 2), np.float32))
    with pytest.raises(RuntimeError, match="layers wrote"):
        cache.advance()  # unequal counts stay an error
    cache.reset()
    cache.update(0, np.ones((1, 1, 2, 2), np.float32), np.ones((1, 1, 2, 2), np.float32))
    with pytest.raises(RuntimeError, match="advance"):
        cache.advance(2)  # an explicit count still needs every layer


def test_full_cache_reports_the_position():
    cache = KVCache(1, 2, 1, 1, 2)
    for _ in range(2):
        cache.update(0, np.zeros((1, 1, 1, 2), np.float32), np.zeros((1, 1, 1, 2), np.float32))
        cache.advance()
    with pytest.raises(ValueError, match="cache is full") as err:
        cache.update(0, np.zeros((1, 1, 1, 2), np.float32), np.zeros((1, 1, 1, 2), np.float32))
    assert "Sequence position 2" in str(err.value)


@pytest.mark.parametrize("num_layers", [1, 3])
def test_enabled_cache_decodes_token_by_token_with_the_full_logits(num_layers):
    model = _gpt(num_layers=num_layers)
    ids = np.array([[3, 7, 2, 9, 11, 0, 5]])
    full = model(ids).data[0]
    cache = enable_kv_cache(model)
    assert all(isinstance(b.attention, CachedAttention) for b in model.blocks)
    assert [b.attention.layer_idx for b in model.blocks] == list(range(num_layers))
    np.testing.assert_array_equal(model(ids).data[0], full)  # without start_pos: a plain forward
    assert cache.seq_pos == 0
    for t in range(ids.shape[1]):
        step = model.forward(Tensor(ids[:, t:t + 1].astype(np.float32)), start_pos=cache.seq_pos).data[0, -1]
        cache.advance()
        np.testing.assert_allclose(step, full[t], atol=1e-5)
    with pytest.raises(ValueError, match="start_pos=2 but the cache holds 7"):
        model.forward(ids[:, :1], start_pos=2)
    originals = [b.attention.attention for b in model.blocks]
    disable_kv_cache(model)
    assert [b.attention for b in model.blocks] == originals
    assert not hasattr(model, "_kv_cache")
    np.testing.assert_array_equal(model(ids).data[0], full)


def test_cached_generate_matches_greedy_generate_and_starts_afresh():
    model = _gpt(max_seq_len=6)
    prompt = [4, 1, 12]
    expected = model.generate(np.array([prompt]), 3, temperature=0)[0, 3:].tolist()
    cache = enable_kv_cache(model)
    assert _cached_generate(model, prompt, 3, 0, cache) == expected
    assert cache.seq_pos == len(prompt) + 3 - 1  # the last sampled id is never fed back
    assert _cached_generate(model, prompt, 3, 0, cache) == expected
    assert _cached_generate(model, [1], 0, 0, cache) == [] and cache.seq_pos == 0
    assert _cached_generate(model, [1, 2], 5, 0, cache)  # 2 + 5 - 1 = 6 positions fit exactly
    before = cache.seq_pos
    for prompt, count, temperature in [([], 1, 1), ([1], -1, 1), ([1], 1, -1), ([1], 1, float("nan")),
                                       ([0.5], 1, 1), ([1, 2, 3], 5, 1)]:
        with pytest.raises(ValueError):
            _cached_generate(model, prompt, count, temperature, cache)
    assert cache.seq_pos == before  # refused before anything changed


# ------------------------------------------------------------------ transformers (module 13)
def test_gpt_defaults_and_upstream_sampling_helper():
    model = GPT(7, 4, 1, 1)
    assert model.max_seq_len == 1024
    np.testing.assert_array_equal(model._sample_next_token(np.array([[1.0, 4.0, 2.0], [5.0, 0.0, 1.0]]), 0), [1, 0])
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="temperature"):
            model._sample_next_token(np.ones((1, 7)), bad)
    out = model.generate(Tensor([[1, 2]]), max_new_tokens=2, temperature=0)  # float32 ids, as upstream
    assert isinstance(out, Tensor) and out.shape == (1, 4)
    np.testing.assert_array_equal(out.data[0, :2], [1, 2])


def test_start_pos_offsets_the_positions_without_a_cache():
    model = _gpt(num_layers=0)
    ids = np.array([[5, 1]])
    got = model(ids, start_pos=3).data.astype(np.float64)
    x = model.token_embedding.weight.data[ids[0]].astype(np.float64) + \
        model.position_embedding.weight.data[3:5].astype(np.float64)
    x = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    want = (x * model.ln_f.weight.data + model.ln_f.bias.data) @ model.lm_head.weight.data.astype(np.float64)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
    for bad in (-1, 0.5, True):
        with pytest.raises(ValueError, match="start_pos"):
            model(ids, start_pos=bad)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        model(ids, start_pos=8)


def test_block_ff_dim_dropout_prob_and_upstream_parameter_names():
    block = TransformerBlock(6, 2, ff_dim=5)
    assert block.mlp.hidden_dim == 5 and block.mlp.fc1.weight.shape == (6, 5)
    assert TransformerBlock(6, 2).mlp.hidden_dim == 24
    for bad in (0, -3, 2.5):
        with pytest.raises(ValueError, match="ff_dim"):
            TransformerBlock(6, 2, ff_dim=bad)
    assert TransformerBlock(6, 2, dropout_prob=0.25).mlp.dropout_prob == 0.25
    assert MLP(4).dropout_prob == 0.0 and MLP(4, dropout_prob=0.5).dropout.p == 0.5
    with pytest.raises(TypeError, match="not both"):
        MLP(4, dropout=0.1, dropout_prob=0.2)
    assert block.attention is block.attn
    ln = LayerNorm(3)
    assert ln.gamma is ln.weight and ln.beta is ln.bias
    up = upstream_tf.TransformerBlock(6, 2, ff_dim=7)
    assert up.mlp.hidden_dim == 7 and isinstance(up.mlp, upstream_tf.MLP)


def test_upstream_module_paths_are_the_same_objects():
    from tinytorch.core import embeddings, tokenization
    from tinytorch.models import GPT as ModelsGPT, TinyGPT
    from tinytorch.models.transformer import GPT as ModelsTransformerGPT
    from tinytorch.text import embeddings as text_embeddings, tokenization as text_tokenization
    assert ModelsGPT is TinyGPT is ModelsTransformerGPT is upstream_tf.GPT
    assert text_embeddings.Embedding is embeddings.Embedding
    assert text_tokenization.CharTokenizer is tokenization.CharTokenizer
    assert upstream_tf.MultiHeadAttention is compat.MultiHeadAttention
    model = ModelsGPT(vocab_size=9, embed_dim=8, num_layers=1, num_heads=2)
    assert model.max_seq_len == 1024 and model(Tensor([[1, 2, 3]])).shape == (1, 3, 9)


def test_upstream_multihead_attention_from_core_transformer_takes_a_float_mask():
    tinytorch.manual_seed(1)
    mha = upstream_tf.MultiHeadAttention(8, 2)
    x = Tensor(np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32))
    causal = np.tril(np.ones((4, 4), np.float32))
    out = mha(x, Tensor(causal))
    ours = tinytorch.core.attention.MultiHeadAttention.forward(mha, x, causal=True)
    np.testing.assert_allclose(out.data, ours.data, atol=1e-6)


# ------------------------------------------------------------------ embeddings (module 11)
def test_embedding_upstream_keywords():
    tinytorch.manual_seed(0)
    a = Embedding(vocab_size=5, embed_dim=3)
    assert (a.num_embeddings, a.embedding_dim) == (5, 3)
    with pytest.raises(TypeError, match="exactly once"):
        Embedding(5, 3, vocab_size=5)
    with pytest.raises(TypeError, match="exactly once"):
        Embedding(embed_dim=3)


def test_float_tensor_ids_of_whole_numbers_read_as_ids_and_others_refused():
    emb = Embedding(4, 2)
    np.testing.assert_array_equal(emb(Tensor([[1.0, 3.0, 1.0]])).data, emb(np.array([[1, 3, 1]])).data)
    for bad in (0.5, np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="finite integers") as err:
            emb(Tensor([bad]))
        assert isinstance(err.value, TypeError) and isinstance(err.value, TokenIdError)
    with pytest.raises(TypeError, match="integers"):
        emb(np.array([0.0, 1.0]))  # a float ndarray is still refused: the caller chose floats
    with pytest.raises(ValueError, match="out of range"):
        emb(Tensor([4.0]))
    emb(Tensor([[1.0, 1.0, 2.0]])).sum().backward()
    np.testing.assert_array_equal(emb.weight.grad, [[0, 0], [2, 2], [1, 1], [0, 0]])


@pytest.mark.parametrize("kind", ["learned", "sinusoidal"])
def test_embedding_layer_start_pos(kind):
    tinytorch.manual_seed(0)
    layer = EmbeddingLayer(6, 4, max_seq_len=5, pos_encoding=kind)
    ids = np.array([[1, 2]])
    table = (layer.pos_encoding.weight.data if kind == "learned" else layer.pos_encoding.table).astype(np.float64)
    got = layer(ids, start_pos=3).data - layer.token_embedding(ids).data
    np.testing.assert_allclose(got[0], table[3:5], atol=1e-6)
    for bad in (-1, 0.5, True, 4):
        with pytest.raises(ValueError):
            layer(ids, start_pos=bad)


# ------------------------------------------------------------------ tokenization (module 10)
def test_tokenize_dataset_encodes_and_truncates():
    tok = CharTokenizer("abcd")
    assert tokenize_dataset(["ab", "dcba", ""], tok) == [tok.encode("ab"), tok.encode("dcba"), []]
    assert tokenize_dataset(["dcba"], tok, max_length=3) == [tok.encode("dcb")]
    with pytest.raises(TypeError, match="single str"):
        tokenize_dataset("abc", tok)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="max_length"):
            tokenize_dataset(["ab"], tok, max_length=bad)
    with pytest.raises(ValueError):
        tokenize_dataset(["az"], tok)  # unknown characters still raise without an unk_token
