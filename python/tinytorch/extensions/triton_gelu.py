"""Upstream TinyTorch's ``extensions.triton_gelu``: a Triton fused bias+GELU kernel.

No Triton kernel is written in this project yet (see cuda_triton/README.md), so:
  has_triton_support()        False: the Triton kernel would not run here. Why (package
                              missing, no GPU, kernel not written) is in ``triton_build_info()``.
  triton_fused_gelu(x, bias)  GELU(x + bias), tanh form, on the CPU path that exists
                              (``simd_fused_bias_gelu``: native SIMD kernel or NumPy); ndarray
                              in -> ndarray out, Tensor in -> Tensor out (with autograd).
A timing of this function is a CPU timing; it is never labelled Triton. See docs/compat.md.
"""
from __future__ import annotations

from ..backends import devices as _devices
from .simd_ops import simd_fused_bias_gelu

__all__ = ["has_triton_support", "triton_build_info", "triton_fused_gelu"]


def has_triton_support() -> bool:
    """Whether ``triton_fused_gelu`` runs a Triton kernel: always False here (none is written)."""
    return False


def triton_build_info() -> dict:
    """{'triton': whether Triton and an NVIDIA GPU are usable, 'detail': the probe's reason,
    'kernel': False (no Triton kernel in this project yet)}."""
    usable, detail = _devices.triton()
    return {"triton": bool(usable), "detail": detail, "kernel": False}


def triton_fused_gelu(x, bias=None):
    """GELU(x + bias) (tanh approximation) on the CPU fused kernel.

    Args:
        x: array or Tensor [..., D].
        bias: optional array or Tensor [D].
    """
    return simd_fused_bias_gelu(x, bias)
