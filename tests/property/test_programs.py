"""Random op programs, run by tinytorch and by PyTorch (float64), compared value by value.

A program starts from 1-3 leaves whose shapes broadcast against one base shape (sides
of 0 and 1 included), each in a random memory layout, and applies 1-7 ops, each to
values already computed (so one tensor is often used in several places). Every
intermediate value is compared, then the last one is backpropagated with a random
upstream gradient and every leaf's gradient is compared.

Kinks: relu, abs, clip, max/min, where and masked_fill decide on comparisons. When the
two frameworks' forward values differ by rounding right at such a decision (a tie in
one and not the other), the gradient legitimately differs; that op is then skipped
(the step reuses its input). Everything else must agree.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import event, given, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from torchdiff import LAYOUTS, SHAPES, arrays, assert_grads, assert_same, backward_both, gather, leaf  # noqa: E402
from tinytorch.core import activations as A  # noqa: E402
from tinytorch.core.tensor import concat, stack, where  # noqa: E402

F = torch.nn.functional


def _np(v):
    return v.detach().numpy() if isinstance(v, torch.Tensor) else v.data


def _axis(x, k):
    return None if x.ndim == 0 else k % x.ndim


def _reduced_size(x, axis):
    return x.size if axis is None else x.shape[axis]


def _same_decision(f, xs, ps):
    """The comparison ``f`` gives the same booleans on both frameworks' values."""
    return bool(np.array_equal(f(*[_np(x) for x in xs]), f(*[_np(p) for p in ps])))


def _ties(axis):
    def f(a):
        if a.size == 0:
            return np.zeros(a.shape, bool)
        return a == np.max(a, axis=axis, keepdims=True)
    return f


def _ties_min(axis):
    def f(a):
        if a.size == 0:
            return np.zeros(a.shape, bool)
        return a == np.min(a, axis=axis, keepdims=True)
    return f


# Each op: (arity, run(xs, k, draw) -> tinytorch result or None to skip,
#           ref(ps, k, params) -> torch result). ``run`` returns (result, params) so the
# reference sees exactly the same parameters (axes, indices) and guard decisions.

def unary(ours, theirs, guard=None):
    def run(xs, ps, k, draw):
        if guard is not None and not _same_decision(guard, xs, ps):
            return None
        return ours(xs[0]), theirs(ps[0])
    return 1, run


def binary(ours, theirs, guard=None):
    def run(xs, ps, k, draw):
        a, b = xs
        try:
            np.broadcast_shapes(a.shape, b.shape)
        except ValueError:          # not broadcastable: use the first operand twice
            xs, ps = [a, a], [ps[0], ps[0]]
        if guard is not None and not _same_decision(guard, xs, ps):
            return None
        return ours(*xs), theirs(*ps)
    return 2, run


def reduction(name):
    def run(xs, ps, k, draw):
        x, p = xs[0], ps[0]
        axis, keep = _axis(x, k), bool(k & 4)
        if name in ("mean", "var", "max", "min") and _reduced_size(x, axis) == 0:
            return None             # max/min raise (in both); mean/var of nothing is nan
        if name in ("max", "min"):
            if not _same_decision((_ties if name == "max" else _ties_min)(axis), [x], [p]):
                return None
        if name == "var":
            out = x.var(axis=axis, keepdims=keep)
        else:
            out = getattr(x, name)(axis=axis, keepdims=keep)
        if axis is None:
            ref = {"sum": p.sum, "mean": p.mean, "max": p.max, "min": p.min,
                   "var": lambda: p.var(correction=0)}[name]()
            ref = ref.reshape((1,) * x.ndim) if keep else ref
        else:
            ref = {"sum": lambda: p.sum(dim=axis, keepdim=keep),
                   "mean": lambda: p.mean(dim=axis, keepdim=keep),
                   "max": lambda: p.amax(dim=axis, keepdim=keep),
                   "min": lambda: p.amin(dim=axis, keepdim=keep),
                   "var": lambda: p.var(dim=axis, correction=0, keepdim=keep)}[name]()
        return out, ref
    return 1, run


