"""Graph capture and fusion: ``compile_graph(fn, *example_args)`` runs an elementwise chain
as one fused loop, forward and backward.

Bottleneck it removes: DRAM round-trips. Eager define-by-run execution writes every
intermediate of an elementwise chain to memory and reads it back: ``(x + bias) * scale`` on
10^7 float32 moves 200 MB (x, bias read; t written; t read; y written) where one fused loop
moves 120 MB (x and bias read once, y written once; 160 MB when scale is a full array
too). The traced program (fusion/trace.py) is executed by the runtime's tile interpreter or
by a C loop generated from it and compiled once (backends/fusion/executors.py), streaming L1-sized blocks
with every intermediate in registers or a per-thread scratch tile. The backward pass is the
adjoint program (fusion/grad.py), fused and executed the same way; it recomputes the forward
from the saved graph inputs, so no intermediate is ever stored for autograd.

Using it::

    def f(x, bias, scale):
        return (x + bias) * scale

    fused = compile_graph(f, x, bias, 0.5)     # traced once for these shapes and dtypes
    y = fused(x, bias, 0.5)                    # ndarray in -> ndarray out
    t = fused(Tensor(x, requires_grad=True), Tensor(bias, requires_grad=True), 0.5)
    t.sum().backward()                         # Tensor in -> Tensor out, on the tape
    print(fused.report())                      # DRAM bytes eager vs fused, times, executor

A call with other shapes or dtypes retraces (one program per signature; Python-number
arguments are part of the signature, baked in as constants). An operation that cannot be
fused raises ``UnsupportedOperation`` (a TypeError) naming it: the graph is never split.

The executor, chosen per call (``TINYTORCH_FUSION=auto|interp|compiled|numpy``, default
auto): "compiled" when a C compiler works, unless auto's measured rule (``executor_choice``)
sends the program to the interpreter ("interp"): C-library math per element (float32 log,
erf, pow, x ** 3; float64 exp, tanh, ...); float32 exp, tanh, sigmoid, GELU and sqrt are
inline formulas the compiled loop vectorises, and row reductions fold in vector lanes, so
those programs (softmax and layer norm among them) are compiled.
"numpy" (fusion/numpy_executor.py) when the runtime is missing, lacks tt_fusion_*, or ``use_native(False)`` is on. A failed compile falls
back to the interpreter. ``last_path()`` says what ran ("fusion:compiled",
"fusion:interp:<isa>", "fusion:numpy") and ``report()`` why.

Upstream's form ``compile_graph(fn, "x", "bias", "scale")`` (argument names, no arrays)
still returns the fused expression's Python source (``str()`` and ``.source``), traced with
upstream's ``TracedNode``.

Owns compile_graph, CompiledGraph, the executor choice and the report; assumes
fusion/ (trace.py, ir.py, grad.py) for the programs and the fusion back end
(backends/fusion/: the runtime program, the C compiler, the kernel cache) to run them.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..core import acceleration as _acc
from ..core.acceleration import last_path
from ..core.autograd import Function, no_grad
from ..core.tensor import Tensor
from .. import backends as _backends
from ..backends.fusion import executors as fusion_executors
from .fusion.grad import adjoint_program, prune
from .fusion.ir import ACCUMULATE, F64, Program, code_dtype
from .fusion.numpy_executor import run_numpy
from .fusion.trace import UnsupportedOperation, trace

__all__ = ["TracedNode", "compile_graph", "CompiledGraph", "FusedSource", "FusionReport",
           "UnsupportedOperation", "executor_choice", "last_path"]

_EXECUTORS = ("auto", "interp", "compiled", "numpy")


# ====================================================================== upstream's toy form

class TracedNode:
    """A symbolic value of upstream's toy tracer: ``name`` is the expression computing it.

    Args:
        name: the expression text (an input name, or a traced sub-expression).
    """

    def __init__(self, name: str):
        self.name = str(name)

    @staticmethod
    def _text(other) -> str:
        return other.name if isinstance(other, TracedNode) else repr(other)

    def __add__(self, other):
        return TracedNode(f"({self.name} + {self._text(other)})")

    def __radd__(self, other):
        return TracedNode(f"({self._text(other)} + {self.name})")

    def __mul__(self, other):
        return TracedNode(f"({self.name} * {self._text(other)})")

    def __rmul__(self, other):
        return TracedNode(f"({self._text(other)} * {self.name})")

    def __repr__(self):
        return f"TracedNode({self.name!r})"


class FusedSource(str):
    """Upstream's result: the source of ``def fused_kernel(<names>)`` (a str; ``exec`` it).

    Args:
        text: the source.
    """

    @property
    def source(self) -> str:
        """The fused expression's code (the string itself)."""
        return str(self)


