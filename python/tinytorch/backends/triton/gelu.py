"""gelu: the fused bias-GELU on the Triton kernels, on arrays (the registry's
"triton_bias_gelu" and "triton_bias_gelu_backward" ops).

Owns the launch shapes (row blocks: ~4K elements per program on a GPU, few large programs
under the interpreter), the host path (interpreter on wrapped NumPy memory, or copies to the
device and back with the copy time reported apart) and the device-array path (PyTorch CUDA
tensors, CuPy arrays, float32 / float16 / bfloat16 storage, float32 arithmetic). Assumes: the
caller (extensions/triton_gelu.py) applied the dtype rule and shape checks to host arrays.
"""
from __future__ import annotations

import time

import numpy as np

from .. import record_path
from .buffers import CupyBuffer, HostBuffer, device_io, device_kind
from .availability import LAST_RUN, run_mode

__all__ = ["DEVICE_DTYPES", "blocks", "kernels", "forward_arrays", "backward_arrays"]

DEVICE_DTYPES = ("float32", "float16", "bfloat16")


def _report(path: str, reason: str = "", copy_in: float = 0.0, kernel: float = 0.0,
            copy_out: float = 0.0) -> None:
    LAST_RUN.record(path, reason, copy_in_s=copy_in, kernel_s=kernel, copy_out_s=copy_out)


