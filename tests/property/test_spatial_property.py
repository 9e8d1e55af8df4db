"""Convolution and pooling against PyTorch (float64): random geometry (kernel, stride,
padding, batch and channel counts including 0 and 1), non-contiguous inputs, and ties
inside pooling windows (both frameworks send a max window's gradient to its first
maximum in row-major order)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import assume, given, strategies as st  # noqa: E402

from torchdiff import LAYOUTS, arrays, assert_grads, assert_same, backward_both, leaf  # noqa: E402
from tinytorch.core.spatial import avg_pool2d, conv2d, max_pool2d  # noqa: E402

F = torch.nn.functional
# few distinct values, so pooling windows often hold ties
TIES = st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0])


@st.composite
def geometry(draw, pool=False):
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    if pool:
        ph, pw = draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))
    else:
        ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    h = draw(st.integers(max(1, kh - 2 * ph), 6))
    w = draw(st.integers(max(1, kw - 2 * pw), 6))
    return (kh, kw), (sh, sw), (ph, pw), (h, w)


@given(geom=geometry(), n=st.integers(0, 2), c=st.integers(1, 3), oc=st.integers(1, 3),
       bias=st.booleans(), layout=LAYOUTS, data=st.data())
def test_conv2d_matches_torch(geom, n, c, oc, bias, layout, data):
    (kh, kw), stride, padding, (h, w) = geom
    x, px = leaf(data.draw(arrays((n, c, h, w)), label="x"), layout)
    wt, pwt = leaf(data.draw(arrays((oc, c, kh, kw)), label="weight"), data.draw(LAYOUTS, label="w layout"))
    leaves, refs = [x, wt], [px, pwt]
    b = pb = None
    if bias:
        b, pb = leaf(data.draw(arrays((oc,)), label="bias"))
        leaves.append(b)
        refs.append(pb)
    out = conv2d(x, wt, b, stride=stride, padding=padding)
    ref = F.conv2d(px, pwt, pb, stride=stride, padding=padding)
    assert_same(out, ref, f"conv2d(k={kh}x{kw}, stride={stride}, padding={padding})")
    backward_both(out, ref, data.draw(arrays(tuple(ref.shape)), label="upstream"))
    assert_grads(leaves, refs)


@given(geom=geometry(pool=True), n=st.integers(1, 2), c=st.integers(1, 2), kind=st.sampled_from(["max", "avg"]),
       default_stride=st.booleans(), ties=st.booleans(), layout=LAYOUTS, data=st.data())
def test_pooling_matches_torch(geom, n, c, kind, default_stride, ties, layout, data):
    kernel, stride, padding, (h, w) = geom
    stride = None if default_stride else stride
    assume(h + 2 * padding[0] >= kernel[0] and w + 2 * padding[1] >= kernel[1])
    values = data.draw(arrays((n, c, h, w), TIES) if ties else arrays((n, c, h, w)), label="x")
    x, px = leaf(values, layout)
    if kind == "max":
        out = max_pool2d(x, kernel, stride, padding)
        ref = F.max_pool2d(px, kernel, stride, padding)
    else:
        out = avg_pool2d(x, kernel, stride, padding)
        ref = F.avg_pool2d(px, kernel, stride, padding)
    assert_same(out, ref, f"{kind}_pool2d(k={kernel}, stride={stride}, padding={padding})")
    backward_both(out, ref, data.draw(arrays(tuple(ref.shape)), label="upstream"))
    assert_grads([x], [px])
