"""Activations of integer and boolean tensors are float32, never truncated integers.

Every activation, in each of its three forms (the layer, the functional form and, where
there is one, the Tensor method), against PyTorch: ``torch.sigmoid`` and ``torch.tanh`` of
an int tensor are float32 too. GELU, SiLU, softmax and log-softmax of ints raise in
PyTorch ("not implemented for 'Long'"), so there the reference is PyTorch on the same
values as float32. ReLU keeps integers, like ``torch.relu``.
"""
import numpy as np
import pytest

from tinytorch.core.activations import (GELU, LogSoftmax, ReLU, SiLU, Sigmoid, Softmax, Tanh, gelu,
                                        log_softmax, relu, sigmoid, silu, softmax, tanh)
from tinytorch.core.tensor import Tensor

torch = pytest.importorskip("torch")
F = torch.nn.functional

# name -> (layer, functional form, Tensor method or None, torch reference, torch takes ints)
FLOATING = {
    "sigmoid": (Sigmoid(), sigmoid, Tensor.sigmoid, torch.sigmoid, True),
    "tanh": (Tanh(), tanh, Tensor.tanh, torch.tanh, True),
    "gelu_tanh": (GELU(), gelu, None, lambda t: F.gelu(t, approximate="tanh"), False),
    "gelu_erf": (GELU("none"), lambda x: gelu(x, "none"), None, F.gelu, False),
    "silu": (SiLU(), silu, None, F.silu, False),
    "softmax": (Softmax(), softmax, Tensor.softmax, lambda t: torch.softmax(t, -1), False),
    "log_softmax": (LogSoftmax(), log_softmax, Tensor.log_softmax, lambda t: torch.log_softmax(t, -1), False),
}
INTEGERS = [np.array([0, 1, -1]), np.array([[3, -7, 0], [120, -120, 5]], dtype=np.int8),
            np.array([2, -40000, 40000], dtype=np.int32), np.array([True, False, True])]


def test_sigmoid_of_ints_is_float32_like_torch():
    y = Sigmoid()(Tensor(np.array([0, 1, -1])))
    assert y.dtype == np.float32
    np.testing.assert_allclose(y.data, [0.5, 0.7310586, 0.26894143], rtol=1e-6)
    want = torch.sigmoid(torch.tensor([0, 1, -1]))
    assert want.dtype == torch.float32
    np.testing.assert_allclose(y.data, want.numpy(), rtol=2e-7)  # 1 ulp


@pytest.mark.parametrize("name", list(FLOATING))
@pytest.mark.parametrize("values", INTEGERS, ids=lambda v: str(v.dtype))
def test_activation_of_integer_tensor_is_float32(name, values):
    layer, functional, method, reference, torch_takes_ints = FLOATING[name]
    x = torch.from_numpy(values)
    want = (reference(x) if torch_takes_ints else reference(x.to(torch.float32))).numpy()
    assert want.dtype == np.float32
    forms = [layer(Tensor(values)), functional(Tensor(values)), functional(values)]
    if method is not None:
        forms.append(method(Tensor(values)))
    for y in forms:
        assert y.dtype == np.float32, (name, values.dtype, y.dtype)
        np.testing.assert_allclose(y.data, want, rtol=2e-6, atol=2e-7)
        # the same numbers as for the float32 values: integers are only promoted
        np.testing.assert_array_equal(y.data, functional(Tensor(values.astype(np.float32))).data)


@pytest.mark.parametrize("values", INTEGERS[:3], ids=lambda v: str(v.dtype))
def test_relu_keeps_integers_like_torch(values):
    want = torch.relu(torch.from_numpy(values)).numpy()
    for y in (ReLU()(Tensor(values)), relu(values), Tensor(values).relu()):
        assert y.dtype == values.dtype
        np.testing.assert_array_equal(y.data, want)


@pytest.mark.parametrize("name", list(FLOATING))
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_floating_input_keeps_its_dtype(name, dtype):
    layer = FLOATING[name][0]
    assert layer(Tensor(np.array([0.5, -2.0, 3.0], dtype=dtype), dtype=dtype)).dtype == dtype
