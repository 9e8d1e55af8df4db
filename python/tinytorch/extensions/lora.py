"""LoRA: low-rank adapters on frozen Linear layers (the architecture boundary).

Bottleneck it removes: optimizer-state memory. Fine-tuning a dense ``(d, k)`` projection
with Adam keeps, per weight, a gradient and two moment arrays: for a 4096 x 16384 layer
that is 67.1 M weights, 268 MB of gradient and 537 MB of Adam state in float32. LoRA
freezes the pretrained weight ``W0`` and trains a rank-``r`` update ``A B`` with
``A: (d, r)`` and ``B: (r, k)``, so gradients and optimizer state shrink to
``r (d + k)`` numbers (99.5 % less at r = 16 for that layer), while the layer computes

    y = x W0 + b + (alpha / r) * dropout(x) A B

``B`` starts at zero, so an injected layer starts out equal to the layer it wraps.

What this file owns
  * ``LoRALinear(in_features, out_features, rank=4, alpha=None, dropout=0.0, bias=True)``:
    ``parameters()`` is exactly ``[lora_A, lora_B]`` (what an optimizer should train);
    ``state_dict()`` still holds the frozen ``weight``/``bias`` too. ``from_linear`` wraps a
    pretrained ``Linear`` by reference (no copy). ``merge()`` folds ``scaling * A B`` into
    the base weight for inference and ``unmerge()`` takes it out again.
  * ``inject_lora(model, target_layers, rank=8, alpha=None, dropout=0.0)``: replaces matching
    ``Linear`` sub-layers, freezes everything else, returns the replaced names.
  * ``lora_state_dict(model)`` / ``load_lora_state_dict(model, state)``: adapters only;
    ``save_lora(model, path)`` / ``load_lora(model, path)`` put them in a file of their own
    (.safetensors or .npz, as ``Layer.save``).
  * ``merge_and_unload(model)`` (PEFT's name): every LoRALinear folded and replaced by a plain
    ``Linear``, so ``model.save`` writes the same names as the model before ``inject_lora``.
  * ``lora_linear(x, weight, bias, lora_A, lora_B, scaling)``: the functional form (used by
    the layer; gradcheck-friendly since every operand is an argument).

Contract: a Tensor input gives a Tensor on the tape; an ndarray input gives an ndarray
(computed without recording). There is no native code here: both matmuls go through the
core ``Linear`` function and hence ``core.acceleration`` (``acceleration.last_path()``
reports what ran). ``alpha=None`` means ``alpha = rank`` (scaling 1).

Assumes: the core's Linear (its LinearFunction and Parameters), the framework generator
for the initial A, and core.safetensors_files for the adapter files.
"""
from __future__ import annotations

import fnmatch
import math
from collections import OrderedDict

import numpy as np

from ..core.autograd import no_grad
from ..core.layers import DropoutFunction, Layer, Linear, LinearFunction, Parameter
from ..core.random import get_generator
from ..core.safetensors_files import load_state_file, save_state_file
from ..core.tensor import Tensor

__all__ = ["LoRALinear", "inject_lora", "lora_state_dict", "load_lora_state_dict", "lora_linear",
           "save_lora", "load_lora", "merge_and_unload"]


def lora_linear(x, weight, bias, lora_A, lora_B, scaling: float, dropout: float = 0.0,
                training: bool = False):
    """``x W + b + scaling * dropout(x) A B`` for x of shape (..., in). Tensors in, Tensor out.

    Args:
        x: input Tensor (..., in).
        weight: base weight (in, out); frozen or not, it is an ordinary operand.
        bias: base bias (out,) or None.
        lora_A: down-projection (in, r).
        lora_B: up-projection (r, out).
        scaling: multiplies the low-rank path (alpha / r in the layer).
        dropout: dropout probability on the adapter's input.
        training: apply the dropout (only when True and dropout > 0).
    """
    base = LinearFunction.apply(x, weight, bias)
    xd = DropoutFunction.apply(x, dropout) if (training and dropout > 0.0) else x
    # Scale the narrow (..., r) intermediate rather than the (..., out) result: r << out.
    low = LinearFunction.apply(xd, lora_A, None) * scaling
    return base + LinearFunction.apply(low, lora_B, None)


