"""compile_graph forward: every op and random graphs against float64 NumPy, on every executor.

Each parity test runs once per executor ("numpy", "interp", "compiled"; the native ones skip
when the runtime lacks tt_fusion_* or no C compiler works) and checks the reported path,
so a pass proves that executor ran. Shapes: broadcast, 0, 1, odd, prime, non-contiguous
views, NaN and inf.
"""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinytorch import _native
from tinytorch.core.acceleration import last_path, native_enabled, use_native
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import compile_graph
from tinytorch.extensions.compile import CompiledGraph, FusedSource, executor_choice
from tinytorch.backends.fusion.executors import compiler
from tinytorch.extensions.fusion.trace import UnsupportedOperation

RNG = np.random.default_rng(1101)
EXECUTORS = ["numpy", "interp", "compiled"]


def _skip_unless(executor):
    if executor != "numpy" and not _native.has_fusion():
        pytest.skip("the runtime library has no tt_fusion_* functions")
    if executor == "compiled" and compiler()[0] is None:
        pytest.skip(f"no C compiler: {compiler()[1]}")


@pytest.fixture(params=EXECUTORS)
def executor(request, monkeypatch):
    _skip_unless(request.param)
    monkeypatch.setenv("TINYTORCH_FUSION", request.param)
    return request.param


def assert_path(executor):
    path = last_path()
    if executor == "interp":
        assert path.startswith("fusion:interp:"), path
    else:
        assert path == f"fusion:{executor}", path


def close(got, want, dtype, loose=False):
    rtol, atol = (3e-5, 2e-6) if np.dtype(dtype) == np.float32 else (1e-11, 1e-13)
    if loose:  # the package's erf (the NumPy executor's) is a fit good to 1.2e-7
        rtol, atol = max(rtol, 3e-7), max(atol, 3e-7)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol, equal_nan=True)


def erf64(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def gelu64(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))


def sigmoid64(x):
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


# name: (traced function, float64 reference, input range)
UNARY = {
    "neg": (lambda x: -x, lambda x: -x, (-3, 3)),
    "abs": (lambda x: np.abs(x), np.abs, (-3, 3)),
    "exp": (lambda x: np.exp(x), np.exp, (-5, 5)),
    "log": (lambda x: np.log(x), np.log, (0.01, 5)),
    "sqrt": (lambda x: np.sqrt(x), np.sqrt, (0, 5)),
    "rsqrt": (lambda x: x.rsqrt(), lambda x: 1 / np.sqrt(x), (0.05, 5)),
    "tanh": (lambda x: np.tanh(x), np.tanh, (-6, 6)),
    "sigmoid": (lambda x: x.sigmoid(), sigmoid64, (-30, 30)),
    "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0), (-3, 3)),
    "gelu": (lambda x: x.gelu(), gelu64, (-6, 6)),
    "erf": (lambda x: x.erf(), erf64, (-3, 3)),
    "square": (lambda x: x ** 2, lambda x: x ** 2, (-3, 3)),
    "cube": (lambda x: x ** 3, lambda x: x ** 3, (-3, 3)),
    "pow_half": (lambda x: x ** 0.5, lambda x: x ** 0.5, (0, 4)),
    "reciprocal": (lambda x: np.reciprocal(x), lambda x: 1 / x, (0.1, 3)),
    "rdiv": (lambda x: 2.0 / x, lambda x: 2.0 / x, (0.1, 3)),
    "rsub": (lambda x: 1 - x, lambda x: 1 - x, (-3, 3)),
    "clip": (lambda x: x.clip(-0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), (-2, 2)),
    "np_clip": (lambda x: np.clip(x, -0.5, 0.7), lambda x: np.clip(x, -0.5, 0.7), (-2, 2)),
    "where": (lambda x: np.where(x > 0, x, 0.1 * x), lambda x: np.where(x > 0, x, 0.1 * x), (-2, 2)),
    "rpow": (lambda x: 2.0 ** x, lambda x: 2.0 ** x, (-3, 3)),
}

SHAPES = [(0,), (1,), (7,), (13, 17), (3, 1, 5), (2, 0, 3), (1, 1)]


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_ops_match_float64(executor, name, dtype):
    fn, ref, (lo, hi) = UNARY[name]
    for shape in SHAPES:
        x = RNG.uniform(lo, hi, shape).astype(dtype)
        g = compile_graph(fn, x)
        got = g(x)
        assert got.dtype == dtype and got.shape == shape
        close(got, ref(x.astype(np.float64)), dtype, loose=name == "erf")
        assert_path(executor)


