"""The autograd contract: Function, the tape walk, grad mode, retain_graph, gradcheck."""
import numpy as np
import pytest

from parity import assert_close, check_parity
from tinytorch.core import autograd
from tinytorch.core.autograd import Function, gradcheck, is_grad_enabled, no_grad, enable_grad
from tinytorch.core.tensor import Tensor
from tinytorch.core.tensor import Function as FunctionFromTensor


class ScaledSquare(Function):
    """x**2 * scale with a non-Tensor argument and a keyword parameter."""

    def forward(self, x, scale, *, offset=0.0):
        self.x, self.scale = x, scale
        return x * x * scale + offset

    def backward(self, grad_output):
        return 2.0 * self.x * self.scale * grad_output, None


def test_function_is_importable_from_tensor_module():
    assert FunctionFromTensor is Function


def test_custom_function_with_passthrough_args(rng):
    x = rng.standard_normal((3, 4))
    check_parity(lambda t: ScaledSquare.apply(t, 1.5, offset=2.0), lambda a: a * a * 1.5 + 2.0, [x], rng=rng)


def test_custom_function_gradient_is_unbroadcast(rng):
    class AddRow(Function):
        def forward(self, a, b):
            return a + b

        def backward(self, g):
            return g, g  # both in the output's shape; the engine reduces b's

    check_parity(lambda a, b: AddRow.apply(a, b), lambda a, b: a + b,
                 [rng.standard_normal((4, 3)), rng.standard_normal((1, 3))], rng=rng)


def test_backward_returning_wrong_count_or_shape_raises():
    class TooMany(Function):
        def forward(self, a):
            return a

        def backward(self, g):
            return g, g

    class WrongShape(Function):
        def forward(self, a):
            return a

        def backward(self, g):
            return np.ones((5, 5))

    x = Tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ValueError, match="2 gradients for 1 inputs"):
        TooMany.apply(x).sum().backward()
    with pytest.raises(ValueError, match=r"\(5, 5\).*\(2, 3\)"):
        WrongShape.apply(x).sum().backward()


def test_needs_input_grad_is_visible_in_forward():
    seen = []

    class Probe(Function):
        def forward(self, a, b):
            seen.append(self.needs_input_grad)
            return a * b

        def backward(self, g):
            return g, g

    a = Tensor(np.ones(2), requires_grad=True)
    b = Tensor(np.ones(2))
    Probe.apply(a, b)
    with no_grad():
        Probe.apply(a, b)
    assert seen == [(True, False), (False, False)]


def test_diamond_graph_accumulates(rng):
    # x feeds two paths that join again: dy/dx = 2*3x^2... checked against the closed form
    x0 = rng.standard_normal((4,))
    x = Tensor(x0, requires_grad=True, dtype=np.float64)
    a = x * x
    b = a * x          # x^3
    c = a + b + a      # 2x^2 + x^3
    c.sum().backward()
    assert_close(x.grad, 4 * x0 + 3 * x0 ** 2, 1e-12, 1e-12, "diamond")


def test_same_tensor_twice_and_leaf_grads_do_not_alias():
    a = Tensor(np.ones(3), requires_grad=True)
    b = Tensor(np.ones(3), requires_grad=True)
    (a + b).sum().backward()
    a.grad *= 10.0  # an in-place update of one leaf's grad (clipping does this) ...
    assert_close(b.grad, np.ones(3), 0, 0, "b.grad")  # ... must not touch another's
    c = Tensor(np.full(3, 2.0), requires_grad=True)
    (c * c + c).sum().backward()
    assert_close(c.grad, np.full(3, 5.0), 0, 0, "c used three times")


def test_gradients_accumulate_across_backward_calls():
    w = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (w * 3.0).sum().backward()
    (w * w).sum().backward()
    assert_close(w.grad, [3 + 2, 3 + 4], 0, 0, "accumulated")


def test_backward_twice_needs_retain_graph():
    x = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert_close(x.grad, [4.0, 8.0], 0, 0, "two backwards")
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        y.backward()


def test_release_frees_saved_arrays():
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    y = x.exp()
    ctx = y.grad_fn
    assert "out" in ctx.__dict__
    y.sum().backward()
    assert not ctx.__dict__


def test_non_scalar_backward_needs_gradient():
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 2
    with pytest.raises(ValueError, match=r"scalar.*\(2, 3\)"):
        y.backward()
    with pytest.raises(ValueError, match=r"\(3,\).*\(2, 3\)"):
        y.backward(np.ones(3))
    y.backward(np.full((2, 3), 0.5))
    assert_close(x.grad, np.ones((2, 3)), 0, 0, "explicit gradient")


def test_backward_without_graph_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor(np.ones(2)).sum().backward()


