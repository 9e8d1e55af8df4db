"""buffers: the arrays Triton accepts and the host <-> device copies, for every Triton kernel.

Owns HostBuffer (a NumPy array dressed as the tensor the Triton interpreter expects, no copy),
CupyBuffer (a CuPy array as Triton sees a device tensor), device_kind (which device array a
value is, found from its type's module, nothing imported) and device_io (the copies through
PyTorch CUDA or CuPy). Assumes: torch and cupy are optional and imported only when called.
"""
from __future__ import annotations

import numpy as np

from .availability import run_mode

__all__ = ["HostBuffer", "CupyBuffer", "device_kind", "device_io"]


class HostBuffer:
    """A NumPy array dressed as the tensor the Triton interpreter expects (no copy): it asks
    for data_ptr, dtype (str like "float32"), size/stride and a storage it can copy."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.dtype = DtypeName(array.dtype.name)

    def data_ptr(self):
        """The array's address."""
        return self.array.ctypes.data

    def untyped_storage(self):
        """Itself: the storage the interpreter copies is this memory."""
        return self

    def cpu(self):
        """Itself: the memory is already the host's."""
        return self

    def copy_(self, other):
        """Itself, ``other`` unread: the interpreter ran on this very memory."""
        return self  # the interpreter ran on this very memory: nothing to copy back

    def new_empty(self, *args, **kwargs):
        """Itself (``args``, ``kwargs`` unread): no staging buffer is needed."""
        return self

    def set_(self, *args):
        """Itself (``args`` unread): the storage never moves."""
        return self

    def storage_offset(self):
        """0: the array starts its storage."""
        return 0

    def size(self):
        """The array's shape."""
        return self.array.shape

    def stride(self):
        """Strides in elements, as PyTorch reports them."""
        return tuple(s // self.array.itemsize for s in self.array.strides)


class DtypeName(str):
    """A dtype whose str() is its NumPy name, as Triton's type mangling reads it."""


class CupyBuffer:
    """A CuPy array as Triton sees a device tensor: its device address and its dtype."""

    def __init__(self, array):
        self.array = array
        self.dtype = array.dtype

    def data_ptr(self):
        """The CuPy array's device address."""
        return self.array.data.ptr


def device_kind(obj) -> str | None:
    """"torch" for a PyTorch CUDA tensor (or, under the interpreter, a PyTorch CPU tensor:
    the interpreter's device memory, which is how the device path is tested), "cupy" for a
    CuPy array, None for anything else (found from the type's module: nothing imported);
    ``obj`` is any object."""
    module = type(obj).__module__ or ""
    if module.startswith("torch") and hasattr(obj, "is_cuda"):
        return "torch" if obj.is_cuda or run_mode()[0] == "interpreter" else None
    if module.startswith("cupy"):
        return "cupy"
    return None


def device_io():
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