def _upstream_source(func, names) -> FusedSource:
    for name in names:
        if not str(name).isidentifier():
            raise ValueError(f"compile_graph: {name!r} is not a valid argument name")
    out = func(*(TracedNode(n) for n in names))
    if not isinstance(out, TracedNode):
        raise TypeError(f"compile_graph: {getattr(func, '__name__', func)} returned {type(out).__name__}, "
                        "not a traced expression (only + and * are traced)")
    return FusedSource(f"def fused_kernel({', '.join(names)}):\n"
                       f"    # Fused by TinyTorch Compiler\n"
                       f"    return {out.name}\n")


# ====================================================================== executor choice

# The measured rule of ``auto`` (bench_fusion.md and bench_fusion_avx2.md, 10^7 float32,
# 1 thread; compiled vs interpreter, ms):
#   - arithmetic chains: chain10 3.6 vs 14.0 (AVX2), 3.2 vs 9.3 (AVX-512) -> compiled;
#   - float32 exp / tanh / sigmoid / GELU / sqrt, which the generated C spells as inline
#     formulas the compiler vectorises (with -fno-trapping-math: without it GCC 12 on AVX2
#     keeps tanh's select as a branch and the GELU chain took 129 ms): GELU chain 17.7 vs
#     18.6 (AVX2), 6.5 vs 9.3 (AVX-512); exp chain 8.7 vs 11.3; sigmoid 9.9 vs 12.8;
#     sqrt 3.4 vs 9.5 -> compiled;
#   - log, erf, pow and powi (but x ** 2, which is x * x) in float32, and every float64
#     transcendental, are C-library calls
#     per element in both executors, and the interpreter keeps the arithmetic around them
#     vectorised: a log chain 40.7 vs 45.0, the float64 GELU chain 258 vs 266 -> interp;
#   - row reductions: the compiled loop folds a unit-stride row in 16 vector lanes per
#     1024-column tile and evaluates a transcendental two passes need once per row, into a
#     row buffer (runtime/fusion/codegen.cpp): layer norm 6.3-6.7 vs 11.7-13.3 (the
#     runtime's own tt_layernorm_forward 6.1-6.5), softmax 14.1 vs 17.9 (tt_softmax_forward
#     8.3); forward + backward 22.0 vs 54.9 and 33.2 vs 70.6 (AVX2) -> compiled.
_LIBM_F32 = frozenset({"LOG", "ERF", "POW"})
_LIBM_F64 = frozenset({"EXP", "LOG", "TANH", "SIGMOID", "GELU", "ERF", "POW"})


def _auto_interp_reason(program: Program) -> str:
    """Why ``auto`` runs ``program`` on the interpreter ("" when the compiled loop is the
    faster one by the measured rule above)."""
    kinds = program.kinds()  # per-row values (a layer norm's rsqrt) cost nothing either way
    libm = sorted({f"{n.op.lower()} ({code_dtype(n.dtype)})" for n, k in zip(program.nodes, kinds)
                   if k == "full" and (n.op in (_LIBM_F64 if n.dtype == F64 else _LIBM_F32)
                                       or (n.op == "POWI" and n.imm != 2.0))})
    if libm:
        return (f"auto: the program uses {', '.join(libm)}, a C-library call per element in both "
                "executors; the interpreter keeps the arithmetic around it vectorised (measured faster)")
    return ""


