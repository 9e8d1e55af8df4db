"""Shared pieces of the differential tests: strategies for float64 inputs in awkward
layouts, and comparisons of tinytorch against PyTorch (the reference), in float64.

Leaves are handed to tinytorch *without a copy* (``Tensor.from_numpy``) so that
non-contiguous layouts (Fortran order, strided, negative strides) reach the ops, and
their arrays are made read-only, so an op that writes into its input fails loudly.
"""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tinytorch.core.tensor import Tensor

# Bounded, finite values; hypothesis favours 0, +-1, 0.5..., which makes ties and exact
# zeros (kinks of relu/abs/max) common.
ELEMENTS = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=64)
LAYOUTS = st.sampled_from(["contiguous", "fortran", "strided", "reversed"])
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def arrays(shape, elements=ELEMENTS):
    return hnp.arrays(np.float64, shape, elements=elements)


def in_layout(x: np.ndarray, layout: str) -> np.ndarray:
    """The same values as ``x`` in a (usually) non-contiguous, read-only array."""
    if layout == "fortran" and x.ndim >= 2:
        out = np.asfortranarray(x)
    elif layout == "strided" and x.ndim >= 1:
        buf = np.zeros(x.shape[:-1] + (2 * x.shape[-1] + 1,))
        out = buf[..., 1::2]
        out[...] = x
    elif layout == "reversed" and x.ndim >= 1:
        out = x[::-1].copy()[::-1]
    else:
        out = x.copy()
    out.flags.writeable = False
    return out


def leaf(x: np.ndarray, layout: str = "contiguous", requires_grad: bool = True):
    """(tinytorch Tensor sharing a view of x, torch float64 leaf holding a copy of x)."""
    ours = Tensor.from_numpy(in_layout(np.asarray(x, dtype=np.float64), layout), requires_grad=requires_grad)
    ref = torch.tensor(np.array(x, dtype=np.float64), requires_grad=requires_grad)
    return ours, ref


def to_numpy(v) -> np.ndarray:
    if isinstance(v, torch.Tensor):
        return v.detach().numpy()
    if isinstance(v, Tensor):
        return v.data
    return np.asarray(v)


def assert_same(ours, ref, what: str, rtol: float = 1e-9, atol: float = 1e-10) -> None:
    """Same shape, and values within float64 tolerances; nan and +-inf must sit in the
    same places. ``atol`` is scaled by the largest finite reference magnitude, so a
    cancellation error in a large sum is not mistaken for a bug."""
    if isinstance(ours, (Tensor, np.ndarray)):   # a float64 graph must stay float64
        assert to_numpy(ours).dtype == np.float64, f"{what}: dtype {to_numpy(ours).dtype}, not float64"
    a = np.asarray(to_numpy(ours), dtype=np.float64)
    b = np.asarray(to_numpy(ref), dtype=np.float64)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != PyTorch's {b.shape}"
    finite = b[np.isfinite(b)]
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale, equal_nan=True,
                               err_msg=f"{what} differs from PyTorch")


def assert_grads(ours_leaves, ref_leaves, what: str = "grad", **tol) -> None:
    """Every leaf's gradient (None counts as zeros) against PyTorch's; ours must be an
    ndarray of the leaf's shape and dtype."""
    for i, (t, p) in enumerate(zip(ours_leaves, ref_leaves)):
        g = t.grad
        if g is not None:
            assert type(g) is np.ndarray, f"{what} {i}: .grad is a {type(g).__name__}, not an ndarray"
            assert g.shape == t.shape and g.dtype == t.dtype, \
                f"{what} {i}: .grad has shape {g.shape} / {g.dtype}, the leaf {t.shape} / {t.dtype}"
        mine = np.zeros(t.shape) if g is None else g
        theirs = np.zeros(tuple(p.shape)) if p.grad is None else p.grad
        assert_same(mine, theirs, f"{what} of leaf {i} (shape {t.shape})", **tol)


def backward_both(out, ref, w: np.ndarray) -> None:
    """Backpropagate the same upstream gradient through both graphs."""
    w = np.asarray(w, dtype=np.float64)
    out.backward(w)
    ref.backward(torch.tensor(w))


def gather(p, index, shape):
    """PyTorch reference for any NumPy index (negative steps included, which torch
    slicing lacks): gather the flat positions the index selects; repeated positions
    accumulate in backward, as they must."""
    flat = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)[index]
    return p.reshape(-1)[torch.as_tensor(np.ascontiguousarray(flat).reshape(-1))].reshape(flat.shape)
