"""Every Tensor op through the parity helper: forward and gradient against float64 NumPy
references on awkward shapes (empty, 1, odd, prime, broadcast) and non-contiguous views."""
import numpy as np
import pytest

from parity import check_parity, assert_close
from tinytorch.core import acceleration
from tinytorch.core.tensor import Tensor, concat, stack, split, where

BINARY_SHAPES = [
    ((3, 5), (3, 5)),
    ((1,), (1,)),
    ((0, 3), (0, 3)),
    ((2, 7), (7,)),          # broadcast a row
    ((4, 1), (1, 3)),        # outer broadcast on both sides
    ((2, 3, 5), (3, 1)),
    ((), (2, 3)),            # 0-d with a matrix
]


def _pos(rng, shape):
    return rng.uniform(0.5, 2.0, shape)


@pytest.mark.parametrize("sa,sb", BINARY_SHAPES)
@pytest.mark.parametrize("opname", ["add", "sub", "mul", "div"])
def test_binary_ops(rng, sa, sb, opname):
    ops = {"add": (lambda a, b: a + b), "sub": (lambda a, b: a - b),
           "mul": (lambda a, b: a * b), "div": (lambda a, b: a / b)}
    f = ops[opname]
    a = rng.standard_normal(sa)
    b = _pos(rng, sb) * rng.choice([-1, 1], sb)
    check_parity(f, f, [a, b], rng=rng, name=opname)


@pytest.mark.parametrize("opname", ["radd", "rsub", "rmul", "rdiv", "scalar_pow", "rpow"])
def test_reflected_and_scalar_ops(rng, opname):
    ops = {"radd": lambda a: 2.5 + a, "rsub": lambda a: 2.5 - a, "rmul": lambda a: 2.5 * a,
           "rdiv": lambda a: 2.5 / a, "scalar_pow": lambda a: a ** 3, "rpow": lambda a: 1.7 ** a}
    f = ops[opname]
    check_parity(f, f, [_pos(rng, (3, 4))], rng=rng, name=opname)


@pytest.mark.parametrize("p", [2, 0.5, -1.5, 3])
def test_pow_scalar_exponents(rng, p):
    check_parity(lambda a: a ** p, lambda a: a ** p, [_pos(rng, (5, 3))], rng=rng)


def test_pow_tensor_exponent(rng):
    check_parity(lambda a, b: a ** b, lambda a, b: a ** b, [_pos(rng, (3, 4)), rng.standard_normal((4,))],
                 rng=rng)


def test_neg_and_numpy_operand(rng):
    check_parity(lambda a: -a, lambda a: -a, [rng.standard_normal((2, 3))], rng=rng)
    c = rng.standard_normal((2, 3))
    # an ndarray on the left defers to Tensor (no silent ndarray result)
    check_parity(lambda a: c * a + c, lambda a: c * a + c, [rng.standard_normal((2, 3))], rng=rng)
    t = Tensor(np.ones((2, 3), np.float32))
    assert isinstance(np.ones((2, 3)) * t, Tensor)


MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((1, 1), (1, 1)), ((5, 7), (7, 1)), ((0, 3), (3, 2)), ((3, 0), (0, 2)),
    ((4,), (4, 3)), ((3, 4), (4,)), ((4,), (4,)),
    ((2, 3, 4), (4, 5)),          # batched x @ weight
    ((2, 3, 4), (2, 4, 5)),       # batched both
    ((2, 1, 3, 4), (5, 4, 2)),    # batch broadcast
    ((4, 3), (2, 3, 5)),
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(rng, sa, sb):
    check_parity(lambda a, b: a @ b, np.matmul, [rng.standard_normal(sa), rng.standard_normal(sb)],
                 rng=rng, name="matmul")


