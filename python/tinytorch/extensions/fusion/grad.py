"""grad: the adjoint program, the backward pass of a fusion program as another one.

Reverse mode over the node list, symbolically: the backward program recomputes the forward
nodes it needs from the saved graph inputs (never from saved intermediates) and adds one
adjoint expression per node. Its inputs are the forward inputs (same slots) followed by one
gradient per forward output; its outputs are the gradients of the requested inputs. An input
that was broadcast (a bias vector, a scalar) gets an ACCUMULATE output, so the executor sums
over the broadcast axes inside the same fused loop.

Row values (reductions and what is computed from them) need one care: the adjoint of a row
value is the sum over the row of the per-element contributions of its full consumers, plus
the (already per-row) contributions of its row consumers. So each row node keeps two lists
and its adjoint is SUM(elementwise part) + row part. A contribution from a full consumer can
itself be a row value (the full node's own adjoint is one when its only consumers are
reductions, as in nested sums ``sum(x + sum(x))``): it is the same at every column, so its
sum over the row is cols * it, a row term (a reduction takes full operands only). Likewise
an input's adjoint that is a row value (``sum(b) + 0 * x``: b's gradient is the same at every
column) is spread over the full domain before it is written, since an output buffer of the
input's shape is written at every domain point.

Derivative conventions follow the eager autograd: relu' = 1 where x > 0, |x|' = sign(x)
(0 at 0), max/min split ties evenly (reductions by the number of tied maxima, the binary
ops half each).

Owns ``adjoint_program`` and ``prune``. Assumes: ir.py's Program and node kinds; programs in,
programs out (no arrays).
"""
from __future__ import annotations

import math

from .ir import ACCUMULATE, COMPARISONS, Node, Program, node_kind

__all__ = ["adjoint_program", "prune"]

# The tanh-form GELU's constants (backends/numpy_fallback.py; runtime/fusion's GELU node):
# gelu(u) = 0.5 u (1 + tanh(K0 (u + K1 u^3))), differentiated below as IR nodes.
_K0 = 0.7978845608028654   # sqrt(2/pi)
_K1 = 0.044715


class _Emitter:
    """Appends nodes with common-subexpression reuse."""

    def __init__(self, program: Program):
        self.nodes = list(program.nodes)
        self.kinds = program.kinds()
        self.cse = {}
        for i, n in enumerate(self.nodes):
            self.cse.setdefault(self._key(n), i)

    @staticmethod
    def _key(n: Node):
        return (n.op, n.dtype, n.a, n.b, n.c, repr(n.imm))

    def __call__(self, op, dtype, a=-1, b=-1, c=-1, imm=0.0):
        n = Node(op, dtype, a, b, c, float(imm))
        found = self.cse.get(self._key(n))
        if found is None:
            self.nodes.append(n)
            self.kinds.append(node_kind(n, self.kinds))
            found = self.cse[self._key(n)] = len(self.nodes) - 1
        return found

    def const(self, value, dtype):
        return self("CONST", dtype, imm=value)

    def total(self, terms, dtype):
        acc = terms[0]
        for t in terms[1:]:
            acc = self("ADD", dtype, acc, t)
        return acc


def prune(nodes: list, outputs: list, input_dtypes: list, shape) -> Program:
    """The program with only the nodes the outputs depend on, renumbered.

    Args:
        nodes: the node list (topological).
        outputs: (node index, flags) per output.
        input_dtypes: dtype code per input slot.
        shape: the domain.
    """
    live = set()
    stack = [o for o, _ in outputs]
    while stack:
        i = stack.pop()
        if i in live:
            continue
        live.add(i)
        stack.extend(nodes[i].operands())
    order = sorted(live)
    new = {old: k for k, old in enumerate(order)}

    def remap(i):
        return new[i] if i >= 0 else -1

    kept = []
    for old in order:
        n = nodes[old]
        if n.op == "INPUT":
            kept.append(n)
        else:
            kept.append(Node(n.op, n.dtype, remap(n.a), remap(n.b), remap(n.c), n.imm))
    return Program(tuple(shape), list(input_dtypes), kept, [(new[o], f) for o, f in outputs])


