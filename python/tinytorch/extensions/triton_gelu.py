"""triton_gelu: the fused bias + GELU as a Triton kernel (forward and backward).

Bottleneck it removes (silicon boundary, NVIDIA GPU): kernel launches and DRAM round trips.
Unfused, ``gelu(x + b)`` is several kernels, each reading and writing the whole activation;
the Triton kernel (``backends/triton/gelu_kernels.py``) reads x once, keeps the sum and the GELU in
registers and writes y once, one program per block of rows with the bias loaded once per
block. Its roofline is the device's copy bandwidth (``benchmarks/device_check.py`` measures
both). The formula is the package's one tanh GELU (``backends/numpy_fallback.py``).

Where it runs, decided by the registry's ``triton`` back end (``backends/triton/``, which owns the
probe, the host and device paths and the kernels; this file is the user-facing API):
  gpu          triton installed, an NVIDIA GPU, and PyTorch (CUDA build) or CuPy to hold
               device arrays. Host inputs (Tensor / ndarray) are copied to the device and
               back; the copy time is reported apart from the kernel time. Device arrays
               (PyTorch CUDA tensors, CuPy arrays) are used in place and a device array of
               the same kind comes back.
  interpreter  TRITON_INTERPRET=1 set before triton is imported: the same kernels run on
               host NumPy memory through a small wrapper (slow; this is how the kernels are
               tested without a GPU); PyTorch CPU tensors then take the device-array path.
  fallback     otherwise (triton missing, no GPU, ``use_native(False)``): the CPU fused
               kernel (``simd_fused_bias_gelu``: native SIMD or NumPy), with the reason in
               ``triton_last_run()["reason"]`` and ``triton_build_info()["detail"]``.

Contract: ndarray in -> ndarray out; any Tensor in -> Tensor out on the tape (backward runs
the Triton backward kernel: grad_x and grad_bias). dtype rule (as simd_ops): float32 runs on
the kernel (float32 arithmetic); float64 stays float64 on the CPU path (precision is never
lowered silently; the reason says so); other reals become float32; complex is a TypeError.
Device arrays may be float32, float16 or bfloat16 (stored as given, computed in float32).
Shapes: x [..., D], bias (D,) or None (ValueError otherwise).

Report: ``last_path()`` names what ran ("triton:gpu:bias_gelu_forward",
"triton:interpreter:bias_gelu_backward", or the CPU kernel's path); ``triton_last_run()``
gives this thread's last call: path, reason (when it fell back), copy_in_s, kernel_s,
copy_out_s (seconds; 0 where nothing was copied).

Owns the user-facing API (argument contract, fallback rule, autograd); assumes the
``triton`` back end for the launch, the buffers and the kernels.
"""
from __future__ import annotations

import numpy as np

from .. import backends as _backends
from ..backends.triton import LAST_RUN, run_mode
from ..backends.triton.buffers import device_kind
from ..core import acceleration as _acc
from ..core.autograd import Function
from .contract import any_tensor, array_of, as_tensor, kernel_dtype
from .simd_ops import simd_fused_bias_gelu

__all__ = ["has_triton_support", "triton_build_info", "triton_fused_gelu",
           "triton_fused_gelu_backward", "triton_last_run", "TritonBiasGeluFunction"]


def triton_last_run() -> dict:
    """This thread's last ``triton_fused_gelu`` / backward call: {'path', 'reason' (why it
    fell back, '' when Triton ran), 'copy_in_s', 'kernel_s', 'copy_out_s'}; {} before any."""
    return LAST_RUN.get()


def has_triton_support() -> bool:
    """True when ``triton_fused_gelu`` runs the Triton kernel now (on a GPU, or on the CPU
    under TRITON_INTERPRET=1); False when it falls back (``triton_build_info`` says why)."""
    return run_mode()[0] is not None


def triton_build_info() -> dict:
    """{'triton': the registry's probe (usable?), 'mode': 'gpu' / 'interpreter' / None,
    'detail': the probe's reason, 'kernel': whether the Triton kernel runs now}."""
    usable, detail = _backends.status("triton")
    mode, why = run_mode()
    return {"triton": bool(usable), "mode": mode, "detail": why if mode is None else detail,
            "kernel": mode is not None}


