"""Losses: MSELoss, CrossEntropyLoss, BCEWithLogitsLoss (PyTorch semantics).

What this file owns: each loss as a ``Layer`` (called as ``loss_fn(prediction, target)``)
backed by one fused ``Function`` whose backward is the closed form, which is both
faster and more accurate than differentiating the composed ops.

Inputs: predictions are Tensors (or arrays); targets are Tensors or arrays. A target gets
a gradient only when it is a Tensor that requires grad (MSE, BCE: distillation-style soft
targets); class indices never do. Shapes and dtypes are checked and a mismatch raises
ValueError / TypeError naming both shapes or the dtype (upstream's words: "matching,
nonempty" shapes); upstream's ``BinaryCrossEntropyLoss`` also refuses empty inputs (MSE keeps
PyTorch's answer there), and
``BinaryCrossEntropyLoss`` refuses predictions or targets that are not finite values in [0, 1].
A cross-entropy target that is not a class index raises ``ClassIndexError``, both a
TypeError (ours) and a ValueError (upstream's).

  * ``CrossEntropyLoss(ignore_index=-100, label_smoothing=0.0, reduction="mean")``:
    logits (N, C) or (C,) or (N, C, d1, ...) with integer class targets (N,) / () /
    (N, d1, ...). Log-sum-exp is shifted by the row maximum. With label smoothing the
    target distribution is (1 - eps) * one_hot + eps / C. "mean" divides by the number
    of targets that are not ``ignore_index``.
  * ``BCEWithLogitsLoss(reduction="mean", pos_weight=None)``: the stable form
    ``(1 - y) x + w * softplus(-x)`` with ``w = 1 + (pos_weight - 1) y``.
  * ``MSELoss(reduction="mean")``: prediction and target must have the same shape.

What it assumes: the kernel door (core/acceleration.py) for cross-entropy's forward and
backward (``acceleration.cross_entropy`` / ``cross_entropy_backward``) and for
``stable_sigmoid``; ``Layer`` (layers.py), ``Tensor`` (tensor.py) and the engine's Function
contract; NumPy for the MSE and BCE formulas.
"""
from __future__ import annotations

import numpy as np

from . import acceleration as _acc
from .activations import log_softmax as _log_softmax
from .autograd import Function
from .layers import Layer
from .tensor import Tensor

__all__ = ["MSELoss", "CrossEntropyLoss", "BCEWithLogitsLoss", "mse_loss", "cross_entropy",
           "binary_cross_entropy_with_logits", "BinaryCrossEntropyLoss", "log_softmax", "EPSILON",
           "ClassIndexError"]


class ClassIndexError(TypeError, ValueError):
    """Cross-entropy targets that are not class indices (fractional, NaN or inf values): a
    TypeError, as this project raised first, and a ValueError, as upstream TinyTorch raises."""

EPSILON = 1e-7  # BinaryCrossEntropyLoss's clipping margin (upstream TinyTorch's name and value)

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, who):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{who}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _pred(x, who):
    if not isinstance(x, Tensor):
        x = Tensor(x)
    if x.data.dtype.kind != "f":
        raise TypeError(f"{who}: predictions must be floating point, got {x.data.dtype}")
    return x


def _target_array(y):
    return y.data if isinstance(y, Tensor) else np.asarray(y)


def _check_same_shape(who, pred_shape, target_shape, what="prediction", allow_empty=False):
    """ValueError unless prediction and target shapes are equal (a column of predictions
    against a vector of labels would broadcast to an N x N loss) and, unless allow_empty,
    nonempty."""
    if pred_shape != target_shape or not (allow_empty or int(np.prod(pred_shape))):
        raise ValueError(f"{who}: {what} and target need matching, nonempty shapes, got "
                         f"{what} shape {pred_shape} and target shape {target_shape}")


def _reduce_forward(loss, reduction, count=None):
    if reduction == "none":
        return loss
    total = loss.sum(dtype=np.float64)
    if reduction == "sum":
        return np.asarray(total, dtype=loss.dtype)
    n = loss.size if count is None else count
    return np.asarray(total / n if n else np.nan, dtype=loss.dtype)


def _reduce_scale(g, reduction, count):
    """Per-element upstream gradient for the reductions above."""
    if reduction == "none":
        return g
    if reduction == "mean" and count == 0:
        # mean over nothing (e.g. every target ignored): the loss is NaN, as in PyTorch,
        # but no element contributed, so the gradient is zero, not NaN
        return np.zeros_like(g)
    return g / count if reduction == "mean" else g


# ============================================================================ MSE

