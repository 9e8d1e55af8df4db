"""The core reaches the row-normalisation kernels through the door: LayerNorm (one or
several trailing dims), Tensor.softmax / log_softmax and the functional forms run
acceleration.layer_norm / softmax / log_softmax (proved by last_path()), match
torch.nn.functional values and gradients, match the NumPy back end (use_native(False)),
and keep NumPy for what the kernels decline (float64, another axis)."""
import numpy as np
import pytest
import torch

from tinytorch.core import acceleration as acc
from tinytorch.core.activations import log_softmax, softmax
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformers import LayerNorm

RNG = np.random.default_rng(5)


def native_path(prefix):
    """The last call ran the native kernel named by prefix (or the runtime is unavailable,
    and NumPy ran: the core must work without it)."""
    return acc.last_path().startswith(prefix) if acc.native_available() else \
        acc.last_path() == "numpy"


def _layer_norm_run(x, shape, weight, bias):
    ln = LayerNorm(shape)
    ln.weight.data[...] = weight
    ln.bias.data[...] = bias
    t = Tensor(x, requires_grad=True)
    out = ln(t)
    path = acc.last_path()
    g = np.cos(np.arange(out.data.size, dtype=np.float32)).reshape(out.shape)
    (out * Tensor(g)).sum().backward()
    return out.data, t.grad, ln.weight.grad, ln.bias.grad, path, g


@pytest.mark.parametrize("shape,norm", [((4, 9, 64), (64,)), ((3, 5, 6, 7), (6, 7)),
                                        ((2, 17), (17,))], ids=str)
def test_layer_norm_module_takes_the_door_and_matches_torch(shape, norm):
    x = (RNG.standard_normal(shape) * 3 + 1).astype(np.float32)
    w = RNG.uniform(0.5, 1.5, norm).astype(np.float32)
    b = RNG.uniform(-1, 1, norm).astype(np.float32)
    y, gx, gw, gb, path, g = _layer_norm_run(x, norm, w, b)
    if x.size >= acc.NATIVE_MIN_ELEMENTS and acc.native_available():
        assert path.startswith("native:layernorm_forward:")
    tx = torch.tensor(x, requires_grad=True)
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    ty = torch.nn.functional.layer_norm(tx, norm, tw, tb, 1e-5)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=3e-5)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gb, tb.grad.numpy(), rtol=1e-4, atol=1e-3)
    assert gw.shape == norm and gb.shape == norm and gx.shape == shape
    with acc.use_native(False):
        y2, gx2, gw2, gb2, path2, _ = _layer_norm_run(x, norm, w, b)
    assert path2 == "numpy"
    np.testing.assert_allclose(y, y2, atol=3e-5)
    np.testing.assert_allclose(gx, gx2, atol=1e-4)
    np.testing.assert_allclose(gw, gw2, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gb, gb2, rtol=1e-4, atol=1e-3)


def test_layer_norm_float64_stays_numpy_and_is_exact():
    x = RNG.standard_normal((8, 32))
    ln = LayerNorm(32, dtype=np.float64)
    t = Tensor(x, requires_grad=True, dtype=np.float64)
    out = ln(t)
    assert acc.last_path() == "numpy" and out.data.dtype == np.float64
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out.data, want, rtol=1e-12, atol=1e-12)
    out.sum().backward()
    np.testing.assert_allclose(t.grad, 0, atol=1e-12)  # d/dx sum(layer_norm(x)) = 0


def test_layer_norm_without_affine():
    x = RNG.standard_normal((16, 40)).astype(np.float32)
    ln = LayerNorm(40, elementwise_affine=False)
    t = Tensor(x, requires_grad=True)
    out = ln(t)
    assert native_path("native:layernorm_forward:")
    (out * out).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.layer_norm(tx, (40,), eps=1e-5)
    (ty * ty).sum().backward()
    np.testing.assert_allclose(out.data, ty.detach().numpy(), atol=3e-5)
    np.testing.assert_allclose(t.grad, tx.grad.numpy(), atol=2e-4)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax_functions_take_the_door_and_match_torch(log, axis):
    x = (RNG.standard_normal((6, 10, 33)) * 3).astype(np.float32)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    t = Tensor(x, requires_grad=True)
    out = (log_softmax if log else softmax)(t, axis)
    name = "log_softmax" if log else "softmax"
    if axis in (-1, 2):
        assert native_path(f"native:{name}_forward:")
    else:
        assert acc.last_path() == "numpy"
    (out * Tensor(g)).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    ty = (torch.log_softmax if log else torch.softmax)(tx, axis)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(out.data, ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    # the Tensor methods are the same Functions
    m = (t.log_softmax(axis) if log else t.softmax(axis))
    np.testing.assert_array_equal(m.data, out.data)
    with acc.use_native(False):
        ref = (log_softmax if log else softmax)(Tensor(x), axis)
        assert acc.last_path() == "numpy"
    np.testing.assert_allclose(out.data, ref.data, rtol=1e-5, atol=1e-6)


def test_door_validates():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="out of range"):
        acc.softmax(x, axis=2)
    with pytest.raises(ValueError, match="at least one dimension"):
        acc.log_softmax(np.float32(1.0))
    with pytest.raises(ValueError, match="beta must have shape"):
        acc.layer_norm(x, None, np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="layer_norm_backward"):
        acc.layer_norm_backward(x, None, np.zeros(3, np.float32), np.zeros(2, np.float32), x)
    # integer input is promoted to float32 (and then served natively when large enough)
    y = acc.softmax(np.arange(512).reshape(2, 256))
    assert y.dtype == np.float32 and native_path("native:softmax_forward:")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_takes_the_door_and_matches_torch(reduction, smoothing):
    from tinytorch.core.losses import cross_entropy
    logits = (RNG.standard_normal((4, 16, 65)) * 3).astype(np.float32)
    target = RNG.integers(0, 65, (4, 16))
    target[0, ::4] = -100
    t = Tensor(logits, requires_grad=True)
    loss = cross_entropy(t.reshape(-1, 65), target.reshape(-1), ignore_index=-100,
                         label_smoothing=smoothing, reduction=reduction)
    path = acc.last_path()
    assert path == "numpy" if smoothing else native_path("native:cross_entropy_forward:")
    g = np.cos(np.arange(loss.data.size, dtype=np.float32)).reshape(loss.shape)
    (loss * Tensor(g)).sum().backward()
    tx = torch.tensor(logits.reshape(-1, 65), requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(target.reshape(-1)), ignore_index=-100,
                                           label_smoothing=smoothing, reduction=reduction)
    (tl * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(loss.data, tl.detach().numpy(), rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(t.grad.reshape(-1, 65), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    with acc.use_native(False):
        ref = cross_entropy(Tensor(logits).reshape(-1, 65), target.reshape(-1), ignore_index=-100,
                            label_smoothing=smoothing, reduction=reduction)
    np.testing.assert_allclose(loss.data, ref.data, rtol=1e-5, atol=2e-5)


def test_cross_entropy_all_ignored_mean_is_nan_with_zero_grad():
    from tinytorch.core.losses import cross_entropy
    logits = Tensor(RNG.standard_normal((32, 20)).astype(np.float32), requires_grad=True)
    loss = cross_entropy(logits, np.full(32, -100))
    assert native_path("native:cross_entropy_forward:")
    assert np.isnan(loss.data)
    loss.backward()
    assert np.all(logits.grad == 0)