class TritonBiasGeluFunction(Function):
    """y = gelu_tanh(x + bias) on the Triton kernel; backward on the Triton backward kernel
    (grad_x, and grad_bias summed from per-row-block partials)."""

    def forward(self, x, bias):
        """gelu_tanh(x + bias) for a float32 array x (..., D) and bias (D,) or None."""
        self.x, self.bias = x, bias
        return _run("triton_bias_gelu", x, bias)

    def backward(self, grad_output):
        """(grad_x, grad_bias) for ``grad_output`` (grad_bias None without a bias)."""
        return _run("triton_bias_gelu_backward", self.x, self.bias,
                    grad_output.astype(self.x.dtype, copy=False))


def _run(op: str, *args):
    """Call the registry's implementation of ``op``; if it stopped routing since the caller
    looked (``use_native(False)`` between a forward and its backward), the CPU door's."""
    found = _backends.routes(op)
    if found:
        return found[0](*args)
    LAST_RUN.record("cpu", run_mode()[1])
    if op == "triton_bias_gelu":
        return _acc.bias_gelu(*args, any_size=True)
    return _acc.bias_gelu_backward(*args, any_size=True)


def _host_inputs(x, bias, who: str):
    """The dtype rule (extensions/contract.py) and simd_ops' shape checks, on the arrays
    behind x and bias."""
    x_arr = kernel_dtype(array_of(x, who, "x"), who, "x")
    if x_arr.ndim < 1:
        raise ValueError(f"{who}: x must have shape [..., D], got a scalar")
    b_arr = None
    if bias is not None:
        b_arr = kernel_dtype(array_of(bias, who, "bias"), who, "bias")
        if b_arr.shape != (x_arr.shape[-1],):
            raise ValueError(f"bias must have shape ({x_arr.shape[-1]},), got {b_arr.shape}")
        if b_arr.dtype != x_arr.dtype:
            common = np.result_type(x_arr, b_arr)
            x_arr, b_arr = x_arr.astype(common), b_arr.astype(common)
    return x_arr, b_arr


def triton_fused_gelu(x, bias=None):
    """``gelu_tanh(x + bias)`` on the Triton kernel where it can run, else on the CPU fused
    kernel with the reason in ``triton_last_run()`` (see the module docstring).

    Args:
        x: Tensor or ndarray [..., D], or a PyTorch CUDA tensor / CuPy array (no copy).
        bias: (D,) of the same kind as ``x``, or None.
    """
    if device_kind(x) is not None:
        if run_mode()[0] is None:
            raise RuntimeError("triton_fused_gelu: a device array was given but Triton cannot "
                               "run here: " + run_mode()[1])
        return _run("triton_bias_gelu", x, bias)
    x_arr, b_arr = _host_inputs(x, bias, "triton_fused_gelu")
    mode, why = run_mode()
    if mode is None or x_arr.dtype != np.float32:
        if mode is not None:
            why = f"{x_arr.dtype} stays on the CPU path (the Triton kernel computes in float32)"
        out = simd_fused_bias_gelu(x, bias)
        LAST_RUN.record("cpu", why)
        return out
    if any_tensor(x, bias):
        return TritonBiasGeluFunction.apply(as_tensor(x, x_arr),
                                            None if bias is None else as_tensor(bias, b_arr))
    return _run("triton_bias_gelu", x_arr, b_arr)


def triton_fused_gelu_backward(x, bias, grad_output):
    """(grad_x, grad_bias) of ``gelu_tanh(x + bias)`` for arrays (what the Function's backward
    runs; for device arrays and benchmarks). Falls back like ``triton_fused_gelu``.

    Args:
        x: ndarray [..., D] or a device array.
        bias: (D,) of the same kind, or None.
        grad_output: upstream gradient, the shape of ``x``.
    """
    if device_kind(x) is not None:
        if run_mode()[0] is None:
            raise RuntimeError("triton_fused_gelu_backward: Triton cannot run here: " + run_mode()[1])
        return _run("triton_bias_gelu_backward", x, bias, grad_output)
    x_arr, b_arr = _host_inputs(x, bias, "triton_fused_gelu_backward")
    g = np.asarray(array_of(grad_output, "triton_fused_gelu_backward", "grad_output"))
    if g.shape != x_arr.shape:
        raise ValueError(f"grad_output must have the shape of x {x_arr.shape}, got {g.shape}")
    mode, why = run_mode()
    if mode is None or x_arr.dtype != np.float32:
        if mode is not None:
            why = f"{x_arr.dtype} stays on the CPU path (the Triton kernel computes in float32)"
        out = _acc.bias_gelu_backward(x_arr, b_arr, g.astype(x_arr.dtype, copy=False), any_size=True)
        LAST_RUN.record("cpu", why)
        return out
    return _run("triton_bias_gelu_backward", x_arr, b_arr, g.astype(np.float32, copy=False))
