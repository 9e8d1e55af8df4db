"""Ops: the differentiable array operations behind Tensor's operators and methods.

Each op is a ``Function`` (see autograd.py): ``forward`` takes NumPy arrays (and keyword
parameters) and returns one array, ``backward`` returns one gradient (or None) per
positional input, in the input's shape or the output's (the engine undoes broadcasting).
Nothing here knows the Tensor class: tensor.py wraps these ops in operators (``a + b`` is
``Add.apply(a, b)``) and methods, so this module sits between the engine and the class:
autograd <- ops <- tensor.

What this file owns: ``Cast`` (the one cast with gradient: the gradient goes back to the
source dtype), arithmetic (``Add``, ``Sub``, ``Mul``, ``Div``, ``Pow``, ``Neg``,
``MatMul``), reductions (``Sum``, ``Mean``, ``MaxMin``, ``Var``), elementwise maths
(``Exp``, ``Log``, ``Sqrt``, ``Abs``, ``Clip``), shape and indexing (``Reshape``,
``Contiguous``, ``Permute``, ``GetItem``, ``Concat``, ``Stack``, ``MaskedFill``, ``Where``). The
activations' Functions live in activation_ops.py.

What it assumes: arguments were checked by the caller (tensor.py normalises axes and
indices); matmuls go through ``acceleration`` (never ``@`` on arrays here), forward and
backward, so native kernels are routed in without editing this file.
"""
from __future__ import annotations

import numpy as np

from . import acceleration as _acc
from .autograd import Function

__all__ = ["Cast", "Add", "Sub", "Mul", "Div", "Pow", "Neg", "MatMul", "Sum", "Mean", "MaxMin",
           "Var", "Exp", "Log", "Sqrt", "Abs", "Clip", "Reshape", "Permute", "GetItem", "Concat",
           "Stack", "MaskedFill", "Where"]


def _is_basic_index(index):
    items = index if isinstance(index, tuple) else (index,)
    for i in items:
        if not (i is None or i is Ellipsis or isinstance(i, (slice, int, np.integer))):
            return False
    return True


def _expand_reduced(g, axis, keepdims):
    """Reshape a reduced gradient so it broadcasts against the input shape."""
    if axis is not None and not keepdims:
        g = np.expand_dims(g, axis)
    return g



class Cast(Function):
    """``a.astype(dtype)``; the gradient is cast back to the source dtype. The one cast with
    gradient of the package (``Tensor.astype``/``float``/``half``/``double`` use it)."""

    def forward(self, a, dtype):
        """``a`` (any array) converted to the NumPy ``dtype``; remembers a's dtype."""
        self.src = a.dtype
        return a.astype(dtype)

    def backward(self, g):
        """The output gradient ``g`` cast back to the source dtype."""
        return g.astype(self.src)


class Add(Function):
    """``a + b`` with NumPy broadcasting (``Tensor.__add__``)."""

    def forward(self, a, b):
        """``a + b`` for broadcastable arrays ``a`` and ``b``."""
        return a + b

    def backward(self, g):
        """``g`` for both inputs (the engine sums broadcast axes back to each shape)."""
        return g, g


class Sub(Function):
    """``a - b`` with NumPy broadcasting (``Tensor.__sub__``)."""

    def forward(self, a, b):
        """``a - b`` for broadcastable arrays ``a`` and ``b``."""
        return a - b

    def backward(self, g):
        """``g`` for a and ``-g`` for b (None when b needs no gradient)."""
        return g, (-g if self.needs_input_grad[1] else None)


class Mul(Function):
    """Elementwise ``a * b`` with NumPy broadcasting (``Tensor.__mul__``)."""

    def forward(self, a, b):
        """``a * b``; saves only the operand each gradient needs."""
        need = self.needs_input_grad
        if need[0]:
            self.b = b
        if need[1]:
            self.a = a
        return a * b

    def backward(self, g):
        """``g * b`` for a and ``g * a`` for b."""
        need = self.needs_input_grad
        return (g * self.b if need[0] else None), (g * self.a if need[1] else None)


