"""Tensor: a NumPy array plus the autograd bookkeeping, and the operators that record ops.

What this file owns
  * ``Tensor(data, requires_grad=False, dtype=None)``. ``.data`` is always a NumPy array
    (so ``t.data.ctypes.data_as(...)`` works for native kernels), ``.grad`` is a NumPy
    array of the tensor's shape and dtype, or None, ``._ctx`` is the Function that produced
    it (None for leaves).
  * ``._version``: stamped by ``autograd.bump_version`` whenever ``.data`` is assigned
    (``t.data = a``, ``t.data -= d``) and by optimizer steps, so backward can refuse to use
    values a Function saved that were changed in place since the forward (PyTorch's
    version counter). Writes through the array itself (``t.data[...] = v``) are not seen:
    call ``bump_version(t)`` after one.
  * The sugar: Python operators, comparisons, reductions, shape and indexing methods and
    the activation methods (``relu``, ``sigmoid``, ``tanh``, ``softmax``, ``log_softmax``),
    each a thin call of a ``Function`` from ops.py or activation_ops.py; and the functional
    forms ``concat``/``cat``, ``stack``, ``split``, ``where``, ``tensor``, ``zeros``,
    ``ones``, ``randn``. ``Function`` is re-exported here because the extension guide
    imports it as ``from tinytorch.core.tensor import Tensor, Function``.

Import structure (no cycle): autograd <- ops, activation_ops <- tensor. This file builds on
the others and, once the class exists, registers it with the engine
(``@autograd.register_tensor_class``), which is how ``Function.apply`` makes Tensors without
importing this module. Layers and the activation layers build on this file, never the
other way round.

The constructor copies its input (like ``torch.tensor``), so an optimizer updating a
parameter in place never writes into the caller's array; ``Tensor.from_numpy(arr)``
shares the array instead (like ``torch.from_numpy``).

Dtype rule (dtype=None): Python numbers and lists become float32; float16 and float32
arrays keep their dtype; float64 arrays become float32 (NumPy's default float64 would
otherwise silently double memory and time) unless ``dtype=np.float64`` is asked for;
integer and bool arrays keep their dtype (labels, masks, token ids). Results of ops keep
whatever dtype NumPy's promotion gives, so a float64 or float16 graph stays so;
activations of integer tensors are float32 (see activation_ops.py).

What it assumes: the Functions of ops.py and activation_ops.py do all the differentiable work
(this file computes no gradient itself) and the engine (autograd.py) runs backward; NumPy's
semantics (broadcasting, indexing, promotion) apply to every result; ``randn`` draws from the
framework generator (core/random.py).
"""
from __future__ import annotations

import operator

import numpy as np

from . import autograd as _autograd
from .activation_ops import (LogSoftmaxFunction, ReLUFunction, SigmoidFunction, SoftmaxFunction,
                             TanhFunction)
from .autograd import Function, no_grad, is_grad_enabled, gradcheck  # noqa: F401  (re-exports)
from .ops import (Abs, Add, Cast, Clip, Concat, Contiguous, Div, Exp, GetItem, Log, MaskedFill, MatMul, MaxMin,
                  Mean, Mul, Neg, Permute, Pow, Reshape, Sqrt, Stack, Sub, Sum, Var, Where)
from .random import get_generator

__all__ = ["Tensor", "Function", "no_grad", "is_grad_enabled", "gradcheck",
           "concat", "cat", "stack", "split", "where", "zeros", "ones", "randn", "tensor",
           "BYTES_PER_FLOAT32", "KB_TO_BYTES", "MB_TO_BYTES"]

# Memory units, under upstream TinyTorch's names: the package's one definition, imported by
# every module that reports sizes (profiling, quantization, compression, transformer, ...).
BYTES_PER_FLOAT32 = np.dtype(np.float32).itemsize  # 4
KB_TO_BYTES = 1024
MB_TO_BYTES = 1024 * 1024

_FLOAT_KEEP = (np.dtype(np.float16), np.dtype(np.float32))


