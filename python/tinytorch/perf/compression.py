"""Upstream TinyTorch's module path ``tinytorch.perf.compression``, as adapters over
``tinytorch.core.compression`` (one implementation; see docs/compat.md).

  measure_sparsity(model) -> percent (0-100) of zero entries in the prunable weights
  magnitude_prune(model, sparsity=0.9) -> model     global threshold over all weights
  structured_prune(model, prune_ratio=0.5) -> model  lowest-L2 output channels of every Linear
      but the classifier head (the last one, kept whole when there are several)
  low_rank_approximate(weight_matrix, rank_ratio=0.5) -> (U_k, S_k, Vt_k)   truncated SVD
  KnowledgeDistillation(teacher, student, temperature=3.0, alpha=0.7)
      ``distillation_loss(student_logits, teacher_logits, true_labels)`` is
      ``core.compression.distillation_loss(..., t2_scaling=False)``: upstream's objective,
      alpha * KL(teacher_T || student_T) + (1 - alpha) * CE, each a mean over rows, as a
      differentiable Tensor; labels are class ids (integral floats accepted) or one-hot rows.
  compress_model(model, config) -> stats   upstream's pipeline: 'magnitude_prune' then
      'structured_prune' fractions, every entry checked before any weight changes.

Prunable weights are those of Linear and Conv2d layers; upstream counts every parameter of
two or more dimensions (so embeddings and norms would count there).

What this file owns: upstream's names and return conventions above (percentages, returned
models, ``Compressor``, ``compress_model``'s config checks, ``verify_pruning_works``) and
``low_rank_approximate`` (NumPy's SVD); every pruning and the loss are core.compression's.

What it assumes: models hold Linear (and Conv2d) layers that core.compression finds; the
classifier head is the model's last Linear; NumPy for the SVD and the counts.
"""
from __future__ import annotations

import numpy as np

from ..core import compression as _c
from ..core.layers import Linear
from ..core.tensor import BYTES_PER_FLOAT32, MB_TO_BYTES, Tensor  # the one definition

__all__ = ["BYTES_PER_FLOAT32", "MB_TO_BYTES", "measure_sparsity", "magnitude_prune", "structured_prune",
           "low_rank_approximate", "KnowledgeDistillation", "Compressor", "compress_model",
           "verify_pruning_works"]


def measure_sparsity(model) -> float:
    """Percentage (0-100) of zeros among ``model``'s prunable weights (``sparsity_report``).

    Args:
        model: a Layer with Linear or Conv2d weights.
    """
    params = _c.prunable_parameters(model)
    total = sum(w.data.size for _, w in params)
    if total == 0:
        return 0.0
    zeros = sum(int(np.count_nonzero(w.data == 0)) for _, w in params)
    return 100.0 * zeros / total


def magnitude_prune(model, sparsity: float = 0.9):
    """Zero the ``sparsity`` fraction of smallest-|w| weights across the whole model
    (``core.compression.magnitude_prune(scope="global")``); returns ``model``.

    Args:
        model: a Layer with Linear or Conv2d weights.
        sparsity: fraction in [0, 1] to zero.
    """
    _c.magnitude_prune(model, sparsity, scope="global")
    return model


def structured_prune(model, prune_ratio: float = 0.5):
    """Zero the ``prune_ratio`` fraction of output channels (lowest L2 norm) of every Linear
    in ``model`` but the last one (and their bias entries) with
    ``core.compression.structured_prune``; returns ``model``. The last Linear is the
    classifier head, whose outputs are the classes, so it is kept whole (as upstream) unless
    it is the model's only Linear.

    Args:
        model: a Layer containing Linear layers (or a Linear).
        prune_ratio: fraction in [0, 1] of each layer's output channels to zero.
    """
    linears = [module for _, module in _c.named_layer_modules(model) if isinstance(module, Linear)]
    if len(linears) > 1:
        linears = linears[:-1]  # the classifier head keeps every output (upstream's rule)
    for module in linears:
        _c.structured_prune(module, prune_ratio)
    return model