class Div(Function):
    """Elementwise true division ``a / b`` with broadcasting (``Tensor.__truediv__``)."""

    def forward(self, a, b):
        """``a / b`` for broadcastable arrays ``a`` and ``b``."""
        self.a, self.b = a, b
        return a / b

    def backward(self, g):
        """``g / b`` for a and ``-g * a / b / b`` for b (never ``b * b``, which underflows)."""
        need = self.needs_input_grad
        ga = g / self.b if need[0] else None
        # (a / b) / b, never b * b: b * b underflows to 0 (float32 b = 1e-23) and gives -inf
        gb = -g * (self.a / self.b / self.b) if need[1] else None
        return ga, gb


class Pow(Function):
    """Elementwise ``a ** b`` (``Tensor.__pow__``), with PyTorch's gradient conventions at
    ``a == 0`` and ``b == 0``."""

    def forward(self, a, b):
        """``np.power(a, b)``; ``b`` may be an array or a Python number."""
        self.a, self.b = a, b
        with np.errstate(divide="ignore", invalid="ignore"):
            self.out = np.power(a, b)
        return self.out

    def backward(self, g):
        """``g * b * a**(b-1)`` for a (0 where b == 0) and ``g * a**b * log(a)`` for b
        (0 where a == 0 and b >= 0)."""
        a, b = self.a, self.b
        need = self.needs_input_grad
        ga = gb = None
        # PyTorch's conventions at the edges: da is 0 where b == 0 (even at a == 0, where
        # b * a**(b-1) is 0 * inf), db is 0 where a == 0 and b >= 0 (a**b * log(a) would be
        # 0 * -inf); a < 0 still gives log(a) = nan, as in PyTorch.
        with np.errstate(divide="ignore", invalid="ignore"):
            if need[0]:
                if isinstance(b, (int, float)) and b == 2:
                    ga = g * (2 * a)
                elif isinstance(b, (int, float)) and b == 0:
                    ga = np.zeros_like(g)
                else:
                    ga = g * np.where(b == 0, 0, b * np.power(a, b - 1))
            if need[1]:
                gb = g * np.where((a == 0) & (b >= 0), 0, self.out * np.log(a))
        return ga, gb


class Neg(Function):
    """Elementwise ``-a`` (``Tensor.__neg__``)."""

    def forward(self, a):
        """``-a``."""
        return -a

    def backward(self, g):
        """``-g``."""
        return -g


class MatMul(Function):
    """a @ b with NumPy's rules (1-D promotion, batch broadcasting); all through acceleration."""

    def forward(self, a, b):
        """``a @ b`` for arrays ``a`` (..., M, K) or (K,) and ``b`` (..., K, N) or (K,);
        raises ValueError on 0-d operands or mismatched inner dimensions."""
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {a.shape} and {b.shape}")
        ka = a.shape[-1]
        kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
        if ka != kb:
            raise ValueError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape} ({ka} != {kb})")
        self.a, self.b = a, b
        return _acc.matmul(a, b)

    def backward(self, g):
        """``g @ b^T`` for a and ``a^T @ g`` for b (``acceleration.matmul_backward``)."""
        # the one formula, in the door (transpose flags, size-0 safe); batch axes come back
        # as broadcast and the engine sums them to each operand's shape
        return _acc.matmul_backward(self.a, self.b, g, self.needs_input_grad)


class Sum(Function):
    """Sum over axes (``Tensor.sum``)."""

    def forward(self, a, axis, keepdims):
        """``np.sum(a, axis, keepdims)``; ``axis`` is None or a tuple of non-negative ints."""
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        return np.sum(a, axis=axis, keepdims=keepdims)

    def backward(self, g):
        """``g`` broadcast back over the summed axes to the input's shape."""
        return np.broadcast_to(_expand_reduced(g, self.axis, self.keepdims), self.shape)


class Mean(Function):
    """Mean over axes (``Tensor.mean``); NaN for an empty reduction, as in NumPy."""

    def forward(self, a, axis, keepdims):
        """``np.mean(a, axis, keepdims)``; ``axis`` is None or a tuple of non-negative ints."""
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        n = a.size if axis is None else int(np.prod([a.shape[i] for i in axis]))
        self.scale = 1.0 / n if n else float("nan")
        return np.mean(a, axis=axis, keepdims=keepdims) if n else \
            np.full(np.sum(a, axis=axis, keepdims=keepdims).shape, np.nan, dtype=a.dtype)

    def backward(self, g):
        """``g / n`` broadcast over the n averaged elements."""
        g = _expand_reduced(g, self.axis, self.keepdims) * self.scale
        return np.broadcast_to(g, self.shape)


