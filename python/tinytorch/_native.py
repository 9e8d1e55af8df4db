"""_native: the ctypes binding of libtinytorch (include/tinytorch/tinytorch.h).

Owns: finding and loading the shared library, declaring argtypes/restype for
every C function, and turning a non-OK tt_status into a Python exception that
carries the library's own message (tt_last_error()).

Where the library is looked for, in order:
  1. the path in the environment variable TINYTORCH_LIB (and only there, if set);
  2. beside this file (a regular install);
  3. _lib_editable/ beside this file (an editable build writes it there, in the source tree);
  4. importlib.resources.files("tinytorch"), which editable "redirect" installs resolve.

Never raises on import: if the library is missing, is not a loadable library, or
lacks a symbol, `lib` is None and `reason()` says why, so every caller can fall
back to NumPy. Everything here is private; the public view is tinytorch.native.

Assumes: the library matches include/tinytorch/tinytorch.h (a missing symbol leaves the
library unloaded, with the reason); nothing here imports another tinytorch module.
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
from ctypes import c_char_p, c_double, c_float, c_int, c_int64, c_void_p

import numpy as np

# tt_status values (keep in sync with the header).
TT_OK = 0
STATUS_NAMES = {
    0: "TT_OK", 1: "TT_ERR_NULL_POINTER", 2: "TT_ERR_INVALID_ARGUMENT", 3: "TT_ERR_SHAPE_MISMATCH",
    4: "TT_ERR_OVERFLOW", 5: "TT_ERR_OUT_OF_MEMORY", 6: "TT_ERR_UNSUPPORTED",
    7: "TT_ERR_INVALID_HANDLE", 8: "TT_ERR_INTERNAL",
}
ISA_NAMES = ("scalar", "avx2", "avx512", "neon")
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.float16): 2,
          np.dtype(np.int32): 3, np.dtype(np.int64): 4}


class MemoryStats(ctypes.Structure):
    _fields_ = [("bytes_in_use", c_int64), ("peak_bytes", c_int64),
                ("allocations", c_int64), ("frees", c_int64)]


class ThreadStats(ctypes.Structure):
    """tt_thread_stats_t: the thread pool's counters (tinytorch.h)."""
    _fields_ = [(name, c_int64) for name in ("jobs", "solo_jobs", "chunks_caller", "chunks_workers",
                                              "stalls", "backed_off_jobs", "one_core_jobs", "workers")]


_ptr = c_void_p
_status = c_int

