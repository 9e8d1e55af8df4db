"""Extension template: a GEMM with the scale folded in, ``scaled_matmul(a, b, alpha)``.

Bottleneck it removes: memory traffic on the GEMM output. Written as ``alpha * (a @ b)``,
NumPy first writes the M x N product to memory, then reads all of it back and writes it
again to apply the scale: two extra passes over the largest array of the operation (in
attention, ``Q K^T / sqrt(d)`` is exactly this shape of work). The runtime's GEMM takes
``alpha`` as an argument and applies it in registers while each output tile is stored,
so the scale costs nothing. The backward pass has the same structure
(``grad_a = alpha * g b^T``, ``grad_b = alpha * a^T g``) and uses the same trick with the
GEMM's transpose flags instead of materialising transposed copies.

This file is the worked example of the four-part extension contract
(``docs/extending.md``); copy it to start a new extension:

  1. Systems framing: the paragraph above (which resource, why, by how much).
  2. Tensor/ndarray interoperability: ``scaled_matmul`` returns an ndarray for ndarray
     inputs and a Tensor (on the autograd tape) when any input is a Tensor.
  3. Autograd transparency: ``ScaledMatmulFunction`` defines ``forward`` and ``backward``
     on NumPy arrays; ``Function.apply`` records it.
  4. Graceful fallback, chosen at call time and reported: the native path runs when the
     registry routes the op (the runtime library is loaded and the package's switch is on)
     and the inputs are float32; otherwise NumPy runs, here. The switch and the report are
     the package's own (``tinytorch.backends``, re-exported by the kernel door
     ``tinytorch.core.acceleration``): ``use_native(False)`` (or
     ``TINYTORCH_DISABLE_NATIVE=1``) forces the fallback so tests can compare both, and
     ``last_path()`` names what ran ("native:sgemm:avx2", "numpy").

The native half is a back end, added the way every back end is (docs/architecture.md, "How
to add a back end"): one folder, ``tinytorch/backends/template/``, owning the probe, the
ctypes call of ``tt_sgemm`` and the report, and ending in one registration line,
``register("template", probe=probe, ops={"scaled_matmul": scaled_gemm}, ...)``; one test
file, ``tests/extensions/test_template.py``. This file only asks the registry
(``backends.routes("scaled_matmul")``) and never touches the C ABI. An extension that only
needs the shipped kernels calls the door's ``gemm``/``matmul`` instead and adds no back end.

The course template's own worked examples (``CustomScaledShift``, ``custom_scaled_shift``,
``CustomResidualBlock``, ``CustomGradientTransform``, ``has_custom_hardware``,
``custom_accelerated_op``) live in ``template_examples.py`` and are re-exported here, so
``from tinytorch.extensions.template import CustomResidualBlock`` works as upstream.

Shapes: ``a`` is (..., K) (leading axes are folded into rows, like ``Linear``), ``b`` is
(K, N); the result is (..., N). Import never fails: the runtime is looked up lazily.

Assumes: the registry's "scaled_matmul" route (none when the runtime is missing or switched
off) and the argument contract of contract.py.
"""
from __future__ import annotations

import numpy as np

from .. import backends as _backends
from ..backends.template import OP as _OP  # "scaled_matmul", the op backends/template/ serves
from ..core.acceleration import last_path, record_path
from ..core.autograd import Function
from ..core.tensor import Tensor
from .contract import any_tensor, array_of, as_tensor
from .template_examples import (CustomGradientTransform, CustomResidualBlock, CustomScaledShift,
                                custom_accelerated_op, custom_scaled_shift, has_custom_hardware)

__all__ = ["scaled_matmul", "ScaledMatmulFunction", "last_path",
           "CustomScaledShift", "custom_scaled_shift", "CustomResidualBlock",
           "CustomGradientTransform", "has_custom_hardware", "custom_accelerated_op"]


