"""Upstream TinyTorch's module path ``tinytorch.perf.compression``, as adapters over
``tinytorch.core.compression`` (one implementation; see docs/compat.md).

  measure_sparsity(model) -> percent (0-100) of zero entries in the prunable weights
  magnitude_prune(model, sparsity=0.9) -> model     global threshold over all weights
  structured_prune(model, prune_ratio=0.5) -> model  lowest-L2 output channels of every Linear
  low_rank_approximate(weight_matrix, rank_ratio=0.5) -> (U_k, S_k, Vt_k)   truncated SVD
  KnowledgeDistillation(teacher, student, temperature=3.0, alpha=0.7)
      ``distillation_loss(student_logits, teacher_logits, true_labels)`` is
      ``core.compression.distillation_loss`` (Hinton: T^2-scaled KL, mean over rows), a
      differentiable Tensor; upstream returns an un-scaled, summed float (different on purpose).

Prunable weights are those of Linear and Conv2d layers; upstream counts every parameter of
two or more dimensions (so embeddings and norms would count there).
"""
from __future__ import annotations

import numpy as np

from ..core import compression as _c
from ..core.layers import Linear
from ..core.tensor import BYTES_PER_FLOAT32, MB_TO_BYTES, Tensor  # the one definition

__all__ = ["BYTES_PER_FLOAT32", "MB_TO_BYTES", "measure_sparsity", "magnitude_prune", "structured_prune",
           "low_rank_approximate", "KnowledgeDistillation", "Compressor",
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
    in ``model`` (and their bias entries) with ``core.compression.structured_prune``;
    returns ``model``.

    Args:
        model: a Layer containing Linear layers (or a Linear).
        prune_ratio: fraction in [0, 1] of each layer's output channels to zero.
    """
    for _, module in model.named_modules():
        if isinstance(module, Linear):
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
        """``core.compression.distillation_loss`` with this object's temperature and alpha.

        Args:
            student_logits: Tensor [N, C] (gets the gradient).
            teacher_logits: Tensor or array [N, C].
            true_labels: integer labels [N] (Tensor or array; integral floats accepted) or None.
        """
        labels = true_labels
        if labels is not None:
            arr = np.asarray(labels.data if isinstance(labels, Tensor) else labels)
            if arr.dtype.kind == "f":
                arr = arr.astype(np.int64)
            labels = arr
        return _c.distillation_loss(student_logits, teacher_logits, labels,
                                    temperature=self.temperature, alpha=self.alpha)


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
        stats = {"original_sparsity": Compressor.measure_sparsity(model)}
        if "magnitude_sparsity" in compression_config:
            magnitude_prune(model, compression_config["magnitude_sparsity"])
        if "structured_prune_ratio" in compression_config:
            structured_prune(model, compression_config["structured_prune_ratio"])
        final = Compressor.measure_sparsity(model)
        stats["final_sparsity"] = final
        stats["compression_ratio"] = 1.0 / (1.0 - final) if final < 1.0 else float("inf")
        return model, stats


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