BINARY = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
    "maximum": (np.maximum, np.maximum), "minimum": (np.minimum, np.minimum),
    "pow": (lambda a, b: np.abs(a) ** b, lambda a, b: np.abs(a) ** b),
}
BROADCASTS = [((7,), (7,)), ((13, 17), (17,)), ((3, 1, 5), (4, 5)), ((6, 5), ()), ((5, 1), (1, 7)),
              ((1,), (11,)), ((0, 3), (3,))]


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_ops_broadcast_and_match_float64(executor, name):
    fn, ref = BINARY[name]
    for sa, sb in BROADCASTS:
        a = (RNG.uniform(0.2, 2, sa) * RNG.choice([-1, 1], sa)).astype(np.float32)
        b = RNG.uniform(0.2, 2, sb).astype(np.float32)
        got = compile_graph(fn, a, b)(a, b)
        want = ref(a.astype(np.float64), b.astype(np.float64))
        assert got.shape == want.shape
        close(got, want, np.float32)
        assert_path(executor)


@pytest.mark.parametrize("op", ["<", "<=", ">", ">=", "==", "!="])
def test_comparisons_give_booleans_like_numpy(executor, op):
    a = RNG.integers(-2, 3, (9, 7)).astype(np.float64)
    b = RNG.integers(-2, 3, (7,)).astype(np.float64)
    fn = eval(f"lambda a, b: a {op} b")
    got = compile_graph(fn, a, b)(a, b)
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got, fn(a, b))
    mixed = compile_graph(lambda a, b: fn(a, b) * a + 1.0, a, b)(a, b)
    np.testing.assert_array_equal(mixed, fn(a, b) * a + 1.0)
    assert_path(executor)


def test_dtypes_promote_like_numpy_and_cast(executor):
    a32 = RNG.standard_normal((5, 3)).astype(np.float32)
    b64 = RNG.standard_normal((3,))
    got = compile_graph(lambda a, b: a * b + 1.5, a32, b64)(a32, b64)
    assert got.dtype == np.float64
    close(got, a32.astype(np.float64) * b64 + 1.5, np.float64)
    down = compile_graph(lambda a, b: (a * b).astype(np.float32), a32, b64)(a32, b64)
    assert down.dtype == np.float32
    close(down, (a32 * b64).astype(np.float32), np.float32)
    weak = compile_graph(lambda a: a * 3 + np.float32(2), a32)(a32)
    assert weak.dtype == np.float32
    strong = compile_graph(lambda a: a * np.float64(3), a32)(a32)
    assert strong.dtype == np.float64
    assert_path(executor)


@pytest.mark.parametrize("small", [(), (1,), (5, 1), (1, 7)])
def test_a_broadcast_float32_input_cast_to_float64(executor, small):
    full = RNG.standard_normal((5, 7))
    part = RNG.standard_normal(small).astype(np.float32)
    got = compile_graph(lambda a, b: a + b, full, part)(full, part)
    close(got, full + part.astype(np.float64), np.float64)
    assert_path(executor)


def test_non_contiguous_inputs(executor):
    base = RNG.standard_normal((9, 22)).astype(np.float32)
    views = [base[:, ::2], base.T, base[::-1, 3:16], base[::2, ::-3]]
    for v in views:
        bias = RNG.standard_normal(v.shape[-1]).astype(np.float32)
        g = compile_graph(lambda x, b: np.tanh(x * 2 + b) - x, v, bias)
        x64 = v.astype(np.float64)
        close(g(v, bias), np.tanh(x64 * 2 + bias) - x64, np.float32)
        bias_view = np.repeat(bias, 2)[::2]
        close(g(v, bias_view), np.tanh(x64 * 2 + bias) - x64, np.float32)
    assert_path(executor)


