"""devices: what the GPU back ends (backends/triton, backends/cuda, backends/mps) share.

Owns two small things, and nothing that registers:
  nvidia_gpu()  the NVIDIA driver probe (libcuda: cuInit + cuDeviceGetCount), asked by the
                triton and cuda probes through this module's attribute, so a test can stand
                in a fake driver with one assignment
  LastRun       a back end's per-thread report of its last call ({'path', 'reason', ...}):
                the back end files what its device call did (copy and kernel times), the
                extension files "cpu" with the reason when it fell back; the extension's
                ``<name>_last_run()`` reads it

Assumes: ctypes only; each back end folder holds its own probe, array-level ops and
registration line (docs/architecture.md, "How to add a back end").
"""
from __future__ import annotations

import ctypes
import sys
import threading

from . import why_unused

__all__ = ["nvidia_gpu", "LastRun"]


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


class LastRun:
    """The per-thread record of a device back end's last call.

    Args:
        backend: the registry name ("triton", "cuda", "mps"), for ``why_not``.
        defaults: the fields every record has, with their values when not given
            (e.g. ``{"copy_in_s": 0.0, "kernel_s": 0.0, "copy_out_s": 0.0}``).
    """

    def __init__(self, backend: str, **defaults):
        self.backend = backend
        self.defaults = defaults
        self._state = threading.local()

    def record(self, path: str, reason: str = "", **fields) -> None:
        """File this thread's last call: ``path`` ("cuda:tiled", "cpu", ...), ``reason`` (why
        it fell back; "" when the device ran) and the back end's own fields."""
        unknown = set(fields) - set(self.defaults)
        if unknown:
            raise TypeError(f"LastRun({self.backend!r}).record: unknown fields {sorted(unknown)}")
        self._state.run = {"path": path, "reason": reason, **self.defaults, **fields}

    def get(self) -> dict:
        """A copy of this thread's last record; {} before any call."""
        return dict(getattr(self._state, "run", {}))

    def why_not(self) -> str:
        """Why the back end serves no call now (its probe's reason, or the package's switch)."""
        return why_unused(self.backend)
