"""Compression: magnitude pruning, structured pruning, knowledge distillation, sparsity reports.

The bottleneck it removes
  Most weights of a trained network contribute little; removing them (pruning) or training a
  small network to imitate a large one (distillation) cuts memory and compute. Unstructured
  zeros only pay off with sparse kernels; whole rows/channels removed (structured) shrink the
  dense GEMMs directly.

What this file owns
  prunable_parameters(model)           (name, weight) of every Linear / Conv2d weight; the
                                       model is a Layer, or a plain model class whose
                                       attributes hold Layers (``named_layer_modules``)
  magnitude_prune(model, sparsity, scope="layer"|"global")
      zeroes the ``sparsity`` fraction of weights with the smallest |w|: per layer (each weight
      loses the same fraction) or globally (one threshold across all of them, so layers with
      small weights lose more). Exactly round(sparsity * n) weights are removed; ties are broken
      by position. Returns ``{name: keep_mask}``.
  structured_prune(layer, amount, axis=None)
      zeroes whole output channels with the smallest L2 norm: columns of a Linear weight (in, out)
      and their bias entries, or filters of a Conv2d weight (out, in, kh, kw). ``axis=0`` on a
      Linear prunes input rows instead.
  apply_masks(model, masks)            re-zero pruned weights (call after each optimizer step
                                       when fine-tuning, so pruned weights stay pruned)
  sparsity_report(model), format_sparsity_report(report)
  distillation_loss(student_logits, teacher_logits, labels=None, temperature=4.0, alpha=0.5,
                    t2_scaling=True)
      alpha * T^2 * KL(softmax(t/T) || softmax(s/T)) + (1 - alpha) * CE(s, labels), averaged
      over rows (PyTorch's ``kl_div(..., reduction="batchmean")``); the teacher is a constant.
      One Function whose backward is  alpha * T * (softmax(s/T) - softmax(t/T)) / N
      + (1 - alpha) * (softmax(s) - onehot) / N.  ``t2_scaling=False`` drops the T^2 factor
      (upstream TinyTorch's objective; the soft gradient is then divided by T).
      ``DistillationLoss`` is the Layer form.

What it never does
  It never changes a weight's shape (structured pruning zeroes; physically slicing the layers is
  a separate export step) and never touches biases in unstructured pruning.

What it assumes: prunable weights are the ``weight`` Parameters of ``Linear`` (in, out) and
``Conv2d`` (out, in, kh, kw) layers, edited in place on their arrays; distillation's labels are
class indices (``ClassIndexError``, losses.py's, otherwise); NumPy for the thresholds and
norms, the engine's Function contract for the loss.
"""
from __future__ import annotations

import numpy as np

from .autograd import Function
from .layers import Layer, Linear
from .losses import ClassIndexError
from .tensor import Tensor

__all__ = ["named_layer_modules", "check_fraction", "prunable_parameters", "magnitude_prune", "structured_prune", "apply_masks", "sparsity",
           "sparsity_report", "format_sparsity_report", "distillation_loss", "DistillationLoss"]


def _is_conv(module) -> bool:
    w = getattr(module, "weight", None)
    return "Conv" in type(module).__name__ and isinstance(w, Tensor) and w.ndim == 4


def named_layer_modules(model):
    """``model.named_modules()``; for a plain model class (not a Layer, as upstream course
    code writes them: ``self.layer = Linear(...)``), the Layers held by its attributes
    (directly, or in lists, tuples and dicts), named by attribute."""
    if isinstance(model, Layer):
        yield from model.named_modules()
        return
    if not hasattr(model, "__dict__"):
        raise TypeError(f"{type(model).__name__} is neither a Layer nor a model object with Layer attributes")
    seen = set()

    def walk(prefix, obj):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, Layer):
            for name, module in obj.named_modules():
                yield (f"{prefix}.{name}" if name else prefix), module
        elif isinstance(obj, (list, tuple)):
            for i, item in enumerate(obj):
                yield from walk(f"{prefix}.{i}", item)
        elif isinstance(obj, dict):
            for key, item in obj.items():
                yield from walk(f"{prefix}.{key}", item)

    for attr, value in vars(model).items():
        yield from walk(attr, value)


