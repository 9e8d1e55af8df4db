"""compile_graph backward: the fused adjoint program against finite differences (float64) and
against tinytorch's eager autograd, on every executor; broadcast inputs (ACCUMULATE
outputs), what the tape node saves, and Tensor calls with several outputs."""
import numpy as np
import pytest

from tinytorch import _native
from tinytorch.core.acceleration import last_path
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import compile_graph

from test_compile import EXECUTORS, _skip_unless
from test_compile import assert_path as assert_forward_path

RNG = np.random.default_rng(1102)


@pytest.fixture(params=EXECUTORS)
def executor(request, monkeypatch):
    _skip_unless(request.param)
    monkeypatch.setenv("TINYTORCH_FUSION", request.param)
    return request.param


def assert_path(executor, graph=None):
    """The backward ran on ``executor``; with "compiled", a runtime whose C generator refuses
    ACCUMULATE outputs (a broadcast input's gradient) runs them on the interpreter, and the
    reason says so."""
    if executor == "compiled" and graph is not None and last_path().startswith("fusion:interp:"):
        assert any(graph._current().accumulate) and "generated C failed" in graph._current().reason
    else:
        assert_forward_path(executor)


def fused_grads(fn, arrays, weights):
    """Gradients of sum(weights * fn(*arrays)) through the compiled graph's backward."""
    g = compile_graph(fn, *arrays)
    tensors = [Tensor(a, requires_grad=True, dtype=a.dtype) for a in arrays]
    out = g(*tensors)
    (out * Tensor(weights, dtype=weights.dtype)).sum().backward()
    return [t.grad for t in tensors], g


def finite_differences(fn, arrays, weights, eps=1e-6):
    g = compile_graph(fn, *arrays)
    grads = []
    for k, a in enumerate(arrays):
        grad = np.zeros_like(a)
        flat = grad.reshape(-1)
        for j in range(a.size):
            up = [x.copy() for x in arrays]
            down = [x.copy() for x in arrays]
            up[k].reshape(-1)[j] += eps
            down[k].reshape(-1)[j] -= eps
            flat[j] = ((g(*up) * weights).sum() - (g(*down) * weights).sum()) / (2 * eps)
        grads.append(grad)
    return grads


