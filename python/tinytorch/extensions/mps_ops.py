"""mps_ops: matmul on an Apple GPU through Metal Performance Shaders, ``mps_matmul(a, b)``.

Bottleneck it removes (silicon boundary, Apple silicon): single-threaded CPU throughput on
large GEMMs. ``tt_mps_sgemm`` (runtime/metal/mps_gemm.mm, compiled into libtinytorch on Apple
only) runs MPSMatrixMultiplication on MTLBuffers. Apple GPUs share memory with the CPU: a
page-aligned NumPy buffer is wrapped in place (newBufferWithBytesNoCopy), any other is
copied once; the output is allocated page-aligned here, so it is never copied. Offloading
pays only when 2 N^3 FLOPs outweigh the copies and the launch (the guide's arithmetic:
N / 6 FLOP per byte moved).

Where it runs: the registry's ``mps`` back end (``backends/mps/``: probe, the tt_mps_sgemm
call, report; this file is the user-facing API) routes
"mps_matmul" when the runtime's ``tt_mps_available()`` finds a Metal device. Elsewhere
(Linux, Windows, a build with TT_METAL=OFF, ``use_native(False)``) ``mps_matmul`` returns
the CPU result (``simd_matmul``) and ``mps_last_run()["reason"]`` says why -- on Linux, the
runtime's own message that Metal exists only on Apple platforms.

Contract: ndarray in -> ndarray out; any Tensor in -> Tensor out on the tape, the backward
being the package's one matmul backward (``simd_ops.SimdMatmulFunction``, CPU door). dtype
rule as simd_ops: float32 runs on MPS, float64 stays float64 on the CPU (reason given),
other reals become float32, complex is a TypeError. 2-D products only on MPS; batched ones
run on the CPU (reason given). ``mps_last_run()["copied"]`` lists the operands that were
copied ("A", "B", "C") rather than wrapped.

Owns the user-facing MPS API (argument contract, fallback rule, autograd); assumes the
``mps`` back end for everything that touches Metal.
"""
from __future__ import annotations

from .. import backends as _backends
from ..backends.mps import LAST_RUN, page_aligned_empty
from .contract import any_tensor, as_tensor
from .gpu_matmul import cpu_fallback, host_operands
from .simd_ops import SimdMatmulFunction

__all__ = ["has_mps_support", "mps_build_info", "mps_matmul", "mps_last_run",
           "page_aligned_empty", "MpsMatmulFunction"]


def has_mps_support() -> bool:
    """True when ``mps_matmul`` runs on the Apple GPU now."""
    return bool(_backends.routes("mps_matmul"))


def mps_build_info() -> dict:
    """{'mps': the registry's probe (usable?), 'detail': its reason (or why it is not
    routed), 'kernel': whether the MPS kernel runs now}."""
    usable, detail = _backends.status("mps")
    return {"mps": bool(usable), "detail": detail if has_mps_support() else LAST_RUN.why_not(),
            "kernel": has_mps_support()}


def mps_last_run() -> dict:
    """This thread's last ``mps_matmul``: {'path', 'reason' ('' when MPS ran), 'copied'
    (operands copied into Metal buffers)}; {} before any call."""
    return LAST_RUN.get()


class MpsMatmulFunction(SimdMatmulFunction):
    """out = a @ b on MPS; the backward is the package's one matmul backward (inherited)."""

    def forward(self, a, b):
        """``a @ b`` for 2-D float32 arrays on MPS (the CPU door if the route went away)."""
        found = _backends.routes("mps_matmul")
        if not found:
            return SimdMatmulFunction.forward(self, a, b)
        self.a, self.b = a, b
        return found[0](a, b)


def mps_matmul(a, b):
    """``a @ b`` on the Apple GPU where MPS can run, else on the CPU with the reason in
    ``mps_last_run()`` (see the module docstring).

    Args:
        a: [M, K] Tensor or ndarray.
        b: [K, N] Tensor or ndarray.
    """
    a_arr, b_arr = host_operands(a, b, "mps_matmul")
    out = cpu_fallback(a, b, a_arr, b_arr, LAST_RUN, usable=has_mps_support(),
                       where="MPS", computes="MPS computes")
    if out is not None:
        return out
    if a_arr.shape[1] != b_arr.shape[0]:
        raise ValueError(f"Incompatible matrix dimensions: {a_arr.shape} x {b_arr.shape}")
    if any_tensor(a, b):
        return MpsMatmulFunction.apply(as_tensor(a, a_arr), as_tensor(b, b_arr))
    return _backends.routes("mps_matmul")[0](a_arr, b_arr)
