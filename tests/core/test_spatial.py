"""Conv2d, MaxPool2d, AvgPool2d against direct float64 loop references (values and gradients)."""
import numpy as np
import pytest

from parity import check_parity
from tinytorch.core import acceleration
from tinytorch.core.spatial import AvgPool2d, Conv2d, MaxPool2d, conv2d, max_pool2d, avg_pool2d
from tinytorch.core.tensor import Tensor


def conv_reference(x, w, b, stride, padding):
    """Direct sum over output pixels, written from the definition."""
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (wd + 2 * padding - kw) // stride + 1
    out = np.zeros((n, oc, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w)
    return out + (0 if b is None else b[None, :, None, None])


def pool_reference(x, k, stride, padding, kind):
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)), constant_values=fill)
    oh = (h + 2 * padding - k) // stride + 1
    ow = (w + 2 * padding - k) // stride + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + k, j * stride:j * stride + k]
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return out


CONV_CASES = [
    # x shape, (oc, kh, kw), stride, padding
    ((2, 3, 5, 5), (4, 3, 3), 1, 0),
    ((1, 1, 7, 6), (2, 3, 3), 2, 1),
    ((2, 2, 4, 4), (3, 1, 1), 1, 0),
    ((1, 3, 6, 7), (2, 2, 3), 2, 2),
    ((3, 1, 3, 3), (1, 3, 3), 1, 1),
]


@pytest.mark.parametrize("x_shape,wspec,stride,padding", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_parity(rng, x_shape, wspec, stride, padding, bias):
    oc, kh, kw = wspec
    x = rng.standard_normal(x_shape)
    w = rng.standard_normal((oc, x_shape[1], kh, kw)) * 0.5
    inputs = [x, w] + ([rng.standard_normal(oc)] if bias else [])

    def ours(x, w, *b):
        return conv2d(x, w, b[0] if b else None, stride=stride, padding=padding)

    def ref(x, w, *b):
        return conv_reference(x, w, b[0] if b else None, stride, padding)

    check_parity(ours, ref, inputs, rng=rng, grad_atol=3e-5)


def test_conv2d_layer_and_gemm_dispatch(monkeypatch, rng):
    calls = []
    real = acceleration.gemm
    monkeypatch.setattr(acceleration, "gemm", lambda a, b, trans_a=False, trans_b=False, **kw:
                        calls.append((trans_a, trans_b)) or real(a, b, trans_a, trans_b, **kw))
    layer = Conv2d(2, 3, 3, padding=1)
    assert layer.weight.shape == (3, 2, 3, 3) and layer.bias.shape == (3,)
    x = Tensor(rng.standard_normal((2, 2, 5, 5)), requires_grad=True)
    y = layer(x)
    want = conv_reference(x.data.astype(np.float64), layer.weight.data.astype(np.float64),
                          layer.bias.data.astype(np.float64), 1, 1)
    np.testing.assert_allclose(y.data, want, rtol=1e-5, atol=1e-5)
    y.sum().backward()
    assert sorted(calls) == [(False, False), (False, True), (True, False)]


@pytest.mark.parametrize("x_shape,k,stride,padding", [
    ((2, 3, 4, 4), 2, None, 0), ((1, 2, 5, 7), 3, 2, 1), ((2, 1, 5, 5), 2, 1, 0), ((1, 1, 3, 3), 3, None, 1),
])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_parity(rng, x_shape, k, stride, padding, kind):
    x = rng.standard_normal(x_shape)
    s = k if stride is None else stride
    fn = max_pool2d if kind == "max" else avg_pool2d
    check_parity(lambda t: fn(t, k, stride, padding), lambda a: pool_reference(a, k, s, padding, kind), [x],
                 rng=rng)


def test_pool_layers():
    x = Tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True)
    y = MaxPool2d(2)(x)
    np.testing.assert_array_equal(y.data[0, 0], [[5, 7], [13, 15]])
    y.sum().backward()
    assert x.grad.sum() == 4 and x.grad[0, 0, 1, 1] == 1 and x.grad[0, 0, 0, 0] == 0
    np.testing.assert_allclose(AvgPool2d(2)(x).data[0, 0], [[2.5, 4.5], [10.5, 12.5]])


@pytest.mark.parametrize("stride,padding", [(None, 0), (1, 0), (2, 1)])
def test_max_pool_ties_send_the_gradient_to_one_position(stride, padding):
    # all-equal windows (e.g. after ReLU): like PyTorch, one position per window gets it
    x = Tensor(np.zeros((1, 2, 4, 4)), requires_grad=True)
    y = max_pool2d(x, 2, stride, padding)
    y.backward(np.ones(y.shape, np.float32))
    assert x.grad.sum() == y.size
    if stride is None:
        np.testing.assert_array_equal(x.grad[0, 0], [[1, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]])


def test_bad_input():
    layer = Conv2d(3, 2, 3)
    with pytest.raises(ValueError, match=r"\(N, 3, H, W\).*\(1, 2, 5, 5\)"):
        layer(np.ones((1, 2, 5, 5)))
    with pytest.raises(ValueError, match="4-D"):
        layer(np.ones((3, 5, 5)))
    with pytest.raises(ValueError, match="smaller than the kernel"):
        layer(np.ones((1, 3, 2, 2)))
    with pytest.raises(ValueError, match="padding"):
        MaxPool2d(2, padding=2)(np.ones((1, 1, 4, 4)))
    with pytest.raises(ValueError, match="positive"):
        Conv2d(0, 2, 3)
