"""Graph capture and fusion, the programs: what ``compile_graph`` traces, differentiates and,
without the runtime, runs.

``compile_graph`` (extensions/compile.py, the guide's import path) turns an elementwise chain
into one fusion program (IR version 1 of runtime/fusion/README.md) and runs it as one fused
loop, forward and backward. This family owns the Python side of those programs:

  ir.py              Program, Node: the op table, the runtime's int64 words, the Python-side
                     validation, node kinds (full / row / constant), the DRAM accounting
  trace.py           trace, TracedValue, UnsupportedOperation: one run of the function on
                     tracing values records the forward program
  grad.py            adjoint_program, prune: the backward pass as another program
  numpy_executor.py  run_numpy: the NumPy executor ("fusion:numpy"), the fallback

Programs in, programs out: nothing here calls the runtime. The native executors (the tile
interpreter, the compiled C loop, the C-compiler search and the kernel cache) belong to the
fusion back end, backends/fusion/; the executor choice and the report to compile.py. The
guide: docs/fusion.md.

Assumes: the runtime's IR version 1, which the C side validates again before anything runs;
the NumPy executor uses the package's own NumPy formulas (backends/reference/, the core's erf).
"""
from __future__ import annotations

from .grad import adjoint_program, prune
from .ir import Node, Program
from .numpy_executor import run_numpy
from .trace import TracedValue, UnsupportedOperation

# ``trace`` the function stays trace.trace: the name ``trace`` is the submodule.
__all__ = ["Program", "Node", "TracedValue", "UnsupportedOperation", "adjoint_program", "prune",
           "run_numpy"]
