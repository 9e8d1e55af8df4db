"""Layers: the architecture extension point (``Layer``) and the basic layers.

What this file owns
  * ``Layer``: ``forward``, ``__call__``, ``parameters()``/``named_parameters()``,
    ``children()``/``named_children()``/``named_modules()``, ``get_submodule``/
    ``set_submodule``, ``train()``/``eval()``, ``state_dict()``/``load_state_dict()``,
    ``save(path)``/``load(path)``.
  * ``Parameter`` (a Tensor that requires grad by default), ``Linear``, ``Sequential``,
    ``Dropout``, ``Flatten``, ``Identity``.
  * ``set_training_mode(model, mode)`` (upstream TinyTorch's): ``train()``/``eval()`` for any
    model object, also a plain class holding layers in attributes, lists or dicts.

Discovery: like PyTorch's Module, sub-layers and parameters are found from instance
attributes, in assignment order: a ``Tensor`` attribute is a parameter (frozen ones
too: ``requires_grad=False`` only stops training it), a ``Layer`` attribute is a child,
and lists/tuples/dicts of those are walked with the index or key as the name
("blocks.0.weight"). Constants that are not parameters should be stored as NumPy
arrays. Replacing a sub-layer is plain ``setattr`` (or ``set_submodule("a.0.b", new)``),
which is what adapter injection needs. ``Layer.__init__`` does nothing, so a subclass
that forgets ``super().__init__()`` still works.

State dicts map dotted names to NumPy arrays (copies); ``load_state_dict`` copies into
the existing arrays (so an optimizer's references stay valid) and names the offending
key and shapes on any mismatch, and refuses a dtype conversion that would change the
values (core/state_files.py: complex, bool, integers out of range). Files are .safetensors
(for that suffix) or .npz archives (core/safetensors_files.py picks), written atomically (a crash
mid-save keeps the previous file) and read without executing code.

What it assumes: ``Tensor`` (tensor.py) and the engine's Function contract; Linear's forward
and backward go through the kernel door (``acceleration.gemm`` / ``matmul_backward``); weights
and dropout masks are drawn from the framework generator (core/random.py); parameters are
float32 unless a dtype is asked for; file formats are core/safetensors_files.py's and
core/state_files.py's.
"""
from __future__ import annotations

import math
from collections import OrderedDict, namedtuple

import numpy as np

from . import acceleration as _acc
from .autograd import Function
from .random import get_generator
from .safetensors_files import load_state_file, save_state_file
from .state_files import checked_cast
from .tensor import Tensor

__all__ = ["Parameter", "Layer", "Module", "Linear", "Sequential", "Dropout", "Flatten", "Identity",
           "IncompatibleKeys", "set_training_mode", "XAVIER_SCALE_FACTOR", "DROPOUT_MIN_PROB", "DROPOUT_MAX_PROB"]

# What load_state_dict returns, as PyTorch's _IncompatibleKeys: still a (missing, unexpected) tuple.
IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])

# Upstream TinyTorch's names for the numbers below. Linear draws its weight uniform in
# +-sqrt(XAVIER_SCALE_FACTOR / fan_in) (PyTorch's default, 1/sqrt(fan_in)); Dropout's p lies in
# [DROPOUT_MIN_PROB, DROPOUT_MAX_PROB].
XAVIER_SCALE_FACTOR = 1.0
DROPOUT_MIN_PROB = 0.0
DROPOUT_MAX_PROB = 1.0


class Parameter(Tensor):
    """A Tensor meant to be trained: ``requires_grad=True`` unless told otherwise.

    Args:
        data: the initial values (copied), as for ``Tensor``.
        requires_grad: False makes a frozen parameter (still listed by ``parameters()``
            and saved in ``state_dict()``, just not trained).
        dtype: as for ``Tensor`` (None keeps float16/float32 arrays' dtype).
    """

    __slots__ = ()

    def __init__(self, data, requires_grad: bool = True, dtype=None):
        super().__init__(data, requires_grad=requires_grad, dtype=dtype)


