"""ir: the fusion program (IR version 1 of runtime/fusion/README.md) on the Python side.

A ``Program`` is what the tracer builds and every executor runs: a domain shape, the dtype of
each input slot, a topologically ordered node list (op, dtype, operands a/b/c, immediate) and
the outputs (node, ACCUMULATE flag). This module owns the op table, the serialisation into
the runtime's int64 words plus one double per node, the Python-side validation (the same
rules the C side checks, so a bad program is a ValueError before any native call), the kind
of each node (full / row / constant) and the DRAM accounting of the report.

Nothing here executes a program: numpy_executor.py (NumPy) and backends/fusion/executors.py
(the runtime's interpreter and compiled C) do.

Assumes: the runtime's IR version 1 (runtime/fusion/README.md), which the C side
validates again before anything runs.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

__all__ = ["OPS", "OP_CODES", "MAGIC", "VERSION", "MAX_DIMS", "ACCUMULATE", "F32", "F64",
           "Node", "Program", "dtype_code", "code_dtype", "node_kind"]

MAGIC = 0x54544655  # "TTFU"
VERSION = 1
MAX_DIMS = 8
ACCUMULATE = 1
F32, F64 = 0, 1

# op name -> (code, number of operands). INPUT uses `a` as the slot, CONST/POWI use imm.
OPS = {
    "INPUT": (0, 0), "CONST": (1, 0), "CAST": (2, 1), "NEG": (3, 1), "ABS": (4, 1),
    "EXP": (5, 1), "LOG": (6, 1), "SQRT": (7, 1), "RSQRT": (8, 1), "TANH": (9, 1),
    "SIGMOID": (10, 1), "RELU": (11, 1), "GELU": (12, 1), "ERF": (13, 1), "POWI": (14, 1),
    "RECIP": (15, 1),
    "ADD": (20, 2), "SUB": (21, 2), "MUL": (22, 2), "DIV": (23, 2), "MAX": (24, 2),
    "MIN": (25, 2), "POW": (26, 2),
    "LT": (30, 2), "LE": (31, 2), "GT": (32, 2), "GE": (33, 2), "EQ": (34, 2), "NE": (35, 2),
    "WHERE": (40, 3),
    "SUM": (50, 1), "MEAN": (51, 1), "MAX_ROW": (52, 1),
}
OP_CODES = {code: name for name, (code, _) in OPS.items()}
REDUCTIONS = ("SUM", "MEAN", "MAX_ROW")
COMPARISONS = ("LT", "LE", "GT", "GE", "EQ", "NE")

_DTYPES = {np.dtype(np.float32): F32, np.dtype(np.float64): F64}


def dtype_code(dtype) -> int:
    """The IR code of a NumPy float dtype (TT_F32 = 0, TT_F64 = 1); TypeError for others.

    Args:
        dtype: a NumPy dtype or anything ``np.dtype`` accepts.
    """
    code = _DTYPES.get(np.dtype(dtype))
    if code is None:
        raise TypeError(f"compile_graph: only float32 and float64 values are fused, got {np.dtype(dtype)}")
    return code


def code_dtype(code: int) -> np.dtype:
    """The NumPy dtype of an IR dtype code.

    Args:
        code: TT_F32 (0) or TT_F64 (1).
    """
    return np.dtype(np.float32) if code == F32 else np.dtype(np.float64)


@dataclass(frozen=True)
class Node:
    """One node of a program.

    Args:
        op: the op name (a key of ``OPS``).
        dtype: the IR dtype code of the result.
        a: first operand (a node index), the input slot for INPUT, or -1.
        b: second operand or -1.
        c: third operand or -1.
        imm: the immediate (CONST's value, POWI's exponent), 0.0 otherwise.
    """

    op: str
    dtype: int
    a: int = -1
    b: int = -1
    c: int = -1
    imm: float = 0.0

    def operands(self) -> tuple:
        """The node indices this node reads (not INPUT's slot)."""
        if self.op == "INPUT":
            return ()
        return tuple(i for i in (self.a, self.b, self.c) if i >= 0)


def node_kind(node: Node, kinds: list) -> str:
    """"full", "row" or "const" of ``node`` given the kinds of the nodes before it (README
    "The iteration domain"): inputs are full, constants const, reductions row, and any other
    node the widest kind among its operands."""
    if node.op == "INPUT":
        return "full"
    if node.op == "CONST":
        return "const"
    if node.op in REDUCTIONS:
        return "row"
    ks = {kinds[i] for i in node.operands()}
    return "full" if "full" in ks else "row" if "row" in ks else "const"


@dataclass
class Program:
    """A fusion program: domain shape, input dtypes, nodes, outputs.

    Args:
        shape: the iteration domain (1 <= rank <= 8); the last axis is the row axis.
        input_dtypes: IR dtype code of each input slot.
        nodes: the node list in topological order.
        outputs: (node index, flags) per output; flag bit 0 is ACCUMULATE.
    """

    shape: tuple
    input_dtypes: list
    nodes: list = field(default_factory=list)
    outputs: list = field(default_factory=list)

    # ------------------------------------------------------------------ wire format
    def words(self) -> np.ndarray:
        """The program as the runtime's int64 words (README "The program")."""
        w = [MAGIC, VERSION, len(self.shape), *self.shape, len(self.input_dtypes),
             *self.input_dtypes, len(self.nodes)]
        for n in self.nodes:
            w += [OPS[n.op][0], n.dtype, n.a, n.b, n.c]
        w.append(len(self.outputs))
        for node, flags in self.outputs:
            w += [node, flags]
        return np.asarray(w, dtype=np.int64)

    def imm(self) -> np.ndarray:
        """One double per node: the immediates."""
        return np.asarray([n.imm for n in self.nodes], dtype=np.float64).reshape(len(self.nodes))

    def digest(self) -> str:
        """A SHA-256 of the wire format: the identity of the program (cache keys)."""
        h = hashlib.sha256(self.words().tobytes())
        h.update(self.imm().tobytes())
        return h.hexdigest()

    # ------------------------------------------------------------------ structure
    def kinds(self) -> list:
        """Per node: "full", "row" or "const" (README "The iteration domain")."""
        out = []
        for n in self.nodes:
            out.append(node_kind(n, out))
        return out

    def validate(self) -> None:
        """Raise ValueError naming the first broken rule (the C validator's rules)."""
        r = len(self.shape)
        if not 1 <= r <= MAX_DIMS:
            raise ValueError(f"fusion program: rank {r} is outside 1..{MAX_DIMS}")
        total = 8
        for d, s in enumerate(self.shape):
            if int(s) < 0:
                raise ValueError(f"fusion program: shape[{d}] = {s} is negative")
            total *= max(int(s), 1)
            if total >= 2 ** 63:
                raise ValueError(f"fusion program: shape {tuple(self.shape)} overflows int64 bytes")
        for i, d in enumerate(self.input_dtypes):
            if d not in (F32, F64):
                raise ValueError(f"fusion program: input {i} has unknown dtype {d}")
        kinds = []
        for i, n in enumerate(self.nodes):
            if n.op not in OPS:
                raise ValueError(f"fusion program: node {i} has unknown op {n.op!r}")
            if n.dtype not in (F32, F64):
                raise ValueError(f"fusion program: node {i} ({n.op}) has unknown dtype {n.dtype}")
            arity = OPS[n.op][1]
            if n.op == "INPUT":
                if not 0 <= n.a < len(self.input_dtypes):
                    raise ValueError(f"fusion program: node {i} reads input slot {n.a}, "
                                     f"but there are {len(self.input_dtypes)} inputs")
                if self.input_dtypes[n.a] != n.dtype:
                    raise ValueError(f"fusion program: node {i} (INPUT {n.a}) dtype differs from the input's")
                if n.b != -1 or n.c != -1:
                    raise ValueError(f"fusion program: node {i} (INPUT) has extra operands")
            else:
                ops = (n.a, n.b, n.c)
                for j, o in enumerate(ops):
                    if j < arity and not 0 <= o < i:
                        raise ValueError(f"fusion program: node {i} ({n.op}) operand {j} = {o} is not "
                                         "an earlier node")
                    if j >= arity and o != -1:
                        raise ValueError(f"fusion program: node {i} ({n.op}) takes {arity} operands, "
                                         f"operand {j} is {o}")
                for j, o in enumerate(ops[:arity]):
                    if n.op == "WHERE" and j == 0:
                        continue
                    if self.nodes[o].dtype != n.dtype and n.op != "CAST":
                        raise ValueError(f"fusion program: node {i} ({n.op}) operand {o} has another "
                                         "dtype (insert a CAST)")
                if n.op in REDUCTIONS and kinds[n.a] != "full":
                    raise ValueError(f"fusion program: node {i} ({n.op}) reduces a {kinds[n.a]} value; "
                                     "reductions take a full operand")
            kinds.append(node_kind(n, kinds))
        if not self.outputs:
            raise ValueError("fusion program: no outputs")
        for j, (node, flags) in enumerate(self.outputs):
            if not 0 <= node < len(self.nodes):
                raise ValueError(f"fusion program: output {j} names node {node}, out of range")
            if flags not in (0, ACCUMULATE):
                raise ValueError(f"fusion program: output {j} has unknown flags {flags}")
            if flags & ACCUMULATE and kinds[node] != "full":
                raise ValueError(f"fusion program: output {j} accumulates a {kinds[node]} node; "
                                 "only full nodes may be accumulated")

    # ------------------------------------------------------------------ the report's accounting
    def dram_bytes(self, input_nbytes: list, output_nbytes: list, value_nbytes: list) -> dict:
        """DRAM traffic eager vs fused, from the node list.

        Eager (one NumPy call per node): every op reads each operand once (an input: the
        bytes its array occupies; an intermediate: its own array) and writes its result;
        constants are scalars folded into the call (0 bytes). Fused: each used input is read
        once and each output written once. This is the extension guide's accounting
        ((x + bias) * scale on 10^7 float32 with a scalar scale: 200 MB vs 120 MB).

        Args:
            input_nbytes: bytes of each input slot's array.
            output_nbytes: bytes of each output array.
            value_nbytes: bytes of each node's eager result (its logical shape).
        """
        eager_read = eager_write = 0
        used = set()
        for i, n in enumerate(self.nodes):
            if n.op == "INPUT":
                used.add(n.a)
                continue
            if n.op == "CONST":
                continue
            for o in n.operands():
                src = self.nodes[o]
                if src.op == "INPUT":
                    eager_read += input_nbytes[src.a]
                elif src.op != "CONST":
                    eager_read += value_nbytes[o]
            eager_write += value_nbytes[i]
        fused_read = sum(input_nbytes[s] for s in sorted(used))
        fused_write = sum(output_nbytes)
        return {"eager_read": eager_read, "eager_write": eager_write,
                "eager_total": eager_read + eager_write,
                "fused_read": fused_read, "fused_write": fused_write,
                "fused_total": fused_read + fused_write}