def executor_choice(program: Program | None = None):
    """(executor, reason) for the next call: executor is "compiled", "interp" or "numpy";
    reason says why it is not the fastest one ("" when it is). ValueError for an unknown
    ``TINYTORCH_FUSION`` value.

    Args:
        program: the program about to run; under ``auto`` the measured rule above picks the
            executor (compiled for arithmetic, vectorised float32 math and row reductions,
            the interpreter for C-library math). None: decide without looking at a program.
    """
    want = os.environ.get("TINYTORCH_FUSION", "auto").strip().lower() or "auto"
    if want not in _EXECUTORS:
        raise ValueError(f"TINYTORCH_FUSION={want!r}: expected one of {', '.join(_EXECUTORS)}")
    if want == "numpy":
        return "numpy", "TINYTORCH_FUSION=numpy"
    lib, why = fusion_executors.fusion_library()
    if lib is None:
        return "numpy", why
    if want == "interp":
        return "interp", "TINYTORCH_FUSION=interp"
    path, detail, _ = fusion_executors.compiler()
    if path is None:
        return "interp", detail
    if want == "auto" and program is not None:
        reason = _auto_interp_reason(program)
        if reason:
            return "interp", reason
    return "compiled", ""


# ====================================================================== one traced signature

def _padded(a: np.ndarray, rank: int) -> np.ndarray:
    a = a[(None,) * (rank - a.ndim)] if a.ndim < rank else a
    if any(s % a.itemsize for s in a.strides):
        a = np.ascontiguousarray(a)
    return a


