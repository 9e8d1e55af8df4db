"""Attention: SDPA and MultiHeadAttention against float64 NumPy references, finite differences
and PyTorch (weights copied across), stability, masks, causality and bad input."""
import numpy as np
import pytest

from parity import assert_close, check_parity
from tinytorch.core.attention import MultiHeadAttention, causal_mask, attention
from tinytorch.core.tensor import Tensor


# ---------------------------------------------------------------- float64 references

def ref_sdpa(q, k, v, mask=None, causal=False, scale=None):
    """Plain float64 attention; fully masked rows give zeros."""
    d = q.shape[-1]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    s = np.einsum("...ld,...sd->...ls", q, k) * scale
    allowed = np.ones(s.shape, dtype=bool)
    if mask is not None:
        if mask.dtype == bool:
            allowed = allowed & mask
        else:
            s = s + mask
    if causal:
        allowed = allowed & np.tril(np.ones(s.shape[-2:], dtype=bool))
    s = np.where(allowed, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, z, out=np.zeros_like(e), where=z > 0)
    return np.einsum("...ls,...sd->...ld", p, v)


def ref_mha(x, wq, bq, wk, bk, wv, bv, wo, bo, heads, causal=False):
    b, t, e = x.shape
    d = e // heads

    def split(a):
        return a.reshape(b, t, heads, d).transpose(0, 2, 1, 3)

    o = ref_sdpa(split(x @ wq + bq), split(x @ wk + bk), split(x @ wv + bv), causal=causal)
    return o.transpose(0, 2, 1, 3).reshape(b, t, e) @ wo + bo


SDPA_SHAPES = [
    # q shape, k shape, v shape
    ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 6)),
    ((1, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1)),
    ((2, 2, 3, 5), (2, 1, 4, 5), (2, 1, 4, 2)),     # keys shared across heads (broadcast)
    ((3, 4, 2), (3, 6, 2), (3, 6, 3)),              # no head axis
    ((1, 2, 13, 3), (1, 2, 13, 3), (1, 2, 13, 3)),  # prime length
]


@pytest.mark.parametrize("qs,ks,vs", SDPA_SHAPES)
def test_sdpa_parity(rng, qs, ks, vs):
    q, k, v = rng.standard_normal(qs), rng.standard_normal(ks), rng.standard_normal(vs)
    check_parity(lambda a, b, c: attention(a, b, c), ref_sdpa, [q, k, v], rng=rng,
                 name="sdpa")


@pytest.mark.parametrize("t", [1, 4, 9])
def test_sdpa_causal_parity(rng, t):
    q, k, v = (rng.standard_normal((2, 2, t, 3)) for _ in range(3))
    check_parity(lambda a, b, c: attention(a, b, c, causal=True),
                 lambda a, b, c: ref_sdpa(a, b, c, causal=True), [q, k, v], rng=rng, name="sdpa causal")


def test_sdpa_bool_and_float_masks_parity(rng):
    q, k, v = rng.standard_normal((2, 2, 4, 3)), rng.standard_normal((2, 2, 6, 3)), rng.standard_normal((2, 2, 6, 3))
    bmask = rng.random((2, 1, 4, 6)) > 0.4
    bmask[..., 0] = True  # every row keeps at least one key
    check_parity(lambda a, b, c: attention(a, b, c, mask=bmask),
                 lambda a, b, c: ref_sdpa(a, b, c, mask=bmask), [q, k, v], rng=rng, name="sdpa bool mask")
    fmask = rng.standard_normal((4, 6))
    check_parity(lambda a, b, c: attention(a, b, c, mask=fmask),
                 lambda a, b, c: ref_sdpa(a, b, c, mask=fmask), [q, k, v], rng=rng, name="sdpa float mask",
                 fwd_atol=1e-5)


