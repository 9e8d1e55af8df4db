"""Quantization: INT8 quantize/dequantize and an INT8 Linear layer for inference.

The bottleneck it removes
  A float32 weight costs 4 bytes; an int8 weight costs 1, so weights take a quarter of the memory
  and memory bandwidth, and integer multiply-accumulate is cheaper than float on most hardware.

What this file owns
  compute_qparams(x, symmetric, per_channel, axis)   scale and zero point
      symmetric:  scale = max|x| / 127, zero_point = 0, q in [-127, 127] (the restricted range,
                  so +-max both map exactly and -128 is never produced)
      asymmetric: the range [min(x, 0), max(x, 0)] is mapped onto [-128, 127]:
                  scale = (hi - lo) / 255, zero_point = round(-128 - lo / scale); 0.0 is exact.
      per-channel: one scale (and zero point) per index along ``axis`` (for a Linear weight of
                  shape (in, out) the output channels are axis 1).
  quantize(x, qp) = clip(round(x * (1/scale)) + zero_point)  (round half to even, like PyTorch)
  dequantize(q, qp) = (q - zero_point) * scale
  quantize_int8(...) -> QuantizedTensor (q, params; ``dequantize()``, ``nbytes``)
  quantization_error(x, x_hat)   max/mean absolute error, RMSE and SQNR in dB
  QuantizedLinear.from_linear(linear, per_channel=True, reduce_range=True)   int8 weights
      (symmetric, per output channel), packed once for the runtime's INT8 kernel; at run time
      each input row is quantized to u8 (asymmetric, dynamic range: ``quantize_rows``), the
      product is accumulated exactly in int32, and one float multiply per output rescales it:
          y = act(sx[i] * sw[j] * sum_k (xq[i, k] - zx[i]) * wq[k, j] + b[j])
  quantize_rows(x, reduce_range=True)   the per-row u8 quantization the layer applies
  quantize_model(model, reduce_range=True)   replaces every plain ``Linear`` (by name) with a
      QuantizedLinear

reduce_range (PyTorch's name): 7-bit activations
  ``reduce_range=True`` quantizes activations onto [0, 127] instead of [0, 255] (the same
  float32 steps with 127 in place of 255). On AVX2 without VNNI it lets the runtime use
  vpmaddubsw exactly (a u8 x s8 pair sums to at most 2 * 127 * 128 = 32512, inside its
  saturating 16-bit result): the avx2_u7 kernel, about 1.4x the multiply rate of the exact
  8-bit scheme. PyTorch's dynamic Linear (quantize_dynamic, fbgemm) uses reduce_range=True for
  the same reason, and it is the default here too: the same activation integers as PyTorch's
  dynamic int8, on every ISA, and the fast exact kernel where most laptops without VNNI are.
  ``reduce_range=False`` keeps 8 bits (one more bit of activation precision, half the
  rounding step) at the slower exact scheme on AVX2 without VNNI (u16 activations through
  vpmaddwd). The integers of a given setting are identical on every kernel either way (the
  other kernels are exact for any u8). Measured on a 2-vCPU Zen 3 (AVX2, no VNNI), 1 thread,
  GPT-2-small GEMMs at M >= 16, two runs: 1.5-4.2x our float32 with reduce_range, 1.0-3.2x
  without (benchmarks/results/bench_int8_avx2.md and docs/int8.md); held-out loss of the
  quantized GPT +0.5 % vs +0.1 % of float32's (bench_int8_e2e_avx2.md).
  model_size_bytes(model), size_report(float_model, quantized_model)

Where the integer product runs
  Through the kernel door (core/acceleration.py quantized_linear): the runtime's tt_qgemm_f32
  (u8 x s8 micro-kernels per ISA, VNNI where the CPU has it; last_path() says
  "native:qgemm:<kernel>") or, where the runtime cannot serve it, NumPy's int64 matmul (exact
  but slow: NumPy's integer matmul has no BLAS); ``acceleration.quantized_path()`` says which
  and why. Both quantize the activations with the same float32 formula, so both give the same
  integers; the float epilogue agrees to float rounding. A float GEMM would not do: it rounds
  sums beyond 2^24, and the point is exact integer accumulation (|sum| <= K * 255 * 128 fits
  int32 for K <= 65,793; larger K raises).

What it assumes / never does
  Inference only: a QuantizedLinear has no trainable parameters and records no gradient. The
  packed copy of the weight is a cache of the runtime's layout (as large as the int8 weight),
  not part of the model's size.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import acceleration
from .layers import Layer, Linear
from .tensor import Tensor

__all__ = ["QuantParams", "QuantizedTensor", "QuantizedRows", "compute_qparams", "quantize", "dequantize",
           "quantize_int8", "quantize_rows", "quantization_error", "QuantizedLinear", "quantize_model",
           "model_size_bytes", "size_report"]

INT8_MIN, INT8_MAX = -128, 127


@dataclass
class QuantParams:
    """Quantization parameters: ``x ~ (q - zero_point) * scale``.

    Args:
        scale: float32 array, shape () per tensor or (channels,) per channel.
        zero_point: int32 array of the same shape (0 when symmetric).
        symmetric: q in [-127, 127] with zero point 0; otherwise [-128, 127].
        axis: the channel axis for per-channel parameters, None per tensor.
    """

    scale: np.ndarray        # float32, shape () or (channels,)
    zero_point: np.ndarray   # int32, same shape as scale
    symmetric: bool
    axis: int | None         # channel axis, None for per-tensor

    def _broadcast(self, ndim: int):
        if self.axis is None:
            return self.scale, self.zero_point
        shape = [1] * ndim
        shape[self.axis] = -1
        return self.scale.reshape(shape), self.zero_point.reshape(shape)

    @property
    def qmin(self) -> int:
        """The smallest quantized value: -127 when symmetric, -128 otherwise."""
        return -INT8_MAX if self.symmetric else INT8_MIN

    @property
    def nbytes(self) -> int:
        """Bytes of the scale and zero-point arrays."""
        return int(self.scale.nbytes + self.zero_point.nbytes)


def _array(x) -> np.ndarray:
    arr = x.data if isinstance(x, Tensor) else np.asarray(x)
    if arr.dtype.kind != "f":
        raise TypeError(f"quantization expects a floating-point array, got dtype {arr.dtype}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("quantization: input contains NaN or inf")
    return arr


def compute_qparams(x, symmetric: bool = True, per_channel: bool = False, axis: int = 0) -> QuantParams:
    """Scale and zero point that map the range of ``x`` onto int8 (see the module docstring).

    Args:
        x: floating-point Tensor or array (finite).
        symmetric: scale = max|x| / 127 with zero point 0; otherwise the range
            [min(x, 0), max(x, 0)] is mapped onto [-128, 127].
        per_channel: one scale and zero point per index along ``axis`` instead of one for
            the whole tensor.
        axis: the channel axis when ``per_channel`` (1 for a Linear weight (in, out)).
    """
    arr = _array(x)
    if per_channel:
        if arr.ndim == 0:
            raise ValueError("per-channel quantization needs at least one axis")
        axis = int(axis) % arr.ndim
        reduce = tuple(i for i in range(arr.ndim) if i != axis)
        if arr.shape[axis] == 0:
            raise ValueError(f"per-channel quantization along axis {axis} of an empty axis (shape {arr.shape})")
        lo = arr.min(axis=reduce) if arr.size else np.zeros(arr.shape[axis])
        hi = arr.max(axis=reduce) if arr.size else np.zeros(arr.shape[axis])
    else:
        axis = None
        lo = np.asarray(arr.min() if arr.size else 0.0)
        hi = np.asarray(arr.max() if arr.size else 0.0)
    lo = np.minimum(lo.astype(np.float64), 0.0)
    hi = np.maximum(hi.astype(np.float64), 0.0)
    if symmetric:
        amax = np.maximum(-lo, hi)
        scale = amax / INT8_MAX
        zero_point = np.zeros(scale.shape, dtype=np.int32)
    else:
        scale = (hi - lo) / (INT8_MAX - INT8_MIN)
        safe = np.where(scale > 0, scale, 1.0)
        zero_point = np.clip(np.round(INT8_MIN - lo / safe), INT8_MIN, INT8_MAX).astype(np.int32)
    # An all-zero range has no information: any positive scale reproduces it exactly.
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    return QuantParams(scale, zero_point, bool(symmetric), axis)


def quantize(x, qp: QuantParams) -> np.ndarray:
    """int8 array ``clip(round(x / scale) + zero_point)`` of the float ``x`` (Tensor or
    array) with the parameters ``qp`` (round half to even, as PyTorch)."""
    arr = _array(x)
    scale, zp = qp._broadcast(arr.ndim)
    # Multiply by the float32 reciprocal, as PyTorch's kernels do, so the two round identically.
    inv_scale = (np.float32(1.0) / scale.astype(np.float32)).astype(np.float32)
    q = np.round(arr.astype(np.float32) * inv_scale) + zp
    return np.clip(q, qp.qmin, INT8_MAX).astype(np.int8)


def dequantize(q: np.ndarray, qp: QuantParams) -> np.ndarray:
    """float32 ``(q - zero_point) * scale`` of the int8 array ``q`` with parameters ``qp``."""
    q = np.asarray(q)
    if q.dtype != np.int8:
        raise TypeError(f"dequantize expects int8 values, got {q.dtype}")
    scale, zp = qp._broadcast(q.ndim)
    return ((q.astype(np.int32) - zp).astype(np.float32) * scale).astype(np.float32)


@dataclass
class QuantizedTensor:
    """An int8 array with the parameters that map it back to floats.

    Args:
        q: the int8 values.
        params: their ``QuantParams``.
    """

    q: np.ndarray
    params: QuantParams

    def dequantize(self) -> np.ndarray:
        """The float32 approximation of the original values."""
        return dequantize(self.q, self.params)

    @property
    def nbytes(self) -> int:
        """Bytes stored: the int8 values plus scales and zero points."""
        return int(self.q.nbytes + self.params.nbytes)

    @property
    def shape(self):
        """The shape of ``q``."""
        return self.q.shape


def quantize_int8(x, symmetric: bool = True, per_channel: bool = False, axis: int = 0) -> QuantizedTensor:
    """Quantize ``x`` to a QuantizedTensor: ``compute_qparams(x, symmetric, per_channel,
    axis)`` then ``quantize``."""
    qp = compute_qparams(x, symmetric, per_channel, axis)
    return QuantizedTensor(quantize(x, qp), qp)


@dataclass
class QuantizedRows:
    """Activations quantized per row: ``x[i] ~ (q[i] - zero_point[i]) * scale[i]``.

    Args:
        q: uint8 (M, K), in [0, 255] ([0, 127] with reduce_range).
        scale: float32 (M,).
        zero_point: int32 (M,), in the range of q.
    """

    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray

    def dequantize(self) -> np.ndarray:
        """The float32 rows the u8 values stand for."""
        return ((self.q.astype(np.int32) - self.zero_point[:, None]).astype(np.float32)
                * self.scale[:, None])


def quantize_rows(x, reduce_range: bool = True) -> QuantizedRows:
    """Dynamic per-row asymmetric u8 quantization of ``x``, a float (M, K) Tensor or array, the one
    QuantizedLinear applies to its input: onto [0, 127] with ``reduce_range`` (the default, as
    the layer's), or [0, 255] with ``reduce_range=False``
    (formula: tinytorch.h tt_qgemm_quantize_rows_ex; the runtime and the NumPy fallback give the
    same bits). ValueError for inf or NaN."""
    q, scale, zp = acceleration.quantize_rows(_array(x), reduce_range)
    return QuantizedRows(q, scale, zp)


def quantization_error(x, x_hat) -> dict:
    """How far ``x_hat`` (e.g. a dequantized copy) is from ``x``."""
    a = np.asarray(x.data if isinstance(x, Tensor) else x, dtype=np.float64)
    b = np.asarray(x_hat.data if isinstance(x_hat, Tensor) else x_hat, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"quantization_error: shapes differ: {a.shape} vs {b.shape}")
    err = a - b
    signal = float(np.mean(a * a)) if a.size else 0.0
    noise = float(np.mean(err * err)) if a.size else 0.0
    return {"max_abs_error": float(np.abs(err).max()) if a.size else 0.0,
            "mean_abs_error": float(np.abs(err).mean()) if a.size else 0.0,
            "rmse": noise ** 0.5,
            "sqnr_db": float("inf") if noise == 0 else 10.0 * np.log10(signal / noise) if signal > 0 else float("-inf")}


class QuantizedLinear(Layer):
    """INT8 inference version of ``Linear``: int8 weights, int32 accumulation, float output.

    Usually built with ``QuantizedLinear.from_linear(linear)``.

    Args:
        weight_q: the weight (in, out) as a symmetric QuantizedTensor (per tensor, or per
            output channel along axis 1).
        bias: float bias (out,) or None; kept in float32.
        activation: None, "relu" or "gelu": applied to the output in the same kernel call.
        reduce_range: quantize the activations to 7 bits, [0, 127] (the default, as PyTorch's
            dynamic Linear; the fast exact kernel on AVX2 without VNNI); False keeps 8 bits,
            [0, 255] (module docstring).

    Shape: input (..., in_features) -> output (..., out_features), float32; a Tensor in
    gives a Tensor (without gradient) out, an array gives an array.
    """

    def __init__(self, weight_q: QuantizedTensor, bias: np.ndarray | None, activation: str | None = None,
                 reduce_range: bool = True):
        if weight_q.q.ndim != 2:
            raise ValueError(f"QuantizedLinear: weight must be 2-D (in, out), got {weight_q.q.shape}")
        if not weight_q.params.symmetric:
            raise ValueError("QuantizedLinear: weights must be quantized symmetrically (zero point 0)")
        if activation not in (None, "relu", "gelu"):
            raise ValueError(f"QuantizedLinear: activation must be None, 'relu' or 'gelu', got {activation!r}")
        self.in_features, self.out_features = weight_q.q.shape
        if self.in_features > acceleration.QGEMM_MAX_K:
            raise ValueError(f"QuantizedLinear: in_features={self.in_features} could overflow the int32 "
                             f"accumulator (at most {acceleration.QGEMM_MAX_K})")
        # NumPy arrays, not Tensors: nothing here is a trainable parameter. The weight is read
        # only: the runtime's pack is a copy of it.
        self.weight_q = np.ascontiguousarray(weight_q.q)
        self.weight_q.flags.writeable = False
        self.weight_params = weight_q.params
        scale = weight_q.params.scale
        self.weight_scale = np.broadcast_to(scale, (self.out_features,)).astype(np.float32) \
            if weight_q.params.axis is None else scale.astype(np.float32)
        self.bias = None if bias is None else np.asarray(bias, dtype=np.float32).copy()
        self.activation = activation
        self.reduce_range = bool(reduce_range)
        self._packs = {}  # kernel -> the weight in the runtime's layout (made here, once)
        acceleration.quantized_pack(self.weight_q, self._packs, self.reduce_range)

    @classmethod
    def from_linear(cls, linear: Linear, per_channel: bool = True, activation: str | None = None,
                    reduce_range: bool = True) -> "QuantizedLinear":
        """Quantize a trained ``linear``'s weight symmetrically, one scale per output column
        when ``per_channel`` (else one for the whole weight); the bias stays float;
        ``activation`` (None, "relu", "gelu") is fused into the layer; ``reduce_range``
        quantizes its inputs to 7 bits (the default, as PyTorch's dynamic Linear; False keeps
        8 bits: see the module docstring)."""
        w = linear.weight.data
        qt = quantize_int8(w, symmetric=True, per_channel=per_channel, axis=1)
        bias = None if linear.bias is None else linear.bias.data
        return cls(qt, bias, activation, reduce_range)

    def quantize_input(self, x: np.ndarray) -> QuantizedRows:
        """Dynamic per-row asymmetric u8 quantization of the activations ``x`` (rows, in),
        7-bit when the layer has ``reduce_range``."""
        return quantize_rows(x, self.reduce_range)

    def int_matmul(self, xq: np.ndarray, zero_point) -> np.ndarray:
        """sum_k (xq - zx) * wq in int32: the exact integer part of the layer. ``xq`` is the
        uint8 input (rows, in_features; at most 127 with ``reduce_range``, else ValueError) and
        ``zero_point`` its zero points zx (one per row)."""
        zp = np.broadcast_to(np.asarray(zero_point, dtype=np.int32), (xq.shape[0],))
        return acceleration.quantized_matmul(xq, zp, self.weight_q, self._packs, self.reduce_range)

    def forward(self, x):
        """``x`` (..., in_features), a Tensor or float array -> (..., out_features) float32:
        quantize each row, exact integer matmul, rescale, add the bias, activation: one call
        of the runtime's INT8 kernel (acceleration.quantized_linear)."""
        tensor_in = isinstance(x, Tensor)
        arr = x.data if tensor_in else np.asarray(x)
        if arr.ndim == 0 or arr.shape[-1] != self.in_features:
            raise ValueError(f"QuantizedLinear: input has shape {arr.shape}, expected [..., {self.in_features}]")
        lead = arr.shape[:-1]
        if arr.dtype.kind != "f":
            raise TypeError(f"QuantizedLinear: expects a floating-point input, got dtype {arr.dtype}")
        x2 = arr.reshape(-1, self.in_features)  # inf / NaN: the quantization raises ValueError
        out = acceleration.quantized_linear(x2, self.weight_q, self.weight_scale, self.bias,
                                            self.activation, self._packs, self.reduce_range)
        out = out.reshape(lead + (self.out_features,))
        return Tensor(out) if tensor_in else out

    def nbytes(self) -> int:
        """Bytes the layer stores: int8 weights, scales, and the float32 bias."""
        return int(self.weight_q.nbytes + self.weight_scale.nbytes + (0 if self.bias is None else self.bias.nbytes))

    def dequantized_weight(self) -> np.ndarray:
        """The float32 weight (in, out) the int8 values stand for."""
        return dequantize(self.weight_q, self.weight_params)

    def extra_repr(self):
        """``in_features=..., out_features=..., int8`` for repr()."""
        act = f", activation={self.activation}" if self.activation else ""
        rr = ", reduce_range" if self.reduce_range else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, int8{act}{rr}"


def quantize_model(model: Layer, per_channel: bool = True, skip=(), reduce_range: bool = True) -> list[str]:
    """Replace every plain ``Linear`` in ``model`` (except names in ``skip``) by a QuantizedLinear
    in place; returns the replaced names. ``per_channel`` and ``reduce_range`` (7-bit
    activations by default, as PyTorch's quantize_dynamic; False for 8 bits) as in
    ``QuantizedLinear.from_linear``. Only sub-layers are replaced (a bare Linear passed as
    ``model`` is not)."""
    targets = [(name, m) for name, m in model.named_modules() if type(m) is Linear and name and name not in skip]
    for name, linear in targets:
        model.set_submodule(name, QuantizedLinear.from_linear(linear, per_channel, reduce_range=reduce_range))
    return [name for name, _ in targets]


def model_size_bytes(model: Layer) -> int:
    """Bytes of ``model``'s parameters plus the int8 buffers of its quantized layers."""
    total = sum(p.data.nbytes for p in model.parameters())
    total += sum(m.nbytes() for _, m in model.named_modules() if isinstance(m, QuantizedLinear))
    return int(total)


def size_report(float_model: Layer, quantized_model: Layer) -> dict:
    """{"float_bytes", "quantized_bytes", "reduction"}: ``model_size_bytes`` of
    ``float_model`` and ``quantized_model`` and their ratio."""
    f, q = model_size_bytes(float_model), model_size_bytes(quantized_model)
    return {"float_bytes": f, "quantized_bytes": q, "reduction": f / q if q else float("inf")}
