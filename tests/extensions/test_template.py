"""The template extension (scaled_matmul) against float64 NumPy, through the contract checker;
its back end (backends/template/: the registry's "scaled_matmul" op) on its own, as the one test
file a new back end brings (docs/architecture.md, "How to add a back end"); and the checker
itself, shown to fail on broken extensions."""
import numpy as np
import pytest

from contract import (check_contract, check_gradcheck, check_ndarray_in_ndarray_out,
                      check_path_report, check_tensor_in_tensor_out, run_with_grads)
from tinytorch import backends, native
from tinytorch.core.autograd import Function
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import template
from tinytorch.core.acceleration import use_native
from tinytorch.extensions.template import scaled_matmul


def _numpy_only():
    return use_native(False)

RNG = np.random.default_rng(20261130)


def _ref(alpha):
    def reference(a, b):
        a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
        return alpha * (a64.reshape(int(np.prod(a64.shape[:-1])), a64.shape[-1]) @ b64).reshape(a64.shape[:-1] + (b64.shape[1],))
    return reference


SHAPES = [((7, 13), (13, 5)), ((1, 1), (1, 1)), ((3, 2, 11), (11, 17)), ((0, 4), (4, 3)),
          ((5, 0), (0, 3)), ((4,), (4, 6)), ((2, 3), (3, 0))]


@pytest.mark.parametrize("shape_a,shape_b", SHAPES)
@pytest.mark.parametrize("alpha", [1.0, -0.125, 3.0])
def test_contract_holds(shape_a, shape_b, alpha):
    a = RNG.standard_normal(shape_a).astype(np.float32)
    b = RNG.standard_normal(shape_b).astype(np.float32)
    fn = lambda x, y: scaled_matmul(x, y, alpha)  # noqa: E731
    small = [RNG.standard_normal(s[:-1][:1] + s[-1:] if len(s) > 1 else s) for s in (shape_a,)]
    small.append(RNG.standard_normal((small[0].shape[-1], min(shape_b[1], 4))))
    check_contract(fn, [a, b], reference=_ref(alpha), disable_native=_numpy_only,
                   path_report=template.last_path, native_expected=native.available(),
                   atol=1e-4, rtol=1e-4, gradcheck_inputs=small)


def test_gradients_match_float64_formula():
    a = RNG.standard_normal((6, 9)).astype(np.float32)
    b = RNG.standard_normal((9, 4)).astype(np.float32)
    out, (ga, gb), g = run_with_grads(lambda x, y: scaled_matmul(x, y, 0.5), [a, b])
    g64 = g.astype(np.float64)
    np.testing.assert_allclose(ga, 0.5 * g64 @ b.T.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb, 0.5 * a.T.astype(np.float64) @ g64, rtol=1e-5, atol=1e-5)


def test_non_contiguous_views():
    a_full = RNG.standard_normal((9, 14)).astype(np.float32)
    b_full = RNG.standard_normal((10, 14)).astype(np.float32)
    a, b = a_full[::2, 1::2], b_full.T[::2, :7]  # strided, and a transposed view
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    assert a.shape[-1] == b.shape[0]
    for run in (lambda: scaled_matmul(a, b, 2.0), lambda: scaled_matmul(Tensor(a), Tensor(b), 2.0).data):
        np.testing.assert_allclose(run(), _ref(2.0)(a, b), rtol=1e-5, atol=1e-5)
        with use_native(False):
            np.testing.assert_allclose(run(), _ref(2.0)(a, b), rtol=1e-5, atol=1e-5)


def test_mixed_tensor_and_array_gives_tensor():
    a = Tensor(RNG.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    b = RNG.standard_normal((4, 2)).astype(np.float32)
    out = scaled_matmul(a, b, 2.0)
    assert isinstance(out, Tensor) and out.requires_grad
    out.sum().backward()
    np.testing.assert_allclose(a.grad, 2.0 * np.ones((3, 2)) @ b.T, rtol=1e-5)


def test_matches_torch_when_installed():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((5, 8)).astype(np.float32)
    b = RNG.standard_normal((8, 3)).astype(np.float32)
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (0.25 * ta @ tb).sum().backward()
    x, y = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = scaled_matmul(x, y, 0.25)
    out.sum().backward()
    np.testing.assert_allclose(out.data, (0.25 * ta @ tb).detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(x.grad, ta.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y.grad, tb.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("a_shape,b_shape,match", [((3, 4), (5, 2), r"\(3, 4\).*\(5, 2\)"),
                                                   ((3, 4), (4, 2, 1), r"\(4, 2, 1\)"),
                                                   ((), (1, 1), r"\(\)")])
def test_bad_shapes_raise_with_shapes(a_shape, b_shape, match):
    with pytest.raises(ValueError, match=match):
        scaled_matmul(np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32))


def test_bad_types_raise():
    with pytest.raises(TypeError, match="floating"):
        scaled_matmul(np.zeros((2, 2), np.int32), np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="alpha"):
        scaled_matmul(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), alpha=np.ones(2))
    with pytest.raises(TypeError, match="list"):
        scaled_matmul([[1.0]], np.zeros((1, 1), np.float32))


def test_path_report_names_fallback():
    with use_native(False):
        scaled_matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
        assert template.last_path() == "numpy"
    # float64 never takes the float32 native kernel
    scaled_matmul(np.ones((2, 2)), np.ones((2, 2)))
    assert template.last_path() == "numpy"


# ----------------------------------------------------------------------------- the back end

needs_runtime = pytest.mark.skipif(not native.available(), reason="needs the runtime")


def _scaled_ref(a, b, alpha, trans_a, trans_b):
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return alpha * ((x.T if trans_a else x) @ (y.T if trans_b else y))


# (M, K, N): empty, one, odd and prime sizes, and one above the runtime's blocking
GEMM_SIZES = [(0, 3, 2), (3, 0, 2), (2, 3, 0), (1, 1, 1), (7, 13, 5), (31, 17, 29), (130, 67, 97)]


@needs_runtime
@pytest.mark.parametrize("m,k,n", GEMM_SIZES)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (True, False), (False, True), (True, True)])
def test_back_end_matches_float64_and_names_the_kernel(m, k, n, trans_a, trans_b):
    a = RNG.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = RNG.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    backends.record_path("none")
    out = backends.template.scaled_gemm(a, b, -0.75, trans_a, trans_b)
    assert out.dtype == np.float32 and out.shape == (m, n)
    np.testing.assert_allclose(out, _scaled_ref(a, b, -0.75, trans_a, trans_b), rtol=1e-4, atol=1e-4)
    assert backends.last_path() == "native:sgemm:" + native.isa() or \
        backends.last_path().startswith("native:sgemm:" + native.isa() + ":"), backends.last_path()