class LoRALinear(Layer):
    """A frozen ``Linear`` plus a trainable low-rank update (see the module docstring):
    ``y = x W0 + b + (alpha / rank) * dropout(x) A B``.

    Args:
        in_features: size of the input's last axis.
        out_features: size of the output's last axis.
        rank: r, the inner size of the adapter (A is (in, r), B is (r, out)).
        alpha: scaling numerator; None means alpha = rank (scaling 1).
        dropout: dropout probability in [0, 1) on the adapter's input (training only).
        bias: whether the (frozen) base layer has a bias.
        dtype: dtype of a newly made base layer (float32). Use ``from_linear`` to wrap a
            pretrained Linear instead.

    ``parameters()`` is ``[lora_A, lora_B]``; the base weight and bias are frozen.
    """

    def __init__(self, in_features: int, out_features: int, rank: int = 4, alpha=None,
                 dropout: float = 0.0, bias: bool = True, dtype=np.float32, _base: Linear = None):
        if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or rank < 1:
            raise ValueError(f"LoRALinear: rank must be a positive int, got {rank!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"LoRALinear: dropout must be in [0, 1), got {dropout}")
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.rank = int(rank)
        self.alpha = float(self.rank if alpha is None else alpha)
        self.scaling = self.alpha / self.rank
        self.dropout = float(dropout)
        if _base is None:
            _base = Linear(in_features, out_features, bias=bias, dtype=dtype)
        # The base Tensors are shared with the wrapped Linear (no copy), frozen here.
        self.weight = _base.weight
        self.bias = _base.bias
        self.weight.requires_grad = False
        if self.bias is not None:
            self.bias.requires_grad = False
        wdtype = self.weight.data.dtype
        # A like PyTorch's default Linear init (kaiming-uniform, a = sqrt(5)); B zero.
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.lora_A = Parameter(get_generator().uniform(-bound, bound, (in_features, rank)).astype(wdtype))
        self.lora_B = Parameter(np.zeros((rank, out_features), dtype=wdtype))
        self.merged = False

    @classmethod
    def from_linear(cls, linear: Linear, rank: int = 4, alpha=None, dropout: float = 0.0) -> "LoRALinear":
        """Wrap a pretrained ``linear``: its weight and bias Tensors are reused, not copied
        (and frozen). ``rank``, ``alpha`` and ``dropout`` as in the constructor."""
        if not isinstance(linear, Linear):
            raise TypeError(f"LoRALinear.from_linear: expected a Linear, got {type(linear).__name__}")
        d, k = linear.weight.data.shape
        return cls(d, k, rank=rank, alpha=alpha, dropout=dropout, bias=linear.bias is not None,
                   _base=linear)

    # -- the names the guide and optimizers use
    @property
    def A(self) -> Parameter:
        """``lora_A``, the (in_features, rank) down-projection."""
        return self.lora_A

    @property
    def B(self) -> Parameter:
        """``lora_B``, the (rank, out_features) up-projection (zero at init)."""
        return self.lora_B

    def parameters(self):
        """Exactly the trainable adapters, ``[lora_A, lora_B]``."""
        return [self.lora_A, self.lora_B]

    def forward(self, x):
        """``x`` (..., in_features) -> (..., out_features). A Tensor gives a Tensor on the tape;
        an array gives an array computed without recording. After ``merge()`` one GEMM."""
        as_array = not isinstance(x, Tensor)
        if as_array:
            x = np.asarray(x)
            with no_grad():
                return self._forward(Tensor(x)).data
        return self._forward(x)

    def _forward(self, x: Tensor) -> Tensor:
        if x.data.shape[-1:] != (self.in_features,):
            raise ValueError(f"LoRALinear: input has shape {x.data.shape}, expected (..., {self.in_features})")
        if self.merged:
            return LinearFunction.apply(x, self.weight, self.bias)
        return lora_linear(x, self.weight, self.bias, self.lora_A, self.lora_B, self.scaling,
                           self.dropout, self.training)

    def delta_weight(self) -> np.ndarray:
        """``scaling * A B`` as an array of the base weight's shape and dtype."""
        delta = (self.lora_A.data.astype(np.float64) @ self.lora_B.data.astype(np.float64)) * self.scaling
        return delta.astype(self.weight.data.dtype)

    def merge(self) -> None:
        """Fold the adapter into the base weight (in place): forward then costs one GEMM."""
        if self.merged:
            raise RuntimeError("LoRALinear.merge: already merged (call unmerge() first)")
        self.weight.data += self.delta_weight()
        self.merged = True

    def unmerge(self) -> None:
        """Undo ``merge()`` (in place), restoring the separate base + adapter forward."""
        if not self.merged:
            raise RuntimeError("LoRALinear.unmerge: not merged")
        self.weight.data -= self.delta_weight()
        self.merged = False

    def extra_repr(self) -> str:
        """Sizes, rank, alpha, dropout and merged state for repr()."""
        return (f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}, "
                f"alpha={self.alpha:g}, dropout={self.dropout:g}, merged={self.merged}")


# ============================================================================ injection

def _matches(name: str, target: str) -> bool:
    return name == target or name.endswith("." + target) or fnmatch.fnmatchcase(name, target)


