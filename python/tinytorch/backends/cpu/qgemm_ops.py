"""qgemm_ops: INT8 inference of the CPU back end (runtime/cpu/qgemm*.cpp): weight packing,
per-row activation quantization, the exact u8 x s8 -> s32 GEMM and the fused float32
linear.

Owns the calls of tt_qgemm_* and the cache of packed weights per kernel. Assumes: the
runtime's qgemm section (docs/int8.md has the exactness scheme per ISA).
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import _native
from .. import record_native_path
from .common import F32, address

__all__ = ["quantized_pack", "quantize_rows", "quantized_matmul", "quantized_linear"]

# --------------------------------------------------------------------------------------
# INT8 inference: tt_qgemm_* (runtime/cpu/qgemm.cpp)
# --------------------------------------------------------------------------------------

_ACTIVATIONS = {None: 0, "relu": 1, "gelu": 2}
_QGEMM_MAX_K = 65793  # TT_QGEMM_MAX_K: the largest K whose int32 sums are exact


def _qgemm_ready(k: int) -> bool:
    return _native.has_qgemm() and k <= _QGEMM_MAX_K


def pack_for(lib, weight_q, packs):
    """(address, bytes) of the pack of ``weight_q`` for the runtime's active INT8 kernel,
    made once and kept in the layer's ``packs`` dict (kernel -> (buffer, offset, bytes)); a
    buffer that lost its 64-byte alignment (a copy of the layer) is packed again. ``lib`` is
    the runtime library."""
    kernel = lib.tt_qgemm_kernel_active()
    entry = packs.get(kernel)
    if entry is not None:
        buf, offset, nbytes = entry
        address = buf.ctypes.data + offset
        if address % 64 == 0:
            return address, nbytes
    k, n = weight_q.shape
    size = ctypes.c_int64()
    _native.check(lib.tt_qgemm_pack_size(k, n, kernel, ctypes.byref(size)), "quantized_pack")
    buf = np.empty(size.value + 64, dtype=np.uint8)
    offset = (-buf.ctypes.data) % 64
    w = np.ascontiguousarray(weight_q, dtype=np.int8)
    _native.check(lib.tt_qgemm_pack(kernel, k, n, w.ctypes.data, max(n, 1), buf.ctypes.data + offset,
                                    size.value), "quantized_pack")
    packs[kernel] = (buf, offset, size.value)
    return buf.ctypes.data + offset, size.value


def quantized_pack(weight_q, packs):
    """Pack the (K, N) int8 weight ``weight_q`` for the active INT8 kernel into the dict
    ``packs`` (done once, when a QuantizedLinear is built); declines where the runtime has no
    tt_qgemm_*."""
    if not _qgemm_ready(weight_q.shape[0]):
        return NotImplemented
    pack_for(_native.lib, weight_q, packs)
    return None


def quantize_rows(x):
    """tt_qgemm_quantize_rows on ``x``, a float32 (M, K) array: (q uint8, scale, zero_point)."""
    if not _native.has_qgemm() or x.dtype != F32:
        return NotImplemented
    x = np.ascontiguousarray(x)
    m, k = x.shape
    q = np.empty((m, k), np.uint8)
    scale = np.empty(m, np.float32)
    zp = np.empty(m, np.int32)
    _native.check(_native.lib.tt_qgemm_quantize_rows(m, k, x.ctypes.data, max(k, 1), q.ctypes.data,
                                                     max(k, 1), scale.ctypes.data, zp.ctypes.data),
                  "quantize_rows")
    record_native_path()
    return q, scale, zp


def _packed_operands(a, weight_q, packs):
    """(a contiguous, m, n, k, packed weight address, its bytes): what tt_qgemm_u8s8s32 and
    tt_qgemm_f32 both take. The runtime reads rows at stride k, so ``a`` is made contiguous
    once here; the weight is packed once per kernel and kept in ``packs``."""
    k, n = weight_q.shape
    a = np.ascontiguousarray(a)
    address, nbytes = pack_for(_native.lib, weight_q, packs)
    return a, a.shape[0], n, k, address, nbytes


def quantized_matmul(q, zero_point, weight_q, packs):
    """Exact int32 ``(q - zero_point[:, None]) @ weight_q`` through tt_qgemm_u8s8s32 (q uint8
    (M, K)); the zero point is folded in with the weight's column sums, in int32 (exact:
    the result is bounded by K * 255 * 128 < 2^31). ``packs`` caches the packed weight."""
    if not _qgemm_ready(weight_q.shape[0]) or q.dtype != np.uint8:
        return NotImplemented
    q, m, n, k, address, nbytes = _packed_operands(q, weight_q, packs)
    out = np.empty((m, n), np.int32)
    _native.check(_native.lib.tt_qgemm_u8s8s32(m, n, k, q.ctypes.data, max(k, 1), address, nbytes,
                                               out.ctypes.data, max(n, 1)), "quantized_matmul")
    record_native_path()
    colsum = weight_q.sum(axis=0, dtype=np.int32)
    zp = np.asarray(zero_point, np.int32)[:, None]
    with np.errstate(over="ignore"):
        return out - zp * colsum[None, :]


def quantized_linear(x, weight_q, weight_scale, bias, activation, packs):
    """act(float(sum (q - zx) w) * (sx * ws) + bias) in one tt_qgemm_f32 call (quantization,
    exact int32 product and epilogue in the runtime) for float32 x (M, K): w is ``weight_q``,
    ws ``weight_scale``, act the ``activation`` (None, "relu", "gelu"); ``packs`` caches the
    packed weight."""
    if not _qgemm_ready(weight_q.shape[0]) or x.dtype != F32:
        return NotImplemented
    x, m, n, k, address, nbytes = _packed_operands(x, weight_q, packs)
    out = np.empty((m, n), np.float32)
    _native.check(_native.lib.tt_qgemm_f32(m, n, k, x.ctypes.data, max(k, 1), address, nbytes,
                                           weight_scale.ctypes.data,
                                           None if bias is None else bias.ctypes.data,
                                           _ACTIVATIONS[activation], out.ctypes.data, max(n, 1)),
                  "quantized_linear")
    record_native_path()
    return out
