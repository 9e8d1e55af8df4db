"""train_ops: the training-step kernels of the CPU back end (runtime/cpu/train_ops*.cpp):
Adam / AdamW over every parameter in one call, embedding gather and scatter-add.

Owns the pointer arrays of tt_adam_step and the calls of tt_embedding_forward / _backward.
Assumes: float32 C-contiguous buffers (declines anything else); integer ids.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import _native
from .. import record_native_path
from .common import F32, I64, address, has_symbol

__all__ = ["adam_step", "embedding", "embedding_backward"]

# --------------------------------------------------------------------------------------
# Training-step kernels: Adam / AdamW over all parameters, embedding gather / scatter-add
# --------------------------------------------------------------------------------------

def _pointers(arrays):
    return (ctypes.c_void_p * len(arrays))(*[address(a) for a in arrays])


def _f32_buffer(a, writeable: bool) -> bool:
    return (type(a) is np.ndarray and a.dtype == F32 and a.flags.c_contiguous and
            (a.flags.writeable or not writeable))


def adam_step(params, grads, exp_avgs, exp_avg_sqs, steps, lr, betas, eps, weight_decay,
              decoupled):
    """Adam / AdamW over every tensor in one tt_adam_step call: ``params``, ``grads``,
    ``exp_avgs``, ``exp_avg_sqs`` and ``steps`` are aligned lists, ``lr``, ``betas``,
    ``eps``, ``weight_decay`` and ``decoupled`` as in the NumPy back end's ``adam_step``.
    Declines unless every array is float32, C-contiguous and each tensor's four arrays have
    one size (the parameter and moments writeable)."""
    if not has_symbol("tt_adam_step") or not params:
        return NotImplemented
    for p, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        if not (_f32_buffer(p, True) and _f32_buffer(g, False) and _f32_buffer(m, True) and
                _f32_buffer(v, True) and p.size == g.size == m.size == v.size):
            return NotImplemented
    count = len(params)
    numel = (ctypes.c_int64 * count)(*[p.size for p in params])
    step_counts = (ctypes.c_int64 * count)(*[int(t) for t in steps])
    _native.check(_native.lib.tt_adam_step(count, _pointers(params), _pointers(grads), _pointers(exp_avgs),
                                    _pointers(exp_avg_sqs), numel, step_counts, float(lr),
                                    float(betas[0]), float(betas[1]), float(eps),
                                    float(weight_decay), int(bool(decoupled))),
           "adam_step")
    record_native_path()
    return None


def embedding(weight, ids):
    """``weight[ids]`` (``weight`` a float32 C-contiguous (V, D) table, ``ids`` integers)
    through tt_embedding_forward; declines other dtypes and layouts."""
    if not (has_symbol("tt_embedding_forward") and _f32_buffer(weight, False) and weight.ndim == 2):
        return NotImplemented
    flat = np.ascontiguousarray(ids, dtype=I64).reshape(-1)
    v, d = weight.shape
    out = np.empty(ids.shape + (d,), dtype=F32)
    _native.check(_native.lib.tt_embedding_forward(address(weight), v, d, address(flat), flat.size,
                                            address(out)), "embedding")
    record_native_path()
    return out


def embedding_backward(grad, ids, vocab):
    """The (``vocab``, D) scatter-add of float32 ``grad`` (ids.shape + (D,)) into the rows
    ``ids`` picks, through tt_embedding_backward (threads split the columns); declines
    other dtypes."""
    if not (has_symbol("tt_embedding_backward") and type(grad) is np.ndarray and grad.dtype == F32):
        return NotImplemented
    d = grad.shape[-1]
    g = np.ascontiguousarray(grad).reshape(-1, d)
    flat = np.ascontiguousarray(ids, dtype=I64).reshape(-1)
    out = np.empty((vocab, d), dtype=F32)
    _native.check(_native.lib.tt_embedding_backward(address(g), address(flat), flat.size, d,
                                             address(out), vocab, 0), "embedding_backward")
    record_native_path()
    return out