# name: (restype, argtypes). Every exported function of tinytorch.h is declared here, once,
# in one convention: every pointer parameter is c_void_p, so a call takes plain integer
# addresses (``array.ctypes.data``, the cheapest thing ctypes converts), ctypes arrays or
# ``ctypes.byref(x)`` alike; const char * is c_char_p. The header test checks each type.
PROTOTYPES = {
    "tt_status_string": (c_char_p, [c_int]),
    "tt_last_error": (c_char_p, []),
    "tt_clear_error": (None, []),
    "tt_version": (c_char_p, []),
    "tt_build_info": (c_char_p, []),
    "tt_isa_name": (c_char_p, [c_int]),
    "tt_isa_compiled": (c_int, [c_int]),
    "tt_isa_supported": (c_int, [c_int]),
    "tt_isa_active": (c_int, []),
    "tt_set_isa": (_status, [c_int]),
    "tt_isa_from_name": (_status, [c_char_p, _ptr]),
    "tt_isa_env_error": (c_char_p, []),
    "tt_set_num_threads": (_status, [c_int]),
    "tt_get_num_threads": (c_int, []),
    "tt_threads_source": (c_char_p, []),
    "tt_thread_stats": (_status, [_ptr]),
    "tt_thread_stats_reset": (_status, []),
    "tt_thread_pool_hold": (_status, [c_int]),
    "tt_thread_pool_slow": (_status, [c_int64]),
    "tt_storage_create": (_status, [c_int64, _ptr]),
    "tt_storage_retain": (_status, [c_void_p]),
    "tt_storage_release": (_status, [c_void_p]),
    "tt_storage_data": (_status, [c_void_p, _ptr]),
    "tt_storage_nbytes": (_status, [c_void_p, _ptr]),
    "tt_storage_refcount": (_status, [c_void_p, _ptr]),
    "tt_memory_stats_get": (_status, [_ptr]),
    "tt_memory_reset_peak": (None, []),
    "tt_dtype_size": (c_int64, [c_int]),
    "tt_dtype_name": (c_char_p, [c_int]),
    "tt_tensor_create": (_status, [c_int, c_int, _ptr, _ptr]),
    "tt_tensor_from_storage": (_status, [c_void_p, c_int, c_int, _ptr, _ptr, c_int64,
                                         _ptr]),
    "tt_tensor_reshape": (_status, [c_void_p, c_int, _ptr, _ptr]),
    "tt_tensor_transpose": (_status, [c_void_p, c_int, c_int, _ptr]),
    "tt_tensor_slice": (_status, [c_void_p, c_int, c_int64, c_int64, c_int64, _ptr]),
    "tt_tensor_free": (_status, [c_void_p]),
    "tt_tensor_is_contiguous": (_status, [c_void_p, _ptr]),
    "tt_tensor_ndim": (_status, [c_void_p, _ptr]),
    "tt_tensor_dtype": (_status, [c_void_p, _ptr]),
    "tt_tensor_shape": (_status, [c_void_p, _ptr]),
    "tt_tensor_strides": (_status, [c_void_p, _ptr]),
    "tt_tensor_offset": (_status, [c_void_p, _ptr]),
    "tt_tensor_numel": (_status, [c_void_p, _ptr]),
    "tt_tensor_data": (_status, [c_void_p, _ptr]),
    "tt_tensor_storage": (_status, [c_void_p, _ptr]),
    "tt_sgemm": (_status, [c_int, c_int, c_int64, c_int64, c_int64, c_float, _ptr, c_int64,
                           _ptr, c_int64, c_float, _ptr, c_int64]),
    "tt_sgemm_reference": (_status, [c_int, c_int, c_int64, c_int64, c_int64, c_float, _ptr,
                                     c_int64, _ptr, c_int64, c_float, _ptr, c_int64]),
    "tt_sgemm_strided_batched": (_status, [c_int, c_int, c_int64, c_int64, c_int64, c_float,
                                           _ptr, c_int64, c_int64, _ptr, c_int64, c_int64,
                                           c_float, _ptr, c_int64, c_int64, c_int64]),
    "tt_bias_gelu_forward": (_status, [_ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_bias_gelu_backward": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_bias_gelu_forward_reference": (_status, [_ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_bias_gelu_backward_reference": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, c_int64,
                                                  c_int64]),
    "tt_last_kernel_path": (c_char_p, []),
    "tt_hgemm": (_status, [c_int, c_int, c_int64, c_int64, c_int64, c_float, _ptr, c_int64,
                           _ptr, c_int64, c_float, _ptr, c_int64]),
    "tt_hgemm_reference": (_status, [c_int, c_int, c_int64, c_int64, c_int64, c_float, _ptr,
                                     c_int64, _ptr, c_int64, c_float, _ptr, c_int64]),
    "tt_f16_to_f32": (_status, [_ptr, _ptr, c_int64]),
    "tt_f32_to_f16": (_status, [_ptr, _ptr, c_int64]),
    "tt_attention_forward": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr,
                                       c_int64, c_int64, c_int64, c_int64, c_int64, c_float,
                                       c_int]),
    "tt_attention_backward": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr,
                                        _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr,
                                        c_int64, c_int64, c_int64, c_int64, c_int64, c_float,
                                        c_int]),
    "tt_layernorm_forward": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, _ptr, c_int64, c_int64,
                                       c_float]),
    "tt_layernorm_backward": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr,
                                        c_int64, c_int64]),
    "tt_softmax_forward": (_status, [_ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_log_softmax_forward": (_status, [_ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_softmax_backward": (_status, [_ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_log_softmax_backward": (_status, [_ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_cross_entropy_forward": (_status, [_ptr, _ptr, _ptr, _ptr, c_int64, c_int64, c_int64]),
    "tt_cross_entropy_backward": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, c_int64, c_int64,
                                            c_int64]),
}

# Optional symbols: declared when present (added by later parts of the runtime),
# their absence does not make the library unavailable.
OPTIONAL_PROTOTYPES: dict = {}

# The training-step kernels (Adam / AdamW in one call, embedding gather / scatter-add, ReLU,
# convolution's im2col / col2im, max pooling with argmax).
OPTIONAL_PROTOTYPES.update({
    "tt_adam_step": (_status, [c_int64, _ptr, _ptr, _ptr, _ptr, _ptr, _ptr, c_double, c_double,
                               c_double, c_double, c_double, c_int]),
    "tt_embedding_forward": (_status, [_ptr, c_int64, c_int64, _ptr, c_int64, _ptr]),
    "tt_embedding_backward": (_status, [_ptr, _ptr, c_int64, c_int64, _ptr, c_int64, c_int]),
    "tt_relu_forward": (_status, [_ptr, _ptr, c_int64]),
    "tt_relu_backward": (_status, [_ptr, _ptr, _ptr, c_int64]),
    "tt_im2col": (_status, [_ptr] + [c_int64] * 10 + [_ptr]),
    "tt_col2im": (_status, [_ptr] + [c_int64] * 10 + [_ptr]),
    "tt_maxpool2d_forward": (_status, [_ptr] + [c_int64] * 12 + [_ptr, _ptr]),
    "tt_maxpool2d_backward": (_status, [_ptr, _ptr] + [c_int64] * 6 + [_ptr, c_int64, c_int64]),
})

# The INT8 GEMM (runtime/cpu/qgemm.cpp): optional, so a library built before it still
# loads; core/quantization.py then multiplies in NumPy and says why.
QGEMM_SYMBOLS = ("tt_qgemm_kernel_active", "tt_qgemm_kernel_name", "tt_qgemm_kernel_usable",
                 "tt_qgemm_pack_size", "tt_qgemm_pack", "tt_qgemm_quantize_rows",
                 "tt_qgemm_u8s8s32", "tt_qgemm_f32")
# The reduce_range calls (7-bit activations) came later: a library without them still serves
# the 8-bit calls, and quantization.py refuses reduce_range=True on it, saying why.
QGEMM_REDUCE_RANGE_SYMBOLS = ("tt_qgemm_kernel_for", "tt_qgemm_pack_size_ex", "tt_qgemm_pack_ex",
                              "tt_qgemm_quantize_rows_ex")
OPTIONAL_PROTOTYPES.update({
    "tt_qgemm_kernel_active": (c_int, []),
    "tt_qgemm_kernel_name": (c_char_p, [c_int]),
    "tt_qgemm_kernel_usable": (c_int, [c_int]),
    "tt_qgemm_pack_size": (_status, [c_int64, c_int64, c_int, _ptr]),
    "tt_qgemm_pack": (_status, [c_int, c_int64, c_int64, _ptr, c_int64, _ptr, c_int64]),
    "tt_qgemm_quantize_rows": (_status, [c_int64, c_int64, _ptr, c_int64, _ptr, c_int64, _ptr,
                                         _ptr]),
    "tt_qgemm_u8s8s32": (_status, [c_int64, c_int64, c_int64, _ptr, c_int64, _ptr, c_int64,
                                   _ptr, c_int64]),
    "tt_qgemm_f32": (_status, [c_int64, c_int64, c_int64, _ptr, c_int64, _ptr, c_int64, _ptr,
                               _ptr, c_int, _ptr, c_int64]),
    "tt_qgemm_kernel_for": (c_int, [c_int]),
    "tt_qgemm_pack_size_ex": (_status, [c_int64, c_int64, c_int, c_int, _ptr]),
    "tt_qgemm_pack_ex": (_status, [c_int, c_int, c_int64, c_int64, _ptr, c_int64, _ptr, c_int64]),
    "tt_qgemm_quantize_rows_ex": (_status, [c_int64, c_int64, _ptr, c_int64, _ptr, c_int64, _ptr,
                                            _ptr, c_int]),
})

# The fusion executor (runtime/fusion/README.md): optional, so a library built before it
# still loads; extensions/compile.py then runs fusion programs on NumPy and says why.
FUSION_SYMBOLS = ("tt_fusion_create", "tt_fusion_free", "tt_fusion_info", "tt_fusion_run",
                  "tt_fusion_source", "tt_fusion_run_rows")
OPTIONAL_PROTOTYPES.update({
    "tt_fusion_create": (_status, [_ptr, c_int64, _ptr, c_int64, _ptr]),
    "tt_fusion_free": (_status, [c_void_p]),
    "tt_fusion_info": (_status, [c_void_p, _ptr, _ptr, _ptr]),
    "tt_fusion_run": (_status, [c_void_p, _ptr, _ptr, _ptr, _ptr]),
    "tt_fusion_run_rows": (_status, [_ptr, _ptr, _ptr, _ptr, _ptr, c_int64, c_int64]),
    "tt_fusion_source": (_status, [c_void_p, c_char_p, c_int64, _ptr]),
})

# Apple MPS GEMM (runtime/metal/mps_gemm.mm; a stub that refuses with the reason elsewhere):
# optional, so a library built before it still loads; extensions/mps_ops.py falls back.
OPTIONAL_PROTOTYPES.update({
    "tt_mps_available": (c_int, []),
    "tt_mps_sgemm": (_status, [c_int64, c_int64, c_int64, _ptr, _ptr, _ptr, _ptr]),
})

# libtinytorch_cuda (include/tinytorch/tinytorch_cuda.h): the CUDA SGEMM stages, a separate
# library built only where CMake found nvcc, with the same conventions (tt_status, its own
# thread-local last error and path report). Loaded on first use by load_cuda(), never at
# import; tests/extensions/test_cuda_ops.py checks these against that header.
CUDA_PROTOTYPES = {
    "tt_cuda_version": (c_char_p, []),
    "tt_cuda_last_error": (c_char_p, []),
    "tt_cuda_last_kernel_path": (c_char_p, []),
    "tt_cuda_stage_count": (c_int, []),
    "tt_cuda_stage_name": (c_char_p, [c_int]),
    "tt_cuda_device_count": (_status, [_ptr]),
    "tt_cuda_device_name": (_status, [_ptr, c_int64]),
    "tt_cuda_sgemm": (_status, [c_int, c_int64, c_int64, c_int64, _ptr, _ptr, _ptr, _ptr]),
    "tt_cuda_sgemm_device": (_status, [c_int, c_int64, c_int64, c_int64, _ptr, _ptr, _ptr,
                                       _ptr]),
}
_cuda_loaded = None  # (handle or None, path or None, reason) once load_cuda() ran


def _open_library(path: str, tried: list, check):
    """The ctypes.CDLL at ``path``, or None with the reason appended to ``tried``: a missing
    file, a library that does not load, or whatever ``check(handle)`` reports ("" = fine)."""
    if not os.path.exists(path):
        tried.append(f"{path}: no such file")
        return None
    try:
        handle = ctypes.CDLL(path)
    except OSError as exc:
        tried.append(f"{path}: not a loadable library ({exc})")
        return None
    problem = check(handle)
    if problem:
        tried.append(f"{path}: {problem}")
        return None
    return handle


def _cuda_candidates() -> list[str]:
    """Where libtinytorch_cuda may be: TINYTORCH_CUDA_LIB (only there, if set), else beside
    the loaded libtinytorch (a build folder), beside this file, and in _lib_editable/."""
    env = os.environ.get("TINYTORCH_CUDA_LIB")
    if env:
        return [env]
    name = {"darwin": "libtinytorch_cuda.dylib", "win32": "tinytorch_cuda.dll"}.get(
        sys.platform, "libtinytorch_cuda.so")
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.path.dirname(_path)] if lib is not None and _path else []
    folders += [here, os.path.join(here, "_lib_editable")]
    return list(dict.fromkeys(os.path.join(f, name) for f in folders))