def test_no_grad_and_is_grad_enabled():
    x = Tensor(np.ones(2), requires_grad=True)
    assert is_grad_enabled()
    with no_grad():
        assert not is_grad_enabled()
        y = x * 2
        with enable_grad():
            z = x * 2
        assert not is_grad_enabled()
    assert is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad

    @no_grad()
    def infer(t):
        return t * 3
    assert not infer(x).requires_grad and is_grad_enabled()


def test_no_grad_restored_after_exception():
    with pytest.raises(KeyError):
        with no_grad():
            raise KeyError("boom")
    assert is_grad_enabled()


def test_frozen_inputs_get_no_grad(rng):
    w = Tensor(rng.standard_normal((3, 2)), requires_grad=False)
    x = Tensor(rng.standard_normal((4, 3)), requires_grad=True)
    (x @ w).sum().backward()
    assert w.grad is None and x.grad is not None


def test_deep_chain_has_no_recursion_limit():
    x = Tensor(np.array([1.0]), requires_grad=True, dtype=np.float64)
    y = x
    for _ in range(5000):
        y = y * 1.0001
    y.sum().backward()
    assert_close(x.grad, [1.0001 ** 5000], 0, 1e-10, "deep chain")


def test_topological_order_visits_each_node_once():
    calls = []

    class Count(Function):
        def forward(self, a):
            return a.copy()

        def backward(self, g):
            calls.append(1)
            return g

    x = Tensor(np.ones(2), requires_grad=True)
    h = Count.apply(x)
    (h + h + h * h).sum().backward()
    assert len(calls) == 1  # summed before the single call
    assert_close(x.grad, [4.0, 4.0], 0, 0, "grad through shared node")


def test_gradcheck_passes_and_catches_a_wrong_backward(rng):
    class Good(Function):
        def forward(self, a):
            self.a = a
            return np.sin(a)

        def backward(self, g):
            return g * np.cos(self.a)

    class Wrong(Good):
        def backward(self, g):
            return g * np.cos(self.a) * 1.01

    x = Tensor(rng.standard_normal((3, 2)), requires_grad=True)
    assert gradcheck(lambda t: Good.apply(t), x)
    with pytest.raises(AssertionError, match="input 0"):
        gradcheck(lambda t: Wrong.apply(t), x)
    assert gradcheck(lambda t: Wrong.apply(t), x, raise_exception=False) is False

    class NaNGrad(Good):
        def backward(self, g):
            return g * np.nan

    assert gradcheck(lambda t: NaNGrad.apply(t), x, raise_exception=False) is False


def test_gradcheck_only_checks_requires_grad_inputs(rng):
    a = Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    b = Tensor(rng.standard_normal((3, 2)))
    assert gradcheck(lambda x, y: (x @ y).exp(), a, b)
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda x: x.astype(np.float32), a)


def test_grad_is_cast_to_the_leaf_dtype():
    h = Tensor(np.ones(3, np.float16), requires_grad=True)
    f = Tensor(np.ones(3, np.float32), requires_grad=True)
    (h * f).sum().backward()  # result float32
    assert h.grad.dtype == np.float16 and f.grad.dtype == np.float32


def test_engine_module_api():
    assert callable(autograd.run_backward) and autograd.is_grad_enabled()


@pytest.mark.parametrize("build, want_x, want_y", [
    (lambda x, y: x, 2.0, None),                      # the root is the leaf
    (lambda x, y: x + y, 2.0, 2.0),                   # add passes the seed itself to both
    (lambda x, y: (x + y) * 1.0 + x, 4.0, 2.0),       # the seed reaches x by two paths
    (lambda x, y: x.reshape(5, 3), 2.0, None),        # a view of the seed reaches x
])
def test_backward_never_hands_the_callers_gradient_to_a_leaf(build, want_x, want_y):
    # the engine does not copy the caller's gradient up front; a leaf it reaches copies it,
    # so neither the caller's array nor any .grad changes when the other is written
    x = Tensor(np.arange(15.0, dtype=np.float32).reshape(3, 5), requires_grad=True)
    y = Tensor(np.ones((3, 5), np.float32), requires_grad=True)
    out = build(x, y)
    seed = np.full(out.shape, 2.0, out.data.dtype)  # the output's dtype: no conversion copy
    out.backward(seed)
    np.testing.assert_array_equal(seed, 2.0)  # read, never written
    grads = [t.grad for t in (x, y) if t.grad is not None]
    for g in grads:
        assert not np.shares_memory(g, seed)
        assert all(other is g or not np.shares_memory(g, other) for other in grads)
    np.testing.assert_array_equal(x.grad, np.full((3, 5), want_x))
    if want_y is None:
        assert y.grad is None
    else:
        np.testing.assert_array_equal(y.grad, np.full((3, 5), want_y))
    seed[...] = -7.0
    for g in grads:
        g *= 3.0
    np.testing.assert_array_equal(seed, -7.0)
    np.testing.assert_array_equal(x.grad, np.full((3, 5), 3 * want_x))
