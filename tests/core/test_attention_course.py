"""The course's scaled_dot_product_attention (core/attention.py): (output, weights) against a
float64 reference and PyTorch, gradients through BOTH results, the 0/1-or-bool mask rule
(anything else refused, as is a query with no allowed key), broadcasting batch dims,
arrays in -> arrays out, awkward shapes (0 queries, 1, odd, prime, non-contiguous), and that
it agrees with the engine's attention() on the same bool mask."""
import numpy as np
import pytest
import torch

from tinytorch.core.attention import attention, scaled_dot_product_attention as sdpa
from tinytorch.core.tensor import Tensor


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def reference(q, k, v, allowed=None, causal=False):
    """float64 (output, weights) with torch, and the torch leaves for gradients."""
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    scores = tq @ tk.transpose(-1, -2) / np.sqrt(q.shape[-1])
    if allowed is not None:
        scores = scores.masked_fill(~torch.tensor(np.broadcast_to(allowed, scores.shape)), float("-inf"))
    if causal:
        l, s = scores.shape[-2:]
        scores = scores.masked_fill(~torch.ones(l, s, dtype=torch.bool).tril(), float("-inf"))
    w = torch.softmax(scores, -1)
    return w @ tv, w, (tq, tk, tv)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 3, 5, 7), (1, 13, 4), (3, 2, 17, 3)], ids=str)
@pytest.mark.parametrize("masked", ["none", "float01", "bool", "int", "causal"])
def test_output_weights_and_both_gradients_match_float64(shape, masked):
    *batch, l, d = shape
    s = l + 2
    q, k, v = rand(*batch, l, d, seed=1), rand(*batch, s, d, seed=2), rand(*batch, s, d + 1, seed=3)
    allowed = None
    mask = None
    if masked in ("float01", "bool", "int"):
        allowed = np.random.default_rng(4).random((l, s)) < 0.6
        allowed[:, 0] = True  # every query keeps a key
        mask = {"float01": allowed.astype(np.float32), "bool": allowed, "int": allowed.astype(np.int64)}[masked]
        mask = Tensor(mask) if masked == "float01" else mask
    Q, K, V = (Tensor(a, requires_grad=True) for a in (q, k, v))
    out, w = sdpa(Q, K, V, mask, causal=masked == "causal")
    ro, rw, (tq, tk, tv) = reference(q, k, v, allowed, causal=masked == "causal")
    np.testing.assert_allclose(out.data, ro.detach().numpy(), atol=2e-6 * (1 + np.abs(v).max()))
    np.testing.assert_allclose(w.data, rw.detach().numpy(), atol=1e-6)
    assert out.shape == (*batch, l, d + 1) and w.shape == (*batch, l, s)
    if allowed is not None:
        assert np.all(w.data[..., ~allowed] == 0.0)  # masked keys get exactly zero weight
    # a loss through the output AND the weights: gradients reach q, k, v through both
    gw = rand(*w.shape, seed=7)
    (out.sum() + (w * Tensor(gw)).sum()).backward()
    (ro.sum() + (rw * torch.tensor(gw, dtype=torch.float64)).sum()).backward()
    for ours, theirs in ((Q, tq), (K, tk), (V, tv)):
        np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), atol=2e-5, rtol=1e-4)


def test_agrees_with_the_engine_attention_on_a_bool_mask_and_arrays_stay_arrays():
    q, k, v = rand(2, 4, 6, 8, seed=1), rand(2, 4, 9, 8, seed=2), rand(2, 4, 9, 8, seed=3)
    allowed = np.random.default_rng(0).random((6, 9)) < 0.5
    allowed[:, 3] = True
    out, w = sdpa(q, k, v, allowed)
    assert type(out) is np.ndarray and type(w) is np.ndarray
    np.testing.assert_allclose(out, attention(q, k, v, mask=allowed, flash=False), atol=2e-6)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-6)


def test_broadcast_batch_and_mask_dims_and_a_non_contiguous_query():
    q = rand(2, 3, 8, 5, seed=1)[:, :, ::2]       # non-contiguous [2, 3, 4, 5]
    k, v = rand(1, 1, 6, 5, seed=2), rand(1, 1, 6, 2, seed=3)
    keep = np.array([1, 0, 1, 1, 0, 1], np.float32)  # one row of keys, broadcast over queries
    out, w = sdpa(Tensor(q), Tensor(k), Tensor(v), Tensor(keep))
    ro, rw, _ = reference(np.ascontiguousarray(q), k, v, keep.astype(bool))
    assert out.shape == (2, 3, 4, 2) and w.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(out.data, ro.detach().numpy(), atol=2e-6)
    np.testing.assert_allclose(w.data, rw.detach().numpy(), atol=1e-6)


def test_zero_queries_and_bottom_right_causality():
    out, w = sdpa(rand(2, 0, 4), rand(2, 3, 4), rand(2, 3, 4))
    assert out.shape == (2, 0, 4) and w.shape == (2, 0, 3)
    q, k, v = rand(1, 2, 4, seed=1), rand(1, 5, 4, seed=2), rand(1, 5, 4, seed=3)
    _, w = sdpa(q, k, v, causal="bottom_right")  # the 2 queries are the last 2 positions of 5
    np.testing.assert_array_equal(w[0] > 0, [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])


@pytest.mark.parametrize("bad", [[[1, 0.5], [1, 1]], [[1, -np.inf], [1, 1]], [[1, np.nan], [1, 1]], [[2, 1], [1, 1]]],
                         ids=["half", "additive", "nan", "two"])
def test_a_mask_that_is_not_0_1_is_refused_naming_the_value(bad):
    q = Tensor(np.ones((1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="only 1 .may attend. and 0 .masked.") as err:
        sdpa(q, q, q, Tensor(np.array(bad, np.float32)))
    assert "core.attention.attention" in str(err.value)  # where an additive mask goes


@pytest.mark.parametrize("mask, causal", [(np.zeros(2), False), ([[0, 0], [1, 1]], False),
                                          ([[0, 1], [1, 1]], True)], ids=["all", "one_row", "with_causal"])
def test_a_query_with_no_allowed_key_is_refused(mask, causal):
    q = Tensor(np.ones((1, 2, 2), np.float32))
    with pytest.raises(ValueError, match="at least one allowed key"):
        sdpa(q, q, q, np.asarray(mask, np.float32), causal=causal)
    with pytest.raises(ValueError, match="at least one allowed key"):
        sdpa(np.ones((1, 2, 2), np.float32), np.ones((1, 0, 2), np.float32), np.ones((1, 0, 2), np.float32))


def test_other_bad_input_is_named():
    a = np.ones((1, 2, 4), np.float32)
    with pytest.raises(TypeError, match="mask must be bool or numeric"):
        sdpa(a, a, a, np.array([["x", "y"], ["x", "y"]]))
    with pytest.raises(ValueError, match="does not broadcast"):
        sdpa(a, a, a, np.ones((3, 3), np.float32))
    with pytest.raises(TypeError, match="Q must be a Tensor or ndarray"):
        sdpa([[1.0]], a, a)
