"""SIMD operations: ``simd_matmul`` and ``simd_fused_bias_gelu`` on the native CPU kernels.

Bottlenecks they remove (silicon boundary):
  * ``simd_matmul``: an interpreted triple loop runs at well under 0.1 GFLOP/s and a scalar
    C loop at a few GFLOP/s. The runtime's GEMM (runtime/cpu/gemm.cpp) blocks for the
    caches, packs both operands into aligned panels and runs a register-tiled vector
    micro-kernel (AVX2+FMA 6x16, AVX-512 12x32 or NEON 8x12) on OpenMP threads: 0.93-1.13x
    OpenBLAS's speed on the development machine (benchmarks/results/bench_gemm.md).
  * ``simd_fused_bias_gelu``: unfused, ``gelu(x + b)`` writes the sum to memory, reads it
    back and spends most of its time in a scalar tanh. The fused kernel
    (runtime/cpu/bias_gelu*.cpp) reads x once, writes y once and evaluates the tanh
    through a vectorised exp: 4-11x PyTorch's gelu(x + b) and 13x unfused NumPy on one
    thread (benchmarks/results/bench_gelu.md).

Contract (docs/extending.md):
  * ndarray in -> ndarray out; any Tensor in -> Tensor out, recorded for backward.
    Backward uses the same kernels: the GEMM with transpose flags (no transposed copies)
    and the fused GELU derivative with the bias gradient summed in the same pass.
  * dtype rule: float32 runs on the SIMD kernels. float64 is computed in float64 through
    NumPy (precision is kept, so float64 gradients can be checked by finite differences).
    Other real dtypes (float16, integers, bool) are converted to float32 first and the
    result is float32. Complex inputs raise TypeError.
  * Non-contiguous inputs are fine: transposed views reach the GEMM as transpose flags,
    other strides are copied once.
  * Fallback: without the runtime library (or inside ``tinytorch.use_native(False)``, the
    package's one switch) NumPy computes the same formulas; ``last_path()`` (the door's
    thread-local report, re-exported) names what ran ("native:sgemm:avx2",
    "native:bias_gelu_forward:avx2", ..., or "numpy"). Unlike the core, these functions
    pass ``any_size=True`` to the door: even tiny float32 problems run natively.

Everything here goes through the public kernel API of ``tinytorch.core.acceleration``
(the door): this file adds the dtype rule, shape checks and autograd, no kernel calls.

Shapes: ``simd_matmul(a, b)`` takes arrays of at least 2 dimensions with NumPy's batching
rules; mismatched inner sizes raise ``ValueError("Incompatible matrix dimensions:
(M, K) x (K2, N)")``. ``simd_fused_bias_gelu(x, bias)`` takes x of shape [..., D] and bias
of shape (D,) or None; any other bias shape raises ``ValueError("bias must have shape
(D,), got ...")``.

Owns the user-facing API (the dtype rule, the shape checks, autograd); assumes the door for
every kernel call.
"""
from __future__ import annotations

import numpy as np

from ..core import acceleration as _acc
from ..core.acceleration import last_path
from ..core.autograd import Function
from .contract import any_tensor, array_of, as_tensor, kernel_dtype

__all__ = ["simd_matmul", "simd_fused_bias_gelu", "has_simd_support", "simd_build_info",
           "last_path", "SimdMatmulFunction", "FusedBiasGeluFunction", "compile_and_load_simd"]

_SIMD_ISAS = ("avx2", "avx512", "neon")


# --------------------------------------------------------------------------------------
# dtype rule and kernels (arrays in, arrays out)
# --------------------------------------------------------------------------------------

# --------------------------------------------------------------------------------------
# Autograd Functions
# --------------------------------------------------------------------------------------

class SimdMatmulFunction(Function):
    """out = a @ b (NumPy batching); grads g @ b^T and a^T @ g through the same GEMM."""

    def forward(self, a, b):
        """``a @ b`` for arrays a (..., M, K) and b (..., K, N), always on the native GEMM
        when it is loaded (``any_size=True``)."""
        self.a, self.b = a, b
        return _acc.matmul(a, b, any_size=True)

    def backward(self, grad_output):
        """(grad_output @ b^T, a^T @ grad_output), through the same kernel."""
        g = grad_output.astype(self.a.dtype, copy=False)
        return _acc.matmul_backward(self.a, self.b, g, self.needs_input_grad[:2], any_size=True)


class FusedBiasGeluFunction(Function):
    """y = gelu_tanh(x + bias); grads from one fused pass (grad_x and the bias sum)."""

    def forward(self, x, bias):
        """gelu_tanh(x + bias) for x (..., D) and bias (D,) or None, in one fused pass."""
        self.x, self.bias = x, bias
        return _acc.bias_gelu(x, bias, any_size=True)

    def backward(self, grad_output):
        """(grad_x, grad_bias) from ``grad_output`` in one fused pass (None for no bias)."""
        g = grad_output.astype(self.x.dtype, copy=False)
        return _acc.bias_gelu_backward(self.x, self.bias, g, any_size=True)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------