class Layer:
    """Base class of every layer (PyTorch's ``nn.Module``; ``Module`` is an alias).

    Subclasses define ``forward``; calling the layer calls it. Parameters and sub-layers
    are found from instance attributes (see the module docstring), so a subclass just
    assigns them; calling ``super().__init__()`` is optional.
    """

    training = True  # class default, so subclasses need not call super().__init__()

    def __init__(self):
        pass

    def forward(self, *args, **kwargs):
        """The layer's computation; subclasses define it (``layer(x)`` calls it)."""
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ discovery
    def _named_members(self):
        """Direct (name, Tensor or Layer) members, in attribute order."""
        for name, value in self.__dict__.items():
            if isinstance(value, (Tensor, Layer)):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, (Tensor, Layer)):
                        yield f"{name}.{i}", item
            elif isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(item, (Tensor, Layer)):
                        yield f"{name}.{key}", item

    def named_children(self):
        """Yield (name, layer) for each direct sub-layer, in attribute order."""
        for name, value in self._named_members():
            if isinstance(value, Layer):
                yield name, value

    def children(self):
        """The direct sub-layers, as a list."""
        return [layer for _, layer in self.named_children()]

    def named_modules(self, prefix: str = "", _seen=None):
        """Yield (dotted name, layer) for this layer and every descendant, once each.

        ``prefix`` is prepended to every name (this layer itself is named ``prefix``,
        "" by default)."""
        seen = set() if _seen is None else _seen
        if id(self) in seen:
            return
        seen.add(id(self))
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name, seen)

    def modules(self):
        """This layer and all its descendants, as a list (each once)."""
        return [m for _, m in self.named_modules()]

    def named_parameters(self, prefix: str = ""):
        """Yield (dotted name, Tensor) for every parameter, shared ones reported once;
        ``prefix`` is prepended to every name ("blocks.0.weight")."""
        seen = set()
        for mod_name, module in self.named_modules(prefix):
            for name, value in module._named_members():
                if isinstance(value, Tensor) and id(value) not in seen:
                    seen.add(id(value))
                    yield (f"{mod_name}.{name}" if mod_name else name), value

    def parameters(self):
        """All parameters (trainable and frozen) as a list."""
        return [p for _, p in self.named_parameters()]

    def get_submodule(self, target: str) -> "Layer":
        """The sub-layer at dotted path ``target`` ("" is this layer); KeyError if absent."""
        module = self
        if target:
            for part in target.split("."):
                module = _child(module, part, target)
        if not isinstance(module, Layer):
            raise KeyError(f"get_submodule: {target!r} is a {type(module).__name__}, not a Layer")
        return module

    def set_submodule(self, target: str, layer: "Layer") -> None:
        """Replace the sub-layer at dotted path ``target`` (e.g. "blocks.0.attn.proj") by
        ``layer``; KeyError when no sub-layer is there."""
        if not isinstance(layer, Layer):
            raise TypeError(f"set_submodule: expected a Layer, got {type(layer).__name__}")
        parent_path, _, last = target.rpartition(".")
        parent = self
        if parent_path:
            for part in parent_path.split("."):
                parent = _child(parent, part, target)
        if not isinstance(_child(parent, last, target), Layer):  # raises if nothing is there
            raise KeyError(f"set_submodule: {target!r} is not a Layer")
        if isinstance(parent, Sequential):
            parent.layers[int(last)] = layer
        elif isinstance(parent, list):
            parent[int(last)] = layer
        elif isinstance(parent, dict):
            parent[last] = layer
        elif isinstance(parent, Layer):
            setattr(parent, last, layer)
        else:
            raise TypeError(f"set_submodule: cannot assign into a {type(parent).__name__} at {target!r}")

    # ------------------------------------------------------------------ modes
    def train(self, mode: bool = True) -> "Layer":
        """Set ``training`` to ``mode`` on this layer and every descendant (Dropout, for
        one, acts only in training); returns self."""
        for m in self.modules():
            m.training = bool(mode)
        return self

    def eval(self) -> "Layer":
        """``train(False)``: evaluation mode for the whole tree; returns self."""
        return self.train(False)

    def zero_grad(self) -> None:
        """Set every parameter's ``.grad`` to None."""
        for p in self.parameters():
            p.grad = None

    # ------------------------------------------------------------------ state
    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """An ordered dict from dotted parameter name to a copy of its array."""
        return OrderedDict((name, p.data.copy()) for name, p in self.named_parameters())

    def load_state_dict(self, state, strict: bool = True):
        """Copy the arrays of ``state`` (name -> array, as from ``state_dict``) into the
        parameters, in place, and return ``IncompatibleKeys(missing_keys, unexpected_keys)``.

        With ``strict`` (the default) any missing or unexpected key raises KeyError naming the
        first one; a shape mismatch always raises ValueError naming the key, before anything
        is copied.
        """
        own = OrderedDict(self.named_parameters())
        keys = list(state.keys())
        missing = [k for k in own if k not in state]
        unexpected = [k for k in keys if k not in own]
        if strict and (missing or unexpected):
            first = f"missing key {missing[0]!r}" if missing else f"unexpected key {unexpected[0]!r}"
            raise KeyError(f"load_state_dict: first mismatch: {first}; missing keys {missing}, "
                           f"unexpected keys {unexpected}")
        for name, p in own.items():
            if name not in state:
                continue
            value = np.asarray(state[name])
            if value.shape != p.data.shape:
                raise ValueError(f"load_state_dict: key {name!r} has shape {value.shape} in the state "
                                 f"but the parameter has shape {p.data.shape}")
        converted = {name: checked_cast(state[name], p.data.dtype, f"load_state_dict: key {name!r}")
                     for name, p in own.items() if name in state}
        for name, value in converted.items():
            np.copyto(own[name].data, value)
        return IncompatibleKeys(missing, unexpected)

    def save(self, path) -> str:
        """Write ``state_dict()`` to ``path`` atomically (a crash mid-save leaves the previous
        file intact): a .safetensors file for that suffix, else an .npz archive (".npz" is
        appended when missing). Returns the path written."""
        return save_state_file(path, self.state_dict())

    def load(self, path, strict: bool = True):
        """Read a file written by ``save`` at ``path`` (.safetensors or .npz; no code runs)
        and ``load_state_dict`` it with ``strict``; returns (missing_keys, unexpected_keys).
        ValueError when the file is truncated, corrupt or of neither format."""
        return self.load_state_dict(load_state_file(path, "Layer.load"), strict=strict)

    def num_parameters(self, trainable_only: bool = False) -> int:
        """Total number of parameter elements; only those with requires_grad when
        ``trainable_only``."""
        return sum(p.data.size for p in self.parameters() if p.requires_grad or not trainable_only)

    def __repr__(self):
        kids = list(self.named_children())
        if not kids:
            return f"{type(self).__name__}({self.extra_repr()})"
        lines = [f"  ({n}): " + repr(c).replace("\n", "\n  ") for n, c in kids]
        return f"{type(self).__name__}(\n" + "\n".join(lines) + "\n)"

    def extra_repr(self) -> str:
        """The text inside the parentheses of a leaf layer's repr(); override it to show
        the constructor arguments."""
        return ""


