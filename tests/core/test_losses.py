"""Losses against float64 NumPy references (values and gradients), stability, bad input."""
import numpy as np
import pytest

from parity import check_parity
from tinytorch.core.losses import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from tinytorch.core.tensor import Tensor


def _log_softmax(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def ce_reference(logits, target, ignore_index=-100, smoothing=0.0, reduction="mean"):
    """Written from the definition: class axis 1 (or 0 for 1-D logits)."""
    axis = 0 if logits.ndim == 1 else 1
    lp = _log_softmax(logits, axis)
    c = logits.shape[axis]
    valid = target != ignore_index
    safe = np.where(valid, target, 0)
    picked = np.take_along_axis(lp, np.expand_dims(safe, axis), axis=axis).squeeze(axis)
    per = -(1 - smoothing) * picked - smoothing / c * lp.sum(axis=axis)
    per = np.where(valid, per, 0.0)
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    return per.sum() / valid.sum()


@pytest.mark.parametrize("shape", [(5, 3), (1, 7), (4, 1), (2, 4, 3), (6,)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy(rng, shape, reduction):
    c = shape[0] if len(shape) == 1 else shape[1]
    tshape = () if len(shape) == 1 else shape[:1] + shape[2:]
    target = rng.integers(0, c, tshape)
    loss = CrossEntropyLoss(reduction=reduction)
    check_parity(lambda x: loss(x, target), lambda x: ce_reference(x, target, reduction=reduction),
                 [rng.standard_normal(shape) * 3], rng=rng)


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.7])
def test_cross_entropy_ignore_index_and_smoothing(rng, smoothing):
    target = rng.integers(0, 5, 9)
    target[[1, 4]] = -1
    loss = CrossEntropyLoss(ignore_index=-1, label_smoothing=smoothing)
    check_parity(lambda x: loss(x, target), lambda x: ce_reference(x, target, -1, smoothing),
                 [rng.standard_normal((9, 5))], rng=rng)


def test_cross_entropy_is_stable_for_huge_logits():
    logits = Tensor(np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4]]), requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        out = CrossEntropyLoss()(logits, np.array([1, 2]))
        out.backward()
    assert np.isclose(out.item(), 1e4, rtol=1e-6)  # (2e4 + 0) / 2
    assert np.isfinite(logits.grad).all()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(4, 3), (7,), (1,)])
def test_bce_with_logits(rng, reduction, shape):
    y = (rng.random(shape) > 0.5).astype(np.float64)

    def ref(x, pw=1.0):
        p = 1 / (1 + np.exp(-x))
        per = -(pw * y * np.log(p) + (1 - y) * np.log(1 - p))
        return per if reduction == "none" else per.sum() if reduction == "sum" else per.mean()

    check_parity(lambda x: BCEWithLogitsLoss(reduction)(x, y), ref, [rng.standard_normal(shape) * 2], rng=rng)
    pw = 2.5
    check_parity(lambda x: BCEWithLogitsLoss(reduction, pos_weight=pw)(x, y), lambda x: ref(x, pw),
                 [rng.standard_normal(shape) * 2], rng=rng)


def test_bce_stable_for_huge_logits():
    x = Tensor(np.array([1e4, -1e4, 1e4]), requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):
        out = BCEWithLogitsLoss()(x, np.array([0.0, 1.0, 1.0]))
        out.backward()
    assert np.isclose(out.item(), 2e4 / 3, rtol=1e-6) and np.isfinite(x.grad).all()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 1, 3)])
def test_mse(rng, reduction, shape):
    t = rng.standard_normal(shape)
    red = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction]
    check_parity(lambda x: MSELoss(reduction)(x, t), lambda x: red((x - t) ** 2), [rng.standard_normal(shape)],
                 rng=rng)


def test_mse_with_differentiable_target(rng):
    check_parity(lambda a, b: MSELoss()(a, b), lambda a, b: np.mean((a - b) ** 2),
                 [rng.standard_normal((3, 2)), rng.standard_normal((3, 2))], rng=rng)


def test_bad_input():
    logits = Tensor(np.zeros((4, 3)))
    # whole-number float labels are class ids (upstream's habit); a fraction is refused
    with pytest.raises(TypeError, match="class ind"):
        CrossEntropyLoss()(logits, np.full(4, 0.5))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(4,\).*\(5,\)"):
        CrossEntropyLoss()(logits, np.zeros(5, dtype=np.int64))
    with pytest.raises(ValueError, match="out of range for 3 classes"):
        CrossEntropyLoss()(logits, np.array([0, 1, 3, 2]))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(3, 4\)"):
        MSELoss()(logits, np.zeros((3, 4)))
    with pytest.raises(ValueError, match=r"\(4, 3\).*\(4,\)"):
        BCEWithLogitsLoss()(logits, np.zeros(4))
    with pytest.raises(ValueError, match="reduction"):
        MSELoss("avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        CrossEntropyLoss(label_smoothing=1.5)
