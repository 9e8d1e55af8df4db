"""compile_graph against PyTorch autograd on random programs (float64).

A program draws 1-3 leaves whose shapes broadcast against a domain of 1-3 rows and 1-4
columns (single-row and single-column domains included; a leaf may be a row vector, a column
or a scalar-like (1,)), then 1-6 steps, each applying an op to values already computed:
smooth unary ops, + - * /, and last-axis reductions (sum, mean, max) with keepdims, so
reductions of broadcast inputs and reductions of values that contain reductions (nested,
``sum(x * sum(x))``) are common. The same program runs as plain NumPy ufunc calls (traced by
compile_graph) and on torch tensors; the loss sum(w * out) is backpropagated by both and every
leaf's gradient compared, on each executor available. A second property writes the result
in place (``out=``) into a leaf's own buffer, alone and beside an output that is that leaf.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import event, given, strategies as st  # noqa: E402

from tinytorch import _native  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.extensions import compile_graph  # noqa: E402
from tinytorch.backends.fusion.executors import compiler  # noqa: E402

UNARY = ["tanh", "square", "exp_tanh", "neg"]
BINARY = ["add", "sub", "mul", "div"]
REDUCE = ["sum", "mean", "max"]


def _executors():
    found = ["numpy"]
    if _native.has_fusion():
        found.append("interp")
        if compiler()[0] is not None:
            found.append("compiled")
    return found


def _reduce(lib, kind, v):
    """A last-axis reduction with keepdims, in NumPy (traced) or torch (max splits ties
    evenly in both: torch.amax, tinytorch's MAX_ROW)."""
    if lib is np:
        return {"sum": np.sum, "mean": np.mean, "max": np.max}[kind](v, -1, keepdims=True)
    return {"sum": torch.sum, "mean": torch.mean, "max": torch.amax}[kind](v, -1, keepdim=True)


def _apply(lib, op, a, b):
    """One step on values of either library (np: what compile_graph traces)."""
    if op == "tanh":
        return lib.tanh(a)
    if op == "square":
        return a * a
    if op == "exp_tanh":
        return lib.exp(lib.tanh(a))
    if op == "neg":
        return -a
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / (1.0 + b * b)
    return _reduce(lib, op, a)


def run_program(lib, steps, leaves):
    values = list(leaves)
    for op, i, j in steps:
        values.append(_apply(lib, op, values[i % len(values)], values[j % len(values)]))
    return values[-1]


@st.composite
def programs(draw):
    rows = draw(st.sampled_from([0, 1, 2, 3]))  # 0: a rank-1 domain (one row)
    cols = draw(st.sampled_from([1, 2, 4]))
    domain = (cols,) if rows == 0 else (rows, cols)
    choices = [domain, (cols,), (1,)] + ([(rows, 1), (1, cols)] if rows else [])
    n_leaves = draw(st.integers(1, 3))
    shapes = [draw(st.sampled_from(choices)) for _ in range(n_leaves)]
    shapes[0] = domain if draw(st.booleans()) else shapes[0]
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    leaves = [rng.uniform(-1.5, 1.5, s) for s in shapes]
    steps = [(draw(st.sampled_from(UNARY + BINARY + REDUCE * 2)), draw(st.integers(0, 50)),
              draw(st.integers(0, 50))) for _ in range(draw(st.integers(1, 6)))]
    return leaves, steps, rng


def _on(executor):
    old = os.environ.get("TINYTORCH_FUSION")
    os.environ["TINYTORCH_FUSION"] = executor

    def restore():
        if old is None:
            os.environ.pop("TINYTORCH_FUSION", None)
        else:
            os.environ["TINYTORCH_FUSION"] = old
    return restore


def _close(got, want, what):
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-9 * scale, err_msg=what)


@given(programs(), st.sampled_from(_executors()))
def test_gradients_match_torch_autograd(program, executor):
    leaves, steps, rng = program
    fn = lambda *xs: run_program(np, steps, xs)  # noqa: E731
    with np.errstate(all="ignore"):
        expected_out = fn(*leaves)
    if np.ndim(expected_out) == 0:  # pragma: no cover - every op keeps a dimension
        return
    event(f"executor {executor}; output {'row' if expected_out.shape[-1:] == (1,) else 'full'}")
    restore = _on(executor)
    try:
        g = compile_graph(fn, *leaves)
        tensors = [Tensor(a, requires_grad=True, dtype=np.float64) for a in leaves]
        out = g(*tensors)
        weights = rng.uniform(-1, 1, out.shape)
        (out * Tensor(weights, dtype=np.float64)).sum().backward()
    finally:
        restore()
    refs = [torch.tensor(a, requires_grad=True) for a in leaves]
    ref = run_program(torch, steps, refs)
    (ref * torch.tensor(weights)).sum().backward()
    _close(out.data, ref.detach().numpy(), "forward")
    for k, (t, r) in enumerate(zip(tensors, refs)):
        want = r.grad.numpy() if r.grad is not None else np.zeros_like(leaves[k])
        got = t.grad if t.grad is not None else np.zeros_like(leaves[k])
        _close(np.asarray(got), want, f"gradient of leaf {k} (shape {leaves[k].shape}), steps {steps}")


@given(programs(), st.sampled_from(_executors()), st.booleans())
def test_out_into_an_input_buffer_gives_the_fresh_result(program, executor, with_identity):
    leaves, steps, _ = program
    domain = np.broadcast_shapes(*[a.shape for a in leaves])
    fn = lambda *xs: run_program(np, steps, xs)  # noqa: E731
    with np.errstate(all="ignore"):
        expected = np.broadcast_to(fn(*leaves), domain).copy()
    target = next((k for k, a in enumerate(leaves) if a.shape == domain), None)
    if target is None:
        event("no leaf has the domain's shape")
        return
    original = leaves[target].copy()
    if with_identity:  # (result, the leaf itself) written into (the leaf, y)
        f2 = lambda *xs: (fn(*xs) + 0.0 * xs[target], xs[target])  # noqa: E731
    else:
        f2 = lambda *xs: fn(*xs) + 0.0 * xs[target]  # noqa: E731  (full-shaped)
    restore = _on(executor)
    try:
        g = compile_graph(f2, *leaves)
        if with_identity:
            y = np.empty(domain)
            g(*leaves, out=(leaves[target], y))
            np.testing.assert_array_equal(y, original, err_msg="the identity output read the overwritten input")
        else:
            g(*leaves, out=leaves[target])
    finally:
        restore()
    _close(leaves[target], expected, f"in place into leaf {target}, steps {steps}")