class MSEFunction(Function):
    def forward(self, pred, target, reduction):
        self.diff = pred - target
        self.reduction = reduction
        return _reduce_forward(self.diff * self.diff, reduction)

    def backward(self, g):
        scale = _reduce_scale(g, self.reduction, self.diff.size)
        return (2 * self.diff * scale).astype(self.diff.dtype, copy=False), None, None


def mse_loss(pred, target, reduction: str = "mean"):
    """Mean squared error ``(pred - target) ** 2``, reduced.

    Args:
        pred: floating-point Tensor (or array) of any shape.
        target: Tensor or array of the same shape (cast to pred's dtype). It gets a
            gradient only if it is a Tensor that requires grad.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (per-element losses).
    """
    _check_reduction(reduction, "MSELoss")
    pred = _pred(pred, "MSELoss")
    t = _target_array(target)
    # An empty batch: its mean is 0/0, and a NaN loss would poison training silently (PyTorch
    # returns it with a warning; upstream refuses): refused. Its sum (0) and per-element
    # losses (an empty array) are well defined and kept.
    _check_same_shape("MSELoss", pred.data.shape, t.shape, allow_empty=reduction != "mean")
    if t.dtype.kind not in "fiub":
        raise TypeError(f"MSELoss: target dtype {t.dtype} is not numeric")
    t = t.astype(pred.data.dtype, copy=False)
    if isinstance(target, Tensor) and target.requires_grad:
        # a differentiable target (rare, e.g. distillation): compose so both get gradients
        d = pred - target
        sq = d * d
        return sq.mean() if reduction == "mean" else sq.sum() if reduction == "sum" else sq
    return MSEFunction.apply(pred, t, reduction)


class MSELoss(Layer):
    """Mean squared error as a layer: ``loss_fn(pred, target)`` is ``mse_loss``.

    Args:
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
    """

    def __init__(self, reduction: str = "mean"):
        _check_reduction(reduction, "MSELoss")
        self.reduction = reduction

    def forward(self, pred, target):
        """``mse_loss(pred, target, reduction)``; pred and target have the same shape."""
        return mse_loss(pred, target, self.reduction)


# ============================================================================ cross-entropy

class CrossEntropyFunction(Function):
    """Rows of logits (M, C) and int targets (M,), already flattened; log-softmax and NLL
    fused in ``acceleration.cross_entropy`` (the runtime's kernel for float32), which keeps
    only each row's log-sum-exp for the backward."""

    def forward(self, logits, target, ignore_index, label_smoothing, reduction):
        loss, lse = _acc.cross_entropy(logits, target, ignore_index, label_smoothing)
        self.count = int((target != ignore_index).sum())
        self.logits, self.target, self.lse = logits, target, lse
        self.ignore_index, self.smoothing, self.reduction = ignore_index, label_smoothing, reduction
        return _reduce_forward(loss, reduction, self.count)

    def backward(self, g):
        scale = _reduce_scale(g, self.reduction, self.count)
        rows = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, dtype=self.logits.dtype),
                                                    self.target.shape))
        grad = _acc.cross_entropy_backward(self.logits, self.target, self.lse, rows,
                                           self.ignore_index, self.smoothing)
        return grad, None


