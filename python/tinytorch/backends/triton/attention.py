"""attention: the FlashAttention forward on the Triton kernel, on arrays (the registry's
"triton_attention_forward" op).

Owns the folding of batch dims into one [B, L, d] launch, the block sizes (64 x 64 on a GPU,
32 x 32 under the interpreter: several key blocks in tests) and the host <-> device copies,
reported apart. Assumes: the caller validated shapes with the door's check_attention_args;
float32 host arrays.
"""
from __future__ import annotations

import time

import numpy as np

from .. import record_path
from .buffers import HostBuffer, device_io
from .availability import LAST_RUN, run_mode

__all__ = ["attention_arrays"]

_OP = "triton_attention_forward"


def _kernels():
    """The kernel module (imports triton; reached only once the registry allowed Triton)."""
    from . import attention_kernels  # function-level: triton is never imported at import
    return attention_kernels


def attention_arrays(q: np.ndarray, k: np.ndarray, v: np.ndarray, code: int, scale: float):
    """(out, lse) of attention for float32 host arrays on the Triton kernel (the registry's
    "triton_attention_forward" op; the caller validated shapes with check_attention_args).

    Args:
        q: [..., L, d] float32.
        k: [..., S, d] float32 (batch dims broadcast with q's).
        v: [..., S, dv] float32.
        code: causal code (0 none, 1 top-left, 2 bottom-right).
        scale: score multiplier.
    """
    mode = run_mode(_OP)[0]
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    (L, D), S, DV = q.shape[-2:], k.shape[-2], v.shape[-1]
    B = int(np.prod(batch, dtype=np.int64))
    q3, k3, v3 = (np.ascontiguousarray(np.broadcast_to(a, batch + a.shape[-2:]), dtype=np.float32)
                  .reshape((B,) + a.shape[-2:]) for a in (q, k, v))
    out = np.zeros((B, L, DV), np.float32)
    lse = np.full((B, L), -np.inf, np.float32)
    offset = None if code == 0 else (0 if code == 1 else S - L)
    strides = (L * D, D, S * D, D, S * DV, DV, L * DV, DV)
    block_m, block_n = (64, 64) if mode == "gpu" else (32, 32)  # small: several key blocks in tests
    copy_in = kernel = copy_out = 0.0
    if B and L and DV:
        if mode == "interpreter":
            t0 = time.perf_counter()
            _kernels().launch_attention_forward(*(HostBuffer(a) for a in (q3, k3, v3, out, lse)), B, L, S,
                                                D, DV, scale, offset, strides, block_m, block_n)
            kernel = time.perf_counter() - t0
        else:
            _, to_dev, to_host, sync = device_io()
            t0 = time.perf_counter()
            dq, dk, dv, do, dl = (to_dev(a) for a in (q3, k3, v3, out, lse))
            sync()
            t1 = time.perf_counter()
            _kernels().launch_attention_forward(dq, dk, dv, do, dl, B, L, S, D, DV, scale, offset,
                                                strides, block_m, block_n)
            sync()
            t2 = time.perf_counter()
            out, lse = to_host(do), to_host(dl)
            copy_in, kernel, copy_out = t1 - t0, t2 - t1, time.perf_counter() - t2
    LAST_RUN.record(f"triton:{mode}", copy_in_s=copy_in, kernel_s=kernel, copy_out_s=copy_out)
    record_path(f"triton:{mode}:attention_forward")
    return out.reshape(batch + (L, DV)), lse.reshape(batch + (L,))
