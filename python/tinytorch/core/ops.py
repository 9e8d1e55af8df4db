"""Ops: the differentiable array operations behind Tensor's operators and methods.

Each op is a ``Function`` (see autograd.py): ``forward`` takes NumPy arrays (and keyword
parameters) and returns one array, ``backward`` returns one gradient (or None) per
positional input, in the input's shape or the output's (the engine undoes broadcasting).
Nothing here knows the Tensor class: tensor.py wraps these ops in operators (``a + b`` is
``Add.apply(a, b)``) and methods, so this module sits between the engine and the class:
autograd <- ops <- tensor.

What lives here: ``Cast`` (the one cast with gradient: the gradient goes back to the
source dtype), arithmetic (``Add``, ``Sub``, ``Mul``, ``Div``, ``Pow``, ``Neg``,
``MatMul``), reductions (``Sum``, ``Mean``, ``MaxMin``, ``Var``), elementwise maths
(``Exp``, ``Log``, ``Sqrt``, ``Abs``, ``Clip``), shape and indexing (``Reshape``,
``Permute``, ``GetItem``, ``Concat``, ``Stack``, ``MaskedFill``, ``Where``). The
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
        self.src = a.dtype
        return a.astype(dtype)

    def backward(self, g):
        return g.astype(self.src)


class Add(Function):
    def forward(self, a, b):
        return a + b

    def backward(self, g):
        return g, g


class Sub(Function):
    def forward(self, a, b):
        return a - b

    def backward(self, g):
        return g, (-g if self.needs_input_grad[1] else None)


class Mul(Function):
    def forward(self, a, b):
        need = self.needs_input_grad
        if need[0]:
            self.b = b
        if need[1]:
            self.a = a
        return a * b

    def backward(self, g):
        need = self.needs_input_grad
        return (g * self.b if need[0] else None), (g * self.a if need[1] else None)


class Div(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        return a / b

    def backward(self, g):
        need = self.needs_input_grad
        ga = g / self.b if need[0] else None
        # (a / b) / b, never b * b: b * b underflows to 0 (float32 b = 1e-23) and gives -inf
        gb = -g * (self.a / self.b / self.b) if need[1] else None
        return ga, gb


class Pow(Function):
    def forward(self, a, b):
        self.a, self.b = a, b
        with np.errstate(divide="ignore", invalid="ignore"):
            self.out = np.power(a, b)
        return self.out

    def backward(self, g):
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
    def forward(self, a):
        return -a

    def backward(self, g):
        return -g


class MatMul(Function):
    """a @ b with NumPy's rules (1-D promotion, batch broadcasting); all through acceleration."""

    def forward(self, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"matmul: both operands need at least 1 dimension, got shapes {a.shape} and {b.shape}")
        ka = a.shape[-1]
        kb = b.shape[-2] if b.ndim >= 2 else b.shape[0]
        if ka != kb:
            raise ValueError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape} ({ka} != {kb})")
        self.a, self.b = a, b
        return _acc.matmul(a, b)

    def backward(self, g):
        # the one formula, in the door (transpose flags, size-0 safe); batch axes come back
        # as broadcast and the engine sums them to each operand's shape
        return _acc.matmul_backward(self.a, self.b, g, self.needs_input_grad)


class Sum(Function):
    def forward(self, a, axis, keepdims):
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        return np.sum(a, axis=axis, keepdims=keepdims)

    def backward(self, g):
        return np.broadcast_to(_expand_reduced(g, self.axis, self.keepdims), self.shape)


class Mean(Function):
    def forward(self, a, axis, keepdims):
        self.shape, self.axis, self.keepdims = a.shape, axis, keepdims
        n = a.size if axis is None else int(np.prod([a.shape[i] for i in axis]))
        self.scale = 1.0 / n if n else float("nan")
        return np.mean(a, axis=axis, keepdims=keepdims) if n else \
            np.full(np.sum(a, axis=axis, keepdims=keepdims).shape, np.nan, dtype=a.dtype)

    def backward(self, g):
        g = _expand_reduced(g, self.axis, self.keepdims) * self.scale
        return np.broadcast_to(g, self.shape)


