"""Upstream TinyTorch course code, module 16, second round (#31): pruning plain model classes,
the classifier head kept whole by structured pruning, the validated ``compress_model``
pipeline and upstream's distillation objective, checked against counts by hand and a float64
reference of the loss and its gradient."""
import numpy as np
import pytest

import tinytorch
from tinytorch.core import compression as core_c
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.tensor import Tensor
from tinytorch.perf.compression import (Compressor, KnowledgeDistillation, compress_model, magnitude_prune,
                                        measure_sparsity, structured_prune)


class _PlainModel:
    """An upstream-style model class: Layers as attributes, no Layer base class."""

    def __init__(self):
        self.first = Linear(6, 5, bias=False)
        self.rest = [Linear(5, 3), {"head": Linear(3, 2, bias=False)}]

    def parameters(self):
        return self.first.parameters() + self.rest[0].parameters() + self.rest[1]["head"].parameters()


def test_plain_model_classes_are_measured_and_pruned():
    tinytorch.manual_seed(0)
    model = _PlainModel()
    names = [n for n, _ in core_c.prunable_parameters(model)]
    assert names == ["first.weight", "rest.0.weight", "rest.1.head.weight"]
    model.first.weight.data[:, :2] = 0.0
    bias = model.rest[0].bias.data.copy()
    assert measure_sparsity(model) == pytest.approx(100.0 * 12 / (30 + 15 + 6))
    magnitude_prune(model, 0.6)
    weights = [model.first.weight.data, model.rest[0].weight.data, model.rest[1]["head"].weight.data]
    assert sum(int(np.count_nonzero(w == 0)) for w in weights) == round(0.6 * 51)
    np.testing.assert_array_equal(model.rest[0].bias.data, bias)  # biases are never pruned
    with pytest.raises(TypeError, match="neither a Layer"):
        core_c.prunable_parameters(3)


def test_nested_classifier_head_survives_full_structured_compression():
    tinytorch.manual_seed(0)
    hidden, head = Linear(2, 4), Linear(4, 2)
    hidden.weight.data[:] = 1
    hidden.bias.data[:] = 1
    head.weight.data[:] = 2
    head.bias.data[:] = 3
    from tinytorch.core.activations import ReLU
    model = Sequential(Sequential(hidden, ReLU()), Sequential(head))
    stats = compress_model(model, {"structured_prune": 1.0})
    assert not np.any(hidden.weight.data) and not np.any(hidden.bias.data)
    assert stats["final_sparsity"] == 50.0  # 8 of the 16 prunable weights
    np.testing.assert_array_equal(model(Tensor([[1.0, 2.0]])).data, [[3.0, 3.0]])  # the head's bias survives


def test_structured_prune_keeps_the_classifier_head_unless_it_is_the_only_linear():
    tinytorch.manual_seed(0)
    hidden, head = Linear(4, 6), Linear(6, 3)
    before = head.weight.data.copy()
    structured_prune(Sequential(hidden, head), 0.5)
    assert int((np.abs(hidden.weight.data).sum(axis=0) == 0).sum()) == 3
    assert int((hidden.bias.data == 0).sum()) >= 3
    np.testing.assert_array_equal(head.weight.data, before)
    only = Linear(5, 4)
    structured_prune(Sequential(only), 0.5)
    assert int((np.abs(only.weight.data).sum(axis=0) == 0).sum()) == 2


def test_compress_model_validates_everything_before_pruning():
    tinytorch.manual_seed(0)
    model = Sequential(Linear(8, 6), Linear(6, 4))
    before = [p.data.copy() for p in model.parameters()]
    for config in ({"low_rank": 0.5}, {"magnitude_prune": 0.5, "structured_prune": 2}, {"typo": 0.1},
                   {"magnitude_prune": float("nan")}):
        with pytest.raises(ValueError):
            compress_model(model, config)
        for p, b in zip(model.parameters(), before):
            np.testing.assert_array_equal(p.data, b)
    with pytest.raises(TypeError, match="dict"):
        compress_model(model, [("magnitude_prune", 0.5)])
    stats = compress_model(model, {"structured_prune": 0.5, "magnitude_prune": 0.25})
    assert stats["applied"] == ["magnitude_prune", "structured_prune"]  # the pipeline's order
    # percentages, as the module's measure_sparsity (the Compressor facade reports fractions)
    assert stats["original_sparsity"] == 0.0 and stats["final_sparsity"] == measure_sparsity(model)
    assert stats["compression_ratio"] == pytest.approx(1 / (1 - stats["final_sparsity"] / 100))
    with pytest.raises(ValueError, match="unknown entries"):
        Compressor.compress_model(model, {"magnitude_prune": 0.5})  # the facade keeps its own names


def _softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("n, c", [(1, 2), (3, 5), (7, 3)])
def test_distillation_is_upstreams_unscaled_mean_objective(n, c):
    rng = np.random.default_rng(n * c)
    s, t = rng.standard_normal((n, c)), rng.standard_normal((n, c)) * 2
    labels = rng.integers(0, c, n)
    temperature, alpha = 2.5, 0.3
    student = Tensor(s.astype(np.float32), requires_grad=True)
    loss = KnowledgeDistillation(None, None, temperature, alpha).distillation_loss(student, Tensor(t), Tensor(labels))
    pt, ps = _softmax(t / temperature), _softmax(s / temperature)
    kl = np.sum(pt * (np.log(pt) - np.log(ps))) / n
    ce = -np.mean(np.log(_softmax(s)[np.arange(n), labels]))
    assert float(loss.data) == pytest.approx(alpha * kl + (1 - alpha) * ce, rel=1e-5)
    loss.backward()
    want = (alpha * (ps - pt) / temperature + (1 - alpha) * (_softmax(s) - np.eye(c)[labels])) / n
    np.testing.assert_allclose(student.grad, want, rtol=1e-4, atol=1e-7)
    # the core function keeps Hinton's T^2 by default: T^2 times the soft term
    scaled = core_c.distillation_loss(Tensor(s), Tensor(t), labels, temperature, alpha)
    assert float(scaled.data) == pytest.approx(alpha * temperature ** 2 * kl + (1 - alpha) * ce, rel=1e-5)


def test_distillation_labels_ids_floats_and_one_hot_agree_and_bad_ones_are_refused():
    kd = KnowledgeDistillation(None, None)
    s, t = np.array([[1.0, 0.0, 2.0], [0.0, 2.0, 1.0]]), np.array([[0.0, 1.0, 0.5], [2.0, 0.0, 1.0]])
    ids = np.array([2, 0])
    want = float(kd.distillation_loss(Tensor(s), Tensor(t), ids).data)
    for labels in (Tensor(ids.astype(np.float32)), np.eye(3)[ids], Tensor(np.eye(3)[ids]), list(ids)):
        assert float(kd.distillation_loss(Tensor(s), Tensor(t), labels).data) == pytest.approx(want)
    for bad in ([0.5, 1.0], [np.nan, 1.0], [-1, 0], [3, 0], [[0.5, 0.5, 0.0], [1, 0, 0]], [[1, 1, 0], [1, 0, 0]]):
        with pytest.raises(ValueError):
            kd.distillation_loss(Tensor(s), Tensor(t), Tensor(bad))