def adjoint_program(program: Program, need: list, seed_scales: list, accumulate: list):
    """The backward program of ``program``.

    Returns (backward Program or None, {input slot: output index or None}): None when no
    requested gradient depends on anything (all zero). Backward input slots: the forward
    slots, then one per forward output (its gradient, of the output node's dtype).

    Args:
        program: the forward program.
        need: per forward input slot, whether its gradient is wanted.
        seed_scales: per forward output, the factor its incoming gradient is multiplied by
            (1 / the number of domain points that map to one output element, for an output
            smaller than its node's extent).
        accumulate: per forward input slot, True when the input was broadcast (its gradient
            is an ACCUMULATE output).
    """
    fwd = program.nodes
    kinds = program.kinds()
    n_in = len(program.input_dtypes)
    emit = _Emitter(program)
    full = {}       # node -> contributions (full and constant nodes)
    elem = {}       # row node -> per-element contributions (summed over the row)
    rowc = {}       # row node -> per-row contributions

    input_dtypes = list(program.input_dtypes)
    for k, (node, _) in enumerate(program.outputs):
        dt = fwd[node].dtype
        input_dtypes.append(dt)
        seed = emit("INPUT", dt, n_in + k)
        if seed_scales[k] != 1.0:
            seed = emit("MUL", dt, seed, emit.const(seed_scales[k], dt))
        if kinds[node] == "const":
            continue
        (rowc if kinds[node] == "row" else full).setdefault(node, []).append(seed)

    cols = program.shape[-1]

    def push(consumer, operand, term):
        if kinds[operand] == "const":
            return
        if kinds[operand] == "full":
            full.setdefault(operand, []).append(term)
        elif kinds[consumer] == "row":
            rowc.setdefault(operand, []).append(term)
        elif emit.kinds[term] != "full":  # the same at every column: its row sum is cols * it
            dt = fwd[operand].dtype
            rowc.setdefault(operand, []).append(emit("MUL", dt, term, emit.const(float(cols), dt)))
        else:
            elem.setdefault(operand, []).append(term)

    input_adjoint = {}
    for i in range(len(fwd) - 1, -1, -1):
        n = fwd[i]
        dt = n.dtype
        if kinds[i] == "row":
            parts = []
            if elem.get(i):
                parts.append(emit("SUM", dt, emit.total(elem[i], dt)))
            if rowc.get(i):
                parts.append(emit.total(rowc[i], dt))
            if not parts:
                continue
            g = emit.total(parts, dt)
        else:
            if not full.get(i):
                continue
            g = emit.total(full[i], dt)
        if n.op == "INPUT":
            input_adjoint.setdefault(n.a, []).append(g)
            continue
        _local(emit, push, fwd, i, g, dt, cols)

    # any full node of the backward program spreads a row value: WHERE(s == s, g, g) is g at
    # every domain point (both branches are g, so a NaN in s changes nothing)
    spread = emit("INPUT", input_dtypes[n_in], n_in)
    outputs, where = [], {}
    for slot, wanted in enumerate(need):
        if not wanted or slot not in input_adjoint:
            where[slot] = None
            continue
        dt = program.input_dtypes[slot]
        g = emit.total(input_adjoint[slot], dt)
        if emit.kinds[g] != "full":
            g = emit("WHERE", dt, emit("EQ", input_dtypes[n_in], spread, spread), g, g)
        where[slot] = len(outputs)
        outputs.append((g, ACCUMULATE if accumulate[slot] else 0))
    if not outputs:
        return None, where
    return prune(emit.nodes, outputs, input_dtypes, program.shape), where