def softmaxes(log):
    def run(xs, ps, k, draw):
        x, p = xs[0], ps[0]
        if x.ndim == 0:
            return None
        axis = k % x.ndim
        if log:
            return A.log_softmax(x, axis), F.log_softmax(p, dim=axis)
        return A.softmax(x, axis), F.softmax(p, dim=axis)
    return 1, run


def indexing(kind):
    def run(xs, ps, k, draw):
        x, p = xs[0], ps[0]
        if x.ndim == 0 and kind != "none":
            return None
        axis = k % max(x.ndim, 1)
        n = x.shape[axis] if x.ndim else 0
        lead = (slice(None),) * axis
        if kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-5, 5)))
            stop = draw(st.one_of(st.none(), st.integers(-5, 5)))
            step = draw(st.sampled_from([1, 2, -1, -2, 3]))
            index = lead + (slice(start, stop, step),)
        elif kind == "int":
            if n == 0:
                return None
            index = lead + (draw(st.integers(-n, n - 1)),)
        elif kind == "take":       # integer array with repeats: backward must add them up
            if n == 0:
                return None
            idx = draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=5))
            index = lead + (np.array(idx, dtype=np.int64),)
        elif kind == "mask":
            index = draw(hnp.arrays(np.bool_, x.shape))
        else:                      # "none": a new axis
            index = (None,)
        return x[index], gather(p, index, x.shape)
    return 1, run


def shape_op(kind):
    def run(xs, ps, k, draw):
        x, p = xs[0], ps[0]
        nd = x.ndim
        if kind == "T":
            return x.T, p.permute(tuple(reversed(range(nd))))
        if kind == "swap":
            if nd < 2:
                return None
            return x.transpose(0, -1), p.transpose(0, -1)
        if kind == "flatten":
            return x.flatten(), p.reshape(-1)
        if kind == "unsqueeze":
            a = k % (nd + 1)
            return x.unsqueeze(a), p.unsqueeze(a)
        if kind == "squeeze":
            return x.squeeze(), p.reshape([s for s in x.shape if s != 1])
        raise AssertionError(kind)
    return 1, run


def joins(kind):
    def run(xs, ps, k, draw):
        a, b = xs
        pa, pb = ps
        if kind == "stack":
            if a.shape != b.shape:
                b, pb = a, pa
            axis = k % (a.ndim + 1)
            return stack([a, b], axis=axis), torch.stack([pa, pb], dim=axis)
        if a.ndim == 0:
            return None
        axis = k % a.ndim
        if a.shape[:axis] + a.shape[axis + 1:] != b.shape[:axis] + b.shape[axis + 1:] or a.ndim != b.ndim:
            b, pb = a, pa
        return concat([a, b], axis=axis), torch.cat([pa, pb], dim=axis)
    return 2, run


def matmuls(kind):
    def run(xs, ps, k, draw):
        a, b = xs
        pa, pb = ps
        if kind == "self_T":       # a @ a.T: one tensor twice, once as a transposed view
            if a.ndim != 2:
                return None
            return a @ a.T, pa @ pa.T
        if a.ndim == 0 or b.ndim == 0:
            return None
        kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
        if a.shape[-1] != kb:
            return None
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            return None
        return a @ b, pa @ pb
    return 2, run


def _wh(a, b):
    return a > b


