"""Upstream TinyTorch course code, second round (#31): the Tensor methods upstream's modules
10-19 use (``contiguous``, ``_grad_fn``, integer masks in ``masked_fill``), checked against
NumPy and the gradients of the plain operations."""
import numpy as np
import pytest

from tinytorch.core.ops import Contiguous
from tinytorch.core.tensor import Tensor


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (7, 2)])
def test_contiguous_copies_strided_data_and_passes_the_gradient(shape):
    rng = np.random.default_rng(0)
    a = Tensor(rng.standard_normal(shape), requires_grad=True)
    assert a.contiguous() is a  # already C-contiguous: the tensor itself
    t = a.transpose(0, 1)
    c = t.contiguous()
    if t.data.flags.c_contiguous:  # a transposed (1, 1) is still contiguous
        assert c is t
    else:
        assert c.data.flags.c_contiguous and isinstance(c.grad_fn, Contiguous)
    np.testing.assert_array_equal(c.data, a.data.T)
    w = rng.standard_normal(shape[::-1]).astype(np.float32)
    (c * Tensor(w)).sum().backward()
    np.testing.assert_array_equal(a.grad, w.T)  # d/da sum(a.T * w) = w.T


def test_grad_fn_under_upstreams_name():
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    assert a._grad_fn is None and b._grad_fn is b.grad_fn and b._grad_fn is not None


def test_masked_fill_takes_integer_zero_one_masks():
    a = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    ints = np.array([[1, 0, 1], [0, 0, 1]])
    out = a.masked_fill(Tensor(ints), -1.0)
    np.testing.assert_array_equal(out.data, a.masked_fill(ints.astype(bool), -1.0).data)
    out.sum().backward()
    np.testing.assert_array_equal(a.grad, 1 - ints)
    np.testing.assert_array_equal(a.masked_fill(np.array([1, 0, 0], np.uint8), 9.0).data[:, 0], [9.0, 9.0])
    with pytest.raises(ValueError, match="only 0 and 1"):
        a.masked_fill(np.array([[2, 0, 0], [0, 0, 0]]), 0.0)
    with pytest.raises(TypeError, match="bool"):
        a.masked_fill(np.ones((2, 3)), 0.0)  # a float mask stays refused