Module = Layer  # PyTorch's name


def _child(module, part, target):
    """One step of a dotted path: a Layer attribute, a Sequential index or a container item."""
    try:
        if isinstance(module, Sequential) and part.isdigit():
            return module.layers[int(part)]
        if isinstance(module, Layer):
            if part in module.__dict__:
                value = module.__dict__[part]
                if isinstance(value, (Layer, list, tuple, dict)):
                    return value
        elif isinstance(module, (list, tuple)) and part.isdigit():
            return module[int(part)]
        elif isinstance(module, dict):
            return module[part]
    except (IndexError, KeyError):
        pass
    raise KeyError(f"no sub-layer {target!r}: {type(module).__name__} has no member {part!r}")


# ============================================================================ Linear

class LinearFunction(Function):
    """y = x @ W + b for x of shape (..., in); rows are folded into one GEMM each way."""

    def forward(self, x, weight, bias):
        if x.shape[-1:] != weight.shape[:1]:
            raise ValueError(f"Linear: input has {x.shape[-1] if x.ndim else 'no'} features "
                             f"(shape {x.shape}) but the weight is {weight.shape}")
        lead = x.shape[:-1]
        x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
        out = _acc.gemm(x2, weight)
        if bias is not None:
            out += bias
        self.x2, self.weight, self.lead = x2, weight, lead
        return out if x.ndim == 2 else out.reshape(lead + (weight.shape[1],))

    def backward(self, g):
        need = self.needs_input_grad
        g2 = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
        # x2 @ weight is a plain 2-D matmul: the door's one backward (transpose flags, no copies)
        gx, gw = _acc.matmul_backward(self.x2, self.weight, g2, need[:2])
        if gx is not None and len(self.lead) != 1:
            gx = gx.reshape(self.lead + (self.weight.shape[0],))
        gb = g2.sum(axis=0) if need[2] else None
        return gx, gw, gb


