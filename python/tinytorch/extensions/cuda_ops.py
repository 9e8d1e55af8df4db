"""cuda_ops: the CUDA SGEMM teaching ladder -- naive, coalesced, shared-memory tiled and
register-tiled kernels -- behind ``cuda_matmul(a, b, stage)``.

Bottleneck each stage removes (silicon boundary, NVIDIA GPU; kernels in
runtime/cuda/sgemm_kernels.cu, one short kernel per stage with its idea on top):
  naive       none: one thread per output, a warp's loads 32 transactions apart (baseline)
  coalesced   wasted DRAM transactions: a warp reads one 128-byte line of B per k
  tiled       DRAM traffic: 32 x 32 tiles reused from shared memory (32x fewer reads)
  register    shared-memory traffic: 8 x 8 outputs per thread in registers, 16 shared
              loads per 64 FMAs
``benchmarks/device_check.py`` measures each against cuBLAS on a GPU.

Where it runs: the registry's ``cuda`` back end (``backends/cuda/``: probe, host and device
calls, report; this file is the user-facing API) routes
"cuda_matmul" when libtinytorch_cuda was built (CMake builds it where nvcc is found; the
binding is ``tinytorch._native.load_cuda``) and a CUDA device answers. Otherwise
``cuda_matmul`` returns the CPU result (``simd_matmul``: native GEMM or NumPy) and
``cuda_last_run()["reason"]`` says why (no library, no driver, no device, switched off).

Contract: ndarray in -> ndarray out; any Tensor in -> Tensor out on the tape. The forward
runs the chosen stage; the backward is the package's one matmul backward (the CPU door,
``simd_ops.SimdMatmulFunction``): the teaching kernels have no transpose flags. dtype rule
as simd_ops: float32 runs on the GPU; float64 stays float64 on the CPU (reason given);
other reals become float32; complex is a TypeError. Only 2-D products go to the GPU; a
batched product runs on the CPU (reason given). Host arrays are copied to the device and
back; ``cuda_last_run()`` reports copy_in_s, kernel_s and copy_out_s apart (CUDA events).
A PyTorch CUDA tensor or CuPy array (2-D, float32, contiguous) is used in place and the
result is a device array of the same kind.

Owns the user-facing CUDA API (argument contract, fallback rule, autograd); assumes the
``cuda`` back end for everything that touches the device.
"""
from __future__ import annotations

from .. import _native
from .. import backends as _backends
from ..backends.cuda import LAST_RUN, STAGES, device_kind
from .contract import any_tensor, as_tensor
from .gpu_matmul import cpu_fallback, host_operands
from .simd_ops import SimdMatmulFunction

__all__ = ["STAGES", "has_cuda_support", "cuda_build_info", "cuda_matmul", "cuda_last_run",
           "compile_and_load_cuda", "CudaMatmulFunction"]


def has_cuda_support() -> bool:
    """True when ``cuda_matmul`` runs on an NVIDIA GPU now (library built, device present,
    native back ends enabled)."""
    return bool(_backends.routes("cuda_matmul"))


def cuda_build_info() -> dict:
    """{'cuda': the registry's probe (usable?), 'detail': its reason, 'kernel': whether the
    CUDA kernels run now, 'library': libtinytorch_cuda's path or None, 'stages': STAGES}."""
    usable, detail = _backends.status("cuda")
    path = _native.load_cuda()[1]
    return {"cuda": bool(usable), "detail": detail if has_cuda_support() else LAST_RUN.why_not(),
            "kernel": has_cuda_support(), "library": path, "stages": STAGES}


def cuda_last_run() -> dict:
    """This thread's last ``cuda_matmul``: {'path', 'reason' ('' when the GPU ran),
    'copy_in_s', 'kernel_s', 'copy_out_s'}; {} before any call."""
    return LAST_RUN.get()


def compile_and_load_cuda():
    """The loaded libtinytorch_cuda (a ctypes.CDLL declared by ``tinytorch._native``) when
    its kernels can run here, else None. Nothing is compiled at run time: CMake builds it."""
    return _native.load_cuda()[0] if has_cuda_support() else None


class CudaMatmulFunction(SimdMatmulFunction):
    """out = a @ b on a CUDA stage; the backward is the package's one matmul backward
    (inherited: the CPU door with transpose flags)."""

    def forward(self, a, b, stage="register"):
        """``a @ b`` for 2-D float32 arrays on ``stage`` (one of STAGES); the CPU door if
        the route went away since the call was planned."""
        found = _backends.routes("cuda_matmul")
        if not found:
            return SimdMatmulFunction.forward(self, a, b)
        self.a, self.b = a, b
        return found[0](a, b, stage)


def cuda_matmul(a, b, stage: str = "tiled"):
    """``a @ b`` on the CUDA SGEMM stage ``stage`` where it can run, else on the CPU with the
    reason in ``cuda_last_run()`` (see the module docstring).

    Args:
        a: [M, K] Tensor or ndarray (or a PyTorch CUDA tensor / CuPy array).
        b: [K, N] of the same kind.
        stage: one of STAGES: "naive", "coalesced", "tiled", "register".
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    if device_kind(a) is not None:
        if not has_cuda_support():
            raise RuntimeError("cuda_matmul: device arrays were given but the CUDA kernels cannot "
                               "run here: " + LAST_RUN.why_not())
        return _backends.routes("cuda_matmul")[0](a, b, stage)
    a_arr, b_arr = host_operands(a, b, "cuda_matmul")
    out = cpu_fallback(a, b, a_arr, b_arr, LAST_RUN, usable=has_cuda_support(),
                       where="the CUDA stages", computes="the CUDA stages compute")
    if out is not None:
        return out
    if a_arr.shape[-1] != b_arr.shape[-2]:
        raise ValueError(f"Incompatible matrix dimensions: {a_arr.shape} x {b_arr.shape}")
    if any_tensor(a, b):
        return CudaMatmulFunction.apply(as_tensor(a, a_arr), as_tensor(b, b_arr), stage=stage)
    return _backends.routes("cuda_matmul")[0](a_arr, b_arr, stage)