def test_nan_and_inf_propagate(executor):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 1e30, -1e30], np.float32)
    funcs = {
        "chain": (lambda x: (x + 1) * 2 - x / 3, lambda x: (x + 1) * 2 - x / 3),
        "maximum": (lambda x: np.maximum(x, 0.5), lambda x: np.maximum(x, 0.5)),
        "minimum": (lambda x: np.minimum(x, 0.5), lambda x: np.minimum(x, 0.5)),
        "relu": (lambda x: x.relu(), lambda x: np.maximum(x, 0)),
        "sigmoid": (lambda x: x.sigmoid(), sigmoid64),
        "tanh": (lambda x: np.tanh(x), np.tanh),
        "exp": (lambda x: np.exp(x), np.exp),
        "abs": (lambda x: np.abs(x), np.abs),
        "gelu": (lambda x: x.gelu(), lambda x: np.where(np.isneginf(x), -0.0, np.where(np.isposinf(x), np.inf, gelu64(x)))),
        "max_row": (lambda x: x.max(-1, keepdims=True), lambda x: np.max(x, -1, keepdims=True)),
        "sum_row": (lambda x: x.sum(-1), lambda x: np.sum(x, -1)),
    }
    with np.errstate(all="ignore"):
        for name, (fn, ref) in funcs.items():
            for arr in (x, x[1:], x[3:]):
                got = compile_graph(fn, arr)(arr)
                want = ref(arr.astype(np.float64)).astype(np.float32).astype(np.float64)
                np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=3e-5, atol=2e-6,
                                           equal_nan=True, err_msg=name)
    assert_path(executor)


ROWS = [(1, 1), (3, 1), (4, 7), (5, 13), (2, 3, 31), (1, 0), (0, 5), (6, 1024 + 3)]


@pytest.mark.parametrize("keepdims", [True, False])
def test_last_axis_reductions(executor, keepdims):
    for shape in ROWS:
        x = RNG.standard_normal(shape)
        for name in ("sum", "mean", "max"):
            if name == "max" and shape[-1] == 0:
                continue  # NumPy refuses an empty max
            fn = {"sum": lambda v: v.sum(axis=-1, keepdims=keepdims),
                  "mean": lambda v: v.mean(axis=-1, keepdims=keepdims),
                  "max": lambda v: v.max(axis=-1, keepdims=keepdims)}[name]
            ref = {"sum": np.sum, "mean": np.mean, "max": np.max}[name]
            with np.errstate(all="ignore"):
                want = ref(x, axis=-1, keepdims=keepdims)
            got = compile_graph(fn, x)(x)
            assert got.shape == want.shape, (name, shape)
            close(got, want, np.float64)
    assert_path(executor)


def softmax64(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layer_norm(x, gamma, beta):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * gamma + beta


@pytest.mark.parametrize("shape", [(1, 1), (4, 7), (3, 2, 13), (5, 257), (2, 1024)])
def test_softmax_and_layer_norm_rows(executor, shape):
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    gamma = RNG.standard_normal(shape[-1]).astype(np.float32)
    beta = RNG.standard_normal(shape[-1]).astype(np.float32)
    x64 = x.astype(np.float64)
    close(compile_graph(lambda v: v.softmax(), x)(x), softmax64(x64), np.float32)
    close(compile_graph(lambda v: v.log_softmax(), x)(x), np.log(softmax64(x64)), np.float32)
    ln = compile_graph(layer_norm, x, gamma, beta)(x, gamma, beta)
    np.testing.assert_allclose(ln, layer_norm(x64, gamma.astype(np.float64), beta.astype(np.float64)),
                               rtol=1e-4, atol=1e-4)
    var = compile_graph(lambda v: v.var(axis=-1, keepdims=True, ddof=1), x)(x)
    close(var, x64.var(axis=-1, keepdims=True, ddof=1) if shape[-1] > 1 else np.full(shape[:-1] + (1,), np.nan),
          np.float32)
    assert_path(executor)


def test_row_values_broadcast_inputs_and_outputs_smaller_than_the_domain(executor):
    x = RNG.standard_normal((4, 6))
    col = RNG.standard_normal((4, 1))
    b = RNG.standard_normal(6)
    g = compile_graph(lambda x, c, b: (x * c + b, b * 2.0, c.sum(-1), x.sum(-1) + c.max(-1)), x, col, b)
    outs = g(x, col, b)
    wants = (x * col + b, b * 2.0, col.sum(-1), x.sum(-1) + col.max(-1))
    for got, want in zip(outs, wants):
        assert got.shape == want.shape
        close(got, want, np.float64)
    assert_path(executor)


def test_multiple_outputs_and_zero_dim_inputs(executor):
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    s = np.array(1.5, np.float32)
    y, z = compile_graph(lambda x, s: (x * s, np.exp(x) - s), x, s)(x, s)
    close(y, x.astype(np.float64) * 1.5, np.float32)
    close(z, np.exp(x.astype(np.float64)) - 1.5, np.float32)
    both = compile_graph(lambda a, b: a * b + 1.0, s, s)(s, s)
    assert both.shape == () and abs(float(both) - 3.25) < 1e-6
    assert_path(executor)


# ------------------------------------------------------------------ random graphs

_SAFE_UNARY = [("tanh", np.tanh, np.tanh), ("sigmoid", lambda v: v.sigmoid(), sigmoid64),
               ("relu", lambda v: v.relu(), lambda v: np.maximum(v, 0)), ("neg", np.negative, np.negative),
               ("abs", np.abs, np.abs), ("gelu", lambda v: v.gelu(), gelu64),
               ("sq", lambda v: v * v, lambda v: v * v)]
_SAFE_BINARY = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("max", np.maximum),
                ("min", np.minimum)]