def low_rank_approximate(weight_matrix, rank_ratio: float = 0.5):
    """Truncated SVD of a 2-D weight: ``(U[:, :k], S[:k], Vt[:k, :])`` with
    k = max(1, int(rank_ratio * min(m, n))); ``U_k @ diag(S_k) @ Vt_k`` approximates it.

    Args:
        weight_matrix: 2-D array or Tensor.
        rank_ratio: fraction in (0, 1] of the full rank to keep.
    """
    w = np.asarray(weight_matrix.data if isinstance(weight_matrix, Tensor) else weight_matrix)
    if w.ndim != 2:
        raise ValueError(f"low_rank_approximate: needs a 2-D matrix, got shape {w.shape}")
    if not 0.0 < rank_ratio <= 1.0:
        raise ValueError(f"low_rank_approximate: rank_ratio must be in (0, 1], got {rank_ratio}")
    u, s, vt = np.linalg.svd(w, full_matrices=False)
    k = max(1, int(rank_ratio * min(w.shape)))
    return u[:, :k], s[:k], vt[:k, :]


def _class_ids(labels, logits_shape) -> np.ndarray:
    """Class ids [N] from integer or integral-float ids, or from one-hot rows [N, C]."""
    arr = np.asarray(labels.data if isinstance(labels, Tensor) else labels)
    if arr.ndim == 2 and tuple(arr.shape) == tuple(logits_shape):
        one_hot = np.all((arr == 0) | (arr == 1), axis=1) & (arr.sum(axis=1) == 1)
        if not np.all(one_hot):
            raise ValueError("distillation_loss: 2-D labels must be one-hot rows (one 1, the rest 0)")
        return arr.argmax(axis=1)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise _c.ClassIndexError("distillation_loss: labels must be finite integer class indices")
        arr = arr.astype(np.int64)
    return arr


class KnowledgeDistillation:
    """Upstream's holder of a teacher, a student and the distillation settings.

    Args:
        teacher_model: the trained large model.
        student_model: the model being trained.
        temperature: softening temperature T > 0 (default 3.0).
        alpha: weight of the soft term (default 0.7).
    """

    def __init__(self, teacher_model, student_model, temperature: float = 3.0, alpha: float = 0.7):
        self.teacher_model, self.student_model = teacher_model, student_model
        self.temperature, self.alpha = float(temperature), float(alpha)

    def distillation_loss(self, student_logits, teacher_logits, true_labels=None):
        """Upstream's objective: ``core.compression.distillation_loss`` with this object's
        temperature and alpha, the soft term not scaled by T^2.

        Args:
            student_logits: Tensor [N, C] (gets the gradient).
            teacher_logits: Tensor or array [N, C].
            true_labels: class ids [N] (Tensor or array; integral floats accepted), one-hot
                rows [N, C], or None. Fractional, NaN or out-of-range ids and rows that are
                not one-hot raise ValueError.
        """
        labels = None if true_labels is None else _class_ids(true_labels, np.shape(getattr(
            student_logits, "data", student_logits)))
        return _c.distillation_loss(student_logits, teacher_logits, labels,
                                    temperature=self.temperature, alpha=self.alpha, t2_scaling=False)