def _gemm(a2: np.ndarray, b2: np.ndarray, alpha: float, trans_a: bool, trans_b: bool) -> np.ndarray:
    """alpha * op(a2) @ op(b2) for 2-D arrays: the first back end serving "scaled_matmul"
    that takes the call (backends/template/: float32 only), or NumPy."""
    for scaled_gemm in _backends.routes(_OP):  # empty when the runtime or the switch is off
        out = scaled_gemm(a2, b2, alpha, trans_a, trans_b)
        if out is not NotImplemented:
            return out
    record_path("numpy")
    x = a2.T if trans_a else a2
    y = b2.T if trans_b else b2
    out = x @ y
    out *= np.asarray(alpha, dtype=out.dtype)  # in place: the fallback still avoids a third array
    return out


def _rows(lead: tuple) -> int:
    # explicit row count: reshape(-1, 0) is ambiguous for empty arrays
    return int(np.prod(lead, dtype=np.int64))


class ScaledMatmulFunction(Function):
    """out = alpha * a @ b with a: (..., K), b: (K, N)."""

    def forward(self, a, b, alpha):
        """``alpha * a @ b`` for arrays a (..., K) and b (K, N); ``alpha`` a Python float
        applied inside the GEMM (no extra pass)."""
        lead = a.shape[:-1]
        a2 = a.reshape(_rows(lead), a.shape[-1])
        self.a2, self.b, self.alpha, self.lead = a2, b, alpha, lead
        out = _gemm(a2, b, alpha, False, False)
        return out.reshape(lead + (b.shape[1],))

    def backward(self, grad_output):
        """(alpha grad_output b^T, alpha a^T grad_output), each one GEMM with alpha folded
        in; None for alpha."""
        # The door's matmul_backward has no alpha: calling it and scaling afterwards would
        # cost the extra pass over each gradient that this file exists to remove. So the
        # two GEMMs of the matmul backward go through the op's own route, alpha folded in.
        g2 = grad_output.reshape(_rows(self.lead), grad_output.shape[-1])
        need_a, need_b = self.needs_input_grad[0], self.needs_input_grad[1]
        grad_a = grad_b = None
        if need_a:
            grad_a = _gemm(g2, self.b, self.alpha, False, True).reshape(self.lead + (self.b.shape[0],))
        if need_b:
            grad_b = _gemm(self.a2, g2, self.alpha, True, False)
        return grad_a, grad_b, None


def _check(a: np.ndarray, b: np.ndarray, alpha) -> float:
    if a.ndim < 1 or b.ndim != 2:
        raise ValueError(f"scaled_matmul: a must be (..., K) and b must be (K, N); "
                         f"got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[0]:
        raise ValueError(f"scaled_matmul: inner sizes differ: a is {a.shape} (K={a.shape[-1]}), "
                         f"b is {b.shape} (K={b.shape[0]})")
    if a.dtype.kind != "f" or b.dtype.kind != "f":
        raise TypeError(f"scaled_matmul: floating-point inputs required, got {a.dtype} and {b.dtype}")
    if isinstance(alpha, (Tensor, np.ndarray)) or not np.isscalar(alpha):
        raise TypeError(f"scaled_matmul: alpha must be a Python number, got {type(alpha).__name__}")
    return float(alpha)


def scaled_matmul(a, b, alpha: float = 1.0):
    """``alpha * a @ b``. ndarray inputs give an ndarray; any Tensor input gives a Tensor
    that records the operation for backward.

    ``a`` is (..., K), ``b`` (K, N), both floating point (Tensors or arrays); ``alpha`` a
    Python number. Returns (..., N)."""
    # The package's argument contract (extensions/contract.py): Tensor or ndarray in.
    a_arr = array_of(a, "scaled_matmul", "a")
    b_arr = array_of(b, "scaled_matmul", "b")
    alpha = _check(a_arr, b_arr, alpha)
    if any_tensor(a, b):  # any Tensor in -> a Tensor out, on the tape
        return ScaledMatmulFunction.apply(as_tensor(a, a_arr), as_tensor(b, b_arr), alpha)
    # Plain arrays: no tape, just the kernel (in the common dtype, as NumPy would).
    dtype = np.result_type(a_arr, b_arr)
    a2 = a_arr.astype(dtype, copy=False).reshape(_rows(a_arr.shape[:-1]), a_arr.shape[-1])
    out = _gemm(a2, b_arr.astype(dtype, copy=False), alpha, False, False)
    return out.reshape(a_arr.shape[:-1] + (b_arr.shape[1],))