class MaxMin(Function):
    """max/min over axes; the gradient is shared equally between tied extremes."""

    def forward(self, a, axis, keepdims, use_max):
        """Max (``use_max=True``) or min of ``a`` over ``axis`` (None or a tuple of ints),
        keeping the reduced axes when ``keepdims``; an empty reduced axis raises ValueError."""
        # like PyTorch: an empty *reduced* axis has no extreme; other size-0 axes are fine
        if 0 in (a.shape if axis is None else [a.shape[i] for i in axis]):
            raise ValueError(f"{'max' if use_max else 'min'}: reduction over an empty axis "
                             f"(shape {a.shape}, axis {axis})")
        out = np.max(a, axis=axis, keepdims=True) if use_max else np.min(a, axis=axis, keepdims=True)
        self.mask = a == out
        self.axis, self.keepdims = axis, keepdims
        return out if keepdims else (out.reshape(()) if axis is None else np.squeeze(out, axis=axis))

    def backward(self, g):
        """``g`` routed to the positions of the extreme, divided by the number of ties."""
        if not self.keepdims:
            g = np.expand_dims(g, self.axis) if self.axis is not None else np.reshape(g, (1,) * self.mask.ndim)
        count = self.mask.sum(axis=self.axis, keepdims=True)
        return self.mask * (g / count)


class Var(Function):
    """Variance over axes (``Tensor.var``), NumPy's ``ddof`` convention."""

    def forward(self, a, axis, keepdims, ddof):
        """``np.var(a, axis, keepdims, ddof)``: divides by n - ``ddof``."""
        self.axis, self.keepdims = axis, keepdims
        n = a.size if axis is None else int(np.prod([a.shape[i] for i in axis]))
        self.centered = a - np.mean(a, axis=axis, keepdims=True)
        self.scale = 2.0 / (n - ddof) if n - ddof > 0 else float("nan")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.var(a, axis=axis, keepdims=keepdims, ddof=ddof)

    def backward(self, g):
        """``g * 2 (a - mean) / (n - ddof)``."""
        g = _expand_reduced(g, self.axis, self.keepdims)
        return g * self.centered * self.scale


class Exp(Function):
    """Elementwise ``e ** a`` (``Tensor.exp``)."""

    def forward(self, a):
        """``np.exp(a)``; the result is saved for the backward."""
        self.out = np.exp(a)
        return self.out

    def backward(self, g):
        """``g * exp(a)``."""
        return g * self.out


class Log(Function):
    """Elementwise natural logarithm (``Tensor.log``)."""

    def forward(self, a):
        """``np.log(a)``."""
        self.a = a
        return np.log(a)

    def backward(self, g):
        """``g / a``."""
        return g / self.a


class Sqrt(Function):
    """Elementwise square root (``Tensor.sqrt``)."""

    def forward(self, a):
        """``np.sqrt(a)``; the result is saved for the backward."""
        self.out = np.sqrt(a)
        return self.out

    def backward(self, g):
        """``g / (2 sqrt(a))``."""
        return g / (2 * self.out)


class Abs(Function):
    """Elementwise absolute value (``Tensor.abs``); gradient ``sign(a)``, 0 at 0."""

    def forward(self, a):
        """``np.abs(a)``."""
        self.a = a
        return np.abs(a)

    def backward(self, g):
        """``g * sign(a)``."""
        return g * np.sign(self.a)


class Clip(Function):
    """Clamp into [lo, hi] (``Tensor.clip``); the gradient flows where lo <= a <= hi."""

    def forward(self, a, lo, hi):
        """``np.clip(a, lo, hi)`` in a's dtype; ``lo`` or ``hi`` may be None (no bound)."""
        self.keep = np.ones(a.shape, dtype=bool)
        if lo is not None:
            self.keep &= a >= lo
        if hi is not None:
            self.keep &= a <= hi
        return np.clip(a, lo, hi).astype(a.dtype, copy=False)

    def backward(self, g):
        """``g`` where a was within the bounds (inclusive), 0 elsewhere."""
        return g * self.keep