def test_matmul_goes_through_acceleration(monkeypatch, rng):
    calls = []
    real_gemm, real_matmul = acceleration.gemm, acceleration.matmul

    def gemm(a, b, trans_a=False, trans_b=False, **kw):  # alpha, beta, out... by keyword
        calls.append(("gemm", trans_a, trans_b))
        return real_gemm(a, b, trans_a, trans_b, **kw)

    def matmul(a, b, **kw):
        calls.append(("matmul",))
        return real_matmul(a, b, **kw)

    monkeypatch.setattr(acceleration, "gemm", gemm)
    monkeypatch.setattr(acceleration, "matmul", matmul)
    a = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = Tensor(rng.standard_normal((4, 2)), requires_grad=True)
    (a @ b).sum().backward()
    assert ("matmul",) in calls
    assert ("gemm", False, True) in calls and ("gemm", True, False) in calls
    calls.clear()
    x = Tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    y = Tensor(rng.standard_normal((2, 4, 5)), requires_grad=True)
    (x @ y).sum().backward()
    assert calls.count(("matmul",)) == 3  # forward + two backward products


@pytest.mark.parametrize("shape,axis,keepdims", [
    ((3, 5), None, False), ((3, 5), 0, False), ((3, 5), 1, True), ((2, 3, 4), (0, 2), False),
    ((2, 3, 4), -1, True), ((1,), None, True), ((0, 4), 0, False), ((7,), 0, False),
])
@pytest.mark.parametrize("opname", ["sum", "mean"])
def test_sum_mean(rng, shape, axis, keepdims, opname):
    if opname == "mean" and 0 in shape:
        pytest.skip("mean over an empty axis is NaN in both")
    ours = (lambda a: a.sum(axis, keepdims)) if opname == "sum" else (lambda a: a.mean(axis, keepdims))
    ref = (lambda a: np.sum(a, axis=axis, keepdims=keepdims)) if opname == "sum" else \
        (lambda a: np.mean(a, axis=axis, keepdims=keepdims))
    check_parity(ours, ref, [rng.standard_normal(shape)], rng=rng, name=opname)


@pytest.mark.parametrize("shape,axis,keepdims", [
    ((3, 5), None, False), ((3, 5), 0, False), ((3, 5), 1, True), ((2, 3, 4), (0, 2), False), ((1,), 0, False),
])
@pytest.mark.parametrize("opname", ["max", "min", "var"])
def test_max_min_var(rng, shape, axis, keepdims, opname):
    ours = {"max": lambda a: a.max(axis, keepdims), "min": lambda a: a.min(axis, keepdims),
            "var": lambda a: a.var(axis, keepdims)}[opname]
    ref = {"max": lambda a: np.max(a, axis=axis, keepdims=keepdims),
           "min": lambda a: np.min(a, axis=axis, keepdims=keepdims),
           "var": lambda a: np.var(a, axis=axis, keepdims=keepdims)}[opname]
    check_parity(ours, ref, [rng.standard_normal(shape)], rng=rng, name=opname)


def test_var_ddof(rng):
    check_parity(lambda a: a.var(1, ddof=1), lambda a: np.var(a, axis=1, ddof=1),
                 [rng.standard_normal((3, 6))], rng=rng)


def test_max_ties_share_gradient():
    a = Tensor(np.array([1.0, 3.0, 3.0, 2.0]), requires_grad=True)
    a.max().backward()
    assert_close(a.grad, [0, 0.5, 0.5, 0], 0, 0, "tied max")


@pytest.mark.parametrize("opname", ["exp", "log", "sqrt", "abs"])
@pytest.mark.parametrize("shape", [(3, 4), (1,), (0,), (2, 3, 5)])
def test_unary(rng, opname, shape):
    ours = {"exp": Tensor.exp, "log": Tensor.log, "sqrt": Tensor.sqrt, "abs": Tensor.abs}[opname]
    ref = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "abs": np.abs}[opname]
    x = _pos(rng, shape) if opname in ("log", "sqrt") else rng.standard_normal(shape)
    check_parity(ours, ref, [x], rng=rng, name=opname)


def test_clip(rng):
    x = rng.uniform(-3, 3, (4, 7))
    check_parity(lambda a: a.clip(-1.0, 0.5), lambda a: np.clip(a, -1.0, 0.5), [x], rng=rng)
    check_parity(lambda a: a.clip(min=0.0), lambda a: np.maximum(a, 0.0), [x], rng=rng)


