"""devices: the GPU back ends -- Triton, CUDA, Apple MPS -- their probes and their ops.

Each probe returns (usable: bool, detail: str), never raises and imports nothing heavy:
  triton  the triton package is found (importlib.util.find_spec, not imported) and either
          TRITON_INTERPRET=1 is set (the CPU interpreter: how the kernels are tested without
          a GPU) or an NVIDIA GPU is present and PyTorch or CuPy can hold device arrays
  cuda    libtinytorch_cuda was built (CMake builds it where nvcc is found) and loads, and
          the NVIDIA driver reports a device (through the driver library and through the
          CUDA library's own tt_cuda_device_count, whose message is the reason)
  mps     the runtime exports tt_mps_* (every build does since the MPS section) and
          tt_mps_available() finds a Metal device; elsewhere its last error says why

The ops are the extensions' own names, not the door's: "triton_bias_gelu",
"triton_bias_gelu_backward" (extensions/triton_gelu.py), "triton_attention_forward"
(extensions/triton_attention.py), "cuda_matmul" (extensions/
cuda_ops.py) and "mps_matmul" (extensions/mps_ops.py). The core's GELU and matmul are not
routed here: their inputs are host arrays, and a lone host GELU never pays for its copies
to a device (docs/architecture.md, "GPU back ends"). The extension asks ``routes(op)``, so
``use_native(False)`` turns these off too and `tinytorch info` lists them with their ops.
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import importlib.util
import os
import sys

from .. import _native
from . import register


def nvidia_gpu() -> tuple[bool, str]:
    """Probe for an NVIDIA GPU through the driver library: (True, "<n> CUDA device(s)") when
    libcuda loads, initialises and reports a device; otherwise (False, why)."""
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    for name in names:
        try:
            driver = ctypes.CDLL(name)
        except OSError:
            continue
        try:
            if driver.cuInit(0) != 0:
                return False, f"{name} loaded but cuInit failed (no usable GPU or driver mismatch)"
            count = ctypes.c_int(0)
            if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
                return False, "the NVIDIA driver reports no CUDA device"
            return True, f"{count.value} CUDA device(s)"
        except AttributeError:
            return False, f"{name} is not a CUDA driver library"
    return False, "no NVIDIA driver on this machine (libcuda not found)"


def cuda() -> tuple[bool, str]:
    """Probe for the CUDA SGEMM stages: libtinytorch_cuda loads and a CUDA device answers it;
    returns (usable, why)."""
    handle, path, why = _native.load_cuda()
    if handle is None:
        return False, why
    gpu, gpu_why = nvidia_gpu()
    if not gpu:
        return False, f"libtinytorch_cuda is built ({path}) but {gpu_why}"
    count = ctypes.c_int(0)
    if handle.tt_cuda_device_count(ctypes.byref(count)) != 0:
        return False, f"libtinytorch_cuda is built ({path}) but: " + handle.tt_cuda_last_error().decode()
    return True, f"libtinytorch_cuda ({path}) with {count.value} CUDA device(s)"


def triton() -> tuple[bool, str]:
    """Probe for Triton: installed (found without importing it), and either the interpreter
    is asked for (TRITON_INTERPRET=1) or an NVIDIA GPU plus PyTorch or CuPy is present."""
    if importlib.util.find_spec("triton") is None:
        return False, "the triton package is not installed (pip install tinytorch[triton])"
    try:
        version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        version = "(unknown version)"
    if os.environ.get("TRITON_INTERPRET", "") == "1":
        return True, (f"triton {version} interpreter (TRITON_INTERPRET=1): the kernels run on "
                      "the CPU, slowly; for testing")
    gpu, why = nvidia_gpu()
    if not gpu:
        return False, (f"triton {version} is installed but needs an NVIDIA GPU: {why} "
                       "(TRITON_INTERPRET=1 runs the kernels on the CPU interpreter, slowly)")
    if importlib.util.find_spec("torch") is None and importlib.util.find_spec("cupy") is None:
        return False, (f"triton {version} and {why}, but neither PyTorch nor CuPy is installed "
                       "to hold device arrays")
    return True, f"triton {version} with {why}"


def mps() -> tuple[bool, str]:
    """Probe for Apple Metal: the runtime is loaded and exports tt_mps_*, and
    ``tt_mps_available()`` finds a device; returns (usable, why)."""
    if not _native.available():
        return False, "the native runtime is not loaded: " + _native.reason()
    if getattr(_native.lib, "tt_mps_available", None) is None:
        return False, "this libtinytorch predates tt_mps_* (rebuild it)"
    if _native.lib.tt_mps_available():
        return True, "Metal Performance Shaders (tt_mps_sgemm)"
    return False, _native.lib.tt_last_error().decode()


# The ops: each reaches its extension when called. The extensions import this registry,
# so the registry imports them only at call time, never at import.
def _extension(name: str):
    return importlib.import_module(f"tinytorch.extensions.{name}")


def _triton_bias_gelu(x, bias):
    return _extension("triton_gelu").forward_arrays(x, bias)


def _triton_bias_gelu_backward(x, bias, grad):
    return _extension("triton_gelu").backward_arrays(x, bias, grad)


def _triton_attention_forward(q, k, v, code, scale):
    return _extension("triton_attention").attention_arrays(q, k, v, code, scale)


def _cuda_matmul(a, b, stage):
    return _extension("cuda_ops").matmul_arrays(a, b, stage)


def _mps_matmul(a, b):
    return _extension("mps_ops").matmul_arrays(a, b)


register("triton", probe=triton, priority=300, description="Triton kernels on an NVIDIA GPU",
         ops={"triton_bias_gelu": _triton_bias_gelu,
              "triton_bias_gelu_backward": _triton_bias_gelu_backward,
              "triton_attention_forward": _triton_attention_forward})
register("cuda", probe=cuda, priority=300, description="CUDA SGEMM stages on an NVIDIA GPU",
         ops={"cuda_matmul": _cuda_matmul})
register("mps", probe=mps, priority=300, description="Metal Performance Shaders on Apple GPUs",
         ops={"mps_matmul": _mps_matmul})