def test_sdpa_is_stable_for_huge_scores(rng):
    q = rng.standard_normal((1, 2, 5, 4)) * 1e4
    k = rng.standard_normal((1, 2, 5, 4)) * 10
    v = rng.standard_normal((1, 2, 5, 4))
    out = attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32))
    assert np.all(np.isfinite(out))
    assert_close(out, ref_sdpa(q, k, v), 1e-4, 1e-4, "sdpa huge scores")
    t = Tensor(q.astype(np.float32), requires_grad=True)
    attention(t, Tensor(k.astype(np.float32)), Tensor(v.astype(np.float32))).sum().backward()
    assert np.all(np.isfinite(t.grad))


def test_sdpa_fully_masked_row_gives_zero_and_no_gradient(rng):
    q, k, v = (Tensor(rng.standard_normal((1, 1, 3, 2)).astype(np.float32), requires_grad=True) for _ in range(3))
    mask = np.ones((3, 3), dtype=bool)
    mask[1] = False
    out = attention(q, k, v, mask=mask)
    assert np.all(out.data[0, 0, 1] == 0)
    out.backward(np.ones(out.shape, np.float32))
    assert np.all(q.grad[0, 0, 1] == 0)
    assert np.all(np.isfinite(k.grad)) and np.all(np.isfinite(v.grad))


def test_sdpa_ndarray_in_ndarray_out_and_custom_scale(rng):
    q, k, v = (rng.standard_normal((2, 3, 4)).astype(np.float32) for _ in range(3))
    out = attention(q, k, v, scale=0.3)
    assert isinstance(out, np.ndarray)
    assert_close(out, ref_sdpa(q.astype(np.float64), k, v, scale=0.3), 1e-5, 1e-5, "sdpa scale")


def test_sdpa_bad_input():
    a = np.zeros((1, 2, 3, 4), np.float32)
    with pytest.raises(ValueError, match="last dim"):
        attention(a, np.zeros((1, 2, 3, 5), np.float32), a)
    with pytest.raises(ValueError, match="same number of keys"):
        attention(a, a, np.zeros((1, 2, 4, 4), np.float32))
    with pytest.raises(ValueError, match="mask of shape"):
        attention(a, a, a, mask=np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="batch dims"):
        b = np.zeros((3, 2, 3, 4), np.float32)
        attention(np.zeros((2, 2, 3, 4), np.float32), b, b)
    with pytest.raises(TypeError, match="bool or float"):
        attention(a, a, a, mask=np.ones((3, 3), np.int64))
    with pytest.raises(ValueError, match="seq, dim"):
        attention(np.zeros(3, np.float32), a, a)


def test_causal_mask():
    m = causal_mask(4)
    assert m.dtype == bool
    np.testing.assert_array_equal(m, np.array([[j <= i for j in range(4)] for i in range(4)]))
    # queries are the last 2 of 5 positions
    np.testing.assert_array_equal(causal_mask(2, 5), np.array([[j <= i + 3 for j in range(5)] for i in range(2)]))
    assert causal_mask(0).shape == (0, 0)
    with pytest.raises(ValueError, match="kv_len"):
        causal_mask(4, 2)
    with pytest.raises(ValueError, match="seq_len"):
        causal_mask(-1)


# ---------------------------------------------------------------- PyTorch SDPA

@pytest.mark.parametrize("case", ["plain", "causal", "bool", "float", "causal_rect"])
def test_sdpa_matches_torch(rng, case):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    lq, lk = (5, 7) if case in ("plain", "bool", "float", "causal_rect") else (6, 6)
    q, k, v = rng.standard_normal((2, 3, lq, 4)), rng.standard_normal((2, 3, lk, 4)), rng.standard_normal((2, 3, lk, 5))
    mask = None
    if case == "bool":
        mask = rng.random((lq, lk)) > 0.3
        mask[:, 0] = True
    elif case == "float":
        mask = rng.standard_normal((2, 1, lq, lk))
    causal = case in ("causal", "causal_rect")
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    tmask = None if mask is None else torch.from_numpy(mask)
    tout = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, is_causal=causal)
    ours_q, ours_k, ours_v = (Tensor(a, requires_grad=True, dtype=np.float64) for a in (q, k, v))
    out = attention(ours_q, ours_k, ours_v, mask=mask, causal=causal)
    g = rng.standard_normal(out.shape)
    out.backward(g)
    tout.backward(torch.from_numpy(g))
    assert_close(out.data, tout.detach().numpy(), 1e-10, 1e-10, "sdpa vs torch")
    for ours, theirs, name in ((ours_q, tq, "q"), (ours_k, tk, "k"), (ours_v, tv, "v")):
        assert_close(ours.grad, theirs.grad.numpy(), 1e-10, 1e-9, f"sdpa grad {name} vs torch")