class _Plan:
    """Everything about one signature: the program, its output layout, its native forms."""

    def __init__(self, fn, args):
        t, outs, positions, is_tuple = trace(fn, args)
        self.positions = positions
        self.is_tuple = is_tuple
        self.domain = tuple(t.domain)
        rank = len(self.domain)
        kinds = t.program.kinds()
        self.out_meta = []
        prog_outputs = []
        for k, o in enumerate(outs):
            if kinds[o.index] == "const":
                raise UnsupportedOperation(f"output {k}: it does not depend on any array argument")
            m = t.meta[o.index]
            ks = (1,) * (rank - len(m.shape)) + tuple(m.shape)
            buf = self.domain if kinds[o.index] == "full" else self.domain[:-1] + (1,)
            shrink = tuple(d for d in range(rank) if ks[d] == 1 and buf[d] != 1)
            factor = float(np.prod([buf[d] for d in shrink])) if shrink else 1.0
            self.out_meta.append({"kind": kinds[o.index], "buffer": buf, "shrink": shrink,
                                  "shape": o.shape, "bool": m.boolean,
                                  "dtype": code_dtype(t.program.nodes[o.index].dtype),
                                  "scale": 1.0 / factor if factor else 1.0})
            prog_outputs.append((o.index, 0))
        self.input_shapes = [tuple(args[i].shape) for i in positions]
        self.input_nbytes = [int(args[i].nbytes) for i in positions]
        value_nbytes = []
        for i, (n, m) in enumerate(zip(t.program.nodes, t.meta)):
            value_nbytes.append(self.input_nbytes[n.a] if n.op == "INPUT" else
                                int(np.prod(m.shape[:-1] if m.dropped else m.shape)) * code_dtype(n.dtype).itemsize)
        self.traced = Program(self.domain, list(t.program.input_dtypes), list(t.program.nodes), prog_outputs)
        self.traced.validate()
        out_nbytes = [int(np.prod(m["shape"])) * (1 if m["bool"] else m["dtype"].itemsize)
                      for m in self.out_meta]
        self.dram = self.traced.dram_bytes(self.input_nbytes, out_nbytes, value_nbytes)
        self.program = prune(self.traced.nodes, prog_outputs, self.traced.input_dtypes, self.domain)
        self.program.validate()
        self.accumulate = [tuple(((1,) * (rank - len(s)) + s)) != self.domain for s in self.input_shapes]
        self._native = {}
        self._backward = {}
        self.last_path = "none"
        self.reason = ""
        self.cache_event = ""
        self.compile_seconds = 0.0

    # ------------------------------------------------------------------ execution
    def _native_program(self, program: Program, lib):
        key = id(program)
        entry = self._native.get(key)
        if entry is None:
            entry = self._native[key] = {"prog": fusion_executors.NativeProgram(lib, program.words(), program.imm()),
                                         "kernel": None, "failed": ""}
        return entry

    def execute(self, program: Program, inputs: list, out_shapes: list, out_dtypes: list,
                outputs: list | None = None) -> list:
        """Run ``program`` on padded input arrays (None for unused slots) into new buffers
        (or into ``outputs``, contiguous arrays of ``out_shapes``)."""
        if outputs is None:
            outputs = [np.empty(s, dtype=d) for s, d in zip(out_shapes, out_dtypes)]
        mode, why = executor_choice(program)
        if mode != "numpy":
            lib, _ = fusion_executors.fusion_library()
            entry = self._native_program(program, lib)
            if mode == "compiled":
                if entry["kernel"] is None and not entry["failed"]:
                    start = time.perf_counter()
                    try:
                        entry["kernel"], self.cache_event = fusion_executors.compile_source(
                            entry["prog"].source(), program.words().tobytes() + program.imm().tobytes())
                    except (RuntimeError, OSError) as exc:
                        entry["failed"] = f"compiling the generated C failed, the interpreter ran: {exc}"
                    self.compile_seconds = time.perf_counter() - start
                if entry["kernel"] is None:
                    why = entry["failed"]
            kernel = entry["kernel"] if mode == "compiled" else None
            # through the door: the fusion back end builds the pointer arrays and runs it
            self.last_path = _backends.routes("fusion_run")[0](entry["prog"], kernel, inputs,
                                                               len(self.domain), outputs)
            self.reason = why
            return outputs
        run_numpy(program, inputs, outputs)
        self.last_path, self.reason = "fusion:numpy", why
        _acc.record_path("fusion:numpy")
        return outputs

    def forward(self, arrays: list, out=None) -> list:
        """The outputs (NumPy shapes and dtypes) for the array arguments ``arrays``, written
        into ``out`` (a list of arrays, one per output) when given."""
        rank = len(self.domain)
        inputs = [_padded(a, rank) for a in arrays]
        given = None if out is None else [self._out_view(o, m, k) for k, (o, m) in enumerate(zip(out, self.out_meta))]
        if given is not None and not self._writes_in_place_safely(given, inputs):
            # an output written into an input's memory would be read back by a later output
            # (or a later pass over the row): compute into fresh buffers, then copy
            for o, b in zip(given, self.execute(self.program, inputs, [m["buffer"] for m in self.out_meta],
                                                [m["dtype"] for m in self.out_meta])):
                np.copyto(o, b)
            return list(out)
        bufs = self.execute(self.program, inputs, [m["buffer"] for m in self.out_meta],
                            [m["dtype"] for m in self.out_meta], given)
        if out is not None:
            return list(out)
        return [self._finish(b, m) for b, m in zip(bufs, self.out_meta)]

    def _writes_in_place_safely(self, outs: list, inputs: list) -> bool:
        """Whether the executor may write ``outs`` directly: no output overlaps an input,
        except one output that *is* an input (same memory, same layout) of a program with
        no row values, where every element is read before it is written. ValueError when
        two outputs overlap (the result would depend on the executor's order)."""
        for j, o in enumerate(outs):
            for other in outs[j + 1:]:
                if np.may_share_memory(o, other):
                    raise ValueError("compile_graph: two out= arrays share memory")
        clashes = [(o, a) for o in outs for a in inputs if np.may_share_memory(o, a)]
        if not clashes:
            return True
        elementwise = "row" not in self.program.kinds()
        return len(outs) == 1 and elementwise and all(
            o.shape == a.shape and o.strides == a.strides and
            o.__array_interface__["data"][0] == a.__array_interface__["data"][0] for o, a in clashes)

    @staticmethod
    def _out_view(o, meta, k):
        """``o`` (a caller's output array) seen as the executor's buffer, or the reason not."""
        if not isinstance(o, np.ndarray):
            raise TypeError(f"compile_graph: out[{k}] must be an ndarray, got {type(o).__name__}")
        want = meta["shape"]
        if o.shape != tuple(want) or o.dtype != meta["dtype"] or meta["shrink"] or meta["bool"]:
            raise ValueError(f"compile_graph: out[{k}] must be a {meta['dtype']} array of shape "
                             f"{tuple(want)} (got {o.dtype} {o.shape}); outputs smaller than the "
                             "domain or boolean cannot be written in place")
        if not (o.flags.c_contiguous and o.flags.writeable):
            raise ValueError(f"compile_graph: out[{k}] must be C-contiguous and writeable")
        return o.reshape(meta["buffer"])

    @staticmethod
    def _finish(buf, meta):
        if meta["shrink"]:
            buf = buf[tuple(0 if d in meta["shrink"] else slice(None) for d in range(buf.ndim))]
        out = buf.reshape(meta["shape"])
        return out != 0 if meta["bool"] else out

    # ------------------------------------------------------------------ backward
    def backward_program(self, need: tuple):
        """(program or None, {slot: output index or None}) of the gradients in ``need``."""
        found = self._backward.get(need)
        if found is None:
            scales = [m["scale"] for m in self.out_meta]
            found = self._backward[need] = adjoint_program(self.program, list(need), scales, self.accumulate)
            if found[0] is not None:
                found[0].validate()
        return found

    def saved_slots(self, need: tuple) -> list:
        """The forward input slots the backward program reads (what autograd keeps)."""
        prog, _ = self.backward_program(need)
        if prog is None:
            return []
        n_in = len(self.program.input_dtypes)
        return sorted({n.a for n in prog.nodes if n.op == "INPUT" and n.a < n_in})

    def backward(self, need: tuple, saved: dict, grads: list) -> list:
        """Gradients per input slot (None where not needed; zeros where independent)."""
        prog, where = self.backward_program(need)
        rank = len(self.domain)
        results = [None] * len(need)
        for slot, wanted in enumerate(need):
            if wanted and where.get(slot) is None:
                results[slot] = np.zeros(self.input_shapes[slot], dtype=code_dtype(self.program.input_dtypes[slot]))
        if prog is None:
            return results
        n_in = len(self.program.input_dtypes)
        inputs = [_padded(saved[s], rank) if s in saved else None for s in range(n_in)]
        for g, m in zip(grads, self.out_meta):
            g = np.asarray(g, dtype=m["dtype"])
            ks = list(m["buffer"])
            for d in m["shrink"]:
                ks[d] = 1
            inputs.append(g.reshape(ks))
        shapes, dtypes, slots = [], [], []
        for slot, k in where.items():
            if k is None:
                continue
            s = self.input_shapes[slot]
            shapes.append((1,) * (rank - len(s)) + s)
            dtypes.append(code_dtype(self.program.input_dtypes[slot]))
            slots.append(slot)
        order = sorted(range(len(slots)), key=lambda j: where[slots[j]])
        shapes = [shapes[j] for j in order]
        dtypes = [dtypes[j] for j in order]
        slots = [slots[j] for j in order]
        # each gradient owns its memory (the engine adopts it as .grad without a copy); the
        # executor writes through a view padded to the domain's rank
        owned = [np.empty(self.input_shapes[slot], dtype=d) for slot, d in zip(slots, dtypes)]
        self.execute(prog, inputs, shapes, dtypes, [o.reshape(s) for o, s in zip(owned, shapes)])
        for slot, o in zip(slots, owned):
            results[slot] = o
        return results


