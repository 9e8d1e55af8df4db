"""backends/cuda: the CUDA SGEMM stages (naive, coalesced, tiled, register) on an NVIDIA GPU.

Owns the whole path below the user-facing ``tinytorch.extensions.cuda_ops``:
  probe          libtinytorch_cuda was built (CMake builds it where nvcc is found) and loads,
                 and the NVIDIA driver reports a device (``devices.nvidia_gpu``, then the
                 library's own tt_cuda_device_count, whose message is the reason)
  matmul_arrays  the registry's "cuda_matmul" op: 2-D float32 host arrays (copied to the
                 device and back, the copy and kernel times from CUDA events) or a PyTorch
                 CUDA tensor / CuPy array used in place
  LAST_RUN       the per-thread report (path, reason, copy_in_s, kernel_s, copy_out_s)
Native code: runtime/cuda/ (the kernels) and include/tinytorch/tinytorch_cuda.h (the
ABI); the binding is ``tinytorch._native.load_cuda``. Statuses map to exceptions through
``_native.check`` with the CUDA library's message.

Assumes: callers (the extension) checked shapes and dtypes of host arrays; the core's
matmul is not routed here (host arrays; docs/architecture.md, "GPU back ends").
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import _native
from .. import record_path, register
from .. import devices

__all__ = ["STAGES", "LAST_RUN", "probe", "device_kind", "matmul_arrays"]

STAGES = ("naive", "coalesced", "tiled", "register")
LAST_RUN = devices.LastRun("cuda", copy_in_s=0.0, kernel_s=0.0, copy_out_s=0.0)


def probe() -> tuple[bool, str]:
    """Probe for the CUDA SGEMM stages: libtinytorch_cuda loads and a CUDA device answers it;
    returns (usable, why)."""
    handle, path, why = _native.load_cuda()
    if handle is None:
        return False, why
    gpu, gpu_why = devices.nvidia_gpu()
    if not gpu:
        return False, f"libtinytorch_cuda is built ({path}) but {gpu_why}"
    count = ctypes.c_int(0)
    if handle.tt_cuda_device_count(ctypes.byref(count)) != 0:
        return False, f"libtinytorch_cuda is built ({path}) but: " + handle.tt_cuda_last_error().decode()
    return True, f"libtinytorch_cuda ({path}) with {count.value} CUDA device(s)"


def device_kind(obj) -> str | None:
    """"torch" for a PyTorch CUDA tensor, "cupy" for a CuPy array, None for anything else
    (found from the type's module: nothing is imported); ``obj`` is any object."""
    module = type(obj).__module__ or ""
    if module.startswith("torch") and getattr(obj, "is_cuda", False):
        return "torch"
    if module.startswith("cupy"):
        return "cupy"
    return None


def _record(path: str, times_ms=(0.0, 0.0, 0.0)) -> None:
    LAST_RUN.record(path, copy_in_s=times_ms[0] / 1e3, kernel_s=times_ms[1] / 1e3,
                    copy_out_s=times_ms[2] / 1e3)


def _device_matmul(handle, a, b, stage: int):
    kind = device_kind(a)
    if device_kind(b) != kind:
        raise TypeError(f"cuda_matmul: b must be a {kind} device array like a, got {type(b).__name__}")
    for name, t in (("a", a), ("b", b)):
        if str(t.dtype).replace("torch.", "") != "float32" or t.ndim != 2:
            raise TypeError(f"cuda_matmul: device operand {name} must be 2-D float32, got "
                            f"{t.ndim}-D {t.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"Incompatible matrix dimensions: {tuple(a.shape)} x {tuple(b.shape)}")
    if kind == "torch":
        a, b = a.contiguous(), b.contiguous()
        c = a.new_empty((a.shape[0], b.shape[1]))
        ptr = (lambda t: t.data_ptr())
    else:
        import cupy  # function-level: optional device-array library, present since a is one
        a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
        c = cupy.empty((a.shape[0], b.shape[1]), dtype=cupy.float32)
        ptr = (lambda t: t.data.ptr)
    kernel_ms = ctypes.c_float(0.0)
    _native.check(handle.tt_cuda_sgemm_device(stage, a.shape[0], b.shape[1], a.shape[1], ptr(a), ptr(b),
                                              ptr(c), ctypes.byref(kernel_ms)), "cuda_matmul", handle)
    _record(f"cuda:{STAGES[stage]}", times_ms=(0.0, kernel_ms.value, 0.0))
    return c


def matmul_arrays(a, b, stage: str):
    """``a @ b`` on the CUDA stage for 2-D float32 host arrays or device arrays (the
    registry's "cuda_matmul" op; callers check shapes and dtypes of host arrays first).

    Args:
        a: [M, K] float32 ndarray, or a PyTorch CUDA tensor / CuPy array.
        b: [K, N] of the same kind.
        stage: one of STAGES.
    """
    handle = _native.load_cuda()[0]
    index = STAGES.index(stage)
    if device_kind(a) is not None:
        out = _device_matmul(handle, a, b, index)
    else:
        a = np.ascontiguousarray(a, dtype=np.float32)
        b = np.ascontiguousarray(b, dtype=np.float32)
        out = np.empty((a.shape[0], b.shape[1]), dtype=np.float32)
        times = (ctypes.c_float * 3)()
        _native.check(handle.tt_cuda_sgemm(index, a.shape[0], b.shape[1], a.shape[1], a.ctypes.data,
                                           b.ctypes.data, out.ctypes.data, times), "cuda_matmul", handle)
        _record(f"cuda:{stage}", times_ms=tuple(times))
    record_path(f"cuda:sgemm:{stage}")
    return out


register("cuda", probe=probe, priority=300, description="CUDA SGEMM stages on an NVIDIA GPU",
         ops={"cuda_matmul": matmul_arrays})
