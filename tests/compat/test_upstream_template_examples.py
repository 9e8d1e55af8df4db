"""Upstream's extensions/template.py worked examples, called the way upstream code calls them,
checked against float64 references and PyTorch (values and gradients)."""
import numpy as np
import pytest
import torch

import tinytorch
from tinytorch.core.acceleration import last_path
from tinytorch.core.autograd import gradcheck
from tinytorch.core.optimizers import SGD
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import template, template_examples
from tinytorch.extensions.template import (CustomGradientTransform, CustomResidualBlock, CustomScaledShift,
                                           custom_accelerated_op, custom_scaled_shift, has_custom_hardware)

# awkward shapes: empty, one element, odd, prime, and a batch of them
SHAPES = [(0,), (1,), (7,), (13, 3), (2, 5, 11)]


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_template_reexports_the_example_module_objects():
    for name in template_examples.__all__:
        assert getattr(template, name) is getattr(template_examples, name)
        assert name in template.__all__


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("alpha, beta", [(2.0, 1.0), (-0.5, 3.25)])
def test_custom_scaled_shift_tensor_value_and_gradient_match_torch(shape, alpha, beta):
    x = f32(*shape, seed=len(shape))
    xt = Tensor(x, requires_grad=True)
    y = custom_scaled_shift(xt, alpha=alpha, beta=beta)
    ref = alpha * x.astype(np.float64) + beta
    np.testing.assert_allclose(y.data, ref, rtol=1e-6, atol=1e-6)
    assert y.dtype == np.float32
    w = f32(*shape, seed=9)
    (y * Tensor(w)).sum().backward()
    xtorch = torch.tensor(x, requires_grad=True)
    ((alpha * xtorch + beta) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xt.grad, xtorch.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_custom_scaled_shift_apply_upstream_call_and_gradcheck():
    x = Tensor(f32(4, 3, seed=2).astype(np.float64), requires_grad=True)
    y = CustomScaledShift.apply(x, alpha=1.5, beta=-2.0)  # upstream's spelling
    np.testing.assert_allclose(y.data, 1.5 * x.data - 2.0)
    assert gradcheck(lambda t: CustomScaledShift.apply(t, alpha=1.5, beta=-2.0), x)


def test_custom_scaled_shift_non_contiguous_and_ndarray_paths():
    base = f32(6, 8, seed=3)
    view = base[:, ::3]  # non-contiguous
    out = custom_scaled_shift(view)  # upstream defaults alpha=2, beta=1
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, 2.0 * view.astype(np.float64) + 1.0, rtol=1e-6)
    ints = custom_scaled_shift([1, 2, 3], alpha=3, beta=0)
    assert ints.dtype == np.float32 and ints.tolist() == [3.0, 6.0, 9.0]
    t = custom_scaled_shift(Tensor(np.array([1, 2], dtype=np.int64)))
    assert t.dtype == np.float32 and t.data.tolist() == [3.0, 5.0]


def test_custom_scaled_shift_bad_input():
    with pytest.raises(TypeError, match="alpha"):
        custom_scaled_shift(np.ones(3), alpha="2")
    with pytest.raises(ValueError, match="beta"):
        custom_scaled_shift(np.ones(3), beta=float("nan"))
    with pytest.raises(TypeError, match="dtype"):
        custom_scaled_shift(np.array(["a", "b"]))


