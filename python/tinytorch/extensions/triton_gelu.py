"""triton_gelu: the fused bias + GELU as a Triton kernel (forward and backward).

Bottleneck it removes (silicon boundary, NVIDIA GPU): kernel launches and DRAM round trips.
Unfused, ``gelu(x + b)`` is several kernels, each reading and writing the whole activation;
the Triton kernel (``_triton_gelu_kernels.py``) reads x once, keeps the sum and the GELU in
registers and writes y once, one program per block of rows with the bias loaded once per
block. Its roofline is the device's copy bandwidth (``cuda_triton/device_check.py`` measures
both). The formula is the package's one tanh GELU (``backends/numpy_fallback.py``).

Where it runs, decided by the registry's ``triton`` back end (``backends/devices.py``):
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
"""
from __future__ import annotations

import threading
import time

import numpy as np

from .. import backends as _backends
from ..core import acceleration as _acc
from ..core.acceleration import record_path
from ..core.autograd import Function
from ..core.tensor import Tensor
from .simd_ops import _as_kernel_dtype, _as_tensor, _data, simd_fused_bias_gelu

__all__ = ["has_triton_support", "triton_build_info", "triton_fused_gelu",
           "triton_fused_gelu_backward", "triton_last_run", "TritonBiasGeluFunction"]

_DEVICE_DTYPES = ("float32", "float16", "bfloat16")
_state = threading.local()


# --------------------------------------------------------------------------------------
# Where the kernel may run (the registry's answer) and the per-thread report
# --------------------------------------------------------------------------------------

def _mode(op: str = "triton_bias_gelu") -> tuple:
    """(mode or None, reason): "gpu" / "interpreter" when the registry routes ``op`` to
    Triton (every Triton extension asks this)."""
    if _backends.routes(op):
        detail = _backends.status("triton")[1]
        return ("interpreter" if "interpreter" in detail else "gpu"), detail
    return None, _backends.why_unused("triton")


def _report(path: str, reason: str = "", copy_in: float = 0.0, kernel: float = 0.0,
            copy_out: float = 0.0) -> None:
    _state.run = {"path": path, "reason": reason, "copy_in_s": copy_in, "kernel_s": kernel,
                  "copy_out_s": copy_out}


def triton_last_run() -> dict:
    """This thread's last ``triton_fused_gelu`` / backward call: {'path', 'reason' (why it
    fell back, '' when Triton ran), 'copy_in_s', 'kernel_s', 'copy_out_s'}; {} before any."""
    return dict(getattr(_state, "run", {}))


def has_triton_support() -> bool:
    """True when ``triton_fused_gelu`` runs the Triton kernel now (on a GPU, or on the CPU
    under TRITON_INTERPRET=1); False when it falls back (``triton_build_info`` says why)."""
    return _mode()[0] is not None


def triton_build_info() -> dict:
    """{'triton': the registry's probe (usable?), 'mode': 'gpu' / 'interpreter' / None,
    'detail': the probe's reason, 'kernel': whether the Triton kernel runs now}."""
    usable, detail = _backends.status("triton")
    mode, why = _mode()
    return {"triton": bool(usable), "mode": mode, "detail": why if mode is None else detail,
            "kernel": mode is not None}


# --------------------------------------------------------------------------------------
# Buffers Triton accepts: wrapped host arrays (interpreter), torch / CuPy device arrays
# --------------------------------------------------------------------------------------

class _HostBuffer:
    """A NumPy array dressed as the tensor the Triton interpreter expects (no copy): it asks
    for data_ptr, dtype (str like "float32"), size/stride and a storage it can copy."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.dtype = _DtypeName(array.dtype.name)

    def data_ptr(self):
        return self.array.ctypes.data

    def untyped_storage(self):
        return self

    def cpu(self):
        return self

    def copy_(self, other):
        return self  # the interpreter ran on this very memory: nothing to copy back

    def new_empty(self, *args, **kwargs):
        return self

    def set_(self, *args):
        return self

    def storage_offset(self):
        return 0

    def size(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)


class _DtypeName(str):
    """A dtype whose str() is its NumPy name, as Triton's type mangling reads it."""


class _CupyBuffer:
    """A CuPy array as Triton sees a device tensor: its device address and its dtype."""

    def __init__(self, array):
        self.array = array
        self.dtype = array.dtype

    def data_ptr(self):
        return self.array.data.ptr


def _device_kind(obj) -> str | None:
    """"torch" for a PyTorch CUDA tensor (or, under the interpreter, a PyTorch CPU tensor:
    the interpreter's device memory, which is how the device path is tested), "cupy" for a
    CuPy array, None for anything else (found from the type's module: nothing imported)."""
    module = type(obj).__module__ or ""
    if module.startswith("torch") and hasattr(obj, "is_cuda"):
        return "torch" if obj.is_cuda or _mode()[0] == "interpreter" else None
    if module.startswith("cupy"):
        return "cupy"
    return None


