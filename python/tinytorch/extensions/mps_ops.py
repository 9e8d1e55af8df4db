"""mps_ops: matmul on an Apple GPU through Metal Performance Shaders, ``mps_matmul(a, b)``.

Bottleneck it removes (silicon boundary, Apple silicon): single-threaded CPU throughput on
large GEMMs. ``tt_mps_sgemm`` (metal/mps_gemm.mm, compiled into libtinytorch on Apple
only) runs MPSMatrixMultiplication on MTLBuffers. Apple GPUs share memory with the CPU: a
page-aligned NumPy buffer is wrapped in place (newBufferWithBytesNoCopy), any other is
copied once; the output is allocated page-aligned here, so it is never copied. Offloading
pays only when 2 N^3 FLOPs outweigh the copies and the launch (the guide's arithmetic:
N / 6 FLOP per byte moved).

Where it runs: the registry's ``mps`` back end (``backends/devices.py``) routes
"mps_matmul" when the runtime's ``tt_mps_available()`` finds a Metal device. Elsewhere
(Linux, Windows, a build with TT_METAL=OFF, ``use_native(False)``) ``mps_matmul`` returns
the CPU result (``simd_matmul``) and ``mps_last_run()["reason"]`` says why -- on Linux, the
runtime's own message that Metal exists only on Apple platforms.

Contract: ndarray in -> ndarray out; any Tensor in -> Tensor out on the tape, the backward
being the package's one matmul backward (``simd_ops.SimdMatmulFunction``, CPU door). dtype
rule as simd_ops: float32 runs on MPS, float64 stays float64 on the CPU (reason given),
other reals become float32, complex is a TypeError. 2-D products only on MPS; batched ones
run on the CPU (reason given). ``mps_last_run()["copied"]`` lists the operands that were
copied ("A", "B", "C") rather than wrapped.
"""
from __future__ import annotations

import ctypes
import mmap
import threading

import numpy as np

from .. import _native
from .. import backends as _backends
from ..core.acceleration import record_path
from ..core.tensor import Tensor
from .simd_ops import SimdMatmulFunction, _as_kernel_dtype, _as_tensor, _data, simd_matmul

__all__ = ["has_mps_support", "mps_build_info", "mps_matmul", "mps_last_run",
           "page_aligned_empty", "MpsMatmulFunction"]

_COPIED_BITS = (("A", 1), ("B", 2), ("C", 4))
_state = threading.local()


def _why_not() -> str:
    return _backends.why_unused("mps")


def has_mps_support() -> bool:
    """True when ``mps_matmul`` runs on the Apple GPU now."""
    return bool(_backends.routes("mps_matmul"))


def mps_build_info() -> dict:
    """{'mps': the registry's probe (usable?), 'detail': its reason (or why it is not
    routed), 'kernel': whether the MPS kernel runs now}."""
    usable, detail = _backends.status("mps")
    return {"mps": bool(usable), "detail": detail if has_mps_support() else _why_not(),
            "kernel": has_mps_support()}


def mps_last_run() -> dict:
    """This thread's last ``mps_matmul``: {'path', 'reason' ('' when MPS ran), 'copied'
    (operands copied into Metal buffers)}; {} before any call."""
    return dict(getattr(_state, "run", {}))


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
    _state.run = {"path": "mps", "reason": "",
                  "copied": [name for name, bit in _COPIED_BITS if copied.value & bit]}
    record_path("native:" + _native.lib.tt_last_kernel_path().decode())
    return out


class MpsMatmulFunction(SimdMatmulFunction):
    """out = a @ b on MPS; the backward is the package's one matmul backward (inherited)."""

    def forward(self, a, b):
        """``a @ b`` for 2-D float32 arrays on MPS (the CPU door if the route went away)."""
        found = _backends.routes("mps_matmul")
        if not found:
            return SimdMatmulFunction.forward(self, a, b)
        self.a, self.b = a, b
        return found[0](a, b)


def mps_matmul(a, b):
    """``a @ b`` on the Apple GPU where MPS can run, else on the CPU with the reason in
    ``mps_last_run()`` (see the module docstring).

    Args:
        a: [M, K] Tensor or ndarray.
        b: [K, N] Tensor or ndarray.
    """
    a_arr = _as_kernel_dtype(_data(a, "mps_matmul", "a"), "mps_matmul")
    b_arr = _as_kernel_dtype(_data(b, "mps_matmul", "b"), "mps_matmul")
    why = None
    if not has_mps_support():
        why = _why_not()
    elif a_arr.ndim != 2 or b_arr.ndim != 2:
        why = "only 2-D products run on MPS; batched products run on the CPU"
    elif a_arr.dtype != np.float32 or b_arr.dtype != np.float32:
        why = "float64 stays on the CPU path (MPS computes in float32)"
    if why is not None:
        out = simd_matmul(a, b)
        _state.run = {"path": "cpu", "reason": why, "copied": []}
        return out
    if a_arr.shape[1] != b_arr.shape[0]:
        raise ValueError(f"Incompatible matrix dimensions: {a_arr.shape} x {b_arr.shape}")
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return MpsMatmulFunction.apply(_as_tensor(a, a_arr), _as_tensor(b, b_arr))
    return _backends.routes("mps_matmul")[0](a_arr, b_arr)