def cross_entropy(logits, target, ignore_index: int = -100, label_smoothing: float = 0.0,
                  reduction: str = "mean"):
    """Cross-entropy between unnormalised ``logits`` and integer class targets
    (``torch.nn.functional.cross_entropy``), log-softmax and NLL fused.

    Args:
        logits: floating-point Tensor of shape (N, C), (C,) or (N, C, d1, ...).
        target: integer class indices of shape (N,), () or (N, d1, ...), values in
            [0, C) or ``ignore_index``; a float array of whole numbers is read as class
            indices (upstream's float32 labels), other floats are a TypeError. Never
            receives a gradient.
        ignore_index: target value that contributes neither loss nor gradient.
        label_smoothing: eps in [0, 1]; the target distribution becomes
            (1 - eps) * one_hot + eps / C.
        reduction: ``"mean"`` (over the non-ignored targets), ``"sum"`` or ``"none"``
            (a loss of the target's shape).
    """
    _check_reduction(reduction, "CrossEntropyLoss")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
    logits = _pred(logits, "CrossEntropyLoss")
    t = _target_array(target)
    if t.dtype.kind == "f" and np.all(np.isfinite(t)) and np.all(t == np.round(t)):
        t = t.astype(np.int64)  # upstream writes labels as float Tensors: whole numbers are class ids
    if t.dtype.kind not in "iu":
        raise ClassIndexError(f"CrossEntropyLoss: targets must be finite integer class indices (one class "
                              f"index per sample; whole-number floats are accepted), got dtype {t.dtype} "
                              "with non-integral, NaN or inf values (cast with .astype(np.int64))")
    shape = logits.data.shape
    if len(shape) == 0:
        raise ValueError("CrossEntropyLoss: logits must have a class dimension, got a 0-d tensor")
    classes = shape[1] if len(shape) >= 2 else shape[0]
    if classes == 0:
        raise ValueError(f"CrossEntropyLoss: logits of shape {shape} and targets of shape {t.shape} "
                         "must be nonempty: at least one class")
    if reduction == "mean" and t.size == 0:  # the mean of no samples is 0/0 (see mse_loss)
        raise ValueError(f"CrossEntropyLoss: logits of shape {shape} and targets of shape {t.shape} "
                         "hold no sample: the mean over an empty batch is undefined (reduction='sum' "
                         "gives 0)")
    expected = shape[:1] + shape[2:] if len(shape) >= 2 else ()
    if t.shape != expected:
        raise ValueError(f"CrossEntropyLoss: logits of shape {shape} need targets of shape {expected}, "
                         f"got {t.shape}")
    c = shape[1] if len(shape) >= 2 else shape[0]
    bad = (t != ignore_index) & ((t < 0) | (t >= c))
    if bad.any():
        raise ValueError(f"CrossEntropyLoss: target {t[bad].flat[0]} is out of range for {c} classes")
    if len(shape) == 1:
        rows = logits.reshape(1, c)
    elif len(shape) == 2:
        rows = logits
    else:
        rows = logits.permute((0,) + tuple(range(2, len(shape))) + (1,)).reshape(-1, c)
    out = CrossEntropyFunction.apply(rows, t.reshape(-1), ignore_index=ignore_index,
                                     label_smoothing=float(label_smoothing), reduction=reduction)
    if reduction == "none":
        out = out.reshape(expected)
    return out