class Linear(Layer):
    """Fully connected layer, ``y = x @ weight + bias`` with weight of shape (in, out).

    Initialised like PyTorch: weight and bias uniform in +-1/sqrt(in_features).
    Note the weight is stored (in, out), the transpose of PyTorch's (out, in).

    Args:
        in_features: size of the last axis of the input.
        out_features: size of the last axis of the output.
        bias: add a learnable bias of shape (out_features,).
        dtype: dtype of the parameters (float32 by default; float64 gives float64 weights).

    Shape: input (..., in_features), output (..., out_features).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=np.float32):
        if in_features < 0 or out_features < 0:
            raise ValueError(f"Linear: sizes must be non-negative, got ({in_features}, {out_features})")
        self.in_features, self.out_features = int(in_features), int(out_features)
        bound = math.sqrt(XAVIER_SCALE_FACTOR) / math.sqrt(in_features) if in_features > 0 else 0.0
        rng = get_generator()
        self.weight = Parameter(rng.uniform(-bound, bound, (in_features, out_features)), dtype=dtype)
        self.bias = Parameter(rng.uniform(-bound, bound, (out_features,)), dtype=dtype) if bias else None

    def forward(self, x):
        """``x @ weight + bias`` for ``x`` of shape (..., in_features) (a Tensor or array)."""
        if not isinstance(x, Tensor):
            x = Tensor(x)
        return LinearFunction.apply(x, self.weight, self.bias)

    def extra_repr(self):
        """``in_features=..., out_features=..., bias=...`` for repr()."""
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


# ============================================================================ containers

class Sequential(Layer):
    """Runs layers in order. ``Sequential(a, b)`` or ``Sequential([a, b])``; names are "0", "1", ..."""

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"Sequential: item {i} is a {type(layer).__name__}, not a Layer")
        self.layers = list(layers)

    def _named_members(self):
        for i, layer in enumerate(self.layers):
            yield str(i), layer

    def forward(self, x):
        """Feed ``x`` through each layer in turn and return the last output."""
        for layer in self.layers:
            x = layer(x)
        return x

    def append(self, layer: Layer) -> "Sequential":
        """Add ``layer`` at the end; returns self."""
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential.append: expected a Layer, got {type(layer).__name__}")
        self.layers.append(layer)
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(self.layers[i])
        return self.layers[i]

    def __setitem__(self, i, layer):
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential: expected a Layer, got {type(layer).__name__}")
        self.layers[i] = layer

    def __len__(self):
        return len(self.layers)

    def __iter__(self):
        return iter(self.layers)


class Identity(Layer):
    """Returns its input unchanged (a placeholder, e.g. for a removed layer)."""

    def forward(self, x):
        """``x``, unchanged."""
        return x


class Flatten(Layer):
    """Flattens dimensions ``start_dim`` through ``end_dim`` (inclusive) into one; the
    default keeps the batch axis: (N, C, H, W) -> (N, C*H*W)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        """``x.flatten(start_dim, end_dim)`` for a Tensor ``x``."""
        return x.flatten(self.start_dim, self.end_dim)


