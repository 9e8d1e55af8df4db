"""devices: the GPU back ends' probes -- Triton, CUDA, Apple MPS -- registered with no op yet.

Each probe returns (available: bool, detail: str) and never raises or imports a
heavy package: Triton is found with importlib.util.find_spec, CUDA by loading the
driver library and asking for a device count, Metal by platform and by whether the
runtime was built with it. `tinytorch info` prints them. A GPU back end that lands adds
its ops here (or in a file of its own) and the door starts routing to it.
"""
from __future__ import annotations

import ctypes
import importlib.util
import sys

from .. import _native
from . import register


def cuda() -> tuple[bool, str]:
    """Probe for an NVIDIA GPU: (True, "<n> CUDA device(s)") when the driver library loads,
    initialises and reports a device; otherwise (False, why)."""
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


def triton() -> tuple[bool, str]:
    """Probe for Triton: the package is installed (found without importing it) and ``cuda()``
    finds a GPU; returns (usable, why)."""
    if importlib.util.find_spec("triton") is None:
        return False, "the triton package is not installed (pip install triton)"
    gpu, why = cuda()
    if not gpu:
        return False, f"triton is installed but needs an NVIDIA GPU: {why} " \
                      "(TRITON_INTERPRET=1 runs kernels on the CPU interpreter, slowly)"
    return True, f"triton with {why}"


def mps() -> tuple[bool, str]:
    """Probe for Apple Metal: macOS, the runtime loaded and built with Metal, and a device
    that ``tt_mps_available()`` accepts; returns (usable, why)."""
    if sys.platform != "darwin":
        return False, f"Apple Metal exists only on macOS (this is {sys.platform})"
    if not _native.available():
        return False, "the native runtime is not loaded: " + _native.reason()
    if not hasattr(_native.lib, "tt_mps_available"):
        return False, "this runtime was built without Metal (TT_METAL=OFF)"
    return bool(_native.lib.tt_mps_available()), "Metal Performance Shaders"


register("triton", probe=triton, priority=300, description="Triton kernels on an NVIDIA GPU")
register("cuda", probe=cuda, priority=300, description="CUDA kernels on an NVIDIA GPU")
register("mps", probe=mps, priority=300, description="Metal Performance Shaders on Apple GPUs")
