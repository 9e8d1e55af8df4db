"""triton_attention: FlashAttention forward as a Triton kernel, ``triton_flash_attention``.

Bottleneck it removes (memory boundary, NVIDIA GPU): as ``flash_attention`` on the CPU, the
[..., L, S] score matrix never reaches DRAM; one program keeps a block of queries' running
maximum, sum and accumulator in registers while it walks the keys
(``_triton_attention_kernels.py``, the tiled reference's equations line for line).

Where it runs: where ``triton_fused_gelu`` does (the registry's ``triton`` back end, op
"triton_attention_forward"): on an NVIDIA GPU (host arrays copied in and out, the copy time
reported apart in ``triton_last_run()``) or under TRITON_INTERPRET=1 on host memory (how it
is tested). Otherwise, and for float64 inputs or a mask, it is ``flash_attention`` on the
CPU, with the reason in ``triton_last_run()["reason"]``.

Contract: shapes, ``causal`` and ``scale`` as ``flash_attention`` (the door's
``check_attention_args`` validates them; ValueError naming the shapes); no mask (use
``flash_attention``). ndarray in -> ndarray out; any Tensor in -> Tensor out on the tape,
whose backward is the package's one attention backward (``FlashAttentionFunction``'s,
through the door, from the saved out and log-sum-exp). dtype rule as flash_attention:
float32 runs on Triton, float64 stays float64 on the CPU, other reals become float32.
"""
from __future__ import annotations

import time

import numpy as np

from .. import backends as _backends
from ..core import acceleration as _acc
from ..core.acceleration import record_path
from ..core.tensor import Tensor
from .flash_attn import FlashAttentionFunction, _as_tensor, _data, _kernel_dtype, flash_attention
from .triton_gelu import _HostBuffer, _device_io, _mode, _report

__all__ = ["triton_flash_attention", "TritonFlashAttentionFunction"]

_OP = "triton_attention_forward"


def _kernels():
    """The kernel module (imports triton; reached only once the registry allowed Triton)."""
    from . import _triton_attention_kernels  # function-level: triton is never imported at import
    return _triton_attention_kernels


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
    mode = _mode(_OP)[0]
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
            _kernels().launch_attention_forward(*(_HostBuffer(a) for a in (q3, k3, v3, out, lse)), B, L, S,
                                                D, DV, scale, offset, strides, block_m, block_n)
            kernel = time.perf_counter() - t0
        else:
            _, to_dev, to_host, sync = _device_io()
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
    _report(f"triton:{mode}", copy_in=copy_in, kernel=kernel, copy_out=copy_out)
    record_path(f"triton:{mode}:attention_forward")
    return out.reshape(batch + (L, DV)), lse.reshape(batch + (L,))


class TritonFlashAttentionFunction(FlashAttentionFunction):
    """out = softmax(scale q k^T) v with the forward on the Triton kernel; the backward is
    inherited (the door's FlashAttention-2 backward from the saved out and lse)."""

    def forward(self, q, k, v, mask=None, causal=False, scale=None):
        """Arrays q [..., L, d], k [..., S, d], v [..., S, dv] (float32), ``causal`` and
        ``scale`` as in ``flash_attention``; ``mask`` must be None. Returns out."""
        found = _backends.routes(_OP)
        if mask is not None or not found:   # the route went away: the door's forward
            return FlashAttentionFunction.forward(self, q, k, v, mask, causal, scale)
        code, scale_value = _acc.check_attention_args(q, k, v, None, causal, scale, "triton_flash_attention")
        out, lse = found[0](q, k, v, code, scale_value)
        self.q, self.k, self.v, self.out, self.lse = q, k, v, out, lse
        self.mask, self.causal, self.scale = None, causal, scale
        return out


def triton_flash_attention(q, k, v, causal=False, scale=None):
    """softmax(scale q k^T) v on the Triton FlashAttention kernel where Triton runs, else
    ``flash_attention`` on the CPU with the reason in ``triton_last_run()``.

    Args:
        q: [..., L, d] Tensor or ndarray.
        k: [..., S, d] Tensor or ndarray.
        v: [..., S, dv] Tensor or ndarray.
        causal: False, True / "top_left" or "bottom_right" (as ``flash_attention``).
        scale: score multiplier (default 1/sqrt(d)).
    """
    q_arr, k_arr, v_arr = (_kernel_dtype(_data(x, name), name) for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if len({q_arr.dtype, k_arr.dtype, v_arr.dtype}) > 1:  # mixed precisions: float64
        q_arr, k_arr, v_arr = (a.astype(np.float64) for a in (q_arr, k_arr, v_arr))
    code, scale_value = _acc.check_attention_args(q_arr, k_arr, v_arr, None, causal, scale,
                                                  "triton_flash_attention")
    mode, why = _mode(_OP)
    if mode is None or q_arr.dtype != np.float32:
        if mode is not None:
            why = f"{q_arr.dtype} stays on the CPU path (the Triton kernel computes in float32)"
        out = flash_attention(q, k, v, causal=causal, scale=scale)
        _report("cpu", reason=why)
        return out
    if any(isinstance(x, Tensor) for x in (q, k, v)):
        return TritonFlashAttentionFunction.apply(_as_tensor(q, q_arr), _as_tensor(k, k_arr),
                                                  _as_tensor(v, v_arr), causal=causal, scale=scale)
    return _backends.routes(_OP)[0](q_arr, k_arr, v_arr, code, scale_value)[0]