def load_cuda(refresh: bool = False):
    """(libtinytorch_cuda as a declared ctypes.CDLL or None, its path or None, reason or '').
    Never raises: a missing file, a file that does not load, or a missing symbol is a reason.
    The result is cached; ``refresh=True`` looks again."""
    global _cuda_loaded
    if _cuda_loaded is not None and not refresh:
        return _cuda_loaded
    tried = []

    def missing_symbol(handle):
        missing = [n for n in CUDA_PROTOTYPES if getattr(handle, n, None) is None]
        return f"symbol {missing[0]} is missing" if missing else ""

    for path in _cuda_candidates():
        handle = _open_library(path, tried, missing_symbol)
        if handle is None:
            continue
        for fn_name, (restype, argtypes) in CUDA_PROTOTYPES.items():
            fn = getattr(handle, fn_name)
            fn.restype, fn.argtypes = restype, argtypes
        _cuda_loaded = (handle, path, "")
        return _cuda_loaded
    _cuda_loaded = (None, None, "libtinytorch_cuda is not built (CMake builds it only where "
                    "nvcc is found): " + "; ".join(tried))
    return _cuda_loaded


lib = None          # the ctypes.CDLL, or None when unavailable
_path = None        # where it was loaded from (or tried last)
_reason = ""        # why lib is None ("" when loaded)


