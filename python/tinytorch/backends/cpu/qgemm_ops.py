"""qgemm_ops: INT8 inference of the CPU back end (runtime/cpu/qgemm*.cpp): weight packing,
per-row activation quantization, the exact u8 x s8 -> s32 GEMM and the fused float32
linear.

Owns the calls of tt_qgemm_* and the cache of packed weights per kernel. ``reduce_range``
(7-bit activations, PyTorch's name) becomes the pack flag TT_QGEMM_REDUCE_RANGE: the runtime
then quantizes to [0, 127] and, on AVX2, runs the vpmaddubsw kernel avx2_u7. Assumes: the
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
_REDUCE_RANGE = 1     # TT_QGEMM_REDUCE_RANGE


def _qgemm_ready(k: int, reduce_range: bool = False) -> bool:
    """The runtime serves this call: it has tt_qgemm_* (and the reduce_range calls when asked
    for 7 bits) and K is within the exact bound."""
    has = _native.has_qgemm_reduce_range() if reduce_range else _native.has_qgemm()
    return has and k <= _QGEMM_MAX_K


def pack_key(kernel: int, reduce_range: bool):
    """The key of a pack in a layer's ``packs`` dict: the kernel id for 8-bit packs (as
    before reduce_range existed), (kernel, "reduce_range") for 7-bit ones."""
    return (kernel, "reduce_range") if reduce_range else kernel


def pack_for(lib, weight_q, packs, reduce_range=False):
    """(address, bytes) of the pack of ``weight_q`` for the INT8 kernel the runtime picks now
    (tt_qgemm_kernel_for the pack's flags: avx2_u7 for 7-bit packs on AVX2), made once and kept
    in the layer's ``packs`` dict (pack_key -> (buffer, offset, bytes)); a buffer that lost its
    64-byte alignment (a copy of the layer) is packed again. ``lib`` is the runtime library;
    ``reduce_range`` asks for a 7-bit pack (TT_QGEMM_REDUCE_RANGE)."""
    flags = _REDUCE_RANGE if reduce_range else 0
    kernel = lib.tt_qgemm_kernel_for(flags) if reduce_range else lib.tt_qgemm_kernel_active()
    key = pack_key(kernel, reduce_range)
    entry = packs.get(key)
    if entry is not None:
        buf, offset, nbytes = entry
        packed = address(buf) + offset
        if packed % 64 == 0:
            return packed, nbytes
    k, n = weight_q.shape
    size = ctypes.c_int64()
    w = np.ascontiguousarray(weight_q, dtype=np.int8)
    if reduce_range:
        _native.check(lib.tt_qgemm_pack_size_ex(k, n, kernel, flags, ctypes.byref(size)),
                      "quantized_pack")
    else:
        _native.check(lib.tt_qgemm_pack_size(k, n, kernel, ctypes.byref(size)), "quantized_pack")
    buf = np.empty(size.value + 64, dtype=np.uint8)
    offset = (-address(buf)) % 64
    packed = address(buf) + offset
    if reduce_range:
        st = lib.tt_qgemm_pack_ex(kernel, flags, k, n, address(w), max(n, 1), packed, size.value)
    else:
        st = lib.tt_qgemm_pack(kernel, k, n, address(w), max(n, 1), packed, size.value)
    _native.check(st, "quantized_pack")
    packs[key] = (buf, offset, size.value)
    return packed, size.value


def quantized_pack(weight_q, packs, reduce_range=False):
    """Pack the (K, N) int8 weight ``weight_q`` for the INT8 kernel of the active ISA (7-bit
    when ``reduce_range``) into the dict ``packs`` (done once, when a QuantizedLinear is
    built); declines where the runtime has no tt_qgemm_* (or no reduce_range calls)."""
    if not _qgemm_ready(weight_q.shape[0], reduce_range):
        return NotImplemented
    pack_for(_native.lib, weight_q, packs, reduce_range)
    return None


def quantize_rows(x, reduce_range=False):
    """tt_qgemm_quantize_rows(_ex) on ``x``, a float32 (M, K) array: (q uint8, scale,
    zero_point), q in [0, 127] when ``reduce_range``, else [0, 255]."""
    if not _qgemm_ready(0, reduce_range) or x.dtype != F32:
        return NotImplemented
    x = np.ascontiguousarray(x)
    m, k = x.shape
    q = np.empty((m, k), np.uint8)
    scale = np.empty(m, np.float32)
    zp = np.empty(m, np.int32)
    args = (m, k, address(x), max(k, 1), address(q), max(k, 1), address(scale),
            address(zp))
    lib = _native.lib
    st = lib.tt_qgemm_quantize_rows_ex(*args, _REDUCE_RANGE) if reduce_range else \
        lib.tt_qgemm_quantize_rows(*args)
    _native.check(st, "quantize_rows")
    record_native_path()
    return q, scale, zp


def _packed_operands(a, weight_q, packs, reduce_range):
    """(a contiguous, m, n, k, packed weight address, its bytes): what tt_qgemm_u8s8s32 and
    tt_qgemm_f32 both take. The runtime reads rows at stride k, so ``a`` is made contiguous
    once here; the weight is packed once per kernel (and range) and kept in ``packs``."""
    k, n = weight_q.shape
    a = np.ascontiguousarray(a)
    packed, nbytes = pack_for(_native.lib, weight_q, packs, reduce_range)
    return a, a.shape[0], n, k, packed, nbytes


def quantized_matmul(q, zero_point, weight_q, packs, reduce_range=False):
    """Exact int32 ``(q - zero_point[:, None]) @ weight_q`` through tt_qgemm_u8s8s32 (q uint8
    (M, K)); the zero point is folded in with the weight's column sums, in int32 (exact:
    the result is bounded by K * 255 * 128 < 2^31). ``packs`` caches the packed weight; with
    ``reduce_range`` it is a 7-bit pack and a q above 127 raises ValueError (the runtime
    refuses it rather than saturate)."""
    if not _qgemm_ready(weight_q.shape[0], reduce_range) or q.dtype != np.uint8:
        return NotImplemented
    q, m, n, k, packed, nbytes = _packed_operands(q, weight_q, packs, reduce_range)
    out = np.empty((m, n), np.int32)
    _native.check(_native.lib.tt_qgemm_u8s8s32(m, n, k, address(q), max(k, 1), packed, nbytes,
                                               address(out), max(n, 1)), "quantized_matmul")
    record_native_path()
    colsum = weight_q.sum(axis=0, dtype=np.int32)
    zp = np.asarray(zero_point, np.int32)[:, None]
    with np.errstate(over="ignore"):
        return out - zp * colsum[None, :]


def quantized_linear(x, weight_q, weight_scale, bias, activation, packs, reduce_range=False):
    """act(float(sum (q - zx) w) * (sx * ws) + bias) in one tt_qgemm_f32 call (quantization,
    exact int32 product and epilogue in the runtime) for float32 x (M, K): w is ``weight_q``,
    ws ``weight_scale``, act the ``activation`` (None, "relu", "gelu"); ``packs`` caches the
    packed weight; ``reduce_range`` quantizes x to 7 bits (the pack's flag says so)."""
    if not _qgemm_ready(weight_q.shape[0], reduce_range) or x.dtype != F32:
        return NotImplemented
    x, m, n, k, packed, nbytes = _packed_operands(x, weight_q, packs, reduce_range)
    out = np.empty((m, n), np.float32)
    _native.check(_native.lib.tt_qgemm_f32(m, n, k, address(x), max(k, 1), packed, nbytes,
                                           address(weight_scale),
                                           None if bias is None else address(bias),
                                           _ACTIVATIONS[activation], address(out), max(n, 1)),
                  "quantized_linear")
    record_native_path()
    return out