def layer_norm(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / (var + 1e-5).sqrt() * gamma + beta


CASES = {
    "guide": (lambda x, b, s: (x + b) * s, [(4, 7), (7,), ()]),
    "unary_chain": (lambda x, b: ((x * b).tanh() + x.sigmoid()).exp() - (x * x + 1).log(), [(3, 5), (5,)]),
    "gelu_relu": (lambda x, b: (x + b).gelu() * (x - b).relu() + x.erf(), [(5, 6), (1, 6)]),
    "div_pow": (lambda x, b: x / (b * b + 1) + (x * x + 0.5) ** 1.5 + x.abs() ** 3, [(2, 3, 4), (3, 1)]),
    "rsqrt_sqrt": (lambda x, b: (x * x + 1).rsqrt() + (b * b + 2).sqrt() * x, [(4, 4), (4,)]),
    "max_min_where": (lambda x, b: np.maximum(x, b) - np.minimum(x * 2, b) + np.where(x > b, x * b, -x),
                      [(6, 5), (5,)]),
    "pow_tensor": (lambda x, b: (x * x + 1) ** (b * 0.5), [(3, 4), (4,)]),
    "softmax": (lambda x: x.softmax(), [(3, 7)]),
    "log_softmax": (lambda x: x.log_softmax(), [(2, 5)]),
    "layer_norm": (layer_norm, [(3, 8), (8,), (8,)]),
    "row_max": (lambda x, c: x * x.max(axis=-1, keepdims=True) + (x * c).sum(axis=-1, keepdims=True), [(4, 6), (4, 1)]),
    "row_stats_dropped": (lambda x: x.mean(axis=-1) * x.sum(axis=-1), [(5, 3)]),
    "prime_cols": (lambda x, b: (x * b).tanh().sum(axis=-1, keepdims=True) * x, [(2, 13), (13,)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_finite_differences(executor, name):
    fn, shapes = CASES[name]
    arrays = [RNG.uniform(-1.2, 1.2, s) for s in shapes]
    if name == "max_min_where":  # keep away from the kinks, where differences are meaningless
        arrays[0] = arrays[0] + np.sign(arrays[0] - arrays[1]) * 0.05
    out_shape = compile_graph(fn, *arrays)(*arrays).shape
    weights = RNG.standard_normal(out_shape)
    got, graph = fused_grads(fn, arrays, weights)
    assert_path(executor, graph)
    want = finite_differences(fn, arrays, weights)
    tol = 1e-6
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == arrays[k].shape
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol, err_msg=f"{name}: input {k}")


EAGER = {
    "guide": (lambda x, b, s: (x + b) * s, [(4, 7), (7,), ()]),
    "chain": (lambda x, b: ((x * b).tanh() + x.sigmoid()).exp() - (x * x + 1).log() + x.relu(), [(3, 5), (5,)]),
    "abs_div": (lambda x, b: x.abs() / (b * b + 1) - x ** 3, [(2, 3, 4), (3, 1)]),
    "softmax": (lambda x: x.softmax(), [(3, 7)]),
    "log_softmax": (lambda x: x.log_softmax(), [(4, 5)]),
    "layer_norm": (layer_norm, [(3, 8), (8,), (8,)]),
    "max_ties": (lambda x: x.max(axis=-1, keepdims=True) * x, [(4, 6)]),
    "clip": (lambda x: x.clip(-0.3, 0.4) * x, [(5, 5)]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(EAGER))
def test_gradients_match_eager_autograd(executor, name, dtype):
    fn, shapes = EAGER[name]
    arrays = [RNG.uniform(-1.5, 1.5, s).astype(dtype) for s in shapes]
    if name == "max_ties":
        arrays[0][:, 2] = arrays[0][:, 4] = 2.0  # ties split evenly, like the eager Max
    weights = RNG.standard_normal(compile_graph(fn, *arrays)(*arrays).shape).astype(dtype)
    got, graph = fused_grads(fn, arrays, weights)
    assert_path(executor, graph)
    eager = [Tensor(a, requires_grad=True, dtype=dtype) for a in arrays]
    out = fn(*eager)
    np.testing.assert_allclose(compile_graph(fn, *arrays)(*arrays), out.data,
                               rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6 if dtype == np.float32 else 1e-12)
    (out * Tensor(weights, dtype=dtype)).sum().backward()
    for k, (a, t) in enumerate(zip(got, eager)):
        assert a.dtype == dtype
        tol = 2e-5 if dtype == np.float32 else 1e-10
        np.testing.assert_allclose(a, t.grad, rtol=tol, atol=tol, err_msg=f"{name}: input {k}")


def test_casts_pass_gradients_in_each_dtype(executor):
    x = RNG.standard_normal((3, 3))
    b = RNG.standard_normal(3).astype(np.float32)
    weights = RNG.standard_normal((3, 3))
    got, graph = fused_grads(lambda x, b: (x.astype(np.float32) * 2 + b).astype(np.float64) * x, [x, b], weights)
    assert_path(executor, graph)
    u = (x.astype(np.float32) * 2 + b).astype(np.float64)
    assert got[0].dtype == np.float64 and got[1].dtype == np.float32
    np.testing.assert_allclose(got[0], weights * u + (2 * weights * x).astype(np.float32), rtol=1e-6)
    np.testing.assert_allclose(got[1], (weights * x).sum(axis=0), rtol=1e-5)


def test_broadcast_inputs_accumulate_over_their_broadcast_axes(executor):
    x = RNG.standard_normal((6, 1, 5))
    col = RNG.standard_normal((4, 1))
    row = RNG.standard_normal((5,))
    s = np.array(0.7)
    fn = lambda x, c, r, s: (x * c + r) * s  # noqa: E731
    weights = RNG.standard_normal((6, 4, 5))
    got, graph = fused_grads(fn, [x, col, row, s], weights)
    assert_path(executor, graph)
    u = x * col + row
    np.testing.assert_allclose(got[0], (weights * col * s).sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(got[1], (weights * x * s).sum(axis=(0, 2))[:, None], rtol=1e-12)
    np.testing.assert_allclose(got[2], (weights * s).sum(axis=(0, 1)), rtol=1e-12)
    np.testing.assert_allclose(got[3], (weights * u).sum(), rtol=1e-12)
    assert got[3].shape == ()


def test_the_tape_node_keeps_only_the_inputs_the_adjoint_reads():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    cases = {(lambda x, b: x + b): set(), (lambda x, b: np.exp(x) + b): {0}, (lambda x, b: x * b): {0, 1}}
    for fn, want in cases.items():
        out = compile_graph(fn, x, b)(Tensor(x, requires_grad=True), Tensor(b, requires_grad=True))
        assert set(out.grad_fn.saved) == want
        out.sum().backward()
    # only b needs a gradient: x * b saves x alone
    out = compile_graph(lambda x, b: x * b, x, b)(Tensor(x), Tensor(b, requires_grad=True))
    assert set(out.grad_fn.saved) == {0}


def test_numbers_and_untracked_inputs_get_no_gradient(executor):
    x = RNG.standard_normal((2, 3))
    g = compile_graph(lambda x, s, y: x * s + y, x, 2.0, x)
    tx, ty = Tensor(x, requires_grad=True, dtype=np.float64), Tensor(x, dtype=np.float64)
    out = g(tx, 2.0, ty)
    out.sum().backward()
    np.testing.assert_allclose(tx.grad, np.full((2, 3), 2.0))
    assert ty.grad is None
    assert_path(executor)


def test_gradient_independent_of_an_input_is_zero(executor):
    x = RNG.standard_normal((2, 3))
    g = compile_graph(lambda x, y: x * 2 + y * 0.0 + (y > 10), x, x)
    tx, ty = Tensor(x, requires_grad=True, dtype=np.float64), Tensor(x, requires_grad=True, dtype=np.float64)
    g(tx, ty).sum().backward()
    np.testing.assert_allclose(tx.grad, 2.0)
    np.testing.assert_array_equal(ty.grad, 0.0)


def test_tensor_calls_with_several_outputs(executor):
    x = RNG.standard_normal((3, 4))
    g = compile_graph(lambda x: (x * 2, x.exp()), x)
    t = Tensor(x, requires_grad=True, dtype=np.float64)
    a, b = g(t)
    (a.sum() + b.sum()).backward()
    np.testing.assert_allclose(t.grad, 2 + np.exp(x), rtol=1e-12)
    assert_path(executor)


def test_backward_source_is_a_fused_program():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    g = compile_graph(lambda x, b: (x + b).gelu(), x, x[0])
    text = g.backward_source()
    assert isinstance(text, str) and text
    same_shape = compile_graph(lambda x, b: (x * b).gelu(), x, x)
    if _native.has_fusion():
        assert "tt_fused_kernel" in same_shape.backward_source()
