"""backends/fusion: the fusion executors behind the door -- what runs ``compile_graph``'s fused
programs (extensions/compile.py traces and plans them; this folder runs them).

Owns the registry's "fusion" entry, its probe and its one op, "fusion_run" (run one program
on arrays: the ctypes pointer and stride arrays are built here, then the compiled kernel or
the runtime's tile interpreter runs), and executors.py (the runtime program handle, the one
C-compiler search, the compiled-kernel cache).

A fused program runs on one of three executors, chosen by the extension itself
(``TINYTORCH_FUSION=auto|interp|compiled|numpy``): the runtime's tile interpreter
(``tt_fusion_run``, path "fusion:interp:<isa>"), a kernel generated as C
(``tt_fusion_source``) and built by the system C compiler ("fusion:compiled"), or the NumPy
executor ("fusion:numpy", in the extension: NumPy needs no back end). The probe says which
executors this machine has and why one is missing. It only looks: finding a compiler is a
PATH lookup (executors.compiler_on_path), and the first compile test-compiles.

Assumes: the runtime's fusion library (``tt_fusion_*``) and programs the runtime
validated (executors.NativeProgram); extensions/compile.py chooses the executor.
"""
from __future__ import annotations

import os
from ctypes import c_int64, c_void_p

import numpy as np

from ... import _native
from .. import record_path, register
from . import executors
from .executors import NativeProgram

__all__ = ["probe", "run", "element_strides", "contiguous_strides", "NativeProgram", "executors"]


def probe():
    """(usable, detail): usable when the runtime library exports the tt_fusion_* functions;
    the detail names the interpreter's ISA, the C compiler found (or why compiled kernels
    fall back to the interpreter) and the executor choice in effect."""
    if not _native.available():
        return False, f"no runtime library ({_native.reason()}): compile_graph runs on NumPy"
    if not _native.has_fusion():
        return False, (f"{_native.library_path()} has no tt_fusion_* functions (built before the "
                       "fusion executor): compile_graph runs on NumPy")
    info = _native.build_info()
    found = executors.compiler_on_path()
    cc = f"C compiler {found} for compiled kernels" if found else \
        "no C compiler on PATH: the interpreter runs every program"
    choice = os.environ.get("TINYTORCH_FUSION", "auto")
    return True, f"tile interpreter (fusion:interp:{info['isa_active']}); {cc}; TINYTORCH_FUSION={choice}"


def element_strides(a: np.ndarray) -> list:
    """Element strides of ``a`` for the runtime (0 on size-1 axes: a broadcast)."""
    return [0 if n == 1 else s // a.itemsize for n, s in zip(a.shape, a.strides)]


def contiguous_strides(shape) -> list:
    """Row-major element strides of a fresh output buffer (0 on size-1 axes). NumPy reports
    0 for every axis of an empty array, which the runtime would read as a broadcast.
    ``shape`` is the output's shape."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(0 if n == 1 else step)
        step *= max(n, 1)
    return strides[::-1]


def run(program: NativeProgram, kernel, inputs: list, rank: int, outputs: list) -> str:
    """Run one fused program (the registry's "fusion_run" op) and return the path that ran:
    "fusion:compiled" when ``kernel`` (a loaded compiled kernel, or None) is given, else the
    tile interpreter's own report ("fusion:interp:<isa>").

    Args:
        program: the runtime's handle of the validated program.
        kernel: its compiled ``tt_fused_kernel`` (executors.compile_source), or None.
        inputs: input arrays padded to ``rank`` dims (None for an unused slot).
        rank: the iteration domain's rank.
        outputs: contiguous output arrays, written in place.
    """
    dummy = np.zeros(1, dtype=np.float64)
    ptrs = [(a if a is not None else dummy).ctypes.data for a in inputs]
    strides = []
    for a in inputs:
        strides += element_strides(a) if a is not None else [0] * rank
    in_p = (c_void_p * len(ptrs))(*ptrs)
    in_s = (c_int64 * max(len(strides), 1))(*strides)
    out_p = (c_void_p * len(outputs))(*[o.ctypes.data for o in outputs])
    o_str = []
    for o in outputs:
        o_str += contiguous_strides(o.shape)
    out_s = (c_int64 * len(o_str))(*o_str)
    if kernel is not None:
        if kernel(in_p, in_s, out_p, out_s) != 0:
            raise MemoryError("compile_graph: the compiled kernel could not allocate its "
                              "accumulation buffer")
        path = "fusion:compiled"
    else:
        path = program.run(in_p, in_s, out_p, out_s)
    record_path(path)
    return path


register("fusion", probe=probe, priority=200, ops={"fusion_run": run},
         description="compile_graph's fused elementwise programs (tile interpreter, generated C)")