def _local(emit, push, fwd, i, g, dt, cols):
    """Push node ``i``'s adjoint ``g`` to its operands (the local derivatives)."""
    n = fwd[i]
    a, b, c = n.a, n.b, n.c
    op = n.op
    one = emit.const(1.0, dt)
    if op == "CAST":
        push(i, a, emit("CAST", fwd[a].dtype, g))
    elif op == "NEG":
        push(i, a, emit("NEG", dt, g))
    elif op == "ABS":
        zero = emit.const(0.0, dt)
        sign = emit("SUB", dt, emit("GT", dt, a, zero), emit("LT", dt, a, zero))
        push(i, a, emit("MUL", dt, g, sign))
    elif op == "EXP":
        push(i, a, emit("MUL", dt, g, i))
    elif op == "LOG":
        push(i, a, emit("DIV", dt, g, a))
    elif op == "SQRT":
        push(i, a, emit("DIV", dt, emit("MUL", dt, g, emit.const(0.5, dt)), i))
    elif op == "RSQRT":
        y3 = emit("MUL", dt, emit("MUL", dt, i, i), i)
        push(i, a, emit("MUL", dt, g, emit("MUL", dt, y3, emit.const(-0.5, dt))))
    elif op == "TANH":
        push(i, a, emit("MUL", dt, g, emit("SUB", dt, one, emit("MUL", dt, i, i))))
    elif op == "SIGMOID":
        push(i, a, emit("MUL", dt, g, emit("MUL", dt, i, emit("SUB", dt, one, i))))
    elif op == "RELU":
        push(i, a, emit("MUL", dt, g, emit("GT", dt, a, emit.const(0.0, dt))))
    elif op == "GELU":
        u2 = emit("MUL", dt, a, a)
        inner = emit("MUL", dt, emit.const(_K0, dt),
                     emit("ADD", dt, a, emit("MUL", dt, emit.const(_K1, dt), emit("MUL", dt, a, u2))))
        t = emit("TANH", dt, inner)
        half = emit.const(0.5, dt)
        left = emit("MUL", dt, half, emit("ADD", dt, one, t))
        slope = emit("MUL", dt, emit.const(_K0, dt),
                     emit("ADD", dt, one, emit("MUL", dt, emit.const(3 * _K1, dt), u2)))
        right = emit("MUL", dt, emit("MUL", dt, emit("MUL", dt, half, a),
                                     emit("SUB", dt, one, emit("MUL", dt, t, t))), slope)
        push(i, a, emit("MUL", dt, g, emit("ADD", dt, left, right)))
    elif op == "ERF":
        d = emit("MUL", dt, emit.const(2.0 / math.sqrt(math.pi), dt),
                 emit("EXP", dt, emit("NEG", dt, emit("MUL", dt, a, a))))
        push(i, a, emit("MUL", dt, g, d))
    elif op == "POWI":
        p = n.imm
        if p != 0.0:
            lower = one if p == 1.0 else emit("POWI", dt, a, imm=p - 1.0)
            push(i, a, emit("MUL", dt, g, emit("MUL", dt, emit.const(p, dt), lower)))
    elif op == "RECIP":
        push(i, a, emit("NEG", dt, emit("MUL", dt, g, emit("MUL", dt, i, i))))
    elif op == "ADD":
        push(i, a, g)
        push(i, b, g)
    elif op == "SUB":
        push(i, a, g)
        push(i, b, emit("NEG", dt, g))
    elif op == "MUL":
        push(i, a, emit("MUL", dt, g, b))
        push(i, b, emit("MUL", dt, g, a))
    elif op == "DIV":
        push(i, a, emit("DIV", dt, g, b))
        push(i, b, emit("NEG", dt, emit("DIV", dt, emit("MUL", dt, g, i), b)))
    elif op in ("MAX", "MIN"):
        wins = emit("GT" if op == "MAX" else "LT", dt, a, b)
        tie = emit("MUL", dt, emit("EQ", dt, a, b), emit.const(0.5, dt))
        share_a = emit("ADD", dt, wins, tie)
        share_b = emit("SUB", dt, one, share_a)
        push(i, a, emit("MUL", dt, g, share_a))
        push(i, b, emit("MUL", dt, g, share_b))
    elif op == "POW":
        push(i, a, emit("MUL", dt, g, emit("MUL", dt, b, emit("POW", dt, a, emit("SUB", dt, b, one)))))
        push(i, b, emit("MUL", dt, g, emit("MUL", dt, i, emit("LOG", dt, a))))
    elif op in COMPARISONS or op == "CONST":
        pass
    elif op == "WHERE":
        zero = emit.const(0.0, dt)
        push(i, b, emit("WHERE", dt, a, g, zero))
        push(i, c, emit("WHERE", dt, a, zero, g))
    elif op == "SUM":
        push(i, a, g)
    elif op == "MEAN":
        # 1/cols as a constant: the domain is fixed per program
        push(i, a, emit("MUL", dt, g, emit.const(1.0 / cols if cols else 0.0, dt)))
    elif op == "MAX_ROW":
        hit = emit("EQ", dt, a, i)
        count = emit("SUM", dt, hit)
        push(i, a, emit("MUL", dt, g, emit("DIV", dt, hit, count)))
    else:  # pragma: no cover - validated programs have no other op
        raise ValueError(f"fusion backward: no derivative for {op}")

