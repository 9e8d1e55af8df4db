"""gpu_matmul: what ``cuda_matmul`` and ``mps_matmul`` share on the host side.

Owns the operands' contract (``host_operands``: Tensor or ndarray, the dtype rule) and the
CPU fallback rule (``cpu_fallback``): a host product goes to the device only as 2-D float32
operands while the device's back end routes the op. Any other product runs ``simd_matmul``
(the CPU door) and the back end's ``LastRun`` files "cpu" with the reason: the back end's own
(no library, no device, switched off), a batched product, or float64 (kept on the CPU so its
precision is kept).

Assumes: ``cpu_fallback`` gets arrays that passed the dtype rule, so float32 or float64;
shape errors are the caller's (after this rule, as before).
"""
from __future__ import annotations

import numpy as np

from .contract import array_of, kernel_dtype
from .simd_ops import simd_matmul

__all__ = ["host_operands", "cpu_fallback"]


def host_operands(a, b, who: str) -> tuple:
    """(a's array, b's array) after the argument contract: a Tensor or an ndarray each
    (TypeError otherwise), the dtype rule applied (``contract.kernel_dtype``).

    Args:
        a: the first operand as given.
        b: the second operand as given.
        who: the public function's name, for the messages.
    """
    return (kernel_dtype(array_of(a, who, "a"), who, "a"),
            kernel_dtype(array_of(b, who, "b"), who, "b"))


def cpu_fallback(a, b, a_arr: np.ndarray, b_arr: np.ndarray, last_run, *, usable: bool,
                 where: str, computes: str):
    """The CPU result of ``a @ b`` (with "cpu" and the reason filed in ``last_run``) when the
    product cannot go to the device; None when it can.

    Args:
        a: the first operand as given (Tensor or ndarray): the CPU path keeps its kind.
        b: the second operand as given.
        a_arr: ``a``'s array after the dtype rule.
        b_arr: ``b``'s array after the dtype rule.
        last_run: the back end's ``devices.LastRun`` (its ``why_not`` gives the reason when
            the device is not usable).
        usable: whether the back end routes the op now.
        where: the device's kernels in a sentence ("the CUDA stages", "MPS").
        computes: the same with its verb ("the CUDA stages compute", "MPS computes").
    """
    if not usable:
        why = last_run.why_not()
    elif a_arr.ndim != 2 or b_arr.ndim != 2:
        why = f"only 2-D products run on {where}; batched products run on the CPU"
    elif a_arr.dtype != np.float32 or b_arr.dtype != np.float32:
        why = f"float64 stays on the CPU path ({computes} in float32)"
    else:
        return None
    out = simd_matmul(a, b)
    last_run.record("cpu", why)
    return out