@st.composite
def expressions(draw, depth=4):
    """A random expression over inputs 0..2: nested tuples."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return ("in", draw(st.integers(0, 2)))
    kind = draw(st.sampled_from(["un", "bin", "bin", "const"]))
    if kind == "un":
        return ("un", draw(st.integers(0, len(_SAFE_UNARY) - 1)), draw(expressions(depth=depth - 1)))
    if kind == "const":
        return ("mulc", draw(st.floats(-2, 2, allow_nan=False)), draw(expressions(depth=depth - 1)))
    return ("bin", draw(st.integers(0, len(_SAFE_BINARY) - 1)), draw(expressions(depth=depth - 1)),
            draw(expressions(depth=depth - 1)))


def evaluate(expr, args, traced):
    tag = expr[0]
    if tag == "in":
        return args[expr[1]]
    if tag == "un":
        name, f_traced, f_ref = _SAFE_UNARY[expr[1]]
        v = evaluate(expr[2], args, traced)
        return f_traced(v) if traced else f_ref(v)
    if tag == "mulc":
        return evaluate(expr[2], args, traced) * expr[1]
    return _SAFE_BINARY[expr[1]][1](evaluate(expr[2], args, traced), evaluate(expr[3], args, traced))


@pytest.mark.parametrize("executor_name", EXECUTORS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(expr=expressions(), shapes=st.sampled_from([((5, 7), (7,), ()), ((3, 1, 4), (2, 4), (1,)),
                                                   ((11,), (11,), (11,)), ((2, 3), (2, 1), (3,))]),
       reduce=st.booleans())
def test_random_graphs_match_float64(monkeypatch, executor_name, expr, shapes, reduce):
    _skip_unless(executor_name)
    monkeypatch.setenv("TINYTORCH_FUSION", executor_name)
    args = [RNG.uniform(-1.5, 1.5, s).astype(np.float64) for s in shapes]

    def fn(a, b, c):
        out = evaluate(expr, [a, b, c], True) + a * 0.0  # at least a traced value
        return out.sum(axis=-1, keepdims=True) if reduce else out

    want = evaluate(expr, args, False) + args[0] * 0.0
    if reduce:
        want = want.sum(axis=-1, keepdims=True)
    got = compile_graph(fn, *args)(*args)
    close(got, want, np.float64)
    assert_path(executor_name)


# ------------------------------------------------------------------ API behaviour

def test_tensor_in_tensor_out_ndarray_in_ndarray_out():
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    g = compile_graph(lambda v: v * 2 + 1, x)
    assert type(g(x)) is np.ndarray
    t = g(Tensor(x, requires_grad=True))
    assert isinstance(t, Tensor) and t.requires_grad and isinstance(t.grad_fn, CompiledGraph)
    assert isinstance(g, CompiledGraph)


def test_retraces_per_signature():
    g = compile_graph(lambda v, s: v * s, np.ones(3, np.float32), 2.0)
    g(np.ones(3, np.float32), 2.0)
    assert len(g.signatures) == 1
    np.testing.assert_array_equal(g(np.ones((2, 4)), 2.0), np.full((2, 4), 2.0))
    np.testing.assert_array_equal(g(np.ones(3, np.float32), 3.0), np.full(3, 3.0, np.float32))
    assert g(np.ones(3, np.float32), 3.0).dtype == np.float32
    assert len(g.signatures) == 3


@pytest.mark.parametrize("fn,names", [
    (lambda x: np.sin(x), "np.sin"),
    (lambda x: x @ x, "matmul"),
    (lambda x: x.sum(axis=0), "sum(axis=0)"),
    (lambda x: x[0], "indexing"),
    (lambda x: x if x > 0 else -x, "control flow"),
    (lambda x: x + np.ones((4, 3)), "array constant"),
    (lambda x: Tensor(x), "conversion"),
    (lambda x: np.cumsum(x), "np.cumsum"),
    (lambda x: x.sum(-1) + x, "keepdims=False"),
])
def test_unsupported_ops_name_the_op(fn, names):
    with pytest.raises(UnsupportedOperation, match=names.replace("(", r"\(").replace(")", r"\)")):
        compile_graph(fn, np.ones((4, 3)))


def test_bad_arguments_are_type_and_value_errors():
    with pytest.raises(TypeError, match="float32 or float64"):
        compile_graph(lambda x: x + 1, np.ones(3, np.int64))
    with pytest.raises(TypeError, match="Tensors, ndarrays or Python numbers"):
        compile_graph(lambda x: x + 1, [1.0, 2.0])
    with pytest.raises(ValueError, match="do not broadcast"):
        compile_graph(lambda x, y: x + y, np.ones(3), np.ones(4))
    with pytest.raises(TypeError, match="not a value computed"):
        compile_graph(lambda x: 3.0, np.ones(3))
    with pytest.raises(TypeError, match="callable"):
        compile_graph(3, np.ones(3))


def test_upstream_names_form_gives_the_fused_expression():
    src = compile_graph(lambda x, bias, scale: (x + bias) * scale, "x", "bias", "scale")
    assert isinstance(src, FusedSource) and isinstance(src, str)
    assert str(src) == src.source and "return ((x + bias) * scale)" in src.source
    scope = {}
    exec(src, scope)
    assert scope["fused_kernel"](1.0, 2.0, 3.0) == 9.0


def test_environment_variable_selects_and_rejects(monkeypatch):
    monkeypatch.setenv("TINYTORCH_FUSION", "bogus")
    with pytest.raises(ValueError, match="TINYTORCH_FUSION"):
        executor_choice()
    monkeypatch.setenv("TINYTORCH_FUSION", "numpy")
    assert executor_choice()[0] == "numpy"
    monkeypatch.setenv("TINYTORCH_FUSION", "auto")
    with use_native(False):
        mode, why = executor_choice()
        assert mode == "numpy" and "turned off" in why
        compile_graph(lambda v: v + 1, np.ones(2))(np.ones(2))
        assert last_path() == "fusion:numpy"


def test_library_without_fusion_falls_back_with_the_reason(monkeypatch):
    from tinytorch.backends.fusion import executors
    if _native.lib is None or not native_enabled():
        pytest.skip("no runtime library at all, or the native path is off")
    monkeypatch.setattr(executors._native, "has_fusion", lambda: False)
    monkeypatch.setenv("TINYTORCH_FUSION", "compiled")
    mode, why = executor_choice()
    assert mode == "numpy" and "without the fusion executor" in why
    g = compile_graph(lambda v: v * 3, np.ones(4))
    np.testing.assert_array_equal(g(np.ones(4)), np.full(4, 3.0))
    assert last_path() == "fusion:numpy"
    assert "without the fusion executor" in str(g.report())


def test_out_writes_in_place(executor):
    x = RNG.standard_normal((6, 9)).astype(np.float32)
    b = RNG.standard_normal(9).astype(np.float32)
    g = compile_graph(lambda x, b: (x + b) * 2, x, b)
    out = np.full((6, 9), np.nan, np.float32)
    assert g(x, b, out=out) is out
    close(out, (x.astype(np.float64) + b) * 2, np.float32)
    assert_path(executor)
    two = compile_graph(lambda x: (x * 2, x.sum(-1)), x)
    o1, o2 = np.empty((6, 9), np.float32), np.empty(6, np.float32)
    r1, r2 = two(x, out=(o1, o2))
    assert r1 is o1 and r2 is o2
    close(o2, x.astype(np.float64).sum(-1), np.float32)
    with pytest.raises(ValueError, match="shape"):
        g(x, b, out=np.empty((6, 9), np.float64))
    with pytest.raises(ValueError, match="C-contiguous"):
        g(x, b, out=np.empty((9, 6), np.float32).T)
    with pytest.raises(ValueError, match="ndarray calls"):
        g(Tensor(x), b, out=out)
    with pytest.raises(ValueError, match="2 arrays"):
        g(x, b, out=(out, out))