@pytest.mark.parametrize("shape,new", [((3, 4), (4, 3)), ((2, 3, 4), (6, -1)), ((5,), (1, 5, 1)),
                                       ((0, 3), (3, 0)), ((1,), ())])
def test_reshape(rng, shape, new):
    check_parity(lambda a: a.reshape(new), lambda a: a.reshape(new), [rng.standard_normal(shape)], rng=rng)


@pytest.mark.parametrize("shape,axes", [((3, 4), ()), ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (2, 0, 1)), ((1, 5), ())])
def test_transpose_permute(rng, shape, axes):
    x = rng.standard_normal(shape)
    if len(axes) == 2:  # PyTorch semantics: swap two axes
        check_parity(lambda a: a.transpose(*axes), lambda a: np.swapaxes(a, *axes), [x], rng=rng)
    elif axes:
        check_parity(lambda a: a.permute(*axes), lambda a: np.transpose(a, axes), [x], rng=rng)
    else:
        check_parity(lambda a: a.T, lambda a: a.T, [x], rng=rng)


INDICES = [
    (slice(1, 3),), (1,), (Ellipsis, 0), (slice(None, None, -2),), (None, slice(0, 2)),
    (np.array([0, 2, 2, 1]),),                 # repeated integer index: scatter-add
    (np.array([[0, 1], [2, 2]]), slice(1, 4)),
    (np.array([True, False, True, True]),),
    (slice(1, 1),),                            # empty result
]


@pytest.mark.parametrize("index", INDICES, ids=[str(i) for i in range(len(INDICES))])
def test_getitem(rng, index):
    x = rng.standard_normal((4, 5))
    idx = index if len(index) > 1 else index[0]
    check_parity(lambda a: a[idx], lambda a: a[idx], [x], rng=rng, name=f"getitem {index}")


def test_concat_stack_split(rng):
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((4, 3)), rng.standard_normal((1, 3))
    check_parity(lambda x, y, z: concat([x, y, z], axis=0), lambda x, y, z: np.concatenate([x, y, z], 0),
                 [a, b, c], rng=rng)
    d, e = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    check_parity(lambda x, y: stack([x, y], axis=1), lambda x, y: np.stack([x, y], 1), [d, e], rng=rng)
    check_parity(lambda x: split(x, 2, axis=1)[1] * 3.0 + split(x, 2, axis=1)[2].sum(),
                 lambda x: x[:, 2:4] * 3.0 + x[:, 4:].sum(), [rng.standard_normal((3, 5))], rng=rng)
    check_parity(lambda x: split(x, [1, 3], axis=0)[1], lambda x: x[1:4], [rng.standard_normal((4, 2))], rng=rng)


def test_masked_fill_and_where(rng):
    mask = rng.random((3, 4)) > 0.5
    check_parity(lambda a: a.masked_fill(mask, -7.0), lambda a: np.where(mask, -7.0, a),
                 [rng.standard_normal((3, 4))], rng=rng)
    row_mask = np.array([True, False, False, True])  # broadcast mask
    check_parity(lambda a: a.masked_fill(row_mask, 0.0), lambda a: np.where(row_mask, 0.0, a),
                 [rng.standard_normal((3, 4))], rng=rng)
    cond = rng.random((3, 4)) > 0.5
    check_parity(lambda a, b: where(cond, a, b), lambda a, b: np.where(cond, a, b),
                 [rng.standard_normal((3, 4)), rng.standard_normal((4,))], rng=rng)


def test_comparisons_have_no_grad(rng):
    a = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = rng.standard_normal((3, 4))
    for got, want in [(a < b, a.data < b), (a <= 0, a.data <= 0), (a > b, a.data > b), (a >= 0, a.data >= 0),
                      (a == a, np.ones((3, 4), bool)), (a != b, a.data != b)]:
        assert got.dtype == np.bool_ and not got.requires_grad
        np.testing.assert_array_equal(got.data, want)
    assert a in {a}  # identity hashing despite elementwise ==