@needs_runtime
def test_back_end_takes_strided_views():
    a = RNG.standard_normal((11, 26)).astype(np.float32)[::2, 1::2]   # (6, 13), strided
    b = RNG.standard_normal((13, 20)).astype(np.float32).T[::3]       # (7, 13), a transposed view
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    out = backends.template.scaled_gemm(a, b, 2.0, False, True)
    np.testing.assert_allclose(out, _scaled_ref(a, b, 2.0, False, True), rtol=1e-5, atol=1e-5)


def test_back_end_declines_what_it_does_not_serve():
    f32, f64 = np.ones((2, 3), np.float32), np.ones((3, 2))
    assert backends.template.scaled_gemm(f32, f64, 1.0, False, False) is NotImplemented
    assert backends.template.scaled_gemm(f64.T, f32.T, 1.0, False, False) is NotImplemented
    assert backends.template.scaled_gemm(f32.astype(np.float16), f32.T, 1.0, False, False) is NotImplemented


def test_back_end_is_registered_with_its_probe():
    entry = {b.name: b for b in backends.registered()}["template"]
    assert set(entry.ops) == {"scaled_matmul"} and entry.native
    usable, detail = backends.status("template")
    assert usable == native.available() and detail
    assert "template" in backends.all_backends()


@needs_runtime
def test_the_switch_keeps_the_back_end_out():
    assert backends.template.scaled_gemm in backends.routes("scaled_matmul")
    with use_native(False):
        assert backends.routes("scaled_matmul") == ()
        scaled_matmul(np.ones((3, 3), np.float32), np.ones((3, 3), np.float32), 2.0)
        assert template.last_path() == "numpy"
    scaled_matmul(np.ones((3, 3), np.float32), np.ones((3, 3), np.float32), 2.0)
    assert template.last_path().startswith("native:sgemm")


def test_extension_goes_through_the_registry():
    """A higher-priority back end registered for the op takes every call of the extension,
    forward and backward; one that declines hands the call on."""
    calls = []

    def spy(a2, b2, alpha, trans_a, trans_b):
        calls.append((a2.shape, b2.shape, alpha, trans_a, trans_b))
        backends.record_path("spy")
        return _scaled_ref(a2, b2, alpha, trans_a, trans_b).astype(np.result_type(a2, b2))

    backends.register("spy", probe=lambda: (True, "test"), priority=10_000, native=False,
                      ops={"scaled_matmul": spy})
    try:
        a = Tensor(RNG.standard_normal((2, 3, 4)).astype(np.float32), requires_grad=True)
        b = Tensor(RNG.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
        out = scaled_matmul(a, b, 0.5)
        assert template.last_path() == "spy"
        out.sum().backward()
        assert calls == [((6, 4), (4, 5), 0.5, False, False), ((6, 5), (4, 5), 0.5, False, True),
                         ((6, 4), (6, 5), 0.5, True, False)]
        np.testing.assert_allclose(a.grad, 0.5 * np.ones((2, 3, 5)) @ b.data.T, rtol=1e-5)
    finally:
        backends.unregister("spy")
    backends.register("spy", probe=lambda: (True, "test"), priority=10_000, native=False,
                      ops={"scaled_matmul": lambda *args: NotImplemented})
    try:
        got = scaled_matmul(np.ones((2, 2)), np.ones((2, 2)), 3.0)
        np.testing.assert_allclose(got, np.full((2, 2), 6.0))
        assert template.last_path() == "numpy"
    finally:
        backends.unregister("spy")


# ----------------------------------------------------------------------------- the checker fails

class _WrongBackward(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return a @ b

    def backward(self, g):
        return g @ self.b.T, 2.0 * self.a.T @ g  # factor 2 is wrong


def test_checker_catches_wrong_backward():
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
    with pytest.raises(AssertionError, match="input 1"):
        check_gradcheck(lambda x, y: _WrongBackward.apply(x, y), [a, b])


def test_checker_catches_tensor_for_ndarray():
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((4, 2)).astype(np.float32)
    with pytest.raises(AssertionError, match="ndarray"):
        check_ndarray_in_ndarray_out(lambda x, y: Tensor(x) @ Tensor(y), [a, b])


def test_checker_catches_lost_graph():
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((4, 2)).astype(np.float32)
    with pytest.raises(AssertionError, match="require grad"):
        check_tensor_in_tensor_out(lambda x, y: Tensor(x.data @ y.data), [a, b])


def test_checker_catches_wrong_path_report():
    a, b = np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)
    with pytest.raises(AssertionError, match="disabled"):
        check_path_report(lambda x, y: scaled_matmul(x, y), [a, b], lambda: "native:fake",
                          disable_native=_numpy_only)