def simd_matmul(a, b):
    """``a @ b`` on the SIMD GEMM. ndarray inputs give an ndarray; any Tensor input gives a
    Tensor that records the operation for backward.

    ``a`` (..., M, K) and ``b`` (..., K, N), Tensors or arrays with broadcastable batch
    dims; float32 and float64 stay, other real dtypes become float32, and float32 mixed
    with float64 computes in float64."""
    a_arr = kernel_dtype(array_of(a, "simd_matmul", "a"), "simd_matmul", "a")
    b_arr = kernel_dtype(array_of(b, "simd_matmul", "b"), "simd_matmul", "b")
    if a_arr.ndim < 2 or b_arr.ndim < 2:
        raise ValueError(f"simd_matmul: both inputs need at least 2 dimensions, got shapes "
                         f"{a_arr.shape} and {b_arr.shape}")
    if a_arr.shape[-1] != b_arr.shape[-2]:
        raise ValueError(f"Incompatible matrix dimensions: {a_arr.shape} x {b_arr.shape}")
    try:
        np.broadcast_shapes(a_arr.shape[:-2], b_arr.shape[:-2])
    except ValueError:
        raise ValueError(f"Incompatible matrix dimensions: {a_arr.shape} x {b_arr.shape} "
                         f"(batch dimensions do not broadcast)") from None
    if a_arr.dtype != b_arr.dtype:  # float32 with float64: compute in float64, like NumPy
        a_arr, b_arr = a_arr.astype(np.float64), b_arr.astype(np.float64)
    if any_tensor(a, b):
        return SimdMatmulFunction.apply(as_tensor(a, a_arr), as_tensor(b, b_arr))
    return _acc.matmul(a_arr, b_arr, any_size=True)


def simd_fused_bias_gelu(x, bias=None):
    """``gelu_tanh(x + bias)`` in one fused pass; ``x`` is [..., D], ``bias`` is (D,) or None.
    ndarray inputs give an ndarray; any Tensor input gives a Tensor on the tape. Dtypes
    follow ``simd_matmul``'s rule."""
    x_arr = kernel_dtype(array_of(x, "simd_fused_bias_gelu", "x"), "simd_fused_bias_gelu", "x")
    if x_arr.ndim < 1:
        raise ValueError("simd_fused_bias_gelu: x must have shape [..., D], got a scalar")
    d = x_arr.shape[-1]
    b_arr = None
    if bias is not None:
        b_arr = kernel_dtype(array_of(bias, "simd_fused_bias_gelu", "bias"), "simd_fused_bias_gelu", "bias")
        if b_arr.shape != (d,):
            raise ValueError(f"bias must have shape ({d},), got {b_arr.shape}")
        if b_arr.dtype != x_arr.dtype:
            common = np.result_type(x_arr, b_arr)
            x_arr, b_arr = x_arr.astype(common), b_arr.astype(common)
    if any_tensor(x, bias):
        x_t = as_tensor(x, x_arr)
        return FusedBiasGeluFunction.apply(x_t, None if bias is None else as_tensor(bias, b_arr))
    return _acc.bias_gelu(x_arr, b_arr, any_size=True)


def has_simd_support() -> bool:
    """True when the native runtime is loaded, enabled, and its active ISA is a SIMD one
    (AVX2, AVX-512 or NEON) rather than the scalar fallback."""
    if not _acc.native_available():
        return False
    from .. import native
    try:
        return native.isa() in _SIMD_ISAS
    except Exception:  # noqa: BLE001 - a broken library means no SIMD
        return False


def simd_build_info() -> dict:
    """What the SIMD kernels are built for and running on: availability (and the reason
    when unavailable), ISAs compiled / detected / active, threads, OpenMP, compiler and
    library path, plus ``simd`` (= has_simd_support()) and ``native_enabled``."""
    from .. import native
    info = dict(native.info())
    info["simd"] = has_simd_support()
    info["native_enabled"] = _acc.native_enabled()
    info["kernels"] = {"gemm": {"scalar": "4x8", "avx2": "6x16", "avx512": "12x32",
                                "neon": "8x12"},
                       "bias_gelu": "fused forward and backward, vectorised exp"}
    return info


def compile_and_load_simd():
    """Upstream TinyTorch's loader: the runtime library whose SIMD kernels ``simd_matmul``
    uses (a ctypes.CDLL), or None without SIMD support. Nothing is compiled on import here:
    CMake builds the runtime (docs/compat.md)."""
    return _acc.native_library() if has_simd_support() else None
