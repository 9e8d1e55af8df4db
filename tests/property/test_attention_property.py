"""Attention against PyTorch (float64): attention with bool / float
masks, causal masking (square and not), custom scales, zero keys and fully masked
rows; and MultiHeadAttention against nn.MultiheadAttention with the same weights."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import assume, given, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from torchdiff import LAYOUTS, arrays, assert_grads, assert_same, backward_both, leaf  # noqa: E402
from tinytorch.core.attention import MultiHeadAttention, attention  # noqa: E402

F = torch.nn.functional
SMALL = st.floats(-1.0, 1.0, allow_nan=False, allow_subnormal=False, width=64)


@given(batch=hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=2), l=st.integers(1, 4),
       s=st.integers(0, 4), d=st.integers(1, 4), dv=st.integers(1, 3),
       mask_kind=st.sampled_from(["none", "bool", "float", "causal"]), full_mask=st.booleans(),
       scale=st.one_of(st.none(), st.floats(0.1, 2.0)), layout=LAYOUTS, data=st.data())
def test_sdpa_matches_torch(batch, l, s, d, dv, mask_kind, full_mask, scale, layout, data):
    q, pq = leaf(data.draw(arrays(batch + (l, d)), label="q"), layout)
    k, pk = leaf(data.draw(arrays(batch + (s, d)), label="k"), data.draw(LAYOUTS, label="k layout"))
    v, pv = leaf(data.draw(arrays(batch + (s, dv)), label="v"), data.draw(LAYOUTS, label="v layout"))
    mshape = (batch + (l, s)) if full_mask else (l, s)
    mask = pmask = None
    if mask_kind == "bool":          # True = may attend; fully masked rows give zeros in both
        mask = data.draw(hnp.arrays(np.bool_, mshape), label="mask")
        pmask = torch.as_tensor(mask)
    elif mask_kind == "float":
        mask = data.draw(arrays(mshape, st.floats(-5.0, 5.0, width=64)), label="mask")
        pmask = torch.as_tensor(mask)
    causal = mask_kind == "causal"
    out = attention(q, k, v, mask=mask, causal=causal, scale=scale)
    ref = F.scaled_dot_product_attention(pq, pk, pv, attn_mask=pmask, is_causal=causal, scale=scale)
    assert_same(out, ref, f"sdpa(mask={mask_kind}, L={l}, S={s}, scale={scale})")
    backward_both(out, ref, data.draw(arrays(tuple(ref.shape)), label="upstream"))
    assert_grads([q, k, v], [pq, pk, pv])


def _linear_pair(data, e, name):
    w = data.draw(arrays((e, e), SMALL), label=f"{name}.weight")
    b = data.draw(arrays((e,), SMALL), label=f"{name}.bias")
    return w, b


@given(heads=st.sampled_from([1, 2]), head_dim=st.integers(1, 3), b=st.integers(1, 2), l=st.integers(1, 4),
       s=st.integers(1, 4), self_attention=st.booleans(), mask_kind=st.sampled_from(["none", "attn", "padding"]),
       data=st.data())
def test_multihead_attention_matches_torch(heads, head_dim, b, l, s, self_attention, mask_kind, data):
    e = heads * head_dim
    s = l if self_attention else s
    ours = MultiHeadAttention(e, heads)
    theirs = torch.nn.MultiheadAttention(e, heads, batch_first=True, dtype=torch.float64)
    ws = {name: _linear_pair(data, e, name) for name in ("q_proj", "k_proj", "v_proj", "out_proj")}
    for name, (w, bias) in ws.items():
        layer = getattr(ours, name)
        layer.weight.data = w.copy()  # ours is x @ W (in, out); torch is x @ W.T
        layer.bias.data = bias.copy()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.tensor(np.concatenate([ws[n][0].T for n in ("q_proj", "k_proj", "v_proj")])))
        theirs.in_proj_bias.copy_(torch.tensor(np.concatenate([ws[n][1] for n in ("q_proj", "k_proj", "v_proj")])))
        theirs.out_proj.weight.copy_(torch.tensor(ws["out_proj"][0].T))
        theirs.out_proj.bias.copy_(torch.tensor(ws["out_proj"][1]))
    x, px = leaf(data.draw(arrays((b, l, e)), label="query"))
    leaves, refs = [x], [px]
    if self_attention:               # one tensor as query, key and value
        key, pkey = x, px
    else:
        key, pkey = leaf(data.draw(arrays((b, s, e)), label="key"))
        leaves.append(key)
        refs.append(pkey)
    attn_mask = kpm = None
    if mask_kind == "attn":          # bool True = blocked (nn.MultiheadAttention's convention)
        attn_mask = data.draw(hnp.arrays(np.bool_, (l, s)), label="attn_mask")
        assume(not attn_mask.all(axis=-1).any())   # torch gives NaN for a fully blocked row
    elif mask_kind == "padding":
        kpm = data.draw(hnp.arrays(np.bool_, (b, s)), label="key_padding_mask")
        assume(not kpm.all(axis=-1).any())
    out = ours(x, key, key, attn_mask=attn_mask, key_padding_mask=kpm)
    ref, _ = theirs(px, pkey, pkey, attn_mask=None if attn_mask is None else torch.as_tensor(attn_mask),
                    key_padding_mask=None if kpm is None else torch.as_tensor(kpm), need_weights=False)
    assert_same(out, ref, f"MultiHeadAttention(heads={heads}, mask={mask_kind})")
    backward_both(out, ref, data.draw(arrays(tuple(ref.shape)), label="upstream"))
    assert_grads(leaves, refs, what="input grad")
    gin = theirs.in_proj_weight.grad.numpy()
    gbias = theirs.in_proj_bias.grad.numpy()
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        layer = getattr(ours, name)
        assert_same(layer.weight.grad, gin[i * e:(i + 1) * e].T, f"{name}.weight grad")
        assert_same(layer.bias.grad, gbias[i * e:(i + 1) * e], f"{name}.bias grad")
    assert_same(ours.out_proj.weight.grad, theirs.out_proj.weight.grad.numpy().T, "out_proj.weight grad")
    assert_same(ours.out_proj.bias.grad, theirs.out_proj.bias.grad, "out_proj.bias grad")
