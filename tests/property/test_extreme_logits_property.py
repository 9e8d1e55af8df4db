"""Cross-entropy and softmax at extreme logits, against PyTorch in float64.

Logits are drawn from a handful of magnitudes around a huge m (up to 1e30 in float64, 1e7 in
float32: +-m, m/2, 0, plus small offsets), so rows with tied maxima far from 0 are common:
exactly where a gradient computed as exp(x - lse) loses log(sum) (two tied logits of 1e7 got
probability 1 each). The reference is PyTorch float64 on the same values (float32 inputs are
widened first), so float32 results are compared with float32's tolerance, never against a
reference that shares their rounding.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import event, given, strategies as st  # noqa: E402

from tinytorch.core.activations import log_softmax, softmax  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402

F = torch.nn.functional
LIMITS = {np.float64: 1e30, np.float32: 1e7}


@st.composite
def extreme_logits(draw):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    m = draw(st.sampled_from([1e3, 1e5, LIMITS[dtype] / 3, LIMITS[dtype]]))
    rows, cols = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    pick = st.sampled_from([m, m, -m, m / 2, 0.0])
    offset = st.sampled_from([0.0, 0.0, 1.0, -0.5, 2.0])
    x = np.array([[draw(pick) + draw(offset) for _ in range(cols)] for _ in range(rows)], dtype=dtype)
    target = np.array([draw(st.integers(0, cols - 1)) for _ in range(rows)], dtype=np.int64)
    return x, target, m


def _tol(dtype):
    return dict(rtol=1e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-15)


@given(extreme_logits(), st.sampled_from(["mean", "sum"]), st.sampled_from([0.0, 0.1]))
def test_cross_entropy_at_extreme_logits_matches_torch(case, reduction, smoothing):
    x, target, m = case
    event(f"{x.dtype} m={m:g}")
    t = Tensor(x, requires_grad=True, dtype=x.dtype)
    loss = cross_entropy(t, target, reduction=reduction, label_smoothing=smoothing)
    loss.backward()
    ref_x = torch.tensor(x.astype(np.float64), requires_grad=True)
    ref = F.cross_entropy(ref_x, torch.tensor(target), reduction=reduction, label_smoothing=smoothing)
    ref.backward()
    np.testing.assert_allclose(float(loss.data), ref.item(), rtol=1e-6 if x.dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(t.grad, ref_x.grad.numpy(), **_tol(x.dtype),
                               err_msg=f"d loss / d logits for {x.tolist()}, targets {target.tolist()}")


@given(extreme_logits(), st.booleans())
def test_softmax_and_log_softmax_at_extreme_logits_match_torch(case, log):
    x, _, m = case
    event(f"{x.dtype} m={m:g}")
    t = Tensor(x, requires_grad=True, dtype=x.dtype)
    out = (log_softmax if log else softmax)(t, -1)
    upstream = np.linspace(-1.0, 1.0, x.size).reshape(x.shape).astype(x.dtype)
    (out * Tensor(upstream, dtype=x.dtype)).sum().backward()
    ref_x = torch.tensor(x.astype(np.float64), requires_grad=True)
    ref = (F.log_softmax if log else F.softmax)(ref_x, -1)
    (ref * torch.tensor(upstream.astype(np.float64))).sum().backward()
    want = ref.detach().numpy()
    if log:  # log-probabilities of size ~m: relative to the row's magnitude
        scale = np.maximum(1.0, np.abs(want).max(axis=-1, keepdims=True))
        np.testing.assert_allclose(out.data / scale, want / scale, **_tol(x.dtype))
    else:
        np.testing.assert_allclose(out.data, want, **_tol(x.dtype))
    np.testing.assert_allclose(t.grad, ref_x.grad.numpy(), **_tol(x.dtype))