def test_composite_expression(rng):
    def f(x, w, b):
        h = (x @ w + b)
        return (h * h).mean(axis=0).sqrt() - (h.exp() / (1 + h.exp())).sum(axis=1, keepdims=True).log()

    def ref(x, w, b):
        h = x @ w + b
        return np.sqrt((h * h).mean(axis=0)) - np.log((np.exp(h) / (1 + np.exp(h))).sum(axis=1, keepdims=True))
    check_parity(f, ref, [rng.standard_normal((5, 3)), rng.standard_normal((3, 4)) * 0.5,
                          rng.standard_normal(4)], rng=rng, grad_atol=2e-4)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_dtypes_are_kept(rng, dtype):
    a = Tensor(rng.standard_normal((3, 4)).astype(dtype), requires_grad=True, dtype=dtype)
    out = ((a * 2.0 + 1.0) @ Tensor(np.ones((4, 2), dtype=dtype))).sum()
    assert out.dtype == dtype
    out.backward()
    assert a.grad.dtype == dtype
    assert_close(a.grad, np.full((3, 4), 4.0), 0, 0, "grad")


def test_dtype_defaults():
    assert Tensor([1, 2, 3]).dtype == np.float32
    assert Tensor(np.zeros(3)).dtype == np.float32            # float64 narrowed unless asked
    assert Tensor(np.zeros(3), dtype=np.float64).dtype == np.float64
    assert Tensor(np.zeros(3, np.float16)).dtype == np.float16
    assert Tensor(np.arange(3)).dtype == np.arange(3).dtype    # integer labels kept
    with pytest.raises(TypeError, match="floating"):
        Tensor(np.arange(3), requires_grad=True)


def test_tensor_api(rng):
    x = Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    assert x.shape == (2, 3) and x.ndim == 2 and x.size == 6 and len(x) == 2
    assert x.numpy() is x.data
    d = x.detach()
    assert d.data is x.data and not d.requires_grad and d.grad_fn is None
    assert Tensor(np.array([3.5])).item() == 3.5
    (x * 2).sum().backward()
    x.zero_grad()
    assert x.grad is None
    assert x.flatten().shape == (6,) and x.unsqueeze(0).shape == (1, 2, 3)
    assert x.unsqueeze(0).squeeze(0).shape == (2, 3)
    assert "requires_grad=True" in repr(x)
    arr = np.ones(3, np.float32)
    copied, shared = Tensor(arr), Tensor.from_numpy(arr[::2])
    copied.data[0] = 5.0  # the constructor copies (an in-place update never reaches arr) ...
    assert arr[0] == 1.0
    assert shared.data.base is arr  # ... from_numpy shares, views included


def test_bad_input_messages():
    a = Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)"):
        a @ Tensor(np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"operands could not be broadcast|shapes"):
        a + Tensor(np.ones((4,)))
    with pytest.raises(ValueError, match=r"\(2, 3\)"):
        a.reshape(4, 2)
    with pytest.raises(ValueError, match="permutation"):
        a.permute(0, 0)
    with pytest.raises(TypeError, match="bool"):
        a.masked_fill(np.ones((2, 3)), 0.0)
    with pytest.raises(ValueError, match="differ outside axis"):
        concat([a, Tensor(np.ones((2, 4)))], axis=0)
    with pytest.raises(ValueError, match="same shape"):
        stack([a, Tensor(np.ones((3, 2)))])
    with pytest.raises(ValueError, match="add up"):
        split(a, [1, 1], axis=1)
    with pytest.raises(ValueError, match="out of range"):
        a.sum(axis=2)


@pytest.mark.parametrize("method, dtype", [("float", np.float32), ("half", np.float16),
                                           ("double", np.float64)])
def test_pytorch_cast_names_keep_the_graph(rng, method, dtype):
    x = Tensor(rng.standard_normal((3, 5)), requires_grad=True)
    y = getattr(x, method)()
    assert y.dtype == dtype and y.requires_grad
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    # d/dx sum(cast(x)^2) = 2 * cast(x), cast back to float32
    assert_close(x.grad, 2.0 * x.data.astype(dtype).astype(np.float64), 1e-3 if dtype == np.float16 else 1e-6,
                 0, "grad")
