"""Upstream TinyTorch's module path ``tinytorch.perf.quantization``, as adapters over
``tinytorch.core.quantization`` (one implementation; see docs/compat.md).

  quantize_int8(tensor) -> (q Tensor int8, scale float, zero_point int)
      per-tensor *asymmetric* int8 (upstream's convention), via ``compute_qparams`` and
      ``quantize``. Our range always contains 0 ([min(x,0), max(x,0)]), so for an all-positive
      tensor the scale can differ from upstream's (max - min) / 255.
  dequantize_int8(q, scale, zero_point) -> Tensor     (q - zero_point) * scale
  QuantizedLinear(linear_layer)     ``core.quantization.QuantizedLinear`` built from a Linear
      (per-tensor symmetric weight, real int8 matmul), plus upstream's q_weight,
      weight_zero_point, original_layer, calibrate() and memory_usage().
  quantize_model(model, calibration_data=None) -> None   in place, like upstream.

Owns only upstream's names and conventions, as adapters; assumes core.quantization.
"""
from __future__ import annotations

import numpy as np

from ..core import quantization as _q
from ..core.layers import Linear
from ..core.tensor import BYTES_PER_FLOAT32, MB_TO_BYTES, Tensor  # the one definition

__all__ = ["INT8_MIN_VALUE", "INT8_MAX_VALUE", "INT8_RANGE", "EPSILON", "BYTES_PER_FLOAT32",
           "BYTES_PER_INT8", "MB_TO_BYTES", "quantize_int8", "dequantize_int8", "QuantizedLinear",
           "quantize_model", "verify_quantization_works", "Quantizer"]

INT8_MIN_VALUE = -128
INT8_MAX_VALUE = 127
INT8_RANGE = 256
EPSILON = 1e-8
BYTES_PER_INT8 = 1


def quantize_int8(tensor):
    """Per-tensor asymmetric int8 quantization in upstream's return form.

    Args:
        tensor: float Tensor or array.

    Returns ``(Tensor of int8, scale, zero_point)`` with x ~ (q - zero_point) * scale.
    """
    qp = _q.compute_qparams(tensor, symmetric=False)
    q = _q.quantize(tensor, qp)
    return Tensor(q), float(np.asarray(qp.scale).reshape(-1)[0]), int(np.asarray(qp.zero_point).reshape(-1)[0])


def dequantize_int8(q_tensor, scale: float, zero_point: int) -> Tensor:
    """float32 Tensor ``(q - zero_point) * scale`` (``core.quantization.dequantize``).

    Args:
        q_tensor: int8 Tensor or array from ``quantize_int8``.
        scale: its scale.
        zero_point: its zero point.
    """
    q = np.asarray(q_tensor.data if isinstance(q_tensor, Tensor) else q_tensor)
    qp = _q.QuantParams(np.asarray(scale, dtype=np.float64), np.asarray(zero_point, dtype=np.int64),
                        symmetric=False, axis=None)
    return Tensor(_q.dequantize(q.astype(np.int8), qp).astype(np.float32))


class QuantizedLinear(_q.QuantizedLinear):
    """``core.quantization.QuantizedLinear`` made from a Linear the way upstream does it.

    Args:
        linear_layer: the trained ``Linear`` to quantize (weight per tensor, bias kept float).
    """

    def __init__(self, linear_layer: Linear):
        if not isinstance(linear_layer, Linear):
            raise TypeError(f"QuantizedLinear: expected a Linear, got {type(linear_layer).__name__}")
        qt = _q.quantize_int8(linear_layer.weight.data, symmetric=True, per_channel=False)
        bias = None if linear_layer.bias is None else linear_layer.bias.data
        super().__init__(qt, bias)
        # kept outside the module tree (a callable, not a Layer attribute), so the float
        # weight is not a parameter, state_dict entry or byte of this quantized layer
        self._original = lambda: linear_layer
        self.input_scale = self.input_zero_point = None

    @property
    def original_layer(self) -> Linear:
        """The float ``Linear`` this layer was made from (not a sub-layer)."""
        return self._original()

    @property
    def q_weight(self) -> Tensor:
        """The int8 weight as a Tensor."""
        return Tensor(self.weight_q)

    @property
    def weight_zero_point(self) -> int:
        """0: the weight is quantized symmetrically."""
        return 0

    def calibrate(self, sample_inputs) -> None:
        """Record the asymmetric int8 parameters of ``sample_inputs`` (``input_scale``,
        ``input_zero_point``). Informational: inputs are quantized per call anyway.

        Args:
            sample_inputs: list of Tensors or arrays seen by this layer.
        """
        arr = np.concatenate([np.asarray(x.data if isinstance(x, Tensor) else x, dtype=np.float32).reshape(-1)
                              for x in sample_inputs])
        _, self.input_scale, self.input_zero_point = quantize_int8(arr)

    def memory_usage(self) -> dict:
        """{'original_bytes', 'quantized_bytes', 'compression_ratio'} of this layer."""
        w = self.original_layer.weight.data
        original = w.size * BYTES_PER_FLOAT32 + (0 if self.bias is None else self.bias.size * BYTES_PER_FLOAT32)
        quantized = int(self.nbytes())
        return {"original_bytes": int(original), "quantized_bytes": quantized,
                "compression_ratio": original / quantized if quantized else 1.0}


