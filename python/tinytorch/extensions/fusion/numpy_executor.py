"""numpy_executor: the NumPy executor of a fusion program ("fusion:numpy").

The reference semantics of runtime/fusion/README.md in NumPy, node by node, in each node's
dtype: what runs when the runtime library is missing, lacks the tt_fusion_* functions or the
native path is switched off. It materialises every intermediate (it is the fallback, not the
fast path). The formulas are the package's own: the stable sigmoid and the tanh-form GELU of
backends/numpy_fallback.py, the error function of core/activation_ops.py.

Owns ``run_numpy``. Assumes: the NumPy formulas of backends/reference/ (GELU, sigmoid) and the
core's erf, so the NumPy executor computes what the door computes.
"""
from __future__ import annotations

import numpy as np

from ...backends.numpy_fallback import bias_gelu as _gelu_tanh
from ...backends.numpy_fallback import stable_sigmoid
from ...core.activation_ops import erf as _erf
from .ir import ACCUMULATE, Program, code_dtype

__all__ = ["run_numpy"]

_BINARY = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide,
           "MAX": np.maximum, "MIN": np.minimum, "POW": np.power}
_COMPARE = {"LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
            "EQ": np.equal, "NE": np.not_equal}


def _node_values(program: Program, inputs: list) -> list:
    shape = tuple(program.shape)
    vals = []
    with np.errstate(all="ignore"):
        for n in program.nodes:
            dt = code_dtype(n.dtype)
            a = vals[n.a] if n.op != "INPUT" and n.a >= 0 else None
            b = vals[n.b] if n.b >= 0 else None
            c = vals[n.c] if n.c >= 0 else None
            op = n.op
            if op == "INPUT":
                v = inputs[n.a]
            elif op == "CONST":
                v = np.asarray(n.imm, dtype=dt)
            elif op == "CAST":
                v = a.astype(dt)
            elif op == "NEG":
                v = np.negative(a)
            elif op == "ABS":
                v = np.abs(a)
            elif op == "EXP":
                v = np.exp(a)
            elif op == "LOG":
                v = np.log(a)
            elif op == "SQRT":
                v = np.sqrt(a)
            elif op == "RSQRT":
                v = dt.type(1) / np.sqrt(a)
            elif op == "TANH":
                v = np.tanh(a)
            elif op == "SIGMOID":
                v = stable_sigmoid(a)
            elif op == "RELU":
                v = np.maximum(a, dt.type(0))
            elif op == "GELU":
                v = _gelu_tanh(np.asarray(a), None)
            elif op == "ERF":
                v = _erf(np.asarray(a))
            elif op == "POWI":
                v = np.power(a, dt.type(n.imm))
            elif op == "RECIP":
                v = dt.type(1) / a
            elif op in _BINARY:
                v = _BINARY[op](a, b)
            elif op in _COMPARE:
                v = _COMPARE[op](a, b).astype(dt)
            elif op == "WHERE":
                v = np.where(a != 0, b, c)
            elif op in ("SUM", "MEAN", "MAX_ROW"):
                full = np.broadcast_to(a, shape)
                if op == "SUM":
                    v = full.sum(axis=-1, keepdims=True, dtype=dt)
                elif shape[-1] == 0:
                    v = np.full(shape[:-1] + (1,), np.nan if op == "MEAN" else -np.inf, dtype=dt)
                elif op == "MEAN":
                    v = full.mean(axis=-1, keepdims=True, dtype=dt)
                else:
                    v = full.max(axis=-1, keepdims=True)
            else:  # validated programs have no other op
                raise ValueError(f"fusion:numpy: unknown op {op!r}")
            vals.append(np.asarray(v).astype(dt, copy=False))
    return vals


def run_numpy(program: Program, inputs: list, outputs: list) -> None:
    """Run ``program`` on NumPy arrays, writing into ``outputs``.

    Args:
        program: a validated program.
        inputs: one array per input slot, of the input's dtype, broadcastable to the domain
            (rank equal to the domain's); None for an unused slot.
        outputs: one preallocated array per program output: the domain shape for a full
            output, the rows (last axis 1) for a row output, and for an ACCUMULATE output the
            domain shape with 1 on the axes summed over.
    """
    vals = _node_values(program, inputs)
    shape = tuple(program.shape)
    kinds = program.kinds()
    for (node, flags), out in zip(program.outputs, outputs):
        v = vals[node]
        if flags & ACCUMULATE:
            full = np.broadcast_to(v, shape)
            axes = tuple(d for d in range(len(shape)) if out.shape[d] == 1 and shape[d] != 1)
            out[...] = full.sum(axis=axes, keepdims=True, dtype=out.dtype) if axes else full
        elif kinds[node] == "full":
            out[...] = np.broadcast_to(v, out.shape)
        else:
            out[...] = np.broadcast_to(v, shape[:-1] + (1,)).reshape(out.shape)