def prunable_parameters(model) -> list[tuple[str, Tensor]]:
    """(dotted weight name, weight) for every Linear-like and Conv2d layer of ``model``
    (biases, norms and embeddings are not pruned). ``model`` is a Layer, or a plain model
    class whose attributes hold Layers."""
    out = []
    for name, module in named_layer_modules(model):
        if isinstance(module, Linear) or _is_conv(module):
            out.append((f"{name}.weight" if name else "weight", module.weight))
    return out


def check_fraction(value, name: str) -> float:
    """``value`` as a float when it is a number in [0, 1]; ValueError naming ``name`` otherwise."""
    if not isinstance(value, (int, float, np.floating)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a fraction in [0, 1], got {value!r}")
    return float(value)


def _smallest_mask(scores: np.ndarray, k: int) -> np.ndarray:
    """Bool mask that is False at the k smallest scores (stable order breaks ties)."""
    keep = np.ones(scores.size, dtype=bool)
    if k > 0:
        keep[np.argsort(scores.reshape(-1), kind="stable")[:k]] = False
    return keep.reshape(scores.shape)


def magnitude_prune(model: Layer, sparsity: float, scope: str = "layer") -> dict:
    """Zero the smallest-magnitude weights of ``model`` in place; returns
    {weight name: bool keep mask}.

    Args:
        model: a Layer; its Linear and Conv2d weights are pruned.
        sparsity: fraction in [0, 1] of weights to zero (exactly round(sparsity * n)).
        scope: ``"layer"`` prunes each weight by the same fraction; ``"global"`` uses one
            threshold across all of them.
    """
    sparsity = check_fraction(sparsity, "sparsity")
    if scope not in ("layer", "global"):
        raise ValueError(f"scope must be 'layer' or 'global', got {scope!r}")
    params = prunable_parameters(model)
    if not params:
        raise ValueError(f"{type(model).__name__} has no Linear or Conv2d weights to prune")
    masks = {}
    if scope == "layer":
        for name, w in params:
            masks[name] = _smallest_mask(np.abs(w.data), int(round(sparsity * w.data.size)))
    else:
        flat = np.concatenate([np.abs(w.data).reshape(-1).astype(np.float64) for _, w in params])
        keep = _smallest_mask(flat, int(round(sparsity * flat.size)))
        start = 0
        for name, w in params:
            masks[name] = keep[start:start + w.data.size].reshape(w.shape)
            start += w.data.size
    apply_masks(model, masks)
    return masks


def structured_prune(layer: Layer, amount: float, axis: int | None = None) -> np.ndarray:
    """Zero the ``amount`` fraction of output channels (or Linear input rows with axis=0) with the
    smallest L2 norm; returns the bool keep mask over that axis.

    Args:
        layer: a Linear (weight (in, out)) or Conv2d (weight (out, in, kh, kw)); pruned output
            channels also get their bias entries zeroed.
        amount: fraction in [0, 1] of channels to zero.
        axis: None for the output channels (1 for Linear, 0 for Conv2d); 0 on a Linear
            prunes input rows.
    """
    amount = check_fraction(amount, "amount")
    if not (isinstance(layer, Linear) or _is_conv(layer)):
        raise TypeError(f"structured_prune works on Linear and Conv2d layers, got {type(layer).__name__}")
    w = layer.weight.data
    if axis is None:
        axis = 1 if isinstance(layer, Linear) else 0  # the output-channel axis of each layout
    axis = int(axis) % w.ndim
    if isinstance(layer, Linear) and axis not in (0, 1):
        raise ValueError(f"axis must be 0 (input rows) or 1 (output columns) for Linear, got {axis}")
    if _is_conv(layer) and axis != 0:
        raise ValueError(f"Conv2d channel pruning works on output filters (axis 0), got axis {axis}")
    others = tuple(i for i in range(w.ndim) if i != axis)
    norms = np.sqrt(np.sum(w.astype(np.float64) ** 2, axis=others))
    keep = _smallest_mask(norms, int(round(amount * norms.size)))
    shape = [1] * w.ndim
    shape[axis] = -1
    w *= keep.reshape(shape).astype(w.dtype)
    out_axis = 1 if isinstance(layer, Linear) else 0
    bias = getattr(layer, "bias", None)
    if bias is not None and axis == out_axis:
        bias.data *= keep.astype(bias.data.dtype)  # a removed neuron must not keep emitting its bias
    return keep


def apply_masks(model: Layer, masks: dict) -> None:
    """Multiply each named weight of ``model`` by its keep mask, in place. ``masks`` maps
    dotted parameter names to bool arrays of the weight's shape (``magnitude_prune``'s
    result); call after each optimizer step so pruned weights stay zero."""
    params = dict(model.named_parameters()) if isinstance(model, Layer) else dict(prunable_parameters(model))
    for name, mask in masks.items():
        if name not in params:
            raise KeyError(f"apply_masks: the model has no parameter {name!r}")
        p = params[name]
        if mask.shape != p.data.shape:
            raise ValueError(f"apply_masks: mask for {name!r} has shape {mask.shape}, weight has {p.data.shape}")
        p.data *= mask.astype(p.data.dtype)


def sparsity(x) -> float:
    """Fraction of exact zeros in ``x`` (a Tensor or array); 0.0 for an empty one."""
    arr = x.data if isinstance(x, Tensor) else np.asarray(x)
    return float(np.mean(arr == 0)) if arr.size else 0.0


def sparsity_report(model: Layer, prunable_only: bool = True) -> dict:
    """{"layers": {name: {zeros, total, sparsity}}, "total": {...}} over the model's weights.

    ``prunable_only`` (default) counts only Linear/Conv2d weights; False counts every
    parameter, biases included."""
    items = prunable_parameters(model) if prunable_only else list(model.named_parameters())
    layers, zeros, total = {}, 0, 0
    for name, p in items:
        z, n = int(np.count_nonzero(p.data == 0)), int(p.data.size)
        layers[name] = {"zeros": z, "total": n, "sparsity": z / n if n else 0.0}
        zeros += z
        total += n
    return {"layers": layers, "total": {"zeros": zeros, "total": total, "sparsity": zeros / total if total else 0.0}}


def format_sparsity_report(report: dict) -> str:
    """A text table (layer, zeros, total, sparsity %) of a ``sparsity_report`` ``report``."""
    width = max([len(n) for n in report["layers"]] + [5])
    lines = [f"{'layer':<{width}}  {'zeros':>10}  {'total':>10}  sparsity"]
    for name, r in report["layers"].items():
        lines.append(f"{name:<{width}}  {r['zeros']:>10}  {r['total']:>10}  {r['sparsity'] * 100:7.2f}%")
    t = report["total"]
    lines.append(f"{'total':<{width}}  {t['zeros']:>10}  {t['total']:>10}  {t['sparsity'] * 100:7.2f}%")
    return "\n".join(lines)


# ============================================================================ distillation

def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


class DistillationFunction(Function):
    def forward(self, student, teacher, labels, temperature, alpha, t2_scaling):
        n = student.shape[0]
        t = temperature
        self.soft_scale = t * t if t2_scaling else 1.0
        log_ps_t = _log_softmax(student / t)
        log_pt_t = _log_softmax(teacher.astype(student.dtype) / t)
        pt_t = np.exp(log_pt_t)
        soft = self.soft_scale * np.sum(pt_t * (log_pt_t - log_ps_t)) / n
        self.n, self.t, self.alpha = n, t, alpha
        self.ps_t, self.pt_t = np.exp(log_ps_t), pt_t
        loss = soft if labels is None else alpha * soft
        self.labels = labels
        if labels is not None:
            log_ps = _log_softmax(student)
            self.ps = np.exp(log_ps)
            hard = -np.sum(log_ps[np.arange(n), labels]) / n
            loss = loss + (1.0 - alpha) * hard
        return np.asarray(loss, dtype=student.dtype)

    def backward(self, g):
        soft_w = 1.0 if self.labels is None else self.alpha
        grad = soft_w * (self.soft_scale / self.t) * (self.ps_t - self.pt_t) / self.n
        if self.labels is not None:
            hard = self.ps.copy()
            hard[np.arange(self.n), self.labels] -= 1.0
            grad = grad + (1.0 - self.alpha) * hard / self.n
        return (g * grad).astype(self.ps_t.dtype, copy=False), None, None


def distillation_loss(student_logits, teacher_logits, labels=None, temperature: float = 4.0, alpha: float = 0.5,
                      t2_scaling: bool = True):
    """Knowledge-distillation loss (Hinton et al.), a scalar averaged over rows:
    ``alpha * T^2 * KL(softmax(t/T) || softmax(s/T)) + (1 - alpha) * CE(s, labels)``
    (without the ``T^2`` factor when ``t2_scaling`` is False: upstream TinyTorch's objective).

    Args:
        student_logits: Tensor [N, C] or [..., C]; the only input that gets a gradient.
        teacher_logits: Tensor or array of the same shape, treated as a constant.
        labels: optional integer class ids, one per row; without them the loss is the
            soft (KL) term alone and ``alpha`` is not applied.
        temperature: T > 0 softening both distributions (the T^2 keeps gradient scale).
        alpha: weight in [0, 1] of the soft term against the hard cross-entropy.
        t2_scaling: multiply the soft term by T^2 (Hinton's choice, which keeps its gradient
            scale independent of T); False leaves it unscaled.
    """
    if not isinstance(student_logits, Tensor):
        student_logits = Tensor(student_logits)
    teacher = teacher_logits.data if isinstance(teacher_logits, Tensor) else np.asarray(teacher_logits)
    if student_logits.shape != teacher.shape:
        raise ValueError(f"distillation_loss: student logits {student_logits.shape} and teacher logits "
                         f"{teacher.shape} must have the same shape")
    if student_logits.ndim < 1 or student_logits.shape[-1] < 1:
        raise ValueError(f"distillation_loss: logits need a class axis, got shape {student_logits.shape}")
    if not temperature > 0:
        raise ValueError(f"distillation_loss: temperature must be > 0, got {temperature}")
    alpha = check_fraction(alpha, "alpha")
    c = student_logits.shape[-1]
    s = student_logits if student_logits.ndim == 2 else student_logits.reshape(-1, c)
    teacher = teacher.reshape(-1, c)
    y = None
    if labels is not None:
        y = labels.data if isinstance(labels, Tensor) else np.asarray(labels)
        if y.dtype.kind not in "iu":
            raise ClassIndexError(f"distillation_loss: labels must be finite integer class indices, got {y.dtype}")
        y = y.reshape(-1)
        if y.shape[0] != s.shape[0]:
            raise ValueError(f"distillation_loss: {y.shape[0]} labels for {s.shape[0]} rows of logits")
        if y.size and (y.min() < 0 or y.max() >= c):
            raise ValueError(f"distillation_loss: label {int(y.max() if y.max() >= c else y.min())} is out of "
                             f"range for {c} classes")
    if s.shape[0] == 0:
        raise ValueError("distillation_loss: no rows of logits")
    return DistillationFunction.apply(s, teacher, y, temperature=float(temperature), alpha=alpha,
                                      t2_scaling=bool(t2_scaling))


class DistillationLoss(Layer):
    """``distillation_loss`` as a layer.

    Args:
        temperature: softening temperature T > 0.
        alpha: weight of the soft (teacher) term when labels are given.
    """

    def __init__(self, temperature: float = 4.0, alpha: float = 0.5):
        self.temperature, self.alpha = float(temperature), float(alpha)

    def forward(self, student_logits, teacher_logits, labels=None):
        """``distillation_loss(student_logits, teacher_logits, labels, ...)``."""
        return distillation_loss(student_logits, teacher_logits, labels, self.temperature, self.alpha)