def _rows(shape) -> int:
    """Rows of the [M, D] view of an array of ``shape`` (M = 0 when D is 0 stays right)."""
    return int(np.prod(shape[:-1], dtype=np.int64))


def _next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def _blocks(M: int, D: int, mode: str) -> tuple:
    """(block_m, block_d, num_warps): ~4K elements per program on a GPU; few large programs
    under the interpreter, whose cost is per program instance."""
    cap_d, per_program = (1024, 4096) if mode == "gpu" else (4096, 65536)
    block_d = min(_next_pow2(D), cap_d)
    block_m = max(1, min(_next_pow2(M), per_program // block_d))
    return block_m, block_d, (8 if block_m * block_d >= 4096 else 4)


def _kernels():
    """The kernel module (imports triton; only reached once the registry allowed Triton)."""
    from . import _triton_gelu_kernels  # function-level: triton is never imported at import
    return _triton_gelu_kernels


# --------------------------------------------------------------------------------------
# Array-level implementations (what the registry's "triton" back end serves)
# --------------------------------------------------------------------------------------

def _host_forward(x: np.ndarray, bias, mode: str) -> np.ndarray:
    D = x.shape[-1]
    x2 = np.ascontiguousarray(x.reshape(_rows(x.shape), D))
    M = x2.shape[0]
    if mode == "interpreter":
        y = np.empty_like(x2)
        t0 = time.perf_counter()
        if M and D:
            bm, bd, _ = _blocks(M, D, mode)
            _kernels().launch_forward(_HostBuffer(x2), None if bias is None else _HostBuffer(bias),
                                      _HostBuffer(y), M, D, D, D, bm, bd)
        _report("triton:interpreter", kernel=time.perf_counter() - t0)
        return y.reshape(x.shape)
    _, to_dev, to_host, sync = _device_io()
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
            bm, bd, _ = _blocks(M, D, mode)
            partial = None if bias is None else np.empty((-(-M // bm), D), np.float32)
            wrap = (lambda a: None if a is None else _HostBuffer(a))
            _kernels().launch_backward(_HostBuffer(x2), wrap(bias), _HostBuffer(g2), _HostBuffer(gx),
                                       wrap(partial), wrap(gb), M, D, D, D, D, bm, bd)
        _report("triton:interpreter", kernel=time.perf_counter() - t0)
        return gx.reshape(x.shape), gb
    _, to_dev, to_host, sync = _device_io()
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


def _device_io():
    """(library name, host->device, device->host, synchronize) from PyTorch (CUDA) or CuPy,
    whichever is usable; RuntimeError naming both when neither is."""
    try:
        import torch  # function-level: a reference library, never imported at package import
        if torch.cuda.is_available():
            return ("torch", lambda a: torch.from_numpy(a).to("cuda"),
                    lambda t: t.cpu().numpy(), torch.cuda.synchronize)
    except ImportError:
        pass
    try:
        import cupy  # function-level: optional device-array library
        return ("cupy", cupy.asarray, cupy.asnumpy, cupy.cuda.Device().synchronize)
    except ImportError:
        raise RuntimeError("triton_fused_gelu on a GPU needs PyTorch with CUDA or CuPy to hold "
                           "device arrays; neither is usable") from None


def _check_device(x, bias):
    kind = _device_kind(x)
    dtype = str(x.dtype).replace("torch.", "")
    if dtype not in _DEVICE_DTYPES:
        raise TypeError(f"triton_fused_gelu: device arrays must be one of {_DEVICE_DTYPES}, got {dtype}")
    if x.ndim < 1:
        raise ValueError("triton_fused_gelu: x must have shape [..., D], got a scalar")
    D = x.shape[-1]
    if bias is not None:
        if _device_kind(bias) != kind:
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
    return a2, _CupyBuffer(a2)


def _device_forward(x, bias):
    kind, D = _check_device(x, bias)
    x2, bx = _device_2d(kind, x, D)
    M = x2.shape[0]
    y2 = _empty_like(kind, x2, (M, D))
    by = y2 if kind == "torch" else _CupyBuffer(y2)
    bb = None if bias is None else _device_2d(kind, bias, D)[1]
    if M and D:
        bm, bd, warps = _blocks(M, D, "gpu")
        _kernels().launch_forward(bx, bb, by, M, D, D, D, bm, bd, warps)
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
    bgx = gx2 if kind == "torch" else _CupyBuffer(gx2)
    wrap = (lambda a: a) if kind == "torch" else _CupyBuffer
    gb = None
    if bias is not None:
        gb = _empty_like(kind, bias, (D,))
        gb[...] = 0
    if M and D:
        bm, bd, warps = _blocks(M, D, "gpu")
        bb = partial = None
        if bias is not None:
            bb = _device_2d(kind, bias, D)[1]
            partial = wrap(_empty_like(kind, x2, (-(-M // bm), D), float32=True))
        _kernels().launch_backward(bx, bb, bg, bgx, partial, None if gb is None else wrap(gb),
                                   M, D, D, D, D, bm, bd, warps)
    return gx2.reshape(tuple(x.shape)), gb


def forward_arrays(x, bias):
    """gelu(x + bias) on the Triton kernel for host float32 arrays or device arrays (the
    registry's ``triton_bias_gelu`` op; callers check shapes and dtypes first).

    Args:
        x: float32 ndarray [..., D], or a PyTorch CUDA tensor / CuPy array.
        bias: (D,) array of the same kind, or None.
    """
    mode, _ = _mode()
    if _device_kind(x) is not None:
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
    mode, _ = _mode()
    if _device_kind(x) is not None:
        t0 = time.perf_counter()
        out = _device_backward(x, bias, grad)
        _report(f"triton:{mode}", kernel=time.perf_counter() - t0)
    else:
        out = _host_backward(x, bias, grad, mode)
    record_path(f"triton:{mode}:bias_gelu_backward")
    return out


# --------------------------------------------------------------------------------------
# Autograd and the public functions
# --------------------------------------------------------------------------------------

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
    _report("cpu", reason=_mode()[1])
    if op == "triton_bias_gelu":
        return _acc.bias_gelu(*args, any_size=True)
    return _acc.bias_gelu_backward(*args, any_size=True)


def _host_inputs(x, bias, who: str):
    """The dtype rule and shape checks of simd_ops, on the arrays behind x and bias."""
    x_arr = _as_kernel_dtype(_data(x, who, "x"), who)
    if x_arr.ndim < 1:
        raise ValueError(f"{who}: x must have shape [..., D], got a scalar")
    b_arr = None
    if bias is not None:
        b_arr = _as_kernel_dtype(_data(bias, who, "bias"), who)
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
    if _device_kind(x) is not None:
        if _mode()[0] is None:
            raise RuntimeError("triton_fused_gelu: a device array was given but Triton cannot "
                               "run here: " + _mode()[1])
        return _run("triton_bias_gelu", x, bias)
    x_arr, b_arr = _host_inputs(x, bias, "triton_fused_gelu")
    mode, why = _mode()
    if mode is None or x_arr.dtype != np.float32:
        if mode is not None:
            why = f"{x_arr.dtype} stays on the CPU path (the Triton kernel computes in float32)"
        out = simd_fused_bias_gelu(x, bias)
        _report("cpu", reason=why)
        return out
    if isinstance(x, Tensor) or isinstance(bias, Tensor):
        return TritonBiasGeluFunction.apply(_as_tensor(x, x_arr),
                                            None if bias is None else _as_tensor(bias, b_arr))
    return _run("triton_bias_gelu", x_arr, b_arr)


def triton_fused_gelu_backward(x, bias, grad_output):
    """(grad_x, grad_bias) of ``gelu_tanh(x + bias)`` for arrays (what the Function's backward
    runs; for device arrays and benchmarks). Falls back like ``triton_fused_gelu``.

    Args:
        x: ndarray [..., D] or a device array.
        bias: (D,) of the same kind, or None.
        grad_output: upstream gradient, the shape of ``x``.
    """
    if _device_kind(x) is not None:
        if _mode()[0] is None:
            raise RuntimeError("triton_fused_gelu_backward: Triton cannot run here: " + _mode()[1])
        return _run("triton_bias_gelu_backward", x, bias, grad_output)
    x_arr, b_arr = _host_inputs(x, bias, "triton_fused_gelu_backward")
    g = np.asarray(_data(grad_output, "triton_fused_gelu_backward", "grad_output"))
    if g.shape != x_arr.shape:
        raise ValueError(f"grad_output must have the shape of x {x_arr.shape}, got {g.shape}")
    mode, why = _mode()
    if mode is None or x_arr.dtype != np.float32:
        if mode is not None:
            why = f"{x_arr.dtype} stays on the CPU path (the Triton kernel computes in float32)"
        out = _acc.bias_gelu_backward(x_arr, b_arr, g.astype(x_arr.dtype, copy=False), any_size=True)
        _report("cpu", reason=why)
        return out
    return _run("triton_bias_gelu_backward", x_arr, b_arr, g.astype(np.float32, copy=False))