def _rows(shape) -> int:
    """Rows of the [M, D] view of an array of ``shape`` (M = 0 when D is 0 stays right)."""
    return int(np.prod(shape[:-1], dtype=np.int64))


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def blocks(M: int, D: int, mode: str) -> tuple:
    """(block_m, block_d, num_warps): ~4K elements per program on a GPU; few large programs
    under the interpreter, whose cost is per program instance. ``M`` x ``D`` is the problem,
    ``mode`` "gpu" or the interpreter's."""
    cap_d, per_program = (1024, 4096) if mode == "gpu" else (4096, 65536)
    block_d = min(_next_pow2(D), cap_d)
    block_m = max(1, min(_next_pow2(M), per_program // block_d))
    return block_m, block_d, (8 if block_m * block_d >= 4096 else 4)


def kernels():
    """The kernel module (imports triton; only reached once the registry allowed Triton)."""
    from . import gelu_kernels  # function-level: triton is never imported at import
    return gelu_kernels


def _host_forward(x: np.ndarray, bias, mode: str) -> np.ndarray:
    D = x.shape[-1]
    x2 = np.ascontiguousarray(x.reshape(_rows(x.shape), D))
    M = x2.shape[0]
    if mode == "interpreter":
        y = np.empty_like(x2)
        t0 = time.perf_counter()
        if M and D:
            bm, bd, _ = blocks(M, D, mode)
            kernels().launch_forward(HostBuffer(x2), None if bias is None else HostBuffer(bias),
                                      HostBuffer(y), M, D, D, D, bm, bd)
        _report("triton:interpreter", kernel=time.perf_counter() - t0)
        return y.reshape(x.shape)
    _, to_dev, to_host, sync = device_io()
    t0 = time.perf_counter()
    dx, db = to_dev(x2), None if bias is None else to_dev(bias)
    sync()
    t1 = time.perf_counter()
    dy = _device_forward(dx, db)
    sync()
    t2 = time.perf_counter()
    y = to_host(dy)
    _report("triton:gpu", copy_in=t1 - t0, kernel=t2 - t1, copy_out=time.perf_counter() - t2)
    return y.reshape(x.shape)


def _host_backward(x: np.ndarray, bias, g: np.ndarray, mode: str):
    D = x.shape[-1]
    x2 = np.ascontiguousarray(x.reshape(_rows(x.shape), D))
    g2 = np.ascontiguousarray(g.reshape(_rows(x.shape), D), dtype=x2.dtype)
    M = x2.shape[0]
    if mode == "interpreter":
        gx = np.empty_like(x2)
        gb = None if bias is None else np.zeros(D, dtype=bias.dtype)
        t0 = time.perf_counter()
        if M and D:
            bm, bd, _ = blocks(M, D, mode)
            partial = None if bias is None else np.empty((-(-M // bm), D), np.float32)
            wrap = (lambda a: None if a is None else HostBuffer(a))
            kernels().launch_backward(HostBuffer(x2), wrap(bias), HostBuffer(g2), HostBuffer(gx),
                                       wrap(partial), wrap(gb), M, D, D, D, D, bm, bd)
        _report("triton:interpreter", kernel=time.perf_counter() - t0)
        return gx.reshape(x.shape), gb
    _, to_dev, to_host, sync = device_io()
    t0 = time.perf_counter()
    dx, dg = to_dev(x2), to_dev(g2)
    db = None if bias is None else to_dev(bias)
    sync()
    t1 = time.perf_counter()
    dgx, dgb = _device_backward(dx, db, dg)
    sync()
    t2 = time.perf_counter()
    gx, gb = to_host(dgx), None if dgb is None else to_host(dgb)
    _report("triton:gpu", copy_in=t1 - t0, kernel=t2 - t1, copy_out=time.perf_counter() - t2)
    return gx.reshape(x.shape), gb


def _check_device(x, bias):
    kind = device_kind(x)
    dtype = str(x.dtype).replace("torch.", "")
    if dtype not in DEVICE_DTYPES:
        raise TypeError(f"triton_fused_gelu: device arrays must be one of {DEVICE_DTYPES}, got {dtype}")
    if x.ndim < 1:
        raise ValueError("triton_fused_gelu: x must have shape [..., D], got a scalar")
    D = x.shape[-1]
    if bias is not None:
        if device_kind(bias) != kind:
            raise TypeError(f"triton_fused_gelu: bias must be a {kind} device array like x, "
                            f"got {type(bias).__name__}")
        if tuple(bias.shape) != (D,):
            raise ValueError(f"bias must have shape ({D},), got {tuple(bias.shape)}")
    return kind, D


def _empty_like(kind: str, a, shape, float32: bool = False):
    """An uninitialised device array of ``shape`` on ``a``'s device, in ``a``'s dtype (or
    float32)."""
    if kind == "torch":
        import torch  # function-level: only reached with a torch tensor in hand
        return a.new_empty(shape, dtype=torch.float32 if float32 else a.dtype)
    import cupy  # function-level: optional device-array library
    return cupy.empty(shape, dtype="float32" if float32 else a.dtype)


def _device_2d(kind: str, a, D: int):
    """``a`` as contiguous [M, D] (a copy only when its rows are not contiguous) and the
    buffer Triton takes."""
    a2 = a.reshape(_rows(tuple(a.shape)), D)
    if kind == "torch":
        a2 = a2.contiguous()
        return a2, a2
    import cupy  # function-level: optional device-array library
    a2 = cupy.ascontiguousarray(a2)
    return a2, CupyBuffer(a2)


def _device_forward(x, bias):
    kind, D = _check_device(x, bias)
    x2, bx = _device_2d(kind, x, D)
    M = x2.shape[0]
    y2 = _empty_like(kind, x2, (M, D))
    by = y2 if kind == "torch" else CupyBuffer(y2)
    bb = None if bias is None else _device_2d(kind, bias, D)[1]
    if M and D:
        bm, bd, warps = blocks(M, D, "gpu")
        kernels().launch_forward(bx, bb, by, M, D, D, D, bm, bd, warps)
    return y2.reshape(tuple(x.shape))


def _device_backward(x, bias, g):
    kind, D = _check_device(x, bias)
    x2, bx = _device_2d(kind, x, D)
    if g.dtype != x.dtype:
        g = g.to(x.dtype) if kind == "torch" else g.astype(x.dtype)
    g2, bg = _device_2d(kind, g, D)
    M = x2.shape[0]
    if tuple(g2.shape) != tuple(x2.shape):
        raise ValueError(f"grad_output must have the shape of x {tuple(x.shape)}, got {tuple(g.shape)}")
    gx2 = _empty_like(kind, x2, (M, D))
    bgx = gx2 if kind == "torch" else CupyBuffer(gx2)
    wrap = (lambda a: a) if kind == "torch" else CupyBuffer
    gb = None
    if bias is not None:
        gb = _empty_like(kind, bias, (D,))
        gb[...] = 0
    if M and D:
        bm, bd, warps = blocks(M, D, "gpu")
        bb = partial = None
        if bias is not None:
            bb = _device_2d(kind, bias, D)[1]
            partial = wrap(_empty_like(kind, x2, (-(-M // bm), D), float32=True))
        kernels().launch_backward(bx, bb, bg, bgx, partial, None if gb is None else wrap(gb),
                                   M, D, D, D, D, bm, bd, warps)
    return gx2.reshape(tuple(x.shape)), gb


def forward_arrays(x, bias):
    """gelu(x + bias) on the Triton kernel for host float32 arrays or device arrays (the
    registry's ``triton_bias_gelu`` op; callers check shapes and dtypes first).

    Args:
        x: float32 ndarray [..., D], or a PyTorch CUDA tensor / CuPy array.
        bias: (D,) array of the same kind, or None.
    """
    mode, _ = run_mode()
    if device_kind(x) is not None:
        t0 = time.perf_counter()
        y = _device_forward(x, bias)
        _report(f"triton:{mode}", kernel=time.perf_counter() - t0)
    else:
        y = _host_forward(x, bias, mode)
    record_path(f"triton:{mode}:bias_gelu_forward")
    return y


def backward_arrays(x, bias, grad):
    """(grad_x, grad_bias or None) of gelu(x + bias) on the Triton backward kernel (the
    registry's ``triton_bias_gelu_backward`` op).

    Args:
        x: the forward's input (host float32 array or device array).
        bias: the forward's bias or None.
        grad: upstream gradient, the shape of ``x``.
    """
    mode, _ = run_mode()
    if device_kind(x) is not None:
        t0 = time.perf_counter()
        out = _device_backward(x, bias, grad)
        _report(f"triton:{mode}", kernel=time.perf_counter() - t0)
    else:
        out = _host_backward(x, bias, grad, mode)
    record_path(f"triton:{mode}:bias_gelu_backward")
    return out