def inject_lora(model: Layer, target_layers, rank: int = 8, alpha=None, dropout: float = 0.0) -> list:
    """Replace every ``Linear`` whose dotted name matches a target with a ``LoRALinear``
    wrapping it, and freeze every parameter that is not an adapter.

    A target matches a name exactly, as a dotted suffix ("q_proj" matches
    "blocks.0.attn.q_proj") or as a glob ("blocks.*.attn.*_proj"). Returns the replaced
    names in model order; raises ValueError listing the available Linear names when
    nothing matches.

    Args:
        model: the Layer to modify in place.
        target_layers: a name or a list of names/globs of Linear sub-layers.
        rank: adapter rank r of each injected layer.
        alpha: scaling numerator (None: alpha = rank).
        dropout: adapter dropout probability.
    """
    if not isinstance(model, Layer):
        raise TypeError(f"inject_lora: expected a Layer, got {type(model).__name__}")
    if isinstance(target_layers, str):
        target_layers = [target_layers]
    targets = list(target_layers)
    if not targets or not all(isinstance(t, str) and t for t in targets):
        raise ValueError(f"inject_lora: target_layers must be non-empty names, got {target_layers!r}")
    linears = [(name, m) for name, m in model.named_modules()
               if isinstance(m, Linear) and not isinstance(m, LoRALinear)]
    chosen = [(name, m) for name, m in linears if name and any(_matches(name, t) for t in targets)]
    if not chosen:
        available = [name for name, _ in linears if name]
        raise ValueError(f"inject_lora: no Linear layer matches {targets}; available Linear layers: "
                         f"{available}")
    adapters = set()
    for name, linear in chosen:
        wrapped = LoRALinear.from_linear(linear, rank=rank, alpha=alpha, dropout=dropout)
        model.set_submodule(name, wrapped)
        adapters.update((id(wrapped.lora_A), id(wrapped.lora_B)))
    for _, p in model.named_parameters():
        if id(p) not in adapters:
            p.requires_grad = False
    return [name for name, _ in chosen]


def _adapter_items(model: Layer):
    for name, m in model.named_modules():
        if isinstance(m, LoRALinear):
            prefix = f"{name}." if name else ""
            yield prefix + "lora_A", m.lora_A
            yield prefix + "lora_B", m.lora_B


def lora_state_dict(model: Layer) -> "OrderedDict[str, np.ndarray]":
    """Copies of every adapter array of ``model``, keyed like ``state_dict()``
    ("blocks.0.attn.q_proj.lora_A"): the few arrays a fine-tune needs to save."""
    return OrderedDict((name, p.data.copy()) for name, p in _adapter_items(model))


def load_lora_state_dict(model: Layer, state) -> None:
    """Load adapters saved by ``lora_state_dict`` into ``model`` (which must already hold the
    LoRALinear layers, e.g. after the same ``inject_lora``). ``state`` is a dict or an
    ``np.load`` result. Keys must match exactly; a missing, unexpected or mis-shaped key
    raises naming it."""
    own = OrderedDict(_adapter_items(model))
    if not own:
        raise ValueError("load_lora_state_dict: the model has no LoRALinear layers (run inject_lora first)")
    keys = list(state.keys())
    missing = [k for k in own if k not in keys]
    unexpected = [k for k in keys if k not in own]
    if missing or unexpected:
        raise KeyError(f"load_lora_state_dict: missing keys {missing}, unexpected keys {unexpected}")
    for name, p in own.items():
        value = np.asarray(state[name])
        if value.shape != p.data.shape:
            raise ValueError(f"load_lora_state_dict: key {name!r} has shape {value.shape} but the adapter "
                             f"has shape {p.data.shape}")
    for name, p in own.items():
        np.copyto(p.data, np.asarray(state[name]), casting="unsafe")


def save_lora(model: Layer, path) -> str:
    """Write only the adapters of ``model`` (``lora_state_dict``) to ``path`` atomically:
    .safetensors for that suffix, else .npz. Returns the path written."""
    state = lora_state_dict(model)
    if not state:
        raise ValueError("save_lora: the model has no LoRALinear layers (run inject_lora first)")
    return save_state_file(path, state)


def load_lora(model: Layer, path) -> None:
    """Load adapters written by ``save_lora`` to ``path`` into ``model`` (which already holds the same
    LoRALinear layers); refuses missing, unexpected or mis-shaped names."""
    load_lora_state_dict(model, load_state_file(path, "load_lora"))


def merge_and_unload(model: Layer) -> Layer:
    """Fold every adapter of ``model`` into its base weight and put a plain ``Linear`` (the
    same weight and bias Tensors) where each LoRALinear was; returns ``model``. Its
    ``state_dict()`` then has exactly the names of the model before ``inject_lora``."""
    for name, m in list(model.named_modules()):
        if isinstance(m, LoRALinear):
            if not m.merged:
                m.merge()
            plain = Linear.__new__(Linear)
            plain.in_features, plain.out_features = m.in_features, m.out_features
            plain.weight, plain.bias = m.weight, m.bias
            if name:
                model.set_submodule(name, plain)
            else:
                raise ValueError("merge_and_unload: the model itself is a LoRALinear; merge() it instead")
    return model