# ---------------------------------------------------------------- MultiHeadAttention

def _mha_params(rng, e):
    return [rng.standard_normal(s) * 0.5 for s in [(e, e), (e,)] * 4]


def _set_mha(mha, params):
    mha.q_proj.weight, mha.q_proj.bias, mha.k_proj.weight, mha.k_proj.bias, \
        mha.v_proj.weight, mha.v_proj.bias, mha.out_proj.weight, mha.out_proj.bias = params


@pytest.mark.parametrize("b,t,e,h,causal", [(2, 3, 4, 2, False), (1, 5, 6, 3, True), (3, 1, 4, 4, True),
                                             (1, 4, 5, 1, False)])
def test_mha_parity(rng, b, t, e, h, causal):
    mha = MultiHeadAttention(e, h)
    x = rng.standard_normal((b, t, e))
    params = _mha_params(rng, e)

    def op(x_, *p):
        _set_mha(mha, p)
        return mha(x_, causal=causal)

    check_parity(op, lambda x_, *p: ref_mha(x_, *p, heads=h, causal=causal), [x] + params, rng=rng,
                 name="mha", layouts=("contiguous",), grad_atol=2e-4)


def _torch_mha_from(mha, torch):
    e = mha.embed_dim
    bias = mha.q_proj.bias is not None
    ref = torch.nn.MultiheadAttention(e, mha.num_heads, bias=bias, batch_first=True).double()
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.from_numpy(np.concatenate(
            [mha.q_proj.weight.data.T, mha.k_proj.weight.data.T, mha.v_proj.weight.data.T]).astype(np.float64)))
        ref.out_proj.weight.copy_(torch.from_numpy(mha.out_proj.weight.data.T.astype(np.float64)))
        if bias:
            ref.in_proj_bias.copy_(torch.from_numpy(np.concatenate(
                [mha.q_proj.bias.data, mha.k_proj.bias.data, mha.v_proj.bias.data]).astype(np.float64)))
            ref.out_proj.bias.copy_(torch.from_numpy(mha.out_proj.bias.data.astype(np.float64)))
    return ref


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("mask_kind", ["none", "causal", "attn_bool", "key_padding"])
def test_mha_matches_torch_multiheadattention(rng, bias, mask_kind):
    torch = pytest.importorskip("torch")
    b, t, s, e, h = 2, 5, 5, 8, 2
    mha = MultiHeadAttention(e, h, bias=bias)
    for p in mha.parameters():  # work in float64 so the comparison can be tight
        p.data = p.data.astype(np.float64)
    ref = _torch_mha_from(mha, torch)
    x = rng.standard_normal((b, t, e))
    kwargs, tkwargs = {}, {}
    if mask_kind == "causal":
        blocked = ~causal_mask(t)
        kwargs, tkwargs = {"causal": True}, {"attn_mask": torch.from_numpy(blocked), "is_causal": True}
    elif mask_kind == "attn_bool":
        blocked = rng.random((t, s)) > 0.6
        blocked[:, 1] = False
        kwargs, tkwargs = {"attn_mask": blocked}, {"attn_mask": torch.from_numpy(blocked)}
    elif mask_kind == "key_padding":
        pad = np.zeros((b, s), dtype=bool)
        pad[0, -2:] = True
        kwargs, tkwargs = {"key_padding_mask": pad}, {"key_padding_mask": torch.from_numpy(pad)}
    xt = Tensor(x, requires_grad=True, dtype=np.float64)
    out, weights = mha(xt, xt, xt, need_weights=True, **kwargs)
    tx = torch.tensor(x, requires_grad=True)
    tout, tweights = ref(tx, tx, tx, need_weights=True, **tkwargs)
    assert_close(out.data, tout.detach().numpy(), 1e-10, 1e-9, "mha output vs torch")
    assert_close(weights.data, tweights.detach().numpy(), 1e-10, 1e-9, "mha weights vs torch")
    g = rng.standard_normal(out.shape)
    out.backward(g)
    tout.backward(torch.from_numpy(g))
    assert_close(xt.grad, tx.grad.numpy(), 1e-10, 1e-9, "mha input grad vs torch")
    tw = ref.in_proj_weight.grad.numpy()
    assert_close(mha.q_proj.weight.grad, tw[:e].T, 1e-10, 1e-9, "q_proj grad")
    assert_close(mha.k_proj.weight.grad, tw[e:2 * e].T, 1e-10, 1e-9, "k_proj grad")
    assert_close(mha.v_proj.weight.grad, tw[2 * e:].T, 1e-10, 1e-9, "v_proj grad")
    assert_close(mha.out_proj.weight.grad, ref.out_proj.weight.grad.numpy().T, 1e-10, 1e-9, "out_proj grad")