def quantize_model(model, calibration_data=None) -> None:
    """Replace every ``Linear`` inside ``model`` by a ``QuantizedLinear`` in place (upstream's
    contract: returns None; ValueError for a bare Linear). ``calibration_data`` is accepted
    for upstream code and unused (inputs are quantized per call).

    Args:
        model: a Layer (e.g. Sequential) containing Linear layers.
        calibration_data: optional list of sample inputs (ignored).
    """
    if isinstance(model, Linear):
        raise ValueError("Cannot quantize a single Linear in place; use QuantizedLinear(layer)")
    targets = [(name, m) for name, m in model.named_modules() if type(m) is Linear and name]
    for name, linear in targets:
        model.set_submodule(name, QuantizedLinear(linear))


def verify_quantization_works(original_model, quantized_model) -> dict:
    """Measure the real memory reduction (``core.quantization.model_size_bytes``: float
    parameters plus int8 buffers) of ``quantized_model`` against ``original_model``; returns
    {actual_reduction, original_mb, quantized_mb, verified}; AssertionError below 3.5x
    (upstream's check).

    Args:
        original_model: the float model.
        quantized_model: the same architecture after ``quantize_model``.
    """
    original = _q.model_size_bytes(original_model)
    quantized = _q.model_size_bytes(quantized_model)
    reduction = original / max(quantized, 1)
    result = {"actual_reduction": reduction, "original_mb": original / MB_TO_BYTES,
              "quantized_mb": quantized / MB_TO_BYTES, "verified": reduction >= 3.5}
    assert result["verified"], f"Expected ~4x reduction, got {reduction:.1f}x"
    return result


class Quantizer:
    """Upstream's facade over ``quantize_int8`` / ``dequantize_int8`` for benchmarking."""

    @staticmethod
    def quantize_tensor(tensor):
        """``quantize_int8(tensor)``.

        Args:
            tensor: float Tensor or array.
        """
        return quantize_int8(tensor)

    @staticmethod
    def dequantize_tensor(q_tensor, scale: float, zero_point: int) -> Tensor:
        """``dequantize_int8(q_tensor, scale, zero_point)``.

        Args:
            q_tensor: int8 Tensor.
            scale: its scale.
            zero_point: its zero point.
        """
        return dequantize_int8(q_tensor, scale, zero_point)

    @staticmethod
    def quantize_model(model, calibration_data=None) -> dict:
        """Quantize every parameter of ``model`` per tensor without changing the model;
        returns {quantized_layers: {'param_i': {quantized, scale, zero_point,
        original_shape}}, original_size_mb, quantized_size_mb, compression_ratio}.

        Args:
            model: a Layer.
            calibration_data: accepted for upstream code; unused.
        """
        layers, original, elements = {}, 0, 0
        for i, p in enumerate(model.parameters()):
            q, scale, zp = quantize_int8(p)
            layers[f"param_{i}"] = {"quantized": q, "scale": scale, "zero_point": zp,
                                    "original_shape": p.data.shape}
            original += p.data.nbytes
            elements += p.data.size
        return {"quantized_layers": layers, "original_size_mb": original / MB_TO_BYTES,
                "quantized_size_mb": elements / MB_TO_BYTES,
                "compression_ratio": original / elements if elements else 1.0}

    @staticmethod
    def compare_models(original_model, quantized_info: dict) -> dict:
        """{original_mb, quantized_mb, compression_ratio, memory_saved_mb} from
        ``quantize_model``'s report.

        Args:
            original_model: the float model (unused; upstream's signature).
            quantized_info: the dict ``Quantizer.quantize_model`` returned.
        """
        return {"original_mb": quantized_info["original_size_mb"],
                "quantized_mb": quantized_info["quantized_size_mb"],
                "compression_ratio": quantized_info["compression_ratio"],
                "memory_saved_mb": quantized_info["original_size_mb"] - quantized_info["quantized_size_mb"]}
