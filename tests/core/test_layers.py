"""Layers and activations: parity of Linear and every activation, the Layer API
(discovery, replacement, modes, state dicts), dropout and seeding."""
import math

import numpy as np
import pytest

from parity import check_parity
from tinytorch.core import acceleration
from tinytorch.core import random as tt_random
from tinytorch.core.activations import (GELU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh, erf, gelu,
                                        log_softmax, relu, sigmoid, silu, softmax, tanh)
from tinytorch.core.layers import Dropout, Flatten, Identity, Layer, Linear, Parameter, Sequential
from tinytorch.core.tensor import Tensor

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-x))


ACTIVATIONS = {
    "relu": (relu, lambda x: np.maximum(x, 0)),
    "sigmoid": (sigmoid, _sigmoid64),
    "tanh": (tanh, np.tanh),
    "silu": (silu, lambda x: x * _sigmoid64(x)),
    "gelu_tanh": (gelu, lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    "gelu_erf": (lambda t: gelu(t, approximate="none"), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    "softmax": (softmax, lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)),
    "log_softmax": (log_softmax, lambda x: x - x.max(-1, keepdims=True) - np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))),
}


@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("shape", [(3, 5), (1,), (2, 3, 7), (0, 4)])
def test_activation_parity(rng, name, shape):
    ours, ref = ACTIVATIONS[name]
    x = rng.standard_normal(shape) * 2
    # erf is a 1.2e-7 fit: the float64 gradcheck tolerance reflects that
    tol = dict(gradcheck_atol=1e-5) if name == "gelu_erf" else {}
    check_parity(ours, ref, [x], rng=rng, name=name, **tol)