class MaxMin(Function):
    """max/min over axes; the gradient is shared equally between tied extremes."""

    def forward(self, a, axis, keepdims, use_max):
        # like PyTorch: an empty *reduced* axis has no extreme; other size-0 axes are fine
        if 0 in (a.shape if axis is None else [a.shape[i] for i in axis]):
            raise ValueError(f"{'max' if use_max else 'min'}: reduction over an empty axis "
                             f"(shape {a.shape}, axis {axis})")
        out = np.max(a, axis=axis, keepdims=True) if use_max else np.min(a, axis=axis, keepdims=True)
        self.mask = a == out
        self.axis, self.keepdims = axis, keepdims
        return out if keepdims else (out.reshape(()) if axis is None else np.squeeze(out, axis=axis))

    def backward(self, g):
        if not self.keepdims:
            g = np.expand_dims(g, self.axis) if self.axis is not None else np.reshape(g, (1,) * self.mask.ndim)
        count = self.mask.sum(axis=self.axis, keepdims=True)
        return self.mask * (g / count)


class Var(Function):
    def forward(self, a, axis, keepdims, ddof):
        self.axis, self.keepdims = axis, keepdims
        n = a.size if axis is None else int(np.prod([a.shape[i] for i in axis]))
        self.centered = a - np.mean(a, axis=axis, keepdims=True)
        self.scale = 2.0 / (n - ddof) if n - ddof > 0 else float("nan")
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.var(a, axis=axis, keepdims=keepdims, ddof=ddof)

    def backward(self, g):
        g = _expand_reduced(g, self.axis, self.keepdims)
        return g * self.centered * self.scale


class Exp(Function):
    def forward(self, a):
        self.out = np.exp(a)
        return self.out

    def backward(self, g):
        return g * self.out


class Log(Function):
    def forward(self, a):
        self.a = a
        return np.log(a)

    def backward(self, g):
        return g / self.a


class Sqrt(Function):
    def forward(self, a):
        self.out = np.sqrt(a)
        return self.out

    def backward(self, g):
        return g / (2 * self.out)


class Abs(Function):
    def forward(self, a):
        self.a = a
        return np.abs(a)

    def backward(self, g):
        return g * np.sign(self.a)


class Clip(Function):
    def forward(self, a, lo, hi):
        self.keep = np.ones(a.shape, dtype=bool)
        if lo is not None:
            self.keep &= a >= lo
        if hi is not None:
            self.keep &= a <= hi
        return np.clip(a, lo, hi).astype(a.dtype, copy=False)

    def backward(self, g):
        return g * self.keep


class Reshape(Function):
    def forward(self, a, shape):
        self.shape = a.shape
        return a.reshape(shape)

    def backward(self, g):
        return g.reshape(self.shape)


class Permute(Function):
    def forward(self, a, perm):
        self.inverse = tuple(np.argsort(perm))
        return a.transpose(perm)

    def backward(self, g):
        return g.transpose(self.inverse)


class GetItem(Function):
    """Basic and integer-array indexing; the backward scatters (and adds duplicates)."""

    def forward(self, a, index):
        self.shape, self.dtype, self.index = a.shape, a.dtype, index
        return a[index]

    def backward(self, g):
        out = np.zeros(self.shape, dtype=g.dtype)
        if _is_basic_index(self.index):
            out[self.index] = g
        else:
            np.add.at(out, self.index, g)
        return out


class Concat(Function):
    def forward(self, *arrays, axis):
        self.axis = axis
        self.bounds = np.cumsum([x.shape[axis] for x in arrays])[:-1]
        return np.concatenate(arrays, axis=axis)

    def backward(self, g):
        return tuple(np.split(g, self.bounds, axis=self.axis))


class Stack(Function):
    def forward(self, *arrays, axis):
        self.axis = axis
        return np.stack(arrays, axis=axis)

    def backward(self, g):
        return tuple(np.moveaxis(g, self.axis, 0))


class MaskedFill(Function):
    def forward(self, a, mask, value):
        self.mask = mask
        return np.where(mask, np.asarray(value, dtype=a.dtype), a)

    def backward(self, g):
        return np.where(self.mask, 0, g).astype(g.dtype, copy=False), None


class Where(Function):
    def forward(self, cond, a, b):
        self.cond = cond
        return np.where(cond, a, b)

    def backward(self, g):
        need = self.needs_input_grad
        zero = np.zeros((), dtype=g.dtype)
        return (None,
                np.where(self.cond, g, zero) if need[1] else None,
                np.where(self.cond, zero, g) if need[2] else None)
