"""The one parity helper every op and layer test goes through.

``check_parity(op, ref, inputs, rng=...)`` checks, for each memory layout of the inputs
(contiguous, and non-contiguous strided views holding the same values):

  1. forward: ``op(*tensors)`` in the working dtype (float32 by default) against
     ``ref(*float64 arrays)``, a plain NumPy float64 reference written by the test;
  2. gradient: backward of ``sum(w * op(...))`` for a random ``w`` against float64
     central differences of the *reference* (so the check does not trust any of our
     code);
  3. ``gradcheck``: our backward against finite differences of our own forward, in
     float64.

Inputs are float64 arrays (perturbed and differentiated) or anything else (passed
through unchanged, e.g. indices or masks). ``diff`` can exclude float inputs from
differentiation. Tolerances are explicit per call. Failures raise AssertionError
naming the op, the layout, the input and the worst element.

Other test folders can import it with ``sys.path`` pointing at tests/core.
"""
from __future__ import annotations

import numpy as np

from tinytorch.core.autograd import gradcheck
from tinytorch.core.tensor import Tensor

__all__ = ["check_parity", "numeric_grad", "strided_copy", "assert_close"]


def strided_copy(a: np.ndarray) -> np.ndarray:
    """Same values, but a non-contiguous view (every other element of a wider buffer)."""
    if a.ndim == 0:
        return a.copy()
    buf = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), dtype=a.dtype)
    view = buf[..., 1::2]
    view[...] = a
    assert a.size <= 1 or not view.flags.c_contiguous
    return view


def assert_close(actual, expected, atol, rtol, what):
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {actual.shape} != expected {expected.shape}")
    if actual.size == 0:
        return
    err = np.abs(actual - expected)
    bad = ~(err <= atol + rtol * np.abs(expected))  # NaN counts as bad
    if bad.any():
        k = int(np.flatnonzero(bad.reshape(-1))[0])
        idx = np.unravel_index(k, actual.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())}/{bad.size} elements off; at {tuple(int(i) for i in idx)} got "
            f"{actual.reshape(-1)[k]!r}, expected {expected.reshape(-1)[k]!r} (atol={atol}, rtol={rtol}, "
            f"max abs err {np.nanmax(err) if np.isfinite(err).any() else err.max()})")


def numeric_grad(ref, values, i, w, eps=1e-6):
    """d/dx_i of sum(w * ref(*values)) by float64 central differences."""
    x = np.array(values[i], dtype=np.float64)
    args = list(values)
    args[i] = x
    flat = x.reshape(-1)
    out = np.zeros(x.size)
    for k in range(x.size):
        orig = flat[k]
        flat[k] = orig + eps
        plus = np.sum(w * np.asarray(ref(*args), dtype=np.float64))
        flat[k] = orig - eps
        minus = np.sum(w * np.asarray(ref(*args), dtype=np.float64))
        flat[k] = orig
        out[k] = (plus - minus) / (2 * eps)
    return out.reshape(x.shape)


def _is_float_array(v):
    return isinstance(v, np.ndarray) and v.dtype.kind == "f"


def check_parity(op, ref, inputs, *, rng, dtype=np.float32, diff=None,
                 fwd_atol=1e-5, fwd_rtol=1e-5, grad_atol=1e-5, grad_rtol=1e-4,
                 layouts=("contiguous", "strided"), gradcheck_atol=1e-6, gradcheck_rtol=1e-5,
                 check_gradcheck=True, name=None):
    """Forward and gradient parity of ``op`` against the float64 NumPy reference ``ref``."""
    name = name or getattr(op, "__name__", "op")
    values = [np.array(v, dtype=np.float64) if _is_float_array(v) else v for v in inputs]
    if diff is None:
        diff = [_is_float_array(v) for v in values]
    expected = np.asarray(ref(*values), dtype=np.float64)
    w = rng.standard_normal(expected.shape)
    numeric = {i: numeric_grad(ref, values, i, w) for i, d in enumerate(diff) if d}

    for layout in layouts:
        tensors = []
        for v, d in zip(values, diff):
            if _is_float_array(v):
                arr = v.astype(dtype)
                if layout == "strided":
                    arr = strided_copy(arr)
                tensors.append(Tensor.from_numpy(arr, requires_grad=d))  # keeps the strided view
            else:
                tensors.append(v)
        out = op(*tensors)
        if not isinstance(out, Tensor):
            raise AssertionError(f"{name}: returned {type(out).__name__}, not a Tensor")
        if out.dtype != np.dtype(dtype):
            raise AssertionError(f"{name} [{layout}]: output dtype {out.dtype}, expected {np.dtype(dtype)}")
        assert_close(out.data, expected, fwd_atol, fwd_rtol, f"{name} forward [{layout}]")
        if not any(diff):
            continue
        out.backward(w.astype(dtype))
        for i, d in enumerate(diff):
            if not d:
                continue
            g = tensors[i].grad
            if g is None:
                g = np.zeros_like(values[i])
            if g.dtype != np.dtype(dtype):
                raise AssertionError(f"{name} [{layout}]: grad of input {i} has dtype {g.dtype}")
            assert_close(g, numeric[i], grad_atol, grad_rtol, f"{name} grad of input {i} [{layout}]")

    if check_gradcheck and any(diff):
        args = [Tensor(v, requires_grad=d, dtype=np.float64) if _is_float_array(v) else v
                for v, d in zip(values, diff)]
        gradcheck(op, *args, atol=gradcheck_atol, rtol=gradcheck_rtol)
    return expected
