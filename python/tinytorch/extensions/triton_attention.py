"""triton_attention: FlashAttention forward as a Triton kernel, ``triton_flash_attention``.

Bottleneck it removes (memory boundary, NVIDIA GPU): as ``flash_attention`` on the CPU, the
[..., L, S] score matrix never reaches DRAM; one program keeps a block of queries' running
maximum, sum and accumulator in registers while it walks the keys
(``backends/triton/attention_kernels.py``, the tiled reference's equations line for line;
the array-level op is ``backends/triton/attention.py``: this file is the user-facing API).

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

Owns the user-facing API (argument contract, fallback rule, autograd); assumes the
``triton`` back end for the launch, the buffers and the kernel.
"""
from __future__ import annotations

import numpy as np

from .. import backends as _backends
from ..backends.triton import LAST_RUN, run_mode
from ..core import acceleration as _acc
from .contract import any_tensor, array_of, as_tensor, kernel_dtype
from .flash_attn import FlashAttentionFunction, flash_attention

__all__ = ["triton_flash_attention", "TritonFlashAttentionFunction"]

_OP = "triton_attention_forward"


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
    q_arr, k_arr, v_arr = (kernel_dtype(array_of(x, "triton_flash_attention", name), "triton_flash_attention", name)
                            for x, name in ((q, "q"), (k, "k"), (v, "v")))
    if len({q_arr.dtype, k_arr.dtype, v_arr.dtype}) > 1:  # mixed precisions: float64
        q_arr, k_arr, v_arr = (a.astype(np.float64) for a in (q_arr, k_arr, v_arr))
    code, scale_value = _acc.check_attention_args(q_arr, k_arr, v_arr, None, causal, scale,
                                                  "triton_flash_attention")
    mode, why = run_mode(_OP)
    if mode is None or q_arr.dtype != np.float32:
        if mode is not None:
            why = f"{q_arr.dtype} stays on the CPU path (the Triton kernel computes in float32)"
        out = flash_attention(q, k, v, causal=causal, scale=scale)
        LAST_RUN.record("cpu", why)
        return out
    if any_tensor(q, k, v):
        return TritonFlashAttentionFunction.apply(as_tensor(q, q_arr), as_tensor(k, k_arr),
                                                  as_tensor(v, v_arr), causal=causal, scale=scale)
    return _backends.routes(_OP)[0](q_arr, k_arr, v_arr, code, scale_value)[0]
