"""Compression: magnitude pruning (per layer, global), structured pruning, the distillation loss
(float64 parity, finite differences, PyTorch), sparsity reports and accuracy before/after."""
import copy

import numpy as np
import pytest

from parity import check_parity
from tinytorch.core.activations import ReLU
from tinytorch.core.compression import (DistillationLoss, apply_masks, distillation_loss, format_sparsity_report,
                                        magnitude_prune, prunable_parameters, sparsity, sparsity_report,
                                        structured_prune)
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam
from tinytorch.core.random import manual_seed
from tinytorch.core.spatial import Conv2d
from tinytorch.core.tensor import Tensor
from tinytorch.data import digits_split


def _model(rng):
    model = Sequential(Linear(6, 5), ReLU(), Linear(5, 4))
    for p in model.parameters():
        p.data[...] = rng.standard_normal(p.shape)
    return model


@pytest.mark.parametrize("s", [0.0, 0.3, 0.5, 0.77, 1.0])
def test_per_layer_magnitude_pruning(rng, s):
    model = _model(rng)
    before = {n: p.data.copy() for n, p in prunable_parameters(model)}
    bias_before = model[0].bias.data.copy()
    masks = magnitude_prune(model, s, scope="layer")
    for name, p in prunable_parameters(model):
        w0 = before[name]
        k = int(round(s * w0.size))
        assert int((p.data == 0).sum()) == k
        # the removed ones are exactly the k smallest magnitudes
        order = np.argsort(np.abs(w0).reshape(-1), kind="stable")
        assert np.all(p.data.reshape(-1)[order[:k]] == 0)
        np.testing.assert_array_equal(p.data.reshape(-1)[order[k:]], w0.reshape(-1)[order[k:]])
        np.testing.assert_array_equal(masks[name], p.data != 0)
    np.testing.assert_array_equal(model[0].bias.data, bias_before)  # biases untouched


def test_global_pruning_uses_one_threshold(rng):
    model = _model(rng)
    w0 = model[0].weight.data
    w0[...] = np.sign(w0) * (0.5 + np.abs(w0))  # every first-layer weight is at least 0.5 in size
    model[2].weight.data *= 0.01  # and these stay far below that: global pruning takes them first
    all_w = np.concatenate([p.data.reshape(-1) for _, p in prunable_parameters(model)])
    k = int(round(0.4 * all_w.size))
    threshold = np.sort(np.abs(all_w))[k - 1]
    magnitude_prune(model, 0.4, scope="global")
    kept = np.concatenate([p.data.reshape(-1) for _, p in prunable_parameters(model)])
    assert int((kept == 0).sum()) == k
    assert np.all(np.abs(kept[kept != 0]) >= threshold)
    report = sparsity_report(model)
    assert report["layers"]["2.weight"]["sparsity"] == 1.0  # 20 weights, all below the threshold
    assert report["total"]["zeros"] == k


def test_structured_pruning_linear_columns_rows_and_conv_filters(rng):
    lin = Linear(6, 8)
    lin.weight.data[...] = rng.standard_normal((6, 8))
    norms = np.linalg.norm(lin.weight.data, axis=0)
    keep = structured_prune(lin, 0.25)
    weakest = np.argsort(norms, kind="stable")[:2]
    assert keep.shape == (8,) and set(np.flatnonzero(~keep)) == set(weakest)
    assert np.all(lin.weight.data[:, weakest] == 0) and np.all(lin.bias.data[weakest] == 0)
    assert np.all(lin.weight.data[:, keep] != 0)
    # pruned output neurons produce nothing at all
    assert np.all(lin(Tensor(rng.standard_normal((3, 6)).astype(np.float32))).data[:, weakest] == 0)

    rows = Linear(5, 3)
    bias = rows.bias.data.copy()
    keep_rows = structured_prune(rows, 0.4, axis=0)
    assert (~keep_rows).sum() == 2 and np.all(rows.weight.data[~keep_rows] == 0)
    np.testing.assert_array_equal(rows.bias.data, bias)  # input rows carry no bias

    conv = Conv2d(2, 6, 3)
    fnorms = np.sqrt((conv.weight.data.astype(np.float64) ** 2).sum(axis=(1, 2, 3)))
    keep_f = structured_prune(conv, 0.5)
    assert set(np.flatnonzero(~keep_f)) == set(np.argsort(fnorms, kind="stable")[:3])
    assert np.all(conv.weight.data[~keep_f] == 0) and np.all(conv.bias.data[~keep_f] == 0)


def test_pruning_bad_input(rng):
    model = _model(rng)
    with pytest.raises(ValueError, match="sparsity must be a fraction"):
        magnitude_prune(model, 1.5)
    with pytest.raises(ValueError, match="scope"):
        magnitude_prune(model, 0.5, scope="row")
    with pytest.raises(ValueError, match="no Linear or Conv2d"):
        magnitude_prune(Sequential(ReLU()), 0.5)
    with pytest.raises(TypeError, match="Linear and Conv2d"):
        structured_prune(ReLU(), 0.5)
    with pytest.raises(ValueError, match="axis"):
        structured_prune(Conv2d(1, 2, 3), 0.5, axis=1)
    with pytest.raises(KeyError, match="no parameter 'nope'"):
        apply_masks(model, {"nope": np.ones(3, bool)})
    with pytest.raises(ValueError, match="mask for '0.weight'"):
        apply_masks(model, {"0.weight": np.ones(3, bool)})


def ref_distill(s, t, labels, temperature, alpha):
    def log_softmax(z):
        z = z - z.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    n = s.shape[0]
    lps, lpt = log_softmax(s / temperature), log_softmax(t / temperature)
    soft = temperature ** 2 * np.sum(np.exp(lpt) * (lpt - lps)) / n
    if labels is None:
        return soft
    hard = -np.mean(log_softmax(s)[np.arange(n), labels])
    return alpha * soft + (1 - alpha) * hard


