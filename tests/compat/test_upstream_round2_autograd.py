"""Upstream TinyTorch course code, module 06 (#31): the argument-free ``Tensor.transpose()``
that upstream's attention code writes (``Q @ K.transpose()``: the last two axes swapped), and
``core.activations.GELUFunction``, upstream's name of the GELU Function, in both of upstream's
calling forms. Checked against NumPy's ``swapaxes``, a float64 reference and this package's
own GELU (upstream's tests themselves are not part of this repository)."""
import warnings

import numpy as np
import pytest

from tinytorch.core.activation_ops import GELUTanhFunction
from tinytorch.core.activations import GELU, GELUFunction, gelu
from tinytorch.core.tensor import Tensor


# ------------------------------------------------------------------ transpose()
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 5), (2, 4, 8, 6)])
def test_argument_free_transpose_swaps_the_last_two_axes_with_gradient(shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    t = Tensor(x, requires_grad=True, dtype=np.float64)
    y = t.transpose()
    np.testing.assert_array_equal(y.data, np.swapaxes(x, -1, -2))
    g = rng.standard_normal(y.shape)
    (y * Tensor(g, dtype=np.float64)).sum().backward()
    np.testing.assert_array_equal(t.grad, np.swapaxes(g, -1, -2))  # d/dx sum(x^T * g) = g^T


def test_attention_scores_with_argument_free_transpose_match_float64():
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((2, 2, 4, 8, 16))
    Q = Tensor(q, requires_grad=True, dtype=np.float64)
    K = Tensor(k, requires_grad=True, dtype=np.float64)
    scores = Q.matmul(K.transpose())
    assert scores.shape == (2, 4, 8, 8)
    np.testing.assert_allclose(scores.data, np.einsum("bhid,bhjd->bhij", q, k), rtol=1e-12)
    g = rng.standard_normal(scores.shape)
    scores.backward(g)
    np.testing.assert_allclose(Q.grad, np.einsum("bhij,bhjd->bhid", g, k), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(K.grad, np.einsum("bhij,bhid->bhjd", g, q), rtol=1e-10, atol=1e-12)


def test_T_still_reverses_every_axis_and_low_rank_transpose_keeps_the_shape():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert Tensor(x).T.shape == (4, 3, 2)
    np.testing.assert_array_equal(Tensor(x).T.data, x.T)
    np.testing.assert_array_equal(Tensor(x[0]).transpose().data, Tensor(x[0]).T.data)  # 2-D: the same
    for a in (np.arange(3.0), np.array(2.0)):
        t = Tensor(a, requires_grad=True)
        y = t.transpose()
        np.testing.assert_array_equal(y.data, a)
        (y * 2).sum().backward()
        np.testing.assert_array_equal(t.grad, np.full(a.shape, 2.0))


def test_transpose_by_pytorchs_keywords():
    x = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(Tensor(x).transpose(dim0=0, dim1=2).data, np.swapaxes(x, 0, 2))
    np.testing.assert_array_equal(Tensor(x).transpose(0, -1).data, np.swapaxes(x, 0, -1))
    with pytest.raises(TypeError, match="dim0 and dim1"):
        Tensor(x).transpose(dim0=1)


# ------------------------------------------------------------------ GELUFunction
_C = np.sqrt(2.0 / np.pi)
LARGE = np.array([-1e4, -1000.0, -200.0, -10.0, -3.0, -0.5, 0.0, 0.5, 3.0, 10.0, 200.0, 1000.0, 1e4])


def _gelu64(x):
    """The tanh GELU and its derivative in float64, written out here (not the package's code)."""
    x = np.asarray(x, np.float64)
    t = np.tanh(_C * (x + 0.044715 * x ** 3))
    d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _C * (1 + 3 * 0.044715 * x * x)
    return 0.5 * x * (1 + t), d


def test_gelufunction_is_the_one_tanh_gelu():
    assert issubclass(GELUFunction, GELUTanhFunction)
    assert "forward" not in vars(GELUFunction)  # no second forward: GELUTanhFunction's
    x = Tensor(np.random.default_rng(2).standard_normal((3, 5)), requires_grad=True)
    x2 = Tensor(x.data.copy(), requires_grad=True)
    y = GELUFunction.apply(x)
    np.testing.assert_array_equal(y.data, gelu(x2).data)
    np.testing.assert_array_equal(y.data, GELU()(x2).data)
    g = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    y.backward(g)
    GELUTanhFunction.apply(x2).backward(g)
    np.testing.assert_array_equal(x.grad, x2.grad)


@pytest.mark.parametrize("dtype, rtol", [(np.float32, 2e-6), (np.float64, 1e-12)])
def test_gelufunction_forward_and_backward_match_float64_at_large_magnitudes(dtype, rtol):
    x = Tensor(LARGE, requires_grad=True, dtype=dtype)
    want_y, want_d = _gelu64(LARGE)
    g = np.linspace(-2.0, 2.0, LARGE.size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or invalid-value warning anywhere
        y = GELUFunction.apply(x)
        y.backward(g.astype(dtype))
    np.testing.assert_allclose(y.data, want_y, rtol=rtol, atol=1e-30)
    np.testing.assert_allclose(x.grad, g * want_d, rtol=rtol, atol=1e-30)


def test_gelufunction_node_form_returns_a_gradient_tuple_without_warnings():
    for scale in (10.0, 200.0, 1000.0, 1e4):
        x = Tensor(np.array([-scale, scale]), requires_grad=True)
        node = GELUFunction(x)
        assert node.inputs == (x,)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            grads = node.backward(np.array([1.0, 1.0]))
        assert type(grads) is tuple and len(grads) == 1
        np.testing.assert_allclose(grads[0], _gelu64([-scale, scale])[1], rtol=2e-6, atol=1e-30)
        assert grads[0][0] == pytest.approx(0.0, abs=1e-6) and grads[0][1] == pytest.approx(1.0, abs=1e-6)
    g = np.array([0.5, -2.0, 3.0])
    a = np.array([-1.0, 0.25, 2.0])
    np.testing.assert_allclose(GELUFunction(a).backward(g)[0], g * _gelu64(a)[1], rtol=2e-6)  # array input
    assert x.grad is None  # the node form computes a gradient and stores none
