"""availability: whether and how the Triton back end may run, and its per-thread report.

Owns probe() (never raises, imports nothing heavy), run_mode(op) -- "gpu", "interpreter" or None
with the reason, as the registry answers for ``op`` -- and LAST_RUN (path, reason, copy_in_s,
kernel_s, copy_out_s). Assumes: the registry (tinytorch.backends) and devices.nvidia_gpu.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import os

from .. import routes, status, why_unused
from .. import devices

__all__ = ["LAST_RUN", "probe", "run_mode"]

LAST_RUN = devices.LastRun("triton", copy_in_s=0.0, kernel_s=0.0, copy_out_s=0.0)


def probe() -> tuple[bool, str]:
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
    gpu, why = devices.nvidia_gpu()
    if not gpu:
        return False, (f"triton {version} is installed but needs an NVIDIA GPU: {why} "
                       "(TRITON_INTERPRET=1 runs the kernels on the CPU interpreter, slowly)")
    if importlib.util.find_spec("torch") is None and importlib.util.find_spec("cupy") is None:
        return False, (f"triton {version} and {why}, but neither PyTorch nor CuPy is installed "
                       "to hold device arrays")
    return True, f"triton {version} with {why}"


def run_mode(op: str = "triton_bias_gelu") -> tuple:
    """(mode or None, reason): "gpu" / "interpreter" when the registry routes ``op`` to
    Triton now (every Triton extension asks this), else None and why not.

    Args:
        op: the registry op ("triton_bias_gelu", "triton_attention_forward", ...).
    """
    if routes(op):
        detail = status("triton")[1]
        return ("interpreter" if "interpreter" in detail else "gpu"), detail
    return None, why_unused("triton")