def _library_names() -> list[str]:
    if sys.platform == "darwin":
        return ["libtinytorch.dylib"]
    if sys.platform == "win32":
        return ["tinytorch.dll", "libtinytorch.dll"]
    return ["libtinytorch.so"]


def _candidates() -> list[str]:
    env = os.environ.get("TINYTORCH_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    found = [os.path.join(here, n) for n in _library_names()]
    found += [os.path.join(here, "_lib_editable", n) for n in _library_names()]
    try:
        from importlib.resources import files
        pkg = files("tinytorch")
        for n in _library_names():
            p = str(pkg / n)
            if p not in found:
                found.append(p)
    except Exception:  # resources may be unavailable in odd installs; beside-__file__ is enough
        pass
    return found


def _declare(handle) -> str:
    """Set argtypes/restype on every prototype; return the first missing symbol name or ''."""
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(handle, name)
        except AttributeError:
            return name
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in OPTIONAL_PROTOTYPES.items():
        fn = getattr(handle, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes
    return ""


def _load() -> None:
    global lib, _path, _reason
    tried = []

    def declare_all(handle):
        missing = _declare(handle)
        return f"built from an older or different runtime (symbol {missing} is missing)" if missing else ""

    for path in _candidates():
        _path = path
        handle = _open_library(path, tried, declare_all)
        if handle is None:
            continue
        lib = handle
        _reason = ""
        return
    if os.environ.get("TINYTORCH_LIB"):
        source = "TINYTORCH_LIB"
    else:
        source = "the package folder (build it with `pip install .` or `pip install -e .`)"
    _reason = f"libtinytorch could not be loaded from {source}: " + "; ".join(tried)


_load()


def available() -> bool:
    return lib is not None


def reason() -> str:
    """Why the library is unavailable ('' when it is loaded)."""
    return _reason


def library_path() -> str | None:
    return _path if lib is not None else None


def last_error() -> str:
    return lib.tt_last_error().decode() if lib is not None else _reason


def check(status: int, what: str = "", library=None) -> None:
    """Raise the exception that matches a non-OK status, with the library's message: the
    package's one mapping of tt_status to Python exceptions (MemoryError for
    TT_ERR_OUT_OF_MEMORY, RuntimeError for TT_ERR_UNSUPPORTED / TT_ERR_INTERNAL, ValueError
    for the rest).

    Args:
        status: the int a runtime call returned (TT_OK returns quietly).
        what: names the operation in the message.
        library: whose last error to read: None for libtinytorch, or the loaded
            libtinytorch_cuda (``load_cuda()[0]``), whose message is ``tt_cuda_last_error``.
    """
    if status == TT_OK:
        return
    name = STATUS_NAMES.get(status, f"status {status}")
    last = lib.tt_last_error if library is None else library.tt_cuda_last_error
    msg = f"{last().decode()} [{name}]"
    if what:
        msg = f"{what}: {msg}"
    if status == 5:
        raise MemoryError(msg)
    if status in (6, 8):
        raise RuntimeError(msg)
    raise ValueError(msg)


def require() -> ctypes.CDLL:
    """The library, or RuntimeError naming why it is unavailable."""
    if lib is None:
        raise RuntimeError(_reason)
    return lib


def build_info() -> dict:
    return json.loads(require().tt_build_info().decode())


def set_isa(name: str) -> None:
    handle = require()
    isa = c_int()
    check(handle.tt_isa_from_name(name.encode(), ctypes.byref(isa)), "set_isa")
    check(handle.tt_set_isa(isa.value), "set_isa")


def isa_active() -> str:
    return require().tt_isa_name(require().tt_isa_active()).decode()


def memory_stats() -> dict:
    stats = MemoryStats()
    check(require().tt_memory_stats_get(ctypes.byref(stats)))
    return {f: getattr(stats, f) for f, _ in MemoryStats._fields_}


def thread_stats() -> dict:
    stats = ThreadStats()
    check(require().tt_thread_stats(ctypes.byref(stats)))
    return {f: getattr(stats, f) for f, _ in ThreadStats._fields_}


def last_kernel_path() -> str:
    return require().tt_last_kernel_path().decode()


def f16_ptr(array: np.ndarray | None):
    """The address of a float16 array's bits, for a uint16_t * (None -> NULL). The caller
    keeps `array` alive."""
    if array is None:
        return None
    if array.dtype != np.float16:
        raise TypeError(f"expected a float16 array, got {array.dtype}")
    return array.ctypes.data


def f32_ptr(array: np.ndarray | None):
    """The address of a float32 array, for a float * (None -> NULL). The caller keeps
    `array` alive."""
    if array is None:
        return None
    if array.dtype != np.float32:
        raise TypeError(f"expected a float32 array, got {array.dtype}")
    return array.ctypes.data


_exports_seen = {}  # (id(lib), symbol group) -> bool, for the library loaded now


def _exports(symbols) -> bool:
    """True when the loaded library exports every name of ``symbols``. Asked once per call of
    an INT8 layer (a decode token makes dozens), so the answer is kept per loaded library."""
    key = (id(lib), symbols)
    known = _exports_seen.get(key)
    if known is None:
        known = _exports_seen[key] = lib is not None and all(getattr(lib, n, None) is not None for n in symbols)
    return known


def has_fusion() -> bool:
    """True when the loaded library exports every tt_fusion_* function."""
    return _exports(FUSION_SYMBOLS)


def has_qgemm() -> bool:
    """True when the loaded library exports every tt_qgemm_* function."""
    return _exports(QGEMM_SYMBOLS)


def has_qgemm_reduce_range() -> bool:
    """True when the loaded library also exports the reduce_range (7-bit) tt_qgemm_* calls."""
    return _exports(QGEMM_SYMBOLS) and _exports(QGEMM_REDUCE_RANGE_SYMBOLS)


class FusedKernel:
    """A compiled fusion kernel (the C file of tt_fusion_source built as a shared object),
    called with tt_fusion_run's four pointer arguments. When the file defines tt_fused_rows
    (programs without ACCUMULATE outputs) the runtime's thread pool runs it in chunks of rows
    (tt_fusion_run_rows) and the call returns 0 or raises; else tt_fused_kernel runs every row
    on the calling thread and its return value (0, or -1: no memory) is returned."""

    def __init__(self, path: str):
        self._handle = ctypes.CDLL(path)  # kept: the library stays mapped while this lives
        kernel = self._handle.tt_fused_kernel
        kernel.restype = c_int
        kernel.argtypes = [c_void_p, c_void_p, c_void_p, c_void_p]
        self._kernel = kernel
        rows = getattr(self._handle, "tt_fused_rows", None)
        self._rows = ctypes.cast(rows, c_void_p).value if rows is not None else None
        rows_cols = (c_int64 * 2).in_dll(self._handle, "tt_fused_domain")
        self._domain = (int(rows_cols[0]), int(rows_cols[1]))

    def __call__(self, inputs, input_strides, outputs, output_strides) -> int:
        if self._rows is None:
            return self._kernel(inputs, input_strides, outputs, output_strides)
        check(require().tt_fusion_run_rows(self._rows, inputs, input_strides, outputs, output_strides,
                                           *self._domain), "tt_fusion_run_rows")
        return 0


def fused_kernel(path: str) -> FusedKernel:
    """Load the compiled fusion kernel at ``path`` (see FusedKernel). OSError /
    AttributeError / ValueError when it does not load."""
    return FusedKernel(path)


def libc_malloc_controls():
    """(mallopt, gnu_get_libc_version) of the process's C library with their prototypes
    declared (int mallopt(int, int); const char *gnu_get_libc_version(void)), or None where
    the C library is not glibc. Used by _allocator.py (one binding declares every prototype)."""
    try:
        libc = ctypes.CDLL(None)
        mallopt, version = libc.mallopt, libc.gnu_get_libc_version
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = [c_int, c_int]
    mallopt.restype = c_int
    version.argtypes = []
    version.restype = c_char_p
    return mallopt, version
