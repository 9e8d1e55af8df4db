"""The fusion executors' entry in the back-end registry: what ``tinytorch info`` reports for
``compile_graph`` (extensions/compile.py).

A fused program runs on one of three executors, chosen by the extension itself
(``TINYTORCH_FUSION=auto|interp|compiled|numpy``): the runtime's tile interpreter
(``tt_fusion_run``, path "fusion:interp:<isa>"), a kernel generated as C
(``tt_fusion_source``) and built by the system C compiler ("fusion:compiled"), or the NumPy
executor ("fusion:numpy"). The entry serves no door op; its probe says which executors this
machine has and why one is missing. It only looks: finding a compiler is a PATH lookup here,
and the extension test-compiles on first use.
"""
from __future__ import annotations

import os
import shutil

from .. import _native
from . import register


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
    names = [os.environ.get("CC", "").strip(), "cc", "gcc", "clang"]
    found = next((shutil.which(n) for n in names if n and shutil.which(n)), None)
    cc = f"C compiler {found} for compiled kernels" if found else \
        "no C compiler on PATH: the interpreter runs every program"
    choice = os.environ.get("TINYTORCH_FUSION", "auto")
    return True, f"tile interpreter (fusion:interp:{info['isa_active']}); {cc}; TINYTORCH_FUSION={choice}"


register("fusion", probe=probe, priority=200,
         description="compile_graph's fused elementwise programs (tile interpreter, generated C)")
