"""Single ops over the whole range of shapes and axes, against PyTorch (float64):
reductions with any axis set, indexing (basic, integer arrays with repeats, masks),
matmul with every operand rank and batch broadcasting, and elementwise ops at the
edges of their domains (zeros, negatives), where the conventions for nan/inf/0
gradients must match PyTorch's exactly."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import given, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from torchdiff import LAYOUTS, SHAPES, arrays, assert_grads, assert_same, backward_both, gather, leaf  # noqa: E402


@st.composite
def reduction_case(draw):
    shape = draw(SHAPES)
    nd = len(shape)
    axis = draw(st.one_of(st.none(),
                          st.integers(-nd, nd - 1) if nd else st.none(),
                          st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True).map(tuple)
                          if nd else st.none()))
    return shape, axis


@pytest.mark.filterwarnings("ignore::UserWarning")   # torch: var over zero elements
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy: mean/var of empty slices
@given(case=reduction_case(), op=st.sampled_from(["sum", "mean", "max", "min", "var"]),
       keepdims=st.booleans(), layout=LAYOUTS, data=st.data())
def test_reductions_match_torch(case, op, keepdims, layout, data):
    shape, axis = case
    x = data.draw(arrays(shape), label="x")
    t, p = leaf(x, layout)
    dims = None if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    if dims is None:
        ref_fn = {"sum": lambda: p.sum(), "mean": lambda: p.mean(),
                  "max": lambda: p.max(), "min": lambda: p.min(),
                  "var": lambda: p.var(correction=0)}[op]
    else:
        ref_fn = {"sum": lambda: p.sum(dim=dims, keepdim=keepdims),
                  "mean": lambda: p.mean(dim=dims, keepdim=keepdims),
                  "max": lambda: p.amax(dim=dims, keepdim=keepdims),
                  "min": lambda: p.amin(dim=dims, keepdim=keepdims),
                  "var": lambda: p.var(dim=dims, correction=0, keepdim=keepdims)}[op]
    reduced = x.size if dims is None else int(np.prod([shape[d] for d in dims]))
    if op in ("max", "min") and reduced == 0 and x.ndim:
        # no extreme of nothing: both refuse
        with pytest.raises((IndexError, RuntimeError)):
            ref_fn()
        with pytest.raises(ValueError):
            getattr(t, op)(axis=axis, keepdims=keepdims)
        return
    ref = ref_fn()
    if dims is None and keepdims:
        ref = ref.reshape((1,) * x.ndim)
    out = getattr(t, op)(axis=axis, keepdims=keepdims)
    assert_same(out, ref, f"{op}(axis={axis}, keepdims={keepdims})")
    backward_both(out, ref, data.draw(arrays(tuple(ref.shape)), label="upstream"))
    assert_grads([t], [p])


@st.composite
def index_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4))
    kind = draw(st.sampled_from(["basic", "integer", "mask", "mixed"]))
    if 0 in shape and kind in ("integer", "mixed"):
        kind = "basic"         # no valid integer index into a size-0 axis
    if kind == "basic":        # slices (any step), ints, None, Ellipsis
        index = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    elif kind == "mask":
        index = draw(hnp.arrays(np.bool_, shape))
    elif kind == "integer":    # repeats are common: backward must add them up
        index = draw(hnp.integer_array_indices(shape, result_shape=hnp.array_shapes(min_dims=0, max_dims=2,
                                                                                     max_side=4)))
    else:                      # an integer array on axis 0, a slice after it
        rows = draw(hnp.arrays(np.int64, draw(st.integers(0, 5)), elements=st.integers(-shape[0], shape[0] - 1)))
        index = (rows, slice(None, None, draw(st.sampled_from([1, -1, 2]))))[:len(shape)]
    return shape, index


@given(case=index_case(), layout=LAYOUTS, data=st.data())
def test_indexing_matches_torch(case, layout, data):
    shape, index = case
    t, p = leaf(data.draw(arrays(shape), label="x"), layout)
    out, ref = t[index], gather(p, index, shape)
    assert_same(out, ref, f"x[{index!r}]")
    backward_both(out, ref, data.draw(arrays(tuple(ref.shape)), label="upstream"))
    assert_grads([t], [p])


@st.composite
def matmul_shapes(draw):
    m, k, n = (draw(st.integers(0, 3)) for _ in range(3))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3))
    bshapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, base_shape=batch, min_side=0, max_side=3))
    a_vec, b_vec = draw(st.booleans()), draw(st.booleans())
    a = (k,) if a_vec else bshapes.input_shapes[0] + (m, k)
    b = (k,) if b_vec else bshapes.input_shapes[1] + (k, n)
    return a, b


@given(shapes=matmul_shapes(), la=LAYOUTS, lb=LAYOUTS, data=st.data())
def test_matmul_matches_torch(shapes, la, lb, data):
    sa, sb = shapes
    a, pa = leaf(data.draw(arrays(sa), label="a"), la)
    b, pb = leaf(data.draw(arrays(sb), label="b"), lb)
    out, ref = a @ b, pa @ pb
    assert_same(out, ref, f"{sa} @ {sb}")
    backward_both(out, ref, data.draw(arrays(tuple(ref.shape)), label="upstream"))
    assert_grads([a, b], [pa, pb])


# Values where the conventions live: exact zeros (both signs), negatives, integers.
# -0.0 is left out for pow: PyTorch computes x ** 0.5 and x ** -0.5 as sqrt / rsqrt,
# which give -0.0 and -inf at x = -0.0 where IEEE pow (NumPy) gives +0.0 and +inf.
EDGE = st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0])
EDGE_NO_NEG_ZERO = st.sampled_from([0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0])

EDGE_OPS = {
    "pow": (lambda a, b: a ** b, lambda a, b: a ** b),
    "pow_scalar_base": (lambda a, b: 2.0 ** b + 0.0 ** b + a, lambda a, b: 2.0 ** b + 0.0 ** b + a),
    "pow_int_exponents": (lambda a, b: a ** 2 + a ** 3 + a ** 0 + a ** -1 + b,
                          lambda a, b: a ** 2 + a ** 3 + a ** 0 + a ** -1 + b),
    "pow_fractional": (lambda a, b: a ** 0.5 + a ** -0.5 + a ** 1.5 + b,
                       lambda a, b: a ** 0.5 + a ** -0.5 + a ** 1.5 + b),
    "div": (lambda a, b: a / b, lambda a, b: a / b),
    "log": (lambda a, b: a.log() * b, lambda a, b: a.log() * b),
    "sqrt": (lambda a, b: a.sqrt() + b, lambda a, b: a.sqrt() + b),
    "abs_relu": (lambda a, b: a.abs() * b + a.relu(), lambda a, b: a.abs() * b + a.relu()),
    "clip": (lambda a, b: a.clip(-1.0, 0.5) + b.clip(min=0.0), lambda a, b: a.clamp(-1.0, 0.5) + b.clamp(min=0.0)),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(op=st.sampled_from(sorted(EDGE_OPS)), shape=hnp.array_shapes(min_dims=1, max_dims=2, max_side=4),
       data=st.data())
def test_elementwise_domain_edges_match_torch(op, shape, data):
    values = EDGE_NO_NEG_ZERO if op.startswith("pow") else EDGE
    x = data.draw(arrays(shape, values), label="a")
    y = data.draw(arrays(shape, values), label="b")
    (a, pa), (b, pb) = leaf(x), leaf(y)
    ours, theirs = EDGE_OPS[op]
    out, ref = ours(a, b), theirs(pa, pb)
    assert_same(out, ref, f"{op} forward", rtol=1e-12, atol=1e-12)
    backward_both(out, ref, np.ones(shape))
    assert_grads([a, b], [pa, pb], what=f"{op} grad", rtol=1e-12, atol=1e-12)