def _as_array(data, dtype):
    if dtype is not None:
        return np.array(data, dtype=dtype)
    if isinstance(data, np.ndarray):
        dt = data.dtype
        if dt in _FLOAT_KEEP or dt.kind in "iub":
            return data.copy()
        if dt.kind == "f":
            return data.astype(np.float32)
        if dt.kind == "c":
            raise TypeError(f"Tensor: complex dtype {dt} is not supported")
        return np.asarray(data, dtype=np.float32)
    if isinstance(data, np.generic):
        return _as_array(np.asarray(data), None)
    return np.asarray(data, dtype=np.float32)


def _comparison(op):
    def compare(self, other):
        return Tensor._make(np.asarray(op(self.data, other.data if isinstance(other, Tensor) else other)), False, None)
    return compare


# Registered once, here, as the class the engine unwraps and makes (see autograd.py):
# that is how Function.apply returns Tensors without importing this module.
@_autograd.register_tensor_class
class Tensor:
    """An n-dimensional array that can record the operations applied to it.

    Args:
        data: the values: a Python number, a (nested) list, a NumPy array or another
            Tensor (its array). Always copied; use ``Tensor.from_numpy`` to share an array.
        requires_grad: record operations on this tensor so ``backward()`` fills its
            ``.grad``. Only floating-point tensors may require grad.
        dtype: NumPy dtype to convert to. None applies the module's dtype rule: numbers and
            lists become float32, float16/float32 arrays keep their dtype, float64 arrays
            become float32, integer and bool arrays keep theirs.

    ``.data`` is the NumPy array, ``.grad`` an array of the same shape and dtype (or None).
    """

    __slots__ = ("_data", "grad", "requires_grad", "_ctx", "_version", "__dict__", "__weakref__")
    __array_ufunc__ = None   # make NumPy defer `ndarray * Tensor` to Tensor.__rmul__
    __hash__ = object.__hash__  # identity hashing, although == is elementwise

    def __init__(self, data, requires_grad: bool = False, dtype=None):
        if isinstance(data, Tensor):
            data = data.data
        arr = _as_array(data, None if dtype is None else np.dtype(dtype))
        if requires_grad and arr.dtype.kind != "f":
            raise TypeError(f"Tensor: only floating-point tensors can require grad, got {arr.dtype}")
        self._data = arr
        self._version = 0
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self._ctx = None

    @classmethod
    def from_numpy(cls, array: np.ndarray, requires_grad: bool = False) -> "Tensor":
        """Wrap ``array`` without copying it or changing its dtype (views stay views).

        ``requires_grad=True`` needs a floating-point array (like ``torch.from_numpy``
        followed by ``requires_grad_()``).
        """
        if not isinstance(array, np.ndarray):
            raise TypeError(f"from_numpy: expected a NumPy array, got {type(array).__name__}")
        if array.dtype.kind not in "fiub":
            raise TypeError(f"from_numpy: unsupported dtype {array.dtype}")
        if requires_grad and array.dtype.kind != "f":
            raise TypeError(f"from_numpy: only floating-point tensors can require grad, got {array.dtype}")
        return Tensor._make(array, bool(requires_grad), None)

    @classmethod
    def _make(cls, data: np.ndarray, requires_grad: bool, ctx):
        # Fast path used by Function.apply: no conversion, no checks.
        t = Tensor.__new__(Tensor)
        t._data = data
        t._version = 0
        t.grad = None
        t.requires_grad = requires_grad
        t._ctx = ctx
        return t

    # ------------------------------------------------------------------ properties
    def _set_data(self, value):
        # `t.data -= d` lands here too (with the same array), so in-place updates count
        self._data = value
        _autograd.bump_version(self)

    # the getter is a C-level attrgetter: reading .data stays nearly as cheap as a slot
    data = property(operator.attrgetter("_data"), _set_data,
                    doc="The NumPy array holding the values (assigning it bumps ``_version``).")

    @property
    def shape(self):
        """The shape, a tuple of ints (NumPy's ``ndarray.shape``)."""
        return self._data.shape

    @property
    def dtype(self):
        """The NumPy dtype of ``.data``."""
        return self._data.dtype

    @property
    def ndim(self):
        """The number of dimensions."""
        return self._data.ndim

    @property
    def size(self):
        """The number of elements (NumPy's ``size``, not PyTorch's ``size()`` method)."""
        return self._data.size

    @property
    def grad_fn(self):
        """The Function that produced this tensor, or None for a leaf."""
        return self._ctx

    @property
    def _grad_fn(self):
        """``grad_fn`` under upstream TinyTorch's name (the recorded Function here, not an
        upstream ``*Backward`` node; see docs/compat.md)."""
        return self._ctx

    @property
    def is_leaf(self):
        """True when no recorded Function produced this tensor (inputs, parameters)."""
        return self._ctx is None

    @property
    def T(self):
        """All axes reversed, with gradient (NumPy's ``.T``; PyTorch's for 2-D)."""
        return Permute.apply(self, perm=tuple(range(self.data.ndim - 1, -1, -1)))

    def __len__(self):
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    def __array__(self, dtype=None, copy=None):
        return self.data if dtype is None else self.data.astype(dtype)

    def __repr__(self):
        extra = ", requires_grad=True" if self.requires_grad else ""
        body = np.array2string(self.data, separator=", ", threshold=20)
        return f"Tensor({body}, dtype={self.data.dtype}{extra})"

    def __bool__(self):
        if self.data.size != 1:
            raise ValueError(f"the truth value of a tensor of shape {self.data.shape} is ambiguous")
        return bool(self.data)

    # ------------------------------------------------------------------ autograd API
    def backward(self, gradient=None, retain_graph: bool = False) -> None:
        """Accumulate gradients of this tensor into the ``.grad`` of every leaf.

        Args:
            gradient: d(output)/d(self), an array or Tensor of this tensor's shape (or of a
                shape this tensor broadcasts to, summed down to it, as upstream TinyTorch).
                May be None only for a one-element tensor (a scalar loss), where it is 1.
            retain_graph: keep the saved arrays so backward can run through this graph
                again; by default they are freed.
        """
        _autograd.run_backward(self, gradient, retain_graph)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(self)`` each backward once this leaf's ``.grad`` is final (PyTorch's
        name); returns a handle whose ``remove()`` unregisters it. See autograd.py.

        Args:
            hook: a callable taking this tensor.
        """
        return _autograd.register_post_accumulate_grad_hook(self, hook)

    def detach(self) -> "Tensor":
        """Same data (shared, not copied), no history, no grad."""
        return Tensor._make(self.data, False, None)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set ``requires_grad`` in place (floating-point tensors only) and return self."""
        if requires_grad and self.data.dtype.kind != "f":
            raise TypeError(f"only floating-point tensors can require grad, got {self.data.dtype}")
        self.requires_grad = bool(requires_grad)
        return self

    def zero_grad(self) -> None:
        """Drop the accumulated gradient (``.grad`` becomes None)."""
        self.grad = None

    def numpy(self) -> np.ndarray:
        """The underlying array (shared, like ``torch.Tensor.numpy``)."""
        return self.data

    def numel(self) -> int:
        """The number of elements as an int (``torch.Tensor.numel``; same as ``size``)."""
        return int(self._data.size)

    def memory_footprint(self) -> int:
        """Bytes held by the data array (``nbytes``; upstream TinyTorch's helper)."""
        return int(self._data.nbytes)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.data.size != 1:
            raise ValueError(f"item(): only one-element tensors can be converted, got shape {self.data.shape}")
        return self.data.item()

    def astype(self, dtype) -> "Tensor":
        """Cast with gradient (the gradient is cast back to the source dtype)."""
        return Cast.apply(self, dtype=np.dtype(dtype))

    to = astype

    def float(self) -> "Tensor":
        """float32 copy with gradient (PyTorch's ``Tensor.float``)."""
        return self.astype(np.float32)

    def half(self) -> "Tensor":
        """float16 copy with gradient (PyTorch's ``Tensor.half``)."""
        return self.astype(np.float16)

    def double(self) -> "Tensor":
        """float64 copy with gradient (PyTorch's ``Tensor.double``)."""
        return self.astype(np.float64)

    # ------------------------------------------------------------------ arithmetic
    def _other(self, other):
        # Python scalars pass through (NumPy keeps our dtype for them); arrays and
        # lists become constant tensors of our dtype when ours is floating.
        if isinstance(other, Tensor) or isinstance(other, (int, float, bool)):
            return other
        arr = np.asarray(other)
        if arr.dtype.kind in "fiub" and self.data.dtype.kind == "f":
            arr = arr.astype(self.data.dtype, copy=False)
        return Tensor._make(arr, False, None)

    def __add__(self, other):
        return Add.apply(self, self._other(other))

    def __radd__(self, other):
        return Add.apply(self._other(other), self)

    def __sub__(self, other):
        return Sub.apply(self, self._other(other))

    def __rsub__(self, other):
        return Sub.apply(self._other(other), self)

    def __mul__(self, other):
        return Mul.apply(self, self._other(other))

    def __rmul__(self, other):
        return Mul.apply(self._other(other), self)

    def __truediv__(self, other):
        return Div.apply(self, self._other(other))

    def __rtruediv__(self, other):
        return Div.apply(self._other(other), self)

    def __pow__(self, other):
        return Pow.apply(self, self._other(other))

    def __rpow__(self, other):
        return Pow.apply(self._other(other), self)

    def __matmul__(self, other):
        return MatMul.apply(self, self._other(other))

    def __rmatmul__(self, other):
        return MatMul.apply(self._other(other), self)

    def __neg__(self):
        return Neg.apply(self)

    def __pos__(self):
        return self

    def matmul(self, other):
        """``self @ other`` with NumPy's batching and 1-D rules, with gradient."""
        return self.__matmul__(other)

    # comparisons: a bool tensor, no gradient
    __eq__ = _comparison(np.equal)
    __ne__ = _comparison(np.not_equal)
    __lt__ = _comparison(np.less)
    __le__ = _comparison(np.less_equal)
    __gt__ = _comparison(np.greater)
    __ge__ = _comparison(np.greater_equal)

    # ------------------------------------------------------------------ elementwise
    def exp(self):
        """Elementwise e**x, with gradient."""
        return Exp.apply(self)

    def log(self):
        """Elementwise natural logarithm, with gradient."""
        return Log.apply(self)

    def sqrt(self):
        """Elementwise square root, with gradient."""
        return Sqrt.apply(self)

    def abs(self):
        """Elementwise absolute value, with gradient (0 at x == 0)."""
        return Abs.apply(self)

    def clip(self, min=None, max=None):
        """Clamp every element into [min, max]; either bound may be None (not both).
        The gradient passes where the value was inside the bounds. ``clamp`` is an alias."""
        if min is None and max is None:
            raise ValueError("clip: at least one of min and max must be given")
        return Clip.apply(self, lo=min, hi=max)

    clamp = clip

    def relu(self):
        """max(x, 0) elementwise, with gradient."""
        return ReLUFunction.apply(self)

    def sigmoid(self):
        """1 / (1 + e**-x) elementwise (numerically stable), with gradient."""
        return SigmoidFunction.apply(self)

    def tanh(self):
        """Elementwise hyperbolic tangent, with gradient."""
        return TanhFunction.apply(self)

    def softmax(self, axis=-1):
        """Softmax along ``axis`` (entries along it are positive and sum to 1)."""
        return SoftmaxFunction.apply(self, axis=axis)

    def log_softmax(self, axis=-1):
        """log(softmax(x)) along ``axis``, computed stably (x - logsumexp(x))."""
        return LogSoftmaxFunction.apply(self, axis=axis)

    # ------------------------------------------------------------------ reductions
    def sum(self, axis=None, keepdims=False):
        """Sum over ``axis`` (an int, a tuple of ints, or None for all axes); ``keepdims``
        keeps the reduced axes with size 1. NumPy's naming (PyTorch: dim, keepdim)."""
        return Sum.apply(self, axis=_norm_axis(axis, self.data.ndim), keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        """Mean over ``axis`` (int, tuple or None for all); ``keepdims`` as in ``sum``."""
        return Mean.apply(self, axis=_norm_axis(axis, self.data.ndim), keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        """Maximum over ``axis`` (int, tuple or None for all); ``keepdims`` as in ``sum``.
        Returns values only; the gradient is split evenly between tied maxima."""
        return MaxMin.apply(self, axis=_norm_axis(axis, self.data.ndim), keepdims=keepdims, use_max=True)

    def min(self, axis=None, keepdims=False):
        """Minimum over ``axis`` (int, tuple or None for all); ``keepdims`` as in ``sum``.
        Returns values only; the gradient is split evenly between tied minima."""
        return MaxMin.apply(self, axis=_norm_axis(axis, self.data.ndim), keepdims=keepdims, use_max=False)

    def var(self, axis=None, keepdims=False, ddof=0):
        """Variance over ``axis`` (int, tuple or None for all), with ``keepdims`` as in
        ``sum``. NumPy's convention: ``ddof=0`` is the biased estimate, ``ddof=1`` the
        unbiased one (PyTorch's default)."""
        return Var.apply(self, axis=_norm_axis(axis, self.data.ndim), keepdims=keepdims, ddof=ddof)

    def argmax(self, axis=None):
        """Index of the maximum along ``axis`` (over the flattened tensor when None):
        an int64 tensor without gradient."""
        return Tensor._make(np.asarray(self.data.argmax(axis=axis)), False, None)

    def argmin(self, axis=None):
        """Index of the minimum along ``axis`` (flattened when None), without gradient."""
        return Tensor._make(np.asarray(self.data.argmin(axis=axis)), False, None)

    # ------------------------------------------------------------------ shape
    def reshape(self, *shape):
        """The same elements in a new shape, given as ints or one tuple (-1 is inferred),
        with gradient. ``view`` is an alias (it may copy, unlike PyTorch's)."""
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        try:
            return Reshape.apply(self, shape=shape)
        except ValueError as e:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {self.data.shape} "
                             f"(size {self.data.size}) into {shape}") from e

    view = reshape

    def contiguous(self) -> "Tensor":
        """This tensor when its data is C-contiguous, else a C-contiguous copy with gradient
        (PyTorch's ``contiguous()``; upstream TinyTorch's name too)."""
        if self._data.flags.c_contiguous:
            return self
        return Contiguous.apply(self)

    def flatten(self, start_dim=0, end_dim=-1):
        """Merge axes ``start_dim`` through ``end_dim`` (inclusive) into one; a 0-d tensor
        becomes shape (1,)."""
        shape = self.data.shape
        if not shape:
            return self.reshape(1)
        s, e = start_dim % len(shape), end_dim % len(shape)
        return self.reshape(shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:])

    def transpose(self, *axes, dim0=None, dim1=None):
        """Two axes (PyTorch's ``transpose(dim0, dim1)``, also by keyword): swap them. No
        axes: swap the last two (upstream TinyTorch's default, e.g. ``K.transpose()`` of a
        (B, H, T, D) key; a 0-D or 1-D tensor keeps its shape); for 2-D the same as ``.T``,
        which reverses all axes. One tuple/list (NumPy): a full permutation. With gradient.

        Args:
            axes: none, two axes to swap, or one permutation (tuple or list).
            dim0: first axis to swap, by keyword (with ``dim1``).
            dim1: second axis to swap, by keyword (with ``dim0``).
        """
        nd = self.data.ndim
        if dim0 is not None or dim1 is not None:
            if axes or dim0 is None or dim1 is None:
                raise TypeError("transpose: give both dim0 and dim1, or neither")
            axes = (dim0, dim1)
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            return self.permute(tuple(axes[0]))
        if len(axes) == 0:
            # PyTorch has no argument-free form, so upstream's meaning conflicts with no
            # PyTorch code; NumPy's (reverse all) stays available as .T
            if nd < 2:
                return Permute.apply(self, perm=tuple(range(nd)))
            axes = (-2, -1)
        if len(axes) == 2:
            if not all(-nd <= int(x) < nd for x in axes):
                raise ValueError(f"transpose: axes {axes} are out of range for shape {self.data.shape}")
            a, b = (int(x) % nd for x in axes)
            perm = list(range(nd))
            perm[a], perm[b] = perm[b], perm[a]
            perm = tuple(perm)
        else:
            return self.permute(axes)
        return Permute.apply(self, perm=perm)

    def permute(self, *dims):
        """Reorder the axes: ``dims`` is a permutation of range(ndim), as ints or one
        tuple; negative axes count from the end. With gradient."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        nd = self.data.ndim
        perm = tuple(int(d) % nd for d in dims if -nd <= int(d) < nd) if nd else ()
        if len(perm) != len(dims) or sorted(perm) != list(range(nd)):
            raise ValueError(f"permute: {dims} is not a permutation of the {nd} axes of shape {self.data.shape}")
        return Permute.apply(self, perm=perm)

    def squeeze(self, axis=None):
        """Remove size-1 axes: all of them, or only ``axis`` (an int or tuple)."""
        return self.reshape(np.squeeze(np.empty(self.data.shape, dtype=np.bool_), axis=axis).shape)

    def unsqueeze(self, axis):
        """Insert a size-1 axis at position ``axis``."""
        return self.reshape(np.expand_dims(np.empty(self.data.shape, dtype=np.bool_), axis).shape)

    def __getitem__(self, index):
        return GetItem.apply(self, index=_unwrap_index(index))

    def masked_fill(self, mask, value):
        """Replace elements where ``mask`` (broadcastable) is True by ``value``. The mask is
        bool, or integer 0/1 (upstream TinyTorch's masks; 1 = fill); a float mask is refused
        (TypeError) and an integer mask holding other values too (ValueError)."""
        m = mask.data if isinstance(mask, Tensor) else np.asarray(mask)
        if m.dtype.kind in "iu":
            if m.size and not np.all((m == 0) | (m == 1)):
                raise ValueError(f"masked_fill: an integer mask must hold only 0 and 1, got values "
                                 f"{np.unique(m)[:5].tolist()}")
            m = m.astype(np.bool_)
        if m.dtype != np.bool_:
            raise TypeError(f"masked_fill: mask must be bool (or integer 0/1), got {m.dtype}")
        np.broadcast_shapes(m.shape, self.data.shape)
        return MaskedFill.apply(self, m, value=value)

    def split(self, split_size_or_sections, axis=0):
        """Split along ``axis`` into views with gradient; ``split_size_or_sections`` as
        in the module-level ``split``."""
        return split(self, split_size_or_sections, axis)


def _norm_axis(axis, ndim):
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)):
        out = tuple(sorted(int(a) % ndim if ndim else int(a) for a in axis))
        if len(set(out)) != len(out):
            raise ValueError(f"repeated axis in {axis}")
        for a in axis:
            if not -ndim <= int(a) < max(ndim, 1):
                raise ValueError(f"axis {a} is out of range for {ndim} dimensions")
        return out
    a = int(axis)
    if not -ndim <= a < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of range for {ndim} dimensions")
    return (a % ndim,) if ndim else (0,)


def _unwrap_index(index):
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        return np.asarray(index)
    return index


# ============================================================================ functions

def _tensors(items, who):
    out = [t if isinstance(t, Tensor) else Tensor(t) for t in items]
    if not out:
        raise ValueError(f"{who}: needs at least one tensor")
    return out


def concat(tensors, axis=0):
    """Join ``tensors`` (a sequence of Tensors or arrays, same shape except along
    ``axis``) along the existing axis ``axis``, with gradient (``torch.cat``)."""
    ts = _tensors(tensors, "concat")
    nd = ts[0].data.ndim
    if nd == 0:
        raise ValueError("concat: zero-dimensional tensors cannot be concatenated")
    axis = int(axis) % nd
    for t in ts:
        if t.data.ndim != nd or t.data.shape[:axis] + t.data.shape[axis + 1:] != \
                ts[0].data.shape[:axis] + ts[0].data.shape[axis + 1:]:
            raise ValueError(f"concat: shapes {[t.shape for t in ts]} differ outside axis {axis}")
    return Concat.apply(*ts, axis=axis)


cat = concat


def stack(tensors, axis=0):
    """Join same-shaped ``tensors`` along a new axis inserted at ``axis``, with gradient."""
    ts = _tensors(tensors, "stack")
    if any(t.data.shape != ts[0].data.shape for t in ts):
        raise ValueError(f"stack: all tensors need the same shape, got {[t.shape for t in ts]}")
    axis = int(axis) % (ts[0].data.ndim + 1)
    return Stack.apply(*ts, axis=axis)


def split(tensor, split_size_or_sections, axis=0):
    """Split ``tensor`` along ``axis`` into a list of tensors, as ``torch.split``.

    Args:
        tensor: the Tensor to split.
        split_size_or_sections: an int is the chunk size (the last chunk may be smaller);
            a list gives each chunk's size and must add up to the axis length.
        axis: the axis to split (PyTorch's ``dim``).
    """
    n = tensor.data.shape[axis]
    axis = axis % tensor.data.ndim
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        if step <= 0:
            raise ValueError(f"split: chunk size must be positive, got {step}")
        sizes = [min(step, n - i) for i in range(0, n, step)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"split: sizes {sizes} do not add up to {n} (axis {axis} of shape {tensor.shape})")
    out, start = [], 0
    lead = (slice(None),) * axis
    for s in sizes:
        out.append(tensor[lead + (slice(start, start + s),)])
        start += s
    return out


def where(condition, a, b):
    """Elementwise ``a if condition else b`` with gradients to a and b.

    ``condition`` is a bool array or Tensor; ``a`` and ``b`` are Tensors, arrays or
    numbers, all three broadcast together.
    """
    cond = condition.data if isinstance(condition, Tensor) else np.asarray(condition)
    if cond.dtype != np.bool_:
        raise TypeError(f"where: condition must be bool, got {cond.dtype}")
    ref = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    if ref is None:
        return Tensor(np.where(cond, a, b))
    a = ref._other(a) if not isinstance(a, Tensor) else a
    b = ref._other(b) if not isinstance(b, Tensor) else b
    return Where.apply(cond, a, b)


def tensor(data, requires_grad=False, dtype=None):
    """``Tensor(data, requires_grad=requires_grad, dtype=dtype)`` (``torch.tensor``)."""
    return Tensor(data, requires_grad=requires_grad, dtype=dtype)


def zeros(*shape, dtype=np.float32, requires_grad=False):
    """A tensor of zeros; ``shape`` given as ints or one tuple, ``dtype`` float32 by
    default, ``requires_grad`` as in ``Tensor``."""
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return Tensor(np.zeros(shape, dtype=dtype), requires_grad=requires_grad)


def ones(*shape, dtype=np.float32, requires_grad=False):
    """A tensor of ones; ``shape`` given as ints or one tuple, ``dtype`` float32 by
    default, ``requires_grad`` as in ``Tensor``."""
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return Tensor(np.ones(shape, dtype=dtype), requires_grad=requires_grad)


def randn(*shape, dtype=np.float32, requires_grad=False):
    """Standard normal samples from the framework generator (see core.random), so
    ``manual_seed`` makes them reproducible; ``shape`` as ints or one tuple, ``dtype``
    float32 by default, ``requires_grad`` as in ``Tensor``."""
    shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    return Tensor(get_generator().standard_normal(shape).astype(dtype), requires_grad=requires_grad)