class Reshape(Function):
    """The same elements in a new shape (``Tensor.reshape``)."""

    def forward(self, a, shape):
        """``a.reshape(shape)``; ``shape`` is a tuple of ints (one may be -1)."""
        self.shape = a.shape
        return a.reshape(shape)

    def backward(self, g):
        """``g`` reshaped to the input's shape."""
        return g.reshape(self.shape)


class Contiguous(Function):
    """A C-contiguous copy of a strided input (``Tensor.contiguous``); the gradient passes through."""

    def forward(self, a):
        """``np.ascontiguousarray(a)``."""
        return np.ascontiguousarray(a)

    def backward(self, g):
        """``g`` unchanged."""
        return g


class Permute(Function):
    """Axis permutation (``Tensor.permute``, ``transpose``, ``.T``)."""

    def forward(self, a, perm):
        """``a.transpose(perm)``; ``perm`` is a permutation of range(a.ndim)."""
        self.perm = perm  # inverted only if backward runs (inference never pays for it)
        return a.transpose(perm)

    def backward(self, g):
        """``g`` transposed by the inverse permutation."""
        return g.transpose(sorted(range(len(self.perm)), key=self.perm.__getitem__))


class GetItem(Function):
    """Basic and integer-array indexing; the backward scatters (and adds duplicates)."""

    def forward(self, a, index):
        """``a[index]``: ``index`` is anything NumPy accepts (ints, slices, None,
        Ellipsis, integer or bool arrays, tuples of those)."""
        self.shape, self.dtype, self.index = a.shape, a.dtype, index
        return a[index]

    def backward(self, g):
        """Zeros of the input's shape with ``g`` scattered into the indexed positions
        (repeated integer indices add up, via ``np.add.at``)."""
        out = np.zeros(self.shape, dtype=g.dtype)
        if _is_basic_index(self.index):
            out[self.index] = g
        else:
            np.add.at(out, self.index, g)
        return out


class Concat(Function):
    """Join arrays along an existing axis (``concat``/``cat``)."""

    def forward(self, *arrays, axis):
        """``np.concatenate(arrays, axis)``; ``axis`` is a non-negative int."""
        self.axis = axis
        self.bounds = np.cumsum([x.shape[axis] for x in arrays])[:-1]
        return np.concatenate(arrays, axis=axis)

    def backward(self, g):
        """``g`` split back into one piece per input along the joined axis."""
        return tuple(np.split(g, self.bounds, axis=self.axis))


class Stack(Function):
    """Join same-shaped arrays along a new axis (``stack``)."""

    def forward(self, *arrays, axis):
        """``np.stack(arrays, axis)``; ``axis`` is a non-negative int."""
        self.axis = axis
        return np.stack(arrays, axis=axis)

    def backward(self, g):
        """One slice of ``g`` along the new axis per input."""
        return tuple(np.moveaxis(g, self.axis, 0))


class MaskedFill(Function):
    """Replace elements where a bool mask is True by a constant (``Tensor.masked_fill``)."""

    def forward(self, a, mask, value):
        """``where(mask, value, a)``: ``mask`` is a bool array broadcastable to a,
        ``value`` a number (cast to a's dtype)."""
        self.mask = mask
        return np.where(mask, np.asarray(value, dtype=a.dtype), a)

    def backward(self, g):
        """``g`` with the filled positions zeroed; None for the mask."""
        return np.where(self.mask, 0, g).astype(g.dtype, copy=False), None


class Where(Function):
    """Elementwise selection ``a if cond else b`` (``where``)."""

    def forward(self, cond, a, b):
        """``np.where(cond, a, b)``; ``cond`` is a bool array, all three broadcast."""
        self.cond = cond
        return np.where(cond, a, b)

    def backward(self, g):
        """None for cond, ``g`` where cond is True for a, ``g`` where it is False for b."""
        need = self.needs_input_grad
        zero = np.zeros((), dtype=g.dtype)
        return (None,
                np.where(self.cond, g, zero) if need[1] else None,
                np.where(self.cond, zero, g) if need[2] else None)