def test_softmax_other_axis(rng):
    check_parity(lambda t: softmax(t, axis=0), lambda x: np.exp(x) / np.exp(x).sum(0, keepdims=True),
                 [rng.standard_normal((4, 3))], rng=rng)


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activations_are_finite_for_huge_inputs(name):
    x = Tensor(np.array([[-1e4, -50.0, 0.0, 50.0, 1e4]]), requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise", under="ignore"):  # no overflow either
        y = ACTIVATIONS[name][0](x)
        y.backward(np.ones(y.shape, np.float32))
    assert np.isfinite(y.data).all() and np.isfinite(x.grad).all()


def test_erf_accuracy():
    x = np.linspace(-6, 6, 2001)
    assert np.max(np.abs(erf(x) - _erf(x))) < 2e-7


def test_gelu_tanh_goes_through_acceleration(monkeypatch):
    calls = []
    real_f, real_b = acceleration.bias_gelu, acceleration.bias_gelu_backward
    monkeypatch.setattr(acceleration, "bias_gelu", lambda x, b: calls.append("f") or real_f(x, b))
    monkeypatch.setattr(acceleration, "bias_gelu_backward", lambda x, b, g: calls.append("b") or real_b(x, b, g))
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    GELU()(x).sum().backward()
    assert calls == ["f", "b"]


def test_activation_layers_match_functions(rng):
    x = Tensor(rng.standard_normal((3, 4)))
    for layer, fn in [(ReLU(), relu), (Sigmoid(), sigmoid), (Tanh(), tanh), (SiLU(), silu),
                      (GELU(), gelu), (Softmax(), softmax), (LogSoftmax(), log_softmax)]:
        np.testing.assert_array_equal(layer(x).data, fn(x).data)
    with pytest.raises(ValueError, match="approximate"):
        GELU("fast")


@pytest.mark.parametrize("x_shape", [(5, 3), (1, 3), (2, 4, 3), (0, 3), (3,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_parity(rng, x_shape, bias):
    layer = Linear(3, 4, bias=bias)
    w = layer.weight.data.astype(np.float64)
    b = layer.bias.data.astype(np.float64) if bias else 0.0

    def ours(x, weight, *maybe_bias):
        layer.weight, layer.bias = weight, (maybe_bias[0] if maybe_bias else None)
        return layer(x)

    inputs = [rng.standard_normal(x_shape), w] + ([b] if bias else [])
    check_parity(ours, lambda x, w, *bb: x @ w + (bb[0] if bb else 0.0), inputs, rng=rng)


def test_linear_weight_shape_and_init():
    tt_random.manual_seed(0)
    layer = Linear(50, 7)
    assert layer.weight.shape == (50, 7) and layer.bias.shape == (7,)
    assert layer.weight.requires_grad and isinstance(layer.weight, Parameter)
    bound = 1 / math.sqrt(50)
    assert np.abs(layer.weight.data).max() <= bound and np.abs(layer.weight.data).max() > 0.8 * bound
    with pytest.raises(ValueError, match=r"6 features.*\(50, 7\)"):
        layer(np.ones((2, 6)))


def test_linear_uses_gemm_with_trans_flags(monkeypatch, rng):
    calls = []
    real = acceleration.gemm
    monkeypatch.setattr(acceleration, "gemm",
                        lambda a, b, trans_a=False, trans_b=False, **kw:
                        calls.append((trans_a, trans_b)) or real(a, b, trans_a, trans_b, **kw))
    layer = Linear(4, 3)
    layer(Tensor(rng.standard_normal((2, 5, 4)), requires_grad=True)).sum().backward()
    assert sorted(calls) == [(False, False), (False, True), (True, False)]


class Block(Layer):
    def __init__(self):
        self.proj = Linear(4, 4)
        self.heads = [Linear(4, 2), Linear(4, 2, bias=False)]
        self.scale = Tensor(np.ones(4), requires_grad=False)  # frozen, still a parameter
        self.table = np.zeros(3)                              # plain constant, not a parameter

    def forward(self, x):
        h = self.proj(x) * self.scale
        return self.heads[0](h) + self.heads[1](h)


def test_discovery_and_names():
    model = Sequential(Block(), ReLU(), Linear(2, 3))
    names = [n for n, _ in model.named_parameters()]
    # PyTorch's order: each module's own parameters, then its children's
    assert names == ["0.scale", "0.proj.weight", "0.proj.bias", "0.heads.0.weight", "0.heads.0.bias",
                     "0.heads.1.weight", "2.weight", "2.bias"]
    assert [n for n, _ in model.named_modules()] == ["", "0", "0.proj", "0.heads.0", "0.heads.1", "1", "2"]
    assert len(model.children()) == 3 and len(model.parameters()) == 8
    shared = Linear(2, 2)
    assert len(Sequential(shared, shared).parameters()) == 2  # reported once


def test_replace_sublayers():
    model = Sequential(Block(), Linear(2, 3))
    new = Linear(4, 2, bias=False)
    model.set_submodule("0.heads.0", new)
    assert model.get_submodule("0.heads.0") is new
    model.get_submodule("0").proj = Identity()  # plain setattr also works
    model[1] = Linear(2, 5)
    names = [n for n, _ in model.named_parameters()]
    assert "0.proj.weight" not in names and "0.heads.0.bias" not in names and "1.weight" in names
    assert model(np.ones((2, 4))).shape == (2, 5)
    with pytest.raises(KeyError, match="nope"):
        model.get_submodule("0.nope")


def test_train_eval_and_dropout():
    tt_random.manual_seed(1)
    model = Sequential(Linear(20, 20), Dropout(0.5))
    assert model.training and model[1].training
    x = Tensor(np.ones((64, 20)))
    model.eval()
    assert not model[1].training
    np.testing.assert_array_equal(model(x).data, model[0](x).data)
    model.train()
    y = model(x).data
    base = model[0](x).data
    dropped = y == 0
    assert 0.35 < dropped.mean() < 0.65
    np.testing.assert_allclose(y[~dropped], 2 * base[~dropped], rtol=1e-6)
    with pytest.raises(ValueError, match="p must be"):
        Dropout(1.5)


def test_dropout_gradient_uses_same_mask():
    x = Tensor(np.ones((8, 8)), requires_grad=True)
    y = Dropout(0.3)(x)
    y.sum().backward()
    np.testing.assert_allclose(x.grad, y.data)  # d(sum)/dx == mask * 1/(1-p) == y for x == 1


def test_manual_seed_and_rng_state_replay_masks():
    tt_random.manual_seed(123)
    a = Linear(5, 5).weight.data.copy()
    tt_random.manual_seed(123)
    assert np.array_equal(Linear(5, 5).weight.data, a)
    x = Tensor(np.ones((4, 16)))
    state = tt_random.get_rng_state()
    m1 = Dropout(0.5)(x).data
    tt_random.set_rng_state(state)
    m2 = Dropout(0.5)(x).data
    assert np.array_equal(m1, m2)
    assert not np.array_equal(m1, Dropout(0.5)(x).data)
    with pytest.raises(TypeError):
        tt_random.manual_seed("x")


def test_flatten():
    x = Tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
    y = Flatten()(x)
    assert y.shape == (2, 12)
    y.backward(np.ones((2, 12)))
    assert x.grad.shape == (2, 3, 4)


def test_state_dict_round_trip(tmp_path):
    tt_random.manual_seed(0)
    model = Sequential(Block(), Linear(2, 3))
    other = Sequential(Block(), Linear(2, 3))
    state = model.state_dict()
    assert list(state) == [n for n, _ in model.named_parameters()]
    state["1.bias"][0] = 99.0  # a copy: the model is unchanged
    assert model[1].bias.data[0] != 99.0
    path = tmp_path / "model.npz"
    model.save(path)
    weight_array = other[1].weight.data
    other.load(path)
    for (n, p), (_, q) in zip(model.named_parameters(), other.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=n)
    assert other[1].weight.data is weight_array  # loaded in place


def test_state_dict_mismatches_name_the_key():
    model = Sequential(Linear(3, 4), Linear(4, 2))
    state = model.state_dict()
    bad = dict(state)
    bad["1.weight"] = np.zeros((5, 2))
    with pytest.raises(ValueError, match=r"'1.weight'.*\(5, 2\).*\(4, 2\)"):
        model.load_state_dict(bad)
    missing = dict(state)
    del missing["0.bias"]
    with pytest.raises(KeyError, match="0.bias"):
        model.load_state_dict(missing)
    extra = dict(state, **{"2.weight": np.zeros(1)})
    with pytest.raises(KeyError, match="2.weight"):
        model.load_state_dict(extra)
    assert model.load_state_dict(missing, strict=False) == (["0.bias"], [])


def test_layer_without_super_init_and_sequential_errors():
    class Bare(Layer):
        def __init__(self):
            self.w = Parameter(np.ones(2))

        def forward(self, x):
            return x * self.w

    b = Bare()
    assert b.training and len(b.parameters()) == 1
    with pytest.raises(TypeError, match="not a Layer"):
        Sequential(Linear(1, 1), "relu")