@pytest.mark.parametrize("n,c", [(1, 2), (5, 7), (3, 1)])
@pytest.mark.parametrize("temperature,alpha,with_labels", [(1.0, 0.5, True), (4.0, 0.9, True), (2.5, 0.5, False),
                                                           (0.5, 0.0, True)])
def test_distillation_loss_parity(rng, n, c, temperature, alpha, with_labels):
    s = rng.standard_normal((n, c)) * 2
    t = rng.standard_normal((n, c)) * 2
    labels = rng.integers(0, c, size=n) if with_labels else None
    check_parity(lambda s_, t_: distillation_loss(s_, t_, labels, temperature, alpha),
                 lambda s_, t_: ref_distill(s_, t_, labels, temperature, alpha),
                 [s, t], rng=rng, diff=[True, False], name="distillation")


def test_distillation_matches_torch(rng):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    s, t = rng.standard_normal((6, 5)), rng.standard_normal((6, 5))
    labels = rng.integers(0, 5, size=6)
    T, alpha = 3.0, 0.7
    ts = torch.tensor(s, requires_grad=True)
    ref = alpha * T * T * F.kl_div(F.log_softmax(ts / T, -1), F.softmax(torch.from_numpy(t) / T, -1),
                                   reduction="batchmean") + (1 - alpha) * F.cross_entropy(ts, torch.from_numpy(labels))
    ref.backward()
    st = Tensor(s, requires_grad=True, dtype=np.float64)
    ours = DistillationLoss(T, alpha)(st, Tensor(t, dtype=np.float64), labels)
    ours.backward()
    np.testing.assert_allclose(ours.item(), ref.item(), rtol=1e-12)
    np.testing.assert_allclose(st.grad, ts.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_distillation_zero_when_student_equals_teacher_and_3d_logits(rng):
    z = rng.standard_normal((2, 3, 4)).astype(np.float32)
    loss = distillation_loss(Tensor(z, requires_grad=True), z)
    assert abs(loss.item()) < 1e-6
    with pytest.raises(ValueError, match="same shape"):
        distillation_loss(z, z[:, :2])
    with pytest.raises(ValueError, match="out of range for 4 classes"):
        distillation_loss(z, z, labels=np.full(6, 4))
    with pytest.raises(ValueError, match="temperature"):
        distillation_loss(z, z, temperature=0)
    with pytest.raises(TypeError, match="integer"):
        distillation_loss(z, z, labels=np.zeros(6))


def _digits():
    x_tr, y_tr, x_te, y_te = digits_split(0.25, seed=0)
    return x_tr.reshape(len(x_tr), -1), y_tr, x_te.reshape(len(x_te), -1), y_te


def _train(model, x, y, steps, lr=1e-2, masks=None, loss_fn=None):
    opt = Adam(model.parameters(), lr=lr)
    for _ in range(steps):
        logits = model(Tensor(x))
        loss = loss_fn(logits) if loss_fn else cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if masks is not None:
            apply_masks(model, masks)  # keep pruned weights at zero through fine-tuning
    return model


def _accuracy(model, x, y):
    return float(np.mean(model(Tensor(x)).data.argmax(1) == y))


def test_pruning_report_and_accuracy_before_after_on_digits():
    manual_seed(0)
    x_tr, y_tr, x_te, y_te = _digits()
    model = _train(Sequential(Linear(64, 64), ReLU(), Linear(64, 10)), x_tr, y_tr, 120)
    acc_dense = _accuracy(model, x_te, y_te)
    pruned = copy.deepcopy(model)
    masks = magnitude_prune(pruned, 0.7, scope="global")
    acc_pruned = _accuracy(pruned, x_te, y_te)
    _train(pruned, x_tr, y_tr, 40, lr=1e-2, masks=masks)
    acc_finetuned = _accuracy(pruned, x_te, y_te)
    report = sparsity_report(pruned)
    text = format_sparsity_report(report)
    print(f"\ndense {acc_dense:.4f}, pruned 70% {acc_pruned:.4f}, fine-tuned {acc_finetuned:.4f}\n{text}")
    assert abs(report["total"]["sparsity"] - 0.7) < 1e-3
    assert sparsity(pruned[0].weight) == report["layers"]["0.weight"]["sparsity"]
    assert "total" in text and "0.weight" in text
    assert acc_dense > 0.9
    assert acc_finetuned >= acc_dense - 0.03      # 70% fewer weights, nearly the same accuracy
    assert acc_finetuned >= acc_pruned            # fine-tuning recovers what pruning cost


def test_distillation_trains_a_small_student_on_digits():
    manual_seed(1)
    x_tr, y_tr, x_te, y_te = _digits()
    teacher = _train(Sequential(Linear(64, 64), ReLU(), Linear(64, 10)), x_tr, y_tr, 100)
    t_logits = teacher(Tensor(x_tr)).data
    student = Sequential(Linear(64, 16), ReLU(), Linear(16, 10))
    _train(student, x_tr, y_tr, 100,
           loss_fn=lambda logits: distillation_loss(logits, t_logits, y_tr, temperature=4.0, alpha=0.7))
    acc_t, acc_s = _accuracy(teacher, x_te, y_te), _accuracy(student, x_te, y_te)
    print(f"\nteacher {acc_t:.4f} ({sum(p.size for p in teacher.parameters())} params), "
          f"student {acc_s:.4f} ({sum(p.size for p in student.parameters())} params)")
    assert acc_s > 0.85