class Compressor:
    """Upstream's one-stop pruning facade over the functions above. Its sparsities are
    fractions in [0, 1] (the module functions report percentages, as upstream)."""

    @staticmethod
    def measure_sparsity(model) -> float:
        """Fraction (0-1) of zeros among the prunable weights.

        Args:
            model: a Layer with Linear or Conv2d weights.
        """
        return measure_sparsity(model) / 100.0

    @staticmethod
    def magnitude_prune(model, sparsity: float = 0.5):
        """``magnitude_prune(model, sparsity)``; returns ``model``.

        Args:
            model: a Layer with Linear or Conv2d weights.
            sparsity: fraction in [0, 1] to zero.
        """
        return magnitude_prune(model, sparsity)

    @staticmethod
    def structured_prune(model, prune_ratio: float = 0.5):
        """``structured_prune(model, prune_ratio)``; returns ``model``.

        Args:
            model: a Layer containing Linear layers.
            prune_ratio: fraction in [0, 1] of output channels to zero per layer.
        """
        return structured_prune(model, prune_ratio)

    @staticmethod
    def compress_model(model, compression_config: dict):
        """Apply ``magnitude_sparsity`` then ``structured_prune_ratio`` (either optional) from
        ``compression_config``; returns ``(model, stats)`` with original_sparsity,
        final_sparsity (fractions) and compression_ratio = 1 / (1 - final_sparsity).

        Args:
            model: the model to prune in place.
            compression_config: dict with optional 'magnitude_sparsity' and
                'structured_prune_ratio' fractions.
        """
        names = {"magnitude_sparsity": "magnitude_prune", "structured_prune_ratio": "structured_prune"}
        unknown = sorted(set(compression_config) - set(names))
        if unknown:
            raise ValueError(f"Compressor.compress_model: unknown entries {unknown}; use {sorted(names)}")
        stats = compress_model(model, {names[k]: v for k, v in compression_config.items()})
        final = stats["final_sparsity"] / 100.0
        return model, {"original_sparsity": stats["original_sparsity"] / 100.0, "final_sparsity": final,
                       "compression_ratio": stats["compression_ratio"], "applied": stats["applied"]}


_PIPELINE = ("magnitude_prune", "structured_prune")  # the order compress_model applies them in


def compress_model(model, compression_config: dict) -> dict:
    """Upstream's compression pipeline: ``magnitude_prune`` then ``structured_prune``, each
    optional, in place. Every entry is checked first (a fraction in [0, 1], a known name), so
    a bad config changes no weight. Returns stats: original_sparsity and final_sparsity
    (percent of zeros in the prunable weights, as ``measure_sparsity``), compression_ratio =
    1 / (1 - final / 100) and the applied steps.

    Args:
        model: a Layer, or a plain model class holding Layers.
        compression_config: dict with optional 'magnitude_prune' and 'structured_prune'
            fractions (upstream's names); anything else is a ValueError.
    """
    if not isinstance(compression_config, dict):
        raise TypeError(f"compress_model: compression_config must be a dict, got {type(compression_config).__name__}")
    unknown = sorted(set(compression_config) - set(_PIPELINE))
    if unknown:
        raise ValueError(f"compress_model: unknown entries {unknown}; the pipeline knows {list(_PIPELINE)}")
    steps = [(name, _c.check_fraction(compression_config[name], f"compress_model: {name}"))
             for name in _PIPELINE if name in compression_config]
    stats = {"original_sparsity": measure_sparsity(model)}
    for name, fraction in steps:
        (magnitude_prune if name == "magnitude_prune" else structured_prune)(model, fraction)
    final = measure_sparsity(model)
    stats.update(final_sparsity=final, applied=[name for name, _ in steps],
                 compression_ratio=1.0 / (1.0 - final / 100.0) if final < 100.0 else float("inf"))
    return stats


def verify_pruning_works(model, target_sparsity: float = 0.8) -> dict:
    """Count the real zeros over every parameter of ``model`` (biases included, as upstream);
    returns {sparsity (fraction), zeros, total, active, memory_mb (dense, unchanged),
    verified}; AssertionError when the sparsity is not within 0.15 of ``target_sparsity``.

    Args:
        model: a pruned Layer.
        target_sparsity: the expected fraction of zeros (default 0.8).
    """
    params = list(model.parameters())
    zeros = int(sum(np.count_nonzero(p.data == 0) for p in params))
    total = int(sum(p.data.size for p in params))
    sparsity = zeros / total if total else 0.0
    result = {"sparsity": sparsity, "zeros": zeros, "total": total, "active": total - zeros,
              "memory_mb": sum(p.data.nbytes for p in params) / MB_TO_BYTES,
              "verified": abs(sparsity - target_sparsity) < 0.15}
    assert result["verified"], f"Sparsity target not met: {sparsity:.2f} vs {target_sparsity:.2f}"
    return result