OPS = {
    # elementwise, one input
    "neg": unary(lambda x: -x, lambda p: -p),
    "exp_tanh": unary(lambda x: x.tanh().exp(), lambda p: p.tanh().exp()),
    "log": unary(lambda x: (x.abs() + 1.0).log(), lambda p: (p.abs() + 1.0).log(), guard=np.sign),
    "sqrt": unary(lambda x: (x * x + 0.5).sqrt(), lambda p: (p * p + 0.5).sqrt()),
    "tanh": unary(lambda x: x.tanh(), torch.tanh),
    "sigmoid": unary(lambda x: x.sigmoid(), torch.sigmoid),
    "relu": unary(lambda x: x.relu(), torch.relu, guard=lambda a: a > 0),
    "gelu": unary(lambda x: A.gelu(x, approximate="tanh"), lambda p: F.gelu(p, approximate="tanh")),
    "silu": unary(A.silu, F.silu),
    "abs": unary(lambda x: x.abs(), torch.abs, guard=np.sign),
    "clip": unary(lambda x: x.clip(-1.0, 1.0), lambda p: p.clamp(-1.0, 1.0),
                  guard=lambda a: np.stack([a >= -1.0, a <= 1.0])),
    "square": unary(lambda x: x ** 2, lambda p: p ** 2),
    "cube": unary(lambda x: x ** 3, lambda p: p ** 3),
    "pow0": unary(lambda x: x ** 0, lambda p: p ** 0),
    "rpow": unary(lambda x: 2.0 ** x.tanh(), lambda p: 2.0 ** p.tanh()),
    "scalar_arith": unary(lambda x: (2.5 * x + 1.5) / 4.0 - 0.5, lambda p: (2.5 * p + 1.5) / 4.0 - 0.5),
    "rsub_rdiv": unary(lambda x: 1.0 - 3.0 / (x * x + 1.0), lambda p: 1.0 - 3.0 / (p * p + 1.0)),
    "masked_fill": unary(lambda x: x.masked_fill(x > 0.5, 0.25), lambda p: p.masked_fill(p > 0.5, 0.25),
                         guard=lambda a: a > 0.5),
    # elementwise, two inputs (broadcasting)
    "add": binary(lambda a, b: a + b, lambda a, b: a + b),
    "sub": binary(lambda a, b: a - b, lambda a, b: a - b),
    "mul": binary(lambda a, b: a * b, lambda a, b: a * b),
    "div": binary(lambda a, b: a / (b * b + 1.0), lambda a, b: a / (b * b + 1.0)),
    "pow": binary(lambda a, b: (a * a + 0.25) ** b.tanh(), lambda a, b: (a * a + 0.25) ** b.tanh()),
    "where": binary(lambda a, b: where(a > b, a, b), lambda a, b: torch.where(a > b, a, b), guard=_wh),
    # reductions (axis and keepdims from the step's parameter)
    "sum": reduction("sum"),
    "mean": reduction("mean"),
    "max": reduction("max"),
    "min": reduction("min"),
    "var": reduction("var"),
    "softmax": softmaxes(False),
    "log_softmax": softmaxes(True),
    # indexing and views
    "slice": indexing("slice"),
    "int_index": indexing("int"),
    "take": indexing("take"),
    "mask_index": indexing("mask"),
    "newaxis": indexing("none"),
    "T": shape_op("T"),
    "swap": shape_op("swap"),
    "flatten": shape_op("flatten"),
    "unsqueeze": shape_op("unsqueeze"),
    "squeeze": shape_op("squeeze"),
    "concat": joins("concat"),
    "stack": joins("stack"),
    "matmul": matmuls("any"),
    "matmul_self_T": matmuls("self_T"),
}

STEPS = st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 7), st.integers(0, 7), st.integers(0, 7)),
                 min_size=1, max_size=7)


@pytest.mark.filterwarnings("ignore::UserWarning")   # torch: var of a size-0 tensor
@given(data=st.data())
def test_random_programs_match_torch(data):
    base = data.draw(SHAPES, label="base shape")
    n_leaves = data.draw(st.integers(1, 3), label="leaves")
    ours, refs = [], []
    for i in range(n_leaves):
        shape = data.draw(hnp.broadcastable_shapes(base, min_side=0), label=f"shape {i}")
        t, p = leaf(data.draw(arrays(shape), label=f"leaf {i}"), data.draw(LAYOUTS, label=f"layout {i}"))
        ours.append(t)
        refs.append(p)
    pool, pool_ref = list(ours), list(refs)
    for name, i, j, k in data.draw(STEPS, label="program"):
        arity, run = OPS[name]
        picks = [i % len(pool), j % len(pool)][:arity]
        got = run([pool[q] for q in picks], [pool_ref[q] for q in picks], k, data.draw)
        if got is None:             # not applicable here (or a rounding tie at a kink)
            event(f"skipped {name}")
            continue
        event(f"ran {name}")
        out, ref = got
        assert_same(out, ref, f"forward of {name} (step {len(pool) - n_leaves})")
        pool.append(out)
        pool_ref.append(ref)
    out, ref = pool[-1], pool_ref[-1]
    w = data.draw(arrays(tuple(ref.shape)), label="upstream gradient")
    backward_both(out, ref, w)
    assert_grads(ours, refs)
