"""Upstream TinyTorch's ``extensions.mps_ops``: matmul on Apple's GPU (Metal / MPS).

The Metal bridge is not written in this project yet (see metal/README.md), so:
  has_mps_support()   False: no MPS kernel would run. ``mps_build_info()`` says what the
                      machine offers (``backends.devices.mps``).
  mps_matmul(a, b)    ``a @ b`` on the CPU kernel door (``simd_matmul``: native GEMM or
                      NumPy); ndarray in -> ndarray, Tensor in -> Tensor (with autograd).
See docs/compat.md.
"""
from __future__ import annotations

from ..backends import devices as _devices
from .simd_ops import simd_matmul

__all__ = ["has_mps_support", "mps_build_info", "mps_matmul"]


def has_mps_support() -> bool:
    """Whether ``mps_matmul`` runs on the Apple GPU: always False here (no bridge written)."""
    return False


def mps_build_info() -> dict:
    """{'mps': whether Metal is usable from the runtime, 'detail': the probe's reason,
    'kernel': False (no MPS matmul in this project yet)}."""
    usable, detail = _devices.mps()
    return {"mps": bool(usable), "detail": detail, "kernel": False}


def mps_matmul(a, b):
    """``a @ b`` for [M, K] and [K, N] arrays or Tensors, on the CPU kernel door.

    Args:
        a: left operand.
        b: right operand.
    """
    return simd_matmul(a, b)
