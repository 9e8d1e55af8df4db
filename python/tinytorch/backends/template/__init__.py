"""backends/template: the worked example of a back end, the native half of the template
extension's ``scaled_matmul`` (``tinytorch.extensions.template``; docs/extending.md).

Owns the whole path below the extension, in the three parts every back end has:
  probe         the runtime library is loaded (``_native.available()``); the reason otherwise
  scaled_gemm   the registry's "scaled_matmul" op: ``alpha * op(a) @ op(b)`` for 2-D float32
                arrays in one tt_sgemm call, alpha applied by the kernel as it stores each
                output tile (no extra pass over the result); any other dtype is declined
                (NotImplemented) and the extension's NumPy fallback serves it
  the report    ``record_native_path()``: the runtime's own name of the kernel that ran, read
                back by ``last_path()``
and the one registration line at the end. Copy this folder with the extension to add a back
end of your own (docs/architecture.md, "How to add a back end").

Assumes: the extension checked shapes (a2 is 2-D, the inner sizes agree) and folded leading
axes into rows; the switch (``use_native(False)``) is the registry's, which leaves a native
entry out of ``routes()``. Imports only the registry and the binding, never the core or an
extension.
"""
from __future__ import annotations

import numpy as np

from ... import _native
from .. import record_native_path, register

__all__ = ["OP", "probe", "scaled_gemm"]

OP = "scaled_matmul"  # the registry's name of the op this back end serves


def probe() -> tuple[bool, str]:
    """Probe for the runtime: (usable, why); never raises and imports nothing."""
    if not _native.available():
        return False, "the native runtime is not loaded: " + _native.reason()
    return True, "the runtime's tt_sgemm, alpha applied in the kernel"


def scaled_gemm(a2: np.ndarray, b2: np.ndarray, alpha: float, trans_a: bool, trans_b: bool):
    """``alpha * op(a2) @ op(b2)`` in one tt_sgemm call, or NotImplemented (the next route,
    or the extension's NumPy path, then serves the call) unless both arrays are float32.

    Args:
        a2: 2-D ndarray, (M, K), or (K, M) when ``trans_a``; any strides.
        b2: 2-D ndarray, (K, N), or (N, K) when ``trans_b``; any strides.
        alpha: the scale, a Python float, applied by the kernel.
        trans_a: use a2 transposed (the GEMM's flag: no transposed copy is made).
        trans_b: use b2 transposed.
    Returns the (M, N) float32 result.
    """
    if a2.dtype != np.float32 or b2.dtype != np.float32:
        return NotImplemented
    m, k = (a2.shape[1], a2.shape[0]) if trans_a else a2.shape
    n = b2.shape[0] if trans_b else b2.shape[1]
    # The C ABI takes row-major matrices with a leading dimension: each operand is made
    # contiguous once here rather than rejected, and crosses as an integer address.
    a_c, b_c = np.ascontiguousarray(a2), np.ascontiguousarray(b2)
    out = np.empty((m, n), dtype=np.float32)
    _native.check(_native.lib.tt_sgemm(int(trans_a), int(trans_b), m, n, k, alpha,
                                       a_c.ctypes.data, max(a_c.shape[1], 1),
                                       b_c.ctypes.data, max(b_c.shape[1], 1),
                                       0.0, out.ctypes.data, max(n, 1)), OP)
    record_native_path()
    return out


register("template", probe=probe, priority=200, description="the worked example: "
         "extensions/template.py's scaled_matmul on the runtime's tt_sgemm", ops={OP: scaled_gemm})
