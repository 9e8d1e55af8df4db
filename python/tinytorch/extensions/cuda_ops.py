"""Upstream TinyTorch's ``extensions.cuda_ops``: teaching SGEMM kernels on an NVIDIA GPU.

No CUDA kernel is written in this project yet (see cuda_triton/README.md), so:
  has_cuda_support()            False: no CUDA kernel would run.
  cuda_build_info()             {'cuda', 'detail', 'kernel': False} from ``backends.devices.cuda``.
  cuda_matmul(a, b, stage)      ``a @ b`` on the CPU kernel door (``simd_matmul``); ``stage``
                                must still be one of STAGES (ValueError otherwise, as upstream).
See docs/compat.md.
"""
from __future__ import annotations

from ..backends import devices as _devices
from .simd_ops import simd_matmul

__all__ = ["STAGES", "has_cuda_support", "cuda_build_info", "cuda_matmul", "compile_and_load_cuda"]

STAGES = ("naive", "coalesced", "tiled")


def has_cuda_support() -> bool:
    """Whether ``cuda_matmul`` runs on an NVIDIA GPU: always False here (no kernel written)."""
    return False


def cuda_build_info() -> dict:
    """{'cuda': whether a CUDA driver and device are present, 'detail': the probe's reason,
    'kernel': False (no CUDA kernel in this project yet)}."""
    usable, detail = _devices.cuda()
    return {"cuda": bool(usable), "detail": detail, "kernel": False}


def cuda_matmul(a, b, stage: str = "tiled"):
    """``a @ b`` for [M, K] and [K, N] arrays or Tensors, on the CPU kernel door.

    Args:
        a: left operand.
        b: right operand.
        stage: upstream's kernel choice, one of ``STAGES`` (checked, then unused).
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    return simd_matmul(a, b)


def compile_and_load_cuda():
    """Upstream TinyTorch's loader of its CUDA SGEMM library: None here (no CUDA kernel is
    written yet; ``cuda_build_info()`` says what the machine offers)."""
    return None