class CrossEntropyLoss(Layer):
    """Cross-entropy as a layer: ``loss_fn(logits, target)`` is ``cross_entropy``.

    Args:
        ignore_index: target value that is skipped (default -100, as in PyTorch).
        label_smoothing: eps in [0, 1] mixed into the one-hot targets.
        reduction: ``"mean"`` (over non-ignored targets), ``"sum"`` or ``"none"``.
    """

    def __init__(self, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"):
        _check_reduction(reduction, "CrossEntropyLoss")
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.ignore_index, self.label_smoothing, self.reduction = ignore_index, label_smoothing, reduction

    def forward(self, logits, target):
        """``cross_entropy(logits, target, ...)``: logits (N, C) or (N, C, d1, ...),
        integer target (N,) or (N, d1, ...)."""
        return cross_entropy(logits, target, self.ignore_index, self.label_smoothing, self.reduction)


# ============================================================================ BCE with logits

class BCEWithLogitsFunction(Function):
    def forward(self, x, y, pos_weight, reduction):
        w = 1.0 if pos_weight is None else 1.0 + (pos_weight - 1.0) * y
        softplus_neg = np.logaddexp(0, -x)  # log(1 + exp(-x)), stable both ways
        loss = ((1.0 - y) * x + w * softplus_neg).astype(x.dtype, copy=False)
        self.x, self.y, self.w, self.reduction = x, y, w, reduction
        if self.needs_input_grad[1]:
            self.softplus_neg, self.pos_weight = softplus_neg, pos_weight
        return _reduce_forward(loss, reduction)

    def backward(self, g):
        x = self.x
        scale = _reduce_scale(g, self.reduction, x.size)
        gx = gy = None
        if self.needs_input_grad[0]:
            grad = (1.0 - self.y) - self.w * (1.0 - _acc.stable_sigmoid(x))
            gx = (grad * scale).astype(x.dtype, copy=False)
        if self.needs_input_grad[1]:  # d/dy of (1 - y) x + w softplus(-x), w = 1 + (pw - 1) y
            dy = -x if self.pos_weight is None else -x + (self.pos_weight - 1.0) * self.softplus_neg
            gy = (dy * scale).astype(x.dtype, copy=False)
        return gx, gy, None, None


def binary_cross_entropy_with_logits(logits, target, reduction: str = "mean", pos_weight=None):
    """Binary cross-entropy on raw ``logits`` (sigmoid fused in, stable for large |x|).

    Args:
        logits: floating-point Tensor of any shape.
        target: probabilities in [0, 1] (Tensor or array, numeric) of the same shape; a
            Tensor that requires grad gets one.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        pos_weight: optional weight of the positive term, broadcastable to the logits
            (e.g. one value per class, (C,)): > 1 raises recall.
    """
    _check_reduction(reduction, "BCEWithLogitsLoss")
    logits = _pred(logits, "BCEWithLogitsLoss")
    t = _target_array(target)
    if t.shape != logits.data.shape:
        raise ValueError(f"BCEWithLogitsLoss: logits and target need matching shapes, got logits shape "
                         f"{logits.data.shape} and target shape {t.shape}")
    if t.dtype.kind not in "fiub":
        raise TypeError(f"BCEWithLogitsLoss: target dtype {t.dtype} is not numeric")
    pw = None
    if pos_weight is not None:
        pw = np.asarray(pos_weight.data if isinstance(pos_weight, Tensor) else pos_weight, dtype=logits.data.dtype)
        np.broadcast_shapes(pw.shape, logits.data.shape)
    if isinstance(target, Tensor) and target.requires_grad:  # soft targets that learn
        y = target if target.dtype == logits.data.dtype else target.astype(logits.data.dtype)
    else:
        y = t.astype(logits.data.dtype, copy=False)
    return BCEWithLogitsFunction.apply(logits, y, pw, reduction)


class BCEWithLogitsLoss(Layer):
    """Binary cross-entropy with logits as a layer (``binary_cross_entropy_with_logits``).

    Args:
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        pos_weight: optional positive-class weight broadcastable to the logits.
    """

    def __init__(self, reduction: str = "mean", pos_weight=None):
        _check_reduction(reduction, "BCEWithLogitsLoss")
        self.reduction = reduction
        self.pos_weight = None if pos_weight is None else np.asarray(
            pos_weight.data if isinstance(pos_weight, Tensor) else pos_weight)

    def forward(self, logits, target):
        """The loss of ``logits`` against same-shaped probability ``target``."""
        return binary_cross_entropy_with_logits(logits, target, self.reduction, self.pos_weight)


# ------------------------------------------------ upstream TinyTorch names (docs/compat.md)

def log_softmax(x, dim: int = -1):
    """Upstream TinyTorch's ``losses.log_softmax(x, dim)``: ``activations.log_softmax`` with
    the axis spelled ``dim`` (one implementation, differentiable).

    Args:
        x: Tensor of scores.
        dim: the axis to normalise over (default the last).
    """
    return _log_softmax(x if isinstance(x, Tensor) else Tensor(x), dim)


class BinaryCrossEntropyLoss(Layer):
    """Binary cross-entropy on *probabilities* (upstream TinyTorch's loss; prefer
    ``BCEWithLogitsLoss`` on logits). ``p`` is clipped to [eps, 1 - eps] and turned into the
    logit log(p) - log(1 - p), then ``binary_cross_entropy_with_logits`` computes
    -(t log p + (1 - t) log(1 - p)): one implementation, differentiable through the clip.

    Args:
        eps: clipping margin that keeps log finite (upstream's EPSILON, 1e-7).
        reduction: ``"mean"`` (default, upstream's only mode), ``"sum"`` or ``"none"``.
    """

    def __init__(self, eps: float = EPSILON, reduction: str = "mean"):
        _check_reduction(reduction, "BinaryCrossEntropyLoss")
        if not 0.0 < eps < 0.5:
            raise ValueError(f"BinaryCrossEntropyLoss: eps must be in (0, 0.5), got {eps}")
        self.eps, self.reduction = float(eps), reduction

    def forward(self, predictions, targets):
        """The loss of probabilities ``predictions`` against same-shaped ``targets`` in [0, 1]
        (ValueError for other shapes, an empty input, or values that are not finite values
        in [0, 1]: raw scores belong in ``BCEWithLogitsLoss``)."""
        p = predictions if isinstance(predictions, Tensor) else Tensor(predictions)
        t = _target_array(targets)
        _check_same_shape("BinaryCrossEntropyLoss", p.data.shape, t.shape, "predictions")
        for name, v in (("predictions", p.data), ("targets", t)):
            if v.dtype.kind in "fc" and not np.all((v >= 0) & (v <= 1)):  # NaN fails too
                bad = v[~((v >= 0) & (v <= 1))].flat[0]
                raise ValueError(f"BinaryCrossEntropyLoss: {name} must be finite values in [0, 1] "
                                 f"(probabilities; use BCEWithLogitsLoss for raw scores), got {bad}")
            if v.dtype.kind in "iu" and not np.all((v >= 0) & (v <= 1)):
                raise ValueError(f"BinaryCrossEntropyLoss: {name} must be finite values in [0, 1], "
                                 f"got {v[(v < 0) | (v > 1)].flat[0]}")
        p = p.clip(self.eps, 1.0 - self.eps)
        logits = p.log() - (1.0 - p).log()
        return binary_cross_entropy_with_logits(logits, targets, self.reduction)