# ====================================================================== the public object

def _signature(args):
    sig = []
    for a in args:
        if isinstance(a, np.ndarray):
            sig.append(("array", a.shape, a.dtype.str))
        elif isinstance(a, (bool, int, float, np.number)):
            sig.append(("number", type(a).__name__, repr(a)))
        else:
            raise TypeError(f"compile_graph: arguments must be Tensors, ndarrays or Python numbers, "
                            f"got {type(a).__name__}")
    return tuple(sig)


class CompiledGraph(Function):
    """A traced function run as one fused loop; call it like the function.

    It is an autograd ``Function``: called with Tensors, it records one node on the tape
    whose backward runs the fused adjoint program; that node keeps only the graph inputs
    the adjoint reads. ndarray arguments give ndarrays and record nothing.

    Args:
        fn: the function (elementwise ops and last-axis reductions; see fusion/trace.py).
        example_args: example arguments (Tensors, ndarrays, Python numbers) traced now.
    """

    def __init__(self, fn, *example_args):
        self.fn = fn
        self._plans = {}
        self._per_output = {}
        self._last_args = None
        if example_args:
            self._last_args = [a.data if isinstance(a, Tensor) else a for a in example_args]
            self._plan(self._last_args)

    def _plan(self, arrays) -> _Plan:
        for a in arrays:
            if isinstance(a, np.ndarray) and a.dtype not in (np.float32, np.float64):
                raise TypeError(f"compile_graph: array arguments must be float32 or float64, got {a.dtype}")
        sig = _signature(arrays)
        plan = self._plans.get(sig)
        if plan is None:
            plan = self._plans[sig] = _Plan(self.fn, arrays)
        return plan

    # ------------------------------------------------------------------ calling
    def __call__(self, *args, out=None):
        """Run the fused program (see the class docstring).

        Args:
            args: the arguments, as for the traced function.
            out: ndarray calls only: an array (a tuple for several outputs) to write the
                result into, of the output's shape and dtype, C-contiguous; it is returned.
                Saves the page faults of a fresh output (half the time of a memory-bound
                call at 10^7 elements). It may be an input (``out=x``): written in place
                when that is exact (one output, no row reductions), else computed into a
                fresh buffer and copied; two out arrays sharing memory are a ValueError.
        """
        arrays = [a.data if isinstance(a, Tensor) else a for a in args]
        self._last_args = arrays
        plan = self._plan(arrays)
        if not any(isinstance(a, Tensor) for a in args):
            if out is not None:
                outs = list(out) if isinstance(out, (tuple, list)) else [out]
                if len(outs) != len(plan.out_meta):
                    raise ValueError(f"compile_graph: out has {len(outs)} arrays, the function "
                                     f"returns {len(plan.out_meta)}")
                out = outs
            outs = plan.forward([arrays[i] for i in plan.positions], out)
            return tuple(outs) if plan.is_tuple else outs[0]
        if out is not None:
            raise ValueError("compile_graph: out= is for ndarray calls (a Tensor call records the "
                             "output on the tape)")
        tensors = [a if isinstance(a, Tensor) or not isinstance(a, np.ndarray) else Tensor.from_numpy(a)
                   for a in args]
        if len(plan.out_meta) == 1:
            out = CompiledGraph.apply(*tensors, _graph=self)
            return (out,) if plan.is_tuple else out
        outs = []
        for k in range(len(plan.out_meta)):
            single = self._per_output.get(k)
            if single is None:
                single = self._per_output[k] = CompiledGraph(lambda *a, _k=k: self.fn(*a)[_k])
            outs.append(single(*args))
        return tuple(outs)

    def forward(self, *arrays, _graph=None):
        """Run the fused program on the arrays; save the inputs the adjoint reads.

        Args:
            arrays: the call's arguments, Tensors unwrapped.
        """
        plan = _graph._plan(list(arrays))
        self.plan = plan
        arrs = [arrays[i] for i in plan.positions]
        need = tuple(self.needs_input_grad[i] for i in plan.positions)
        self.need = need
        if any(need):
            self.saved = {s: arrs[s] for s in plan.saved_slots(need)}
        return plan.forward(arrs)[0]

    def backward(self, grad_output):
        """Run the fused adjoint program; one gradient per argument (None for numbers).

        Args:
            grad_output: d loss / d output.
        """
        plan = self.plan
        grads = plan.backward(self.need, self.saved, [grad_output])
        out = [None] * len(self.needs_input_grad)
        for slot, i in enumerate(plan.positions):
            out[i] = grads[slot]
        return tuple(out)

    # ------------------------------------------------------------------ inspection
    def _current(self) -> _Plan:
        if self._last_args is None:
            raise ValueError("compile_graph: nothing traced yet (give example arguments or call it)")
        return self._plan(self._last_args)

    @property
    def signatures(self) -> list:
        """The (shape, dtype) signatures traced so far, one program each."""
        return list(self._plans)

    def dram_bytes(self) -> dict:
        """DRAM bytes eager vs fused of the last signature (``Program.dram_bytes``): keys
        eager_read, eager_write, eager_total, fused_read, fused_write, fused_total."""
        return dict(self._current().dram)

    @property
    def program(self) -> Program:
        """The fusion program of the last signature called (or traced)."""
        return self._current().program

    @property
    def ir(self) -> str:
        """The program as text, one node a line."""
        p = self.program
        lines = [f"domain {tuple(p.shape)}, inputs {[str(code_dtype(d)) for d in p.input_dtypes]}"]
        for i, n in enumerate(p.nodes):
            args = f"slot {n.a}" if n.op == "INPUT" else repr(n.imm) if n.op == "CONST" else \
                ", ".join(f"%{o}" for o in n.operands()) + (f", {n.imm!r}" if n.op == "POWI" else "")
            lines.append(f"%{i} = {n.op.lower()}.{code_dtype(n.dtype)}({args})")
        lines.append("outputs " + ", ".join(f"%{o}" + (" (accumulate)" if f & ACCUMULATE else "")
                                            for o, f in p.outputs))
        return "\n".join(lines)

    @property
    def source(self) -> str:
        """The generated C of the fused loop (tt_fusion_source); the IR listing when the
        runtime has no fusion executor."""
        lib, why = fusion_executors.fusion_library()
        if lib is None:
            return f"/* no generated C: {why} */\n" + self.ir
        plan = self._current()
        return plan._native_program(plan.program, lib)["prog"].source()

    def backward_source(self) -> str:
        """The generated C of the adjoint program for all inputs' gradients."""
        plan = self._current()
        prog, _ = plan.backward_program(tuple(True for _ in plan.positions))
        lib, why = fusion_executors.fusion_library()
        if prog is None:
            return "/* every gradient is zero */"
        if lib is None:
            return f"/* no generated C: {why} */"
        try:
            return plan._native_program(prog, lib)["prog"].source()
        except RuntimeError as exc:  # a runtime whose generator refuses this program
            return f"/* no generated C ({exc}); the interpreter runs it */"

    def report(self, *args, repeat: int = 5) -> "FusionReport":
        """DRAM bytes eager vs fused, the measured time of both, and the executor that ran.

        Args:
            args: arguments to measure with (default: the last call's or the examples).
            repeat: timed runs of each (the median is reported).
        """
        arrays = [a.data if isinstance(a, Tensor) else a for a in args] if args else self._last_args
        if arrays is None:
            raise ValueError("report: nothing traced yet (give example arguments or call it)")
        plan = self._plan(arrays)
        self(*arrays)  # warm: compile / load once, outside the timing
        fused = _median_seconds(lambda: self(*arrays), repeat)
        path, reason = plan.last_path, plan.reason
        eager_call, eager_what = _eager_runner(self.fn, plan, arrays)
        eager = _median_seconds(eager_call, repeat)
        _acc.record_path(path)  # the report is about the fused call, not the baseline's kernels
        return FusionReport(plan.dram, eager, fused, path, reason, plan.cache_event,
                            plan.compile_seconds, len(plan.program.nodes), eager_what)


