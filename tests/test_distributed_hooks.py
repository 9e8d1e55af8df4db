"""The autograd engine's post-accumulate-grad hook (what DDP's overlap starts all-reduces from):
called once per backward per leaf, after the leaf's last contribution of that pass (a leaf used
twice sees the sum), before leaves nearer the input are reached, in registration order; the
handle removes it; only leaves that require grad accept one."""
import numpy as np
import pytest

from tinytorch.core import autograd
from tinytorch.core.tensor import Tensor


def _net():
    rng = np.random.default_rng(0)
    w1 = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w2 = Tensor(rng.standard_normal((4, 2)), requires_grad=True)
    x = Tensor(rng.standard_normal((5, 3)))
    return x, w1, w2


def test_hook_sees_the_final_gradient_once_and_before_earlier_layers():
    x, w1, w2 = _net()
    seen = []
    w2.register_post_accumulate_grad_hook(lambda t: seen.append(("w2", t.grad.copy(), w1.grad)))
    w1.register_post_accumulate_grad_hook(lambda t: seen.append(("w1", t.grad.copy(), None)))
    h = (x @ w1).relu()
    loss = (h @ w2).sum() + (h @ w2 * 0.5).sum()  # w2 used twice: its hook must see the sum
    loss.backward()
    assert [s[0] for s in seen] == ["w2", "w1"]
    assert np.array_equal(seen[0][1], w2.grad) and np.array_equal(seen[1][1], w1.grad)
    assert seen[0][2] is None  # w1 had no gradient yet when w2's was final: room to overlap
    np.testing.assert_allclose(w2.grad, 1.5 * h.data.sum(axis=0)[:, None] * np.ones((1, 2)))


def test_hook_sees_accumulated_grad_over_two_backwards_and_remove_stops_it():
    x, w1, w2 = _net()
    calls = []
    before = autograd._leaf_hooks
    handle = w1.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.copy()))
    ((x @ w1) @ w2).sum().backward()
    first = w1.grad.copy()
    ((x @ w1) @ w2).sum().backward()
    assert len(calls) == 2 and np.array_equal(calls[0], first)
    np.testing.assert_allclose(calls[1], 2 * first)
    handle.remove()
    handle.remove()  # a second remove does nothing
    ((x @ w1) @ w2).sum().backward()
    assert len(calls) == 2
    assert autograd._leaf_hooks == before  # the count the engine tests (0 = its hook-free path)


def test_hooks_run_in_registration_order():
    x, w1, w2 = _net()
    order = []
    w1.register_post_accumulate_grad_hook(lambda t: order.append(1))
    w1.register_post_accumulate_grad_hook(lambda t: order.append(2))
    ((x @ w1) @ w2).sum().backward()
    assert order == [1, 2]


def test_only_leaves_that_require_grad_take_a_hook():
    x, w1, _ = _net()
    with pytest.raises(ValueError, match="only a leaf tensor that requires grad"):
        x.register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(ValueError, match="only a leaf tensor"):
        (x @ w1).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(TypeError, match="hook must be callable"):
        w1.register_post_accumulate_grad_hook(3)
