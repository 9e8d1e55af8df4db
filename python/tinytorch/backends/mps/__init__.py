"""backends/mps: matmul on an Apple GPU through Metal Performance Shaders.

Owns the whole path below the user-facing ``tinytorch.extensions.mps_ops``:
  probe               the runtime exports tt_mps_* (every build does) and
                      ``tt_mps_available()`` finds a Metal device; elsewhere the runtime's
                      last error says why (on Linux: Metal exists only on Apple platforms)
  matmul_arrays       the registry's "mps_matmul" op on 2-D float32 host arrays
  page_aligned_empty  outputs MPS wraps in place (newBufferWithBytesNoCopy)
  LAST_RUN            the per-thread report (path, reason, copied: operands copied into
                      Metal buffers rather than wrapped)
Native code: runtime/metal/mps_gemm.mm (compiled into libtinytorch on Apple only;
runtime/core/mps_unavailable.cpp elsewhere).

Assumes: callers checked shapes and dtypes; the core's matmul is not routed here.
"""
from __future__ import annotations

import ctypes
import mmap

import numpy as np

from ... import _native
from .. import record_path, register
from .. import devices

__all__ = ["LAST_RUN", "probe", "page_aligned_empty", "matmul_arrays"]

_COPIED_BITS = (("A", 1), ("B", 2), ("C", 4))
LAST_RUN = devices.LastRun("mps", copied=[])


def probe() -> tuple[bool, str]:
    """Probe for Apple Metal: the runtime is loaded and exports tt_mps_*, and
    ``tt_mps_available()`` finds a device; returns (usable, why)."""
    if not _native.available():
        return False, "the native runtime is not loaded: " + _native.reason()
    if getattr(_native.lib, "tt_mps_available", None) is None:
        return False, "this libtinytorch predates tt_mps_* (rebuild it)"
    if _native.lib.tt_mps_available():
        return True, "Metal Performance Shaders (tt_mps_sgemm)"
    return False, _native.lib.tt_last_error().decode()


def page_aligned_empty(shape, dtype=np.float32) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on a page boundary (MPS can
    wrap it without a copy).

    Args:
        shape: the array's shape.
        dtype: its dtype.
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + mmap.PAGESIZE, dtype=np.uint8)
    start = (-raw.ctypes.data) % mmap.PAGESIZE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def matmul_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` on MPS for 2-D float32 arrays (the registry's "mps_matmul" op; callers
    check shapes and dtypes first).

    Args:
        a: [M, K] float32 ndarray.
        b: [K, N] float32 ndarray.
    """
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    out = page_aligned_empty((a.shape[0], b.shape[1]))
    copied = ctypes.c_int(0)
    _native.check(_native.lib.tt_mps_sgemm(a.shape[0], b.shape[1], a.shape[1], a.ctypes.data,
                                           b.ctypes.data, out.ctypes.data, ctypes.byref(copied)),
                  "mps_matmul")
    LAST_RUN.record("mps", copied=[name for name, bit in _COPIED_BITS if copied.value & bit])
    record_path("native:" + _native.lib.tt_last_kernel_path().decode())
    return out


register("mps", probe=probe, priority=300, description="Metal Performance Shaders on Apple GPUs",
         ops={"mps_matmul": matmul_arrays})
