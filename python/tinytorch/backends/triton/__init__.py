"""backends/triton: the Triton kernels (fused bias-GELU forward and backward, FlashAttention
forward) on an NVIDIA GPU, or on the CPU under TRITON_INTERPRET=1.

Owns the whole path below the user-facing ``tinytorch.extensions.triton_gelu`` and
``triton_attention``, one file each:
  availability.py       probe() and run_mode(): triton is found (importlib.util.find_spec, not
                        imported) and either TRITON_INTERPRET=1 is set (the interpreter: how
                        the kernels are tested without a GPU) or an NVIDIA GPU is present and
                        PyTorch or CuPy can hold device arrays; LAST_RUN, the per-thread report
  buffers.py            what Triton accepts: wrapped host arrays (interpreter), PyTorch / CuPy
                        device arrays, and the host <-> device copies
  gelu.py, attention.py the registry's ops on arrays ("triton_bias_gelu",
                        "triton_bias_gelu_backward", "triton_attention_forward")
  gelu_kernels.py,      the @triton.jit kernels; they import triton at their top, so they are
  attention_kernels.py  imported only at call time, after the probe allowed Triton

Assumes: callers (the extensions) checked shapes and dtypes of host arrays; the core's GELU is
not routed here (a host GELU never pays for its copies; docs/architecture.md, "GPU back ends").
"""
from __future__ import annotations

from .. import register
from .attention import attention_arrays
from .gelu import backward_arrays, forward_arrays
from .availability import LAST_RUN, probe, run_mode

__all__ = ["LAST_RUN", "probe", "run_mode", "forward_arrays", "backward_arrays", "attention_arrays"]

register("triton", probe=probe, priority=300, description="Triton kernels on an NVIDIA GPU",
         ops={"triton_bias_gelu": forward_arrays, "triton_bias_gelu_backward": backward_arrays,
              "triton_attention_forward": attention_arrays})
