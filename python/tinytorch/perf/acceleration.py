"""Upstream TinyTorch's module path ``tinytorch.perf.acceleration``: the accelerated kernels
as Tensor functions over the one kernel door here, ``tinytorch.core.acceleration`` (native
runtime when loaded, NumPy otherwise). See docs/compat.md.

  vectorized_matmul(a, b)             Tensor @ Tensor through ``core.acceleration.matmul``
  fused_gelu(x)                       GELU, tanh form (``core.acceleration.bias_gelu``)
  tiled_matmul(a, b, tile_size=64)    the cache-blocked teaching loop ``core.teaching.tiled_matmul``

These return plain Tensors without autograd history, as upstream's do; use ``a @ b`` and
``activations.gelu`` in models.

Owns only upstream's names, as adapters; assumes the kernel door and core.teaching.
"""
from __future__ import annotations

import numpy as np

from ..core import acceleration as _acc
from ..core.teaching import tiled_matmul as _tiled
from ..core.tensor import BYTES_PER_FLOAT32, Tensor  # the one definition

__all__ = ["DEFAULT_WARMUP_ITERATIONS", "DEFAULT_TIMING_ITERATIONS", "BYTES_PER_FLOAT32",
           "vectorized_matmul", "fused_gelu", "tiled_matmul"]

DEFAULT_WARMUP_ITERATIONS = 2
DEFAULT_TIMING_ITERATIONS = 5


def _arr(x) -> np.ndarray:
    return _acc.promote_to_float(x.data if isinstance(x, Tensor) else x)


def _check_matmul(a: np.ndarray, b: np.ndarray, who: str) -> None:
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"{who}: needs 2-D or batched tensors, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-2]:
        raise ValueError(f"{who}: inner dimensions differ: {a.shape} @ {b.shape}")


def vectorized_matmul(a, b) -> Tensor:
    """``a @ b`` for Tensors (or arrays) of shape [..., M, K] and [..., K, N];
    ValueError for fewer than 2 dimensions or mismatched inner sizes.

    Args:
        a: left operand.
        b: right operand.
    """
    x, y = _arr(a), _arr(b)
    _check_matmul(x, y, "vectorized_matmul")
    if x.ndim == 2 and y.ndim == 2:
        return Tensor(_acc.matmul(x, y))
    return Tensor(np.matmul(x, y))


def fused_gelu(x) -> Tensor:
    """GELU(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in one pass
    (``core.acceleration.bias_gelu`` without a bias).

    Args:
        x: Tensor or array.
    """
    return Tensor(_acc.bias_gelu(_arr(x), None))


def tiled_matmul(a, b, tile_size: int = 64) -> Tensor:
    """``a @ b`` for 2-D Tensors computed tile by tile (``core.teaching.tiled_matmul``).

    Args:
        a: [M, K] Tensor or array.
        b: [K, N] Tensor or array.
        tile_size: edge of the square tiles (default 64).
    """
    x, y = _arr(a), _arr(b)
    _check_matmul(x, y, "tiled_matmul")
    if x.ndim != 2 or y.ndim != 2:
        return Tensor(np.matmul(x, y))
    return Tensor(_tiled(x, y, tile=int(tile_size)))