def test_mha_cross_attention_matches_torch(rng):
    torch = pytest.importorskip("torch")
    mha = MultiHeadAttention(6, 3)
    for p in mha.parameters():
        p.data = p.data.astype(np.float64)
    ref = _torch_mha_from(mha, torch)
    q, kv = rng.standard_normal((2, 4, 6)), rng.standard_normal((2, 7, 6))
    out = mha(Tensor(q, dtype=np.float64), Tensor(kv, dtype=np.float64))
    tout, _ = ref(torch.from_numpy(q), torch.from_numpy(kv), torch.from_numpy(kv))
    assert_close(out.data, tout.detach().numpy(), 1e-10, 1e-9, "cross attention vs torch")


def test_mha_causality_future_token_changes_no_earlier_output(rng):
    mha = MultiHeadAttention(8, 4)
    x = rng.standard_normal((2, 6, 8)).astype(np.float32)
    base = mha(x, causal=True).data
    for pos in range(6):
        x2 = x.copy()
        x2[:, pos] += rng.standard_normal((2, 8)).astype(np.float32) * 3
        changed = mha(x2, causal=True).data
        np.testing.assert_array_equal(changed[:, :pos], base[:, :pos])
        assert np.abs(changed[:, pos:] - base[:, pos:]).max() > 1e-3  # the test can fail
    # and without the causal flag the past does see the future
    x2 = x.copy()
    x2[:, -1] += 1.0
    assert np.abs(mha(x2).data[:, 0] - mha(x).data[:, 0]).max() > 1e-4


def test_mha_projections_are_linear_layers_found_by_name():
    from tinytorch.core.layers import Linear
    mha = MultiHeadAttention(4, 2)
    names = dict(mha.named_modules())
    for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
        assert isinstance(names[n], Linear) and names[n].weight.shape == (4, 4)
    assert len(mha.parameters()) == 8


def test_mha_bad_input():
    with pytest.raises(ValueError, match="embed_dim 10 is not divisible by num_heads 4"):
        MultiHeadAttention(10, 4)
    with pytest.raises(ValueError, match="num_heads"):
        MultiHeadAttention(8, 0)
    mha = MultiHeadAttention(4, 2)
    with pytest.raises(ValueError, match=r"query must be \[batch, seq, 4\]"):
        mha(np.zeros((2, 3, 5), np.float32))
    with pytest.raises(ValueError, match="query must be"):
        mha(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError, match="attn_mask"):
        mha(np.zeros((1, 3, 4), np.float32), attn_mask=np.zeros((2, 2), bool))
    with pytest.raises(ValueError, match="key_padding_mask"):
        mha(np.zeros((1, 3, 4), np.float32), key_padding_mask=np.zeros((1, 2), bool))
