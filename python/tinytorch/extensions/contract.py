"""contract: the extension argument contract, in one place for every extension and the template.

Owns the three rules every function of ``tinytorch.extensions`` applies to its arguments
(docs/extending.md, the guide's "Extension Contract"):

  * what may come in: a Tensor or a numpy.ndarray (``array_of``: the array behind it; any
    other type is a TypeError naming the function and the argument);
  * the dtype rule (``kernel_dtype``): float32 and float64 stay, other real dtypes (float16,
    integers, bool) become float32, complex is a TypeError saying "real-valued";
  * what goes out: ndarray in -> ndarray out; any Tensor in -> Tensor out on the autograd
    tape (``any_tensor`` asks, ``as_tensor`` gives the Tensor to record, a differentiable
    cast when the dtype rule converted the input).

Assumes: the core's Tensor, its ``to`` (a recorded cast) and ``from_numpy`` (no copy). The back ends
never import this module (they take arrays).
"""
from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor

__all__ = ["array_of", "kernel_dtype", "as_tensor", "any_tensor"]


def array_of(x, who: str, name: str) -> np.ndarray:
    """The ndarray behind ``x``: ``x.data`` for a Tensor, ``x`` for an ndarray.

    Args:
        x: the argument.
        who: the public function's name, for the message.
        name: the argument's name, for the message.

    Raises:
        TypeError: ``x`` is neither a Tensor nor an ndarray.
    """
    if isinstance(x, Tensor):
        return x.data
    if isinstance(x, np.ndarray):
        return x
    raise TypeError(f"{who}: {name} must be a Tensor or a numpy.ndarray, got {type(x).__name__}")


def kernel_dtype(x: np.ndarray, who: str, name: str = "input") -> np.ndarray:
    """The dtype rule: float32 and float64 stay, other reals become float32.

    Args:
        x: an ndarray.
        who: the public function's name, for the message.
        name: the argument's name, for the message.

    Raises:
        TypeError: ``x`` is complex (or not numeric), naming "real-valued".
    """
    if x.dtype == np.float32 or x.dtype == np.float64:
        return x
    if x.dtype.kind in "fiub":
        return x.astype(np.float32)
    raise TypeError(f"{who}: {name} must be real-valued, got dtype {x.dtype}")


def any_tensor(*args) -> bool:
    """True when any of ``args`` is a Tensor (the result is then a Tensor on the tape)."""
    return any(isinstance(a, Tensor) for a in args)


def as_tensor(x, arr: np.ndarray) -> Tensor:
    """The Tensor to record for argument ``x`` whose array (after the dtype rule) is ``arr``:
    ``x`` itself when its data is ``arr``; a differentiable cast of ``x`` when the dtype rule
    converted it (gradients reach ``x`` in its own dtype); a constant Tensor for an ndarray
    mixed with Tensors.

    Args:
        x: the argument as given (Tensor or ndarray).
        arr: its array after ``kernel_dtype``.
    """
    if isinstance(x, Tensor):
        return x if x.data is arr else x.to(arr.dtype)
    return Tensor.from_numpy(arr)  # no copy; arr passed the dtype rule, so it is real-valued
