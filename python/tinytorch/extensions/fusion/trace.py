"""trace: running a function once on tracing values, recording a fusion program.

``trace(fn, args)`` calls ``fn`` with one ``TracedValue`` per array argument (Python numbers
are passed through and baked in as constants). Each operation on a traced value appends a
node to an ``ir.Program`` instead of computing anything; the value only knows its
logical shape (NumPy broadcasting of the arguments), dtype (NumPy 2 promotion: Python
numbers are weak, float32 op float64 is float64) and whether it is boolean.

What traces (everything else raises ``UnsupportedOperation`` naming the op):
  operators   + - * / unary -, ** (a constant exponent gives POWI), < <= > >= == !=
  NumPy       the ufuncs add subtract multiply divide negative positive absolute exp log
              sqrt tanh maximum minimum power square reciprocal less... (through
              ``__array_ufunc__``); np.where, np.clip, np.sum / np.mean / np.max / np.amax,
              np.square (through ``__array_function__``)
  methods     the Tensor methods exp log sqrt abs clip/clamp relu sigmoid tanh softmax
              log_softmax sum mean max min var astype float double, plus gelu (tanh form),
              erf and rsqrt
  reductions  over the last axis only (axis=-1, or None on a 1-D value), keepdims either way;
              a keepdims=False result may only meet other such results or constants

The domain of the program is the broadcast shape of all array arguments (rank >= 1); every
node is evaluated over it. A reduction of a value that is constant along the row (its last
axis has size 1) is the value itself, so no reduction node is emitted for it.

Owns ``trace`` and ``TracedValue``; assumes ir.py's Program (nothing is computed while
tracing).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from .ir import COMPARISONS, F32, F64, Node, Program, code_dtype, dtype_code

__all__ = ["TracedValue", "UnsupportedOperation", "Trace", "trace"]

class UnsupportedOperation(TypeError):
    """An operation compile_graph cannot fuse (the message names it).

    Args:
        what: the operation and why it is not fused.
    """

    def __init__(self, what: str):
        super().__init__(f"compile_graph: cannot fuse {what}")


class _UnsupportedAttribute(UnsupportedOperation, AttributeError):
    """An attribute traced values do not have (``x.T``, ``x.reshape``): an
    ``UnsupportedOperation`` for the caller, still an AttributeError for ``hasattr``."""


@dataclass
class _Meta:
    shape: tuple       # logical shape in keepdims form (a dropped reduction keeps a 1 at the end)
    boolean: bool      # a comparison result (NumPy gives bool)
    dropped: bool      # produced by a keepdims=False reduction: NumPy shape is shape[:-1]


class Trace:
    """The program being recorded and what each node is (shapes, booleans).

    Args:
        input_shapes: shape of each array argument.
        input_dtypes: NumPy dtype of each array argument (float32 or float64).
    """

    def __init__(self, input_shapes, input_dtypes):
        try:
            domain = tuple(np.broadcast_shapes(*[tuple(s) for s in input_shapes])) if input_shapes else ()
        except ValueError:
            raise ValueError("compile_graph: the arguments' shapes do not broadcast together: "
                             f"{[tuple(s) for s in input_shapes]}") from None
        self.domain = domain if domain else (1,)
        self.rank = len(self.domain)
        self.program = Program(self.domain, [dtype_code(d) for d in input_dtypes])
        self.meta: list = []
        self._cse: dict = {}

    # ------------------------------------------------------------------ node making
    def node(self, op, dtype, a=-1, b=-1, c=-1, imm=0.0, shape=(), boolean=False, dropped=False):
        """Append (or reuse an identical) node; returns its index.

        Args:
            op: op name.
            dtype: IR dtype code.
            a: first operand / input slot.
            b: second operand.
            c: third operand.
            imm: immediate value.
            shape: logical shape (keepdims form).
            boolean: result is a comparison.
            dropped: result of a keepdims=False reduction.
        """
        value = float(imm) if op in ("CONST", "POWI") else 0.0
        key = (op, dtype, a, b, c, repr(value), tuple(shape), bool(boolean), bool(dropped))
        found = self._cse.get(key)
        if found is not None:
            return found
        self.program.nodes.append(Node(op, dtype, a, b, c, float(imm) if op in ("CONST", "POWI") else 0.0))
        self.meta.append(_Meta(tuple(shape), boolean, dropped))
        self._cse[key] = len(self.program.nodes) - 1
        return self._cse[key]

    def input(self, slot: int, shape, dtype) -> "TracedValue":
        """The traced value of argument ``slot``.

        Args:
            slot: input slot index.
            shape: the argument's shape.
            dtype: the argument's NumPy dtype.
        """
        return TracedValue(self, self.node("INPUT", dtype_code(dtype), slot, shape=tuple(shape)))

    def const(self, value: float, dtype: int) -> int:
        """A CONST node of ``value``.

        Args:
            value: the number.
            dtype: IR dtype code.
        """
        return self.node("CONST", dtype, imm=float(value))

    def cast(self, index: int, dtype: int) -> int:
        """``index`` converted to ``dtype`` (the node itself when it has it already).

        Args:
            index: a node index.
            dtype: IR dtype code wanted.
        """
        n = self.program.nodes[index]
        if n.dtype == dtype:
            return index
        if n.op == "CONST":
            return self.const(n.imm, dtype)
        m = self.meta[index]
        return self.node("CAST", dtype, index, shape=m.shape, boolean=m.boolean, dropped=m.dropped)


def _weak_or_strong(x):
    """(value, dtype code or None for a weak Python number) of a constant operand."""
    if isinstance(x, (bool, np.bool_)):
        return float(x), None
    if isinstance(x, np.floating) or (isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind == "f"):
        dt = np.dtype(x.dtype)
        if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise UnsupportedOperation(f"a constant of dtype {dt}")
        return float(x), dtype_code(dt)
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return float(x), None
    if isinstance(x, numbers.Real):
        return float(x), None
    if isinstance(x, np.ndarray):
        raise UnsupportedOperation(f"an array constant of shape {x.shape} (pass arrays to the "
                                   "compiled function as arguments)")
    raise UnsupportedOperation(f"an operand of type {type(x).__name__}")


class TracedValue:
    """A value inside a traced function: operations on it record nodes.

    Args:
        trace: the ``Trace`` it belongs to.
        index: its node index.
    """

    __array_priority__ = 1000

    def __init__(self, trace: Trace, index: int):
        self.trace = trace
        self.index = index

    # ------------------------------------------------------------------ description
    @property
    def shape(self) -> tuple:
        """The NumPy shape this value would have."""
        m = self.trace.meta[self.index]
        return m.shape[:-1] if m.dropped else m.shape

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def dtype(self) -> np.dtype:
        """The NumPy dtype (bool for a comparison result)."""
        if self.trace.meta[self.index].boolean:
            return np.dtype(bool)
        return code_dtype(self.trace.program.nodes[self.index].dtype)

    def __repr__(self):
        n = self.trace.program.nodes[self.index]
        return f"TracedValue(node {self.index}: {n.op}, shape={self.shape}, dtype={self.dtype})"

    def __array__(self, *args, **kwargs):
        raise UnsupportedOperation(
            "a conversion of a traced value to an array (np.asarray, Tensor(...), float(), or a "
            "function that does that such as tinytorch.core.activations.*); use the value's "
            "methods (x.relu(), x.gelu(), x.sigmoid(), x.tanh(), ...) or NumPy ufuncs")

    def __bool__(self):
        raise UnsupportedOperation("Python control flow on a traced value (if / and / or / bool())")

    def __float__(self):
        raise UnsupportedOperation("float() of a traced value")

    def __len__(self):
        return self.shape[0] if self.shape else 0

    def __iter__(self):
        raise UnsupportedOperation("iterating over a traced value")

    def __getitem__(self, item):
        raise UnsupportedOperation("indexing or slicing a traced value")

    def __getattr__(self, name):
        # only reached for names the class lacks; NumPy's protocol probes (__array_*__)
        # must keep seeing a plain AttributeError
        if name.startswith("__"):
            raise AttributeError(name)
        raise _UnsupportedAttribute(f"x.{name} (reshapes, transposes and other non-elementwise "
                                    "methods are not traced; only elementwise ops and last-axis "
                                    "reductions fuse)")

    # ------------------------------------------------------------------ building blocks
    def _wrap(self, index):
        return TracedValue(self.trace, index)

    def _unary(self, op, imm=0.0, keep_bool=False):
        t = self.trace
        src = self.index
        m = t.meta[src]
        dt = t.program.nodes[src].dtype
        return self._wrap(t.node(op, dt, src, imm=imm, shape=m.shape, boolean=keep_bool and m.boolean,
                                 dropped=m.dropped))

    def _operands(self, others):
        """Node indices of ``others`` (self first), cast to the promoted dtype; plus shape info."""
        t = self.trace
        items = []
        strong = []
        for o in others:
            if isinstance(o, TracedValue):
                if o.trace is not t:
                    raise UnsupportedOperation("a value from another trace")
                items.append(o)
                if not t.meta[o.index].boolean:
                    strong.append(t.program.nodes[o.index].dtype)
            else:
                value, code = _weak_or_strong(o)
                items.append(value)
                if code is not None:
                    strong.append(code)
        if not strong:  # all bool or weak: NumPy gives the traced operands' float dtype
            strong = [t.program.nodes[o.index].dtype for o in items if isinstance(o, TracedValue)]
        dtype = F64 if F64 in strong else F32
        indices, shapes, dropped = [], [], set()
        for o in items:
            if isinstance(o, TracedValue):
                indices.append(t.cast(o.index, dtype))
                m = t.meta[o.index]
                shapes.append(m.shape)
                dropped.add(m.dropped)
            else:
                indices.append(t.const(o, dtype))
        if len(dropped) > 1:
            raise UnsupportedOperation(
                "combining a keepdims=False reduction with an unreduced value (its NumPy shape "
                "would broadcast against the wrong axes; reduce with keepdims=True)")
        try:
            shape = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise ValueError(f"compile_graph: shapes {shapes} do not broadcast together") from None
        return indices, dtype, shape, dropped == {True}

    def _binary(self, op, other, reverse=False, boolean=False):
        ops = [other, self] if reverse else [self, other]
        (a, b), dtype, shape, dropped = self._operands(ops)
        return self._wrap(self.trace.node(op, dtype, a, b, shape=shape, boolean=boolean, dropped=dropped))

    # ------------------------------------------------------------------ operators
    def __add__(self, o): return self._binary("ADD", o)
    def __radd__(self, o): return self._binary("ADD", o, True)
    def __sub__(self, o): return self._binary("SUB", o)
    def __rsub__(self, o): return self._binary("SUB", o, True)
    def __mul__(self, o): return self._binary("MUL", o)
    def __rmul__(self, o): return self._binary("MUL", o, True)
    def __truediv__(self, o): return self._binary("DIV", o)
    def __rtruediv__(self, o): return self._binary("DIV", o, True)
    def __neg__(self): return self._unary("NEG")
    def __pos__(self): return self
    def __lt__(self, o): return self._binary("LT", o, boolean=True)
    def __le__(self, o): return self._binary("LE", o, boolean=True)
    def __gt__(self, o): return self._binary("GT", o, boolean=True)
    def __ge__(self, o): return self._binary("GE", o, boolean=True)
    def __eq__(self, o): return self._binary("EQ", o, boolean=True)  # noqa: E704
    def __ne__(self, o): return self._binary("NE", o, boolean=True)  # noqa: E704
    __hash__ = object.__hash__

    def __pow__(self, o):
        if isinstance(o, TracedValue):
            return self._binary("POW", o)
        value, code = _weak_or_strong(o)
        base = self if code is None or code == self.trace.program.nodes[self.index].dtype else \
            self._wrap(self.trace.cast(self.index, max(code, self.trace.program.nodes[self.index].dtype)))
        if value == 1.0:
            return base
        return base._unary("POWI", imm=value)

    def __rpow__(self, o):
        return self._binary("POW", o, True)

    def __matmul__(self, o):
        raise UnsupportedOperation("matmul (@): not elementwise")

    __rmatmul__ = __matmul__

    @property
    def T(self):
        """Refused: a transpose is a layout change, not elementwise (``x @ x.T`` meets it first)."""
        raise UnsupportedOperation("transpose (.T) or matmul (@), as in x @ x.T: neither is elementwise")

    # ------------------------------------------------------------------ elementwise methods
    def exp(self):
        """e**x."""
        return self._unary("EXP")

    def log(self):
        """Natural logarithm."""
        return self._unary("LOG")

    def sqrt(self):
        """Square root."""
        return self._unary("SQRT")

    def rsqrt(self):
        """1 / sqrt(x)."""
        return self._unary("RSQRT")

    def abs(self):
        """Absolute value."""
        return self._unary("ABS")

    def tanh(self):
        """Hyperbolic tangent."""
        return self._unary("TANH")

    def sigmoid(self):
        """1 / (1 + exp(-x)), stable."""
        return self._unary("SIGMOID")

    def relu(self):
        """max(x, 0)."""
        return self._unary("RELU")

    def gelu(self, approximate: str = "tanh"):
        """GELU, tanh form (the fused CPU kernel's formula).

        Args:
            approximate: only "tanh" is fused.
        """
        if approximate != "tanh":
            raise UnsupportedOperation(f"gelu(approximate={approximate!r}) (only the tanh form is fused)")
        return self._unary("GELU")

    def erf(self):
        """The error function."""
        return self._unary("ERF")

    def astype(self, dtype):
        """Cast to float32 or float64.

        Args:
            dtype: the target dtype.
        """
        code = dtype_code(dtype)
        t = self.trace
        m = t.meta[self.index]
        if t.program.nodes[self.index].dtype == code and not m.boolean:
            return self
        return self._wrap(t.node("CAST", code, self.index, shape=m.shape, dropped=m.dropped))

    def float(self):
        """Cast to float32."""
        return self.astype(np.float32)

    def double(self):
        """Cast to float64."""
        return self.astype(np.float64)

    def clip(self, min=None, max=None):
        """Clamp into [min, max] (either may be None).

        Args:
            min: lower bound (a number or traced value) or None.
            max: upper bound or None.
        """
        out = self
        if min is not None:
            out = out._binary("MAX", min)
        if max is not None:
            out = out._binary("MIN", max)
        return out

    clamp = clip

    def maximum(self, other):
        """Elementwise maximum (NaN propagates).

        Args:
            other: a number or traced value.
        """
        return self._binary("MAX", other)

    def minimum(self, other):
        """Elementwise minimum (NaN propagates).

        Args:
            other: a number or traced value.
        """
        return self._binary("MIN", other)

    # ------------------------------------------------------------------ reductions
    def _reduce(self, op, axis, keepdims, what):
        t = self.trace
        m = t.meta[self.index]
        nd = self.ndim
        if isinstance(axis, (tuple, list)) and len(axis) == 1:
            axis = axis[0]
        if axis is None and nd <= 1:
            axis = -1
        if axis is None or not isinstance(axis, numbers.Integral) or axis not in (-1, nd - 1):
            raise UnsupportedOperation(f"{what}(axis={axis!r}) on a {nd}-D value (only the last "
                                       "axis is reduced in a fused loop)")
        if m.dropped:
            raise UnsupportedOperation(f"{what} of a value already reduced with keepdims=False")
        shape = m.shape if m.shape else (1,)
        cols = t.domain[-1]
        kinds = t.program.kinds()
        if shape[-1] == cols and cols != 1 and kinds[self.index] == "full":
            index = t.node(op, t.program.nodes[self.index].dtype, self.index,
                           shape=shape[:-1] + (1,), dropped=not keepdims)
        elif kinds[self.index] == "full" and cols != 1:
            # constant along the row: the reduction is the value; MAX_ROW makes it a row value
            index = t.node("MAX_ROW", t.program.nodes[self.index].dtype, self.index,
                           shape=shape[:-1] + (1,), dropped=not keepdims)
        else:
            # a row value, or a one-column domain: the value already is its own reduction
            index = self.index
            if not keepdims:
                dt = t.program.nodes[index].dtype
                index = t.node("MUL", dt, index, t.const(1.0, dt), shape=shape[:-1] + (1,), dropped=True)
        return self._wrap(index)

    def sum(self, axis=None, keepdims=False):
        """Sum over the last axis.

        Args:
            axis: -1 (or the last axis' index; None for a 1-D value).
            keepdims: keep the reduced axis with size 1.
        """
        return self._reduce("SUM", axis, keepdims, "sum")

    def mean(self, axis=None, keepdims=False):
        """Mean over the last axis.

        Args:
            axis: -1 (or the last axis' index; None for a 1-D value).
            keepdims: keep the reduced axis with size 1.
        """
        return self._reduce("MEAN", axis, keepdims, "mean")

    def max(self, axis=None, keepdims=False):
        """Maximum over the last axis (NaN propagates).

        Args:
            axis: -1 (or the last axis' index; None for a 1-D value).
            keepdims: keep the reduced axis with size 1.
        """
        return self._reduce("MAX_ROW", axis, keepdims, "max")

    def min(self, axis=None, keepdims=False):
        """Minimum over the last axis, as -max(-x).

        Args:
            axis: -1 (or the last axis' index; None for a 1-D value).
            keepdims: keep the reduced axis with size 1.
        """
        return -((-self).max(axis=axis, keepdims=keepdims))

    def var(self, axis=None, keepdims=False, ddof=0):
        """Variance over the last axis (two passes in registers: mean, then squares).

        Args:
            axis: -1 (or the last axis' index; None for a 1-D value).
            keepdims: keep the reduced axis with size 1.
            ddof: NumPy's delta degrees of freedom.
        """
        d = self - self.mean(axis=axis, keepdims=True)
        sq = (d * d).sum(axis=axis, keepdims=keepdims)
        n = self.trace.domain[-1] if self.shape and self.shape[-1] != 1 else 1
        return sq / float(n - ddof)

    def softmax(self, axis=-1):
        """Softmax along the last axis: exp(x - max) / sum.

        Args:
            axis: -1 only.
        """
        e = (self - self.max(axis=axis, keepdims=True)).exp()
        return e / e.sum(axis=axis, keepdims=True)

    def log_softmax(self, axis=-1):
        """log(softmax(x)) along the last axis: (x - max) - log(sum(exp(x - max))).

        Args:
            axis: -1 only.
        """
        z = self - self.max(axis=axis, keepdims=True)
        return z - z.exp().sum(axis=axis, keepdims=True).log()

    # ------------------------------------------------------------------ NumPy protocols
    _UFUNCS = {"add": "ADD", "subtract": "SUB", "multiply": "MUL", "divide": "DIV",
               "true_divide": "DIV", "maximum": "MAX", "minimum": "MIN", "power": "POW",
               "less": "LT", "less_equal": "LE", "greater": "GT", "greater_equal": "GE",
               "equal": "EQ", "not_equal": "NE"}
    _UNARY_UFUNCS = {"negative": "NEG", "absolute": "ABS", "fabs": "ABS", "exp": "EXP",
                     "log": "LOG", "sqrt": "SQRT", "tanh": "TANH", "erf": "ERF"}

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = ufunc.__name__
        if method != "__call__" or kwargs:
            raise UnsupportedOperation(f"np.{name}.{method} with {sorted(kwargs)} (only plain calls)")
        if name == "positive":
            return inputs[0]
        if name == "square":
            return _as_traced(inputs[0], self) ** 2
        if name == "reciprocal":
            return 1.0 / _as_traced(inputs[0], self)
        if name in self._UNARY_UFUNCS:
            return _as_traced(inputs[0], self)._unary(self._UNARY_UFUNCS[name])
        if name in self._UFUNCS:
            a, b = inputs
            op = self._UFUNCS[name]
            if op == "POW" and not isinstance(b, TracedValue):
                return _as_traced(a, self) ** b
            boolean = op in COMPARISONS
            if isinstance(a, TracedValue):
                return a._binary(op, b, boolean=boolean)
            return b._binary(op, a, reverse=True, boolean=boolean)
        raise UnsupportedOperation(f"np.{name}")

    def __array_function__(self, func, types, args, kwargs):
        name = func.__name__
        if name == "where" and len(args) == 3 and not kwargs:
            cond = _as_traced(args[0], self)
            if not any(isinstance(v, TracedValue) for v in args[1:]):
                branches = [_as_traced(v, self).astype(np.float64) for v in args[1:]]
            else:
                branches = list(args[1:])
            (b, c), dtype, shape, dropped = self._operands(branches)
            cm = self.trace.meta[cond.index]
            if cm.dropped != dropped:
                raise UnsupportedOperation("np.where mixing keepdims=False reductions and other values")
            shape = tuple(np.broadcast_shapes(cm.shape, shape))
            return self._wrap(self.trace.node("WHERE", dtype, cond.index, b, c, shape=shape,
                                              dropped=dropped))
        if name in ("sum", "mean", "max", "amax", "min", "amin") and args and isinstance(args[0], TracedValue):
            allowed = {"axis", "keepdims"}
            if set(kwargs) - allowed or len(args) > 2:
                raise UnsupportedOperation(f"np.{name} with arguments {sorted(set(kwargs) - allowed)}")
            method = {"amax": "max", "amin": "min"}.get(name, name)
            return getattr(args[0], method)(*args[1:], **kwargs)
        if name == "clip" and len(args) >= 1 and isinstance(args[0], TracedValue):
            lo = args[1] if len(args) > 1 else kwargs.get("a_min", kwargs.get("min"))
            hi = args[2] if len(args) > 2 else kwargs.get("a_max", kwargs.get("max"))
            return args[0].clip(lo, hi)
        raise UnsupportedOperation(f"np.{name}")


def _as_traced(x, like: TracedValue) -> TracedValue:
    """``x`` as a traced value (a constant becomes a CONST node broadcast everywhere)."""
    if isinstance(x, TracedValue):
        return x
    value, code = _weak_or_strong(x)
    dtype = code if code is not None else like.trace.program.nodes[like.index].dtype
    return TracedValue(like.trace, like.trace.const(value, dtype))


def trace(fn, args):
    """Run ``fn`` once on traced values; return (Trace, outputs, array-argument positions).

    Args:
        fn: the function to trace.
        args: the example arguments: ndarrays (or array views of Tensors) become traced
            inputs, Python numbers are passed through as constants.
    """
    positions = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    t = Trace([args[i].shape for i in positions], [args[i].dtype for i in positions])
    call_args = list(args)
    for slot, i in enumerate(positions):
        call_args[i] = t.input(slot, args[i].shape, args[i].dtype)
    result = fn(*call_args)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    for k, o in enumerate(outputs):
        if not isinstance(o, TracedValue):
            raise TypeError(f"compile_graph: {getattr(fn, '__name__', fn)} returned "
                            f"{type(o).__name__} as output {k}, not a value computed from its "
                            "array arguments")
    return t, outputs, positions, isinstance(result, (tuple, list))