@pytest.mark.parametrize("dim, lead", [(1, (1,)), (5, (3,)), (7, (2, 3))])
def test_custom_residual_block_forward_backward_match_torch(dim, lead):
    tinytorch.manual_seed(dim)
    block = CustomResidualBlock(dim)
    assert [p is q for p, q in zip(block.parameters(), [block.weight, block.bias])] == [True, True]
    assert block.weight.shape == (dim, dim) and np.all(block.bias.data == 0)
    x = f32(*lead, dim, seed=dim)
    xt = Tensor(x, requires_grad=True)
    y = block(xt)
    W, b = block.weight.data.astype(np.float64), block.bias.data.astype(np.float64)
    np.testing.assert_allclose(y.data, x + x.astype(np.float64) @ W + b, rtol=1e-5, atol=1e-5)
    g = f32(*lead, dim, seed=99)
    (y * Tensor(g)).sum().backward()
    xs, Ws, bs = (torch.tensor(a, requires_grad=True) for a in (x, block.weight.data, block.bias.data))
    ((xs + xs @ Ws + bs) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(xt.grad, xs.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(block.weight.grad, Ws.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(block.bias.grad, bs.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_custom_residual_block_init_is_seeded_and_trains():
    tinytorch.manual_seed(3)
    a = CustomResidualBlock(64)
    tinytorch.manual_seed(3)
    b = CustomResidualBlock(64)
    np.testing.assert_array_equal(a.weight.data, b.weight.data)
    assert abs(a.weight.data.std() - 1 / 8) < 0.01  # N(0, 1/dim)
    block = CustomResidualBlock(3)
    w0 = block.weight.data.copy()
    x = f32(4, 3, seed=5)
    block(Tensor(x)).sum().backward()
    SGD(block.parameters(), lr=0.1).step()
    # d(sum(x + xW + b))/dW = x^T 1
    np.testing.assert_allclose(block.weight.data, w0 - 0.1 * x.T.astype(np.float64) @ np.ones((4, 3)), rtol=1e-5)
    with pytest.raises(ValueError, match="dim"):
        CustomResidualBlock(0)
    with pytest.raises(ValueError, match=r"\(\.\.\., 3\)"):
        block(Tensor(np.ones((2, 4), dtype=np.float32)))


def test_custom_gradient_transform_matches_torch_clip_grad_value():
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(s).astype(np.float32) * 3 for s in [(7,), (3, 5), (1,)]]
    params = [Tensor(np.zeros_like(g), requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.copy()
    frozen = Tensor(np.zeros(2, dtype=np.float32), requires_grad=True)  # grad None: skipped
    CustomGradientTransform(clip_value=0.75).transform_gradients(params + [frozen])
    tparams = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, g in zip(tparams, grads):
        p.grad = torch.tensor(g)
    torch.nn.utils.clip_grad_value_(tparams, 0.75)
    for p, tp in zip(params, tparams):
        np.testing.assert_array_equal(p.grad, tp.grad.numpy())
    assert frozen.grad is None
    t = Tensor(np.zeros(3, dtype=np.float32), requires_grad=True)
    t.grad = Tensor(np.array([-5.0, 0.5, 5.0], dtype=np.float32))  # upstream sometimes stores Tensors
    CustomGradientTransform().transform_gradients([t])
    assert isinstance(t.grad, np.ndarray) and t.grad.tolist() == [-1.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="clip_value"):
        CustomGradientTransform(0.0)


@pytest.mark.parametrize("shape", SHAPES)
def test_custom_accelerated_op_is_relu_on_both_paths(shape):
    from tinytorch import native
    assert has_custom_hardware() == native.available()  # the runtime's ReLU kernel
    x = f32(*shape, seed=7)
    out = custom_accelerated_op(x)
    assert isinstance(out, np.ndarray) and out.dtype == x.dtype
    np.testing.assert_array_equal(out, np.maximum(x.astype(np.float64), 0))
    assert last_path() == (f"native:relu:{native.isa()}" if has_custom_hardware() else "numpy")
    xt = Tensor(x, requires_grad=True)
    y = custom_accelerated_op(xt)
    assert isinstance(y, Tensor)
    y.sum().backward()
    xs = torch.tensor(x, requires_grad=True)
    torch.relu(xs).sum().backward()
    np.testing.assert_array_equal(y.data, torch.relu(torch.tensor(x)).numpy())
    np.testing.assert_array_equal(xt.grad, xs.grad.numpy())


def test_custom_accelerated_op_dtypes_and_errors():
    ints = custom_accelerated_op(np.array([-3, 0, 4]))
    assert ints.dtype.kind == "i" and ints.tolist() == [0, 0, 4]
    strided = f32(5, 6, seed=1)[::2, 1::2]
    np.testing.assert_array_equal(custom_accelerated_op(strided), np.maximum(strided, 0))
    with pytest.raises(TypeError, match="numeric"):
        custom_accelerated_op(np.array(["x"]))


def test_custom_scaled_shift_apply_on_integers_is_not_truncated():
    y = CustomScaledShift.apply(Tensor(np.array([1, 2, 3])), alpha=2.5, beta=0.25)
    assert y.dtype == np.float32 and y.data.tolist() == [2.75, 5.25, 7.75]