def _dropout_mask(shape, p: float, dtype) -> np.ndarray:
    """The one dropout mask: each element kept with probability 1 - p (framework generator)
    and then worth 1/(1-p), dropped ones 0 (all 0 when p = 1)."""
    if p >= DROPOUT_MAX_PROB:
        return np.zeros(shape, dtype=dtype)
    keep = get_generator().random(shape, dtype=np.float32) >= p
    return keep.astype(dtype) * np.asarray(1.0 / (1.0 - p), dtype=dtype)


class DropoutFunction(Function):
    def forward(self, x, p):
        self.mask = _dropout_mask(x.shape, p, x.dtype)
        return x * self.mask

    def backward(self, g):
        return g * self.mask, None


class Dropout(Layer):
    """Zeroes elements with probability p in training and scales the rest by 1/(1-p);
    identity in eval. Masks come from the framework generator (see core.random).

    Args:
        p: probability of zeroing an element, in [0, 1].
    """

    def __init__(self, p: float = 0.5):
        if not DROPOUT_MIN_PROB <= p <= DROPOUT_MAX_PROB:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = float(p)

    def forward(self, x, training: bool | None = None):
        """``x`` with a fresh random mask applied in training; ``x`` itself in eval.

        ``training`` (upstream TinyTorch's explicit flag) overrides the layer's mode for
        this call: ``dropout(x, training=False)`` is the identity even in train mode."""
        training = self.training if training is None else bool(training)
        if not self._should_apply_dropout(training):
            return x
        if self.p == DROPOUT_MAX_PROB:
            return x * 0.0
        return DropoutFunction.apply(x, self.p)

    # upstream TinyTorch's two steps of forward, kept as methods (its tests call them)
    def _should_apply_dropout(self, training: bool) -> bool:
        """True when a mask is applied: in training and with p > 0.

        Args:
            training: the mode of this call.
        """
        return bool(training) and self.p > DROPOUT_MIN_PROB

    def _generate_dropout_mask(self, shape, dtype=np.float32):
        """A fresh mask as a Tensor: kept elements 1/(1-p), dropped ones 0 (what forward
        multiplies by).

        Args:
            shape: the mask's shape.
            dtype: its dtype (float32 by default).
        """
        return Tensor(_dropout_mask(tuple(shape), self.p, np.dtype(dtype)), dtype=dtype)

    def extra_repr(self):
        """``p=...`` for repr()."""
        return f"p={self.p}"


def set_training_mode(model, mode: bool = True):
    """Put ``model`` in training (``mode=True``) or evaluation mode, whatever it is: a Layer
    (``model.train(mode)``), or a plain object holding layers in attributes, lists, tuples or
    dicts (a hand-written model class: its own attributes are searched, Layers below them
    are walked whole), each once (cycles are fine). Sets
    ``training`` on every Layer found, and on ``model`` itself when it has that attribute;
    returns ``model``.

    Args:
        model: the model object.
        mode: True for training, False for evaluation.
    """
    mode, seen, todo = bool(mode), set(), [model]
    if not isinstance(model, Layer) and hasattr(model, "training"):
        try:
            model.training = mode
        except AttributeError:
            pass
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, Layer):
            for m in obj.modules():
                m.training = mode
                seen.add(id(m))
            continue
        if isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            todo.extend(obj)
        elif obj is model and hasattr(obj, "__dict__"):  # a plain model class: its attributes
            todo.extend(vars(obj).values())
    return model