def _eager_runner(fn, plan, arrays):
    """(call, what it runs) for the eager baseline: ``fn`` on the ndarrays; else on Tensors
    without a tape; else (the function uses a method only traced values have, such as
    ``.gelu()``) the traced program node by node in NumPy, which materialises every
    intermediate just as eager code does."""
    tensors = [Tensor.from_numpy(a) if isinstance(a, np.ndarray) else a for a in arrays]

    def on_tensors():
        with no_grad():
            return fn(*tensors)

    for call, what in ((lambda: fn(*arrays), "fn on ndarrays"), (on_tensors, "fn on Tensors")):
        try:
            call()
            return call, what
        except (AttributeError, TypeError):
            continue
    rank = len(plan.domain)
    inputs = [_padded(arrays[i], rank) for i in plan.positions]

    def node_by_node():
        outs = [np.empty(m["buffer"], m["dtype"]) for m in plan.out_meta]
        run_numpy(plan.program, inputs, outs)
        return outs

    return node_by_node, "the program node by node in NumPy"


def _median_seconds(call, repeat: int) -> float:
    times = []
    for _ in range(max(1, int(repeat))):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


class FusionReport:
    """What ``CompiledGraph.report()`` measured; ``str()`` is a small table.

    Args:
        dram: the byte counts of ``Program.dram_bytes`` (eager_* and fused_* keys).
        eager_seconds: median time of the function run eagerly on the arrays.
        fused_seconds: median time of the fused call.
        path: the executor that ran ("fusion:compiled", "fusion:interp:<isa>", "fusion:numpy").
        reason: why it is not the fastest executor ("" when it is).
        cache: the compiled-C cache event ("cache-hit", "compiled", "rebuilt", "loaded", "").
        compile_seconds: time spent compiling or loading the C kernel.
        nodes: number of nodes in the fused program.
        eager_what: what the eager time measured ("fn on ndarrays", ...).
    """

    def __init__(self, dram, eager_seconds, fused_seconds, path, reason, cache, compile_seconds, nodes,
                 eager_what=""):
        self.eager_what = eager_what
        self.dram = dict(dram)
        self.eager_bytes = self.dram["eager_total"]
        self.fused_bytes = self.dram["fused_total"]
        self.eager_seconds = eager_seconds
        self.fused_seconds = fused_seconds
        self.path = path
        self.reason = reason
        self.cache = cache
        self.compile_seconds = compile_seconds
        self.nodes = nodes

    def __str__(self):
        d = self.dram
        saved = 1.0 - self.fused_bytes / self.eager_bytes if self.eager_bytes else 0.0
        lines = [
            f"{'strategy':10} {'DRAM reads':>12} {'DRAM writes':>12} {'total':>12} {'time':>12}",
            f"{'eager':10} {_size(d['eager_read']):>12} {_size(d['eager_write']):>12} "
            f"{_size(self.eager_bytes):>12} {self.eager_seconds * 1e3:>9.3f} ms",
            f"{'fused':10} {_size(d['fused_read']):>12} {_size(d['fused_write']):>12} "
            f"{_size(self.fused_bytes):>12} {self.fused_seconds * 1e3:>9.3f} ms",
            f"bandwidth saved {saved:.1%}; {self.nodes} nodes; executor {self.path}"
            + (f" ({self.reason})" if self.reason else "")
            + (f"; C kernel {self.cache} in {self.compile_seconds * 1e3:.1f} ms" if self.cache else ""),
            f"eager time: {self.eager_what}",
        ]
        return "\n".join(lines)

    __repr__ = __str__


def compile_graph(fn, *example_args):
    """Trace ``fn`` on the example arguments and return a ``CompiledGraph`` that runs it as
    one fused loop (see the module docstring); with only strings (argument names), upstream's
    form: the fused Python expression's source as a ``FusedSource`` str.

    Args:
        fn: an elementwise function of its arguments (Tensors or ndarrays, Python numbers).
        example_args: example arguments (traced now; later calls with other shapes or dtypes
            retrace), or argument names for upstream's form.
    """
    if example_args and all(isinstance(a, str) for a in example_args):
        return _upstream_source(fn, example_args)
    if not callable(fn):
        raise TypeError(f"compile_graph: fn must be callable, got {type(fn).__name__}")
    return CompiledGraph(fn, *example_args)

