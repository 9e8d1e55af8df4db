"""Losses against PyTorch (float64): MSE, cross-entropy (class dim first or second,
ignore_index, label smoothing, every reduction) and BCE with logits (pos_weight)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import given, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from torchdiff import LAYOUTS, SHAPES, arrays, assert_grads, assert_same, backward_both, leaf  # noqa: E402
from tinytorch.core.losses import binary_cross_entropy_with_logits, cross_entropy, mse_loss  # noqa: E402

F = torch.nn.functional
REDUCTIONS = st.sampled_from(["mean", "sum", "none"])
LOGITS = st.floats(-30.0, 30.0, allow_nan=False, allow_subnormal=False, width=64)


def _upstream(data, ref):
    return data.draw(arrays(tuple(ref.shape)), label="upstream")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # mean of an empty loss
@given(shape=SHAPES, reduction=REDUCTIONS, layout=LAYOUTS, target_grad=st.booleans(), data=st.data())
def test_mse_matches_torch(shape, reduction, layout, target_grad, data):
    x, px = leaf(data.draw(arrays(shape), label="pred"), layout)
    y, py = leaf(data.draw(arrays(shape), label="target"), requires_grad=target_grad)
    if reduction == "mean" and x.data.size == 0:  # PyTorch: NaN; here a ValueError (0/0)
        with pytest.raises(ValueError, match="matching, nonempty"):
            mse_loss(x, y, reduction=reduction)
        return
    out, ref = mse_loss(x, y, reduction=reduction), F.mse_loss(px, py, reduction=reduction)
    assert_same(out, ref, f"mse_loss({reduction})")
    backward_both(out, ref, _upstream(data, ref))
    assert_grads([x, y] if target_grad else [x], [px, py] if target_grad else [px])


@st.composite
def ce_case(draw):
    c = draw(st.integers(1, 5))
    layout = draw(st.sampled_from(["NC", "C", "NCd"]))
    n = draw(st.integers(0, 4))
    if layout == "C":
        shape, tshape = (c,), ()
    elif layout == "NC":
        shape, tshape = (n, c), (n,)
    else:
        d = draw(hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=3))
        shape, tshape = (n, c) + d, (n,) + d
    ignore = draw(st.sampled_from([-100, 0, c - 1, 7]))
    labels = st.one_of(st.integers(0, c - 1), st.just(ignore))
    target = draw(hnp.arrays(np.int64, tshape, elements=labels))
    return shape, target, ignore


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(case=ce_case(), smoothing=st.sampled_from([0.0, 0.1, 0.5, 1.0]), reduction=REDUCTIONS,
       layout=LAYOUTS, data=st.data())
def test_cross_entropy_matches_torch(case, smoothing, reduction, layout, data):
    shape, target, ignore = case
    x, px = leaf(data.draw(arrays(shape, LOGITS), label="logits"), layout)
    if reduction == "mean" and target.size == 0:  # PyTorch: NaN; here a ValueError (0/0)
        with pytest.raises(ValueError, match="no sample"):
            cross_entropy(x, target, ignore_index=ignore, label_smoothing=smoothing, reduction=reduction)
        return
    out = cross_entropy(x, target, ignore_index=ignore, label_smoothing=smoothing, reduction=reduction)
    ref = F.cross_entropy(px, torch.as_tensor(target), ignore_index=ignore, label_smoothing=smoothing,
                          reduction=reduction)
    assert_same(out, ref, f"cross_entropy(ignore={ignore}, smoothing={smoothing}, {reduction})")
    backward_both(out, ref, _upstream(data, ref))
    assert_grads([x], [px])
    assert not np.isnan(x.grad).any(), "cross-entropy gradient has NaN"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), reduction=REDUCTIONS,
       use_pos_weight=st.booleans(), layout=LAYOUTS, data=st.data())
def test_bce_with_logits_matches_torch(shape, reduction, use_pos_weight, layout, data):
    x, px = leaf(data.draw(arrays(shape, LOGITS), label="logits"), layout)
    y = data.draw(arrays(shape, st.floats(0.0, 1.0, width=64)), label="target")
    pw = data.draw(arrays(shape[-1:], st.floats(0.1, 5.0, width=64)), label="pos_weight") \
        if use_pos_weight else None
    out = binary_cross_entropy_with_logits(x, y, reduction=reduction, pos_weight=pw)
    ref = F.binary_cross_entropy_with_logits(px, torch.tensor(y), reduction=reduction,
                                             pos_weight=None if pw is None else torch.tensor(pw))
    assert_same(out, ref, f"bce_with_logits({reduction}, pos_weight={pw is not None})")
    backward_both(out, ref, _upstream(data, ref))
    assert_grads([x], [px])
