"""Recording a model's GEMMs without changing it: Gemm, GemmTracer, trace_gemms, SimulatedLinear.

Design. Every matrix product of the core goes through one module, the kernel door
``tinytorch.core.acceleration`` (``gemm``, ``matmul``, ``matmul_backward``, ``attention``,
``attention_backward``), and the layers call it as ``_acc.<name>``. ``GemmTracer`` is a
context manager that, while active, replaces those five module attributes with wrappers
that record the product's (M, K, N) and call the original, and wraps the ``forward`` of
each sub-layer of the model (an instance attribute, deleted again on exit) to keep a stack
of layer names. Nothing in the core is edited and nothing is left behind: on exit every
attribute is restored, also after an exception. The tracer is not thread-safe (one trace
at a time per process); calls the door makes to itself (``matmul_backward`` calling
``gemm``) are recorded once, at the outermost call.

What is recorded, per product:
  * name: the parameter's layer when an operand is a parameter (``blocks.0.attn.q_proj``,
    ``blocks.0.mlp.fc1``: found by the identity of the weight array, so the fused
    bias-GELU path of the MLP is named too), else the innermost running layer plus the
    product's part (``blocks.0.attn.scores``); backward products carry ``.grad_<operand>``.
  * M, K, N, with SCALE-Sim's operand convention: A (ifmap) is M x K, B (filter) is K x N.
    A product whose weight is the left operand (Conv2d computes ``W (OC x CKK) @ cols``) is
    recorded transposed, ``cols^T @ W^T``, so the weight is always the filter: a
    convolution is M = batch * OH * OW patches, K = C * KH * KW, N = OC channels.
  * batch: independent products of that shape (attention: batch * heads); 1-D operands
    follow NumPy's rules (M or N = 1).
  * roles of A, B and C ("input", "weight", "output"; "query", "key^T", "scores"; ...).
Attention through FlashAttention is recorded as its two products (scores = Q K^T and
context = P V) per head, in full: the simulator sees the work of the textbook formula, not
the causal block skipping of the kernel. Products with a zero size (no work) are skipped.

Owns Gemm, GemmTracer, trace_gemms and SimulatedLinear; assumes the core's Layer and
Linear, and the kernel door's GEMMs to observe.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from ...core import acceleration as _acc
from ...core.layers import Layer, Linear
from ...core.tensor import Tensor

__all__ = ["Gemm", "GemmTracer", "trace_gemms", "SimulatedLinear"]

_DOOR_NAMES = ("gemm", "matmul", "matmul_backward", "attention", "attention_backward")


@dataclasses.dataclass(frozen=True)
class Gemm:
    """One recorded matrix product C (M x N) = A (M x K) @ B (K x N).

    Args:
        name: the layer (and part) that ran it, e.g. "blocks.0.attn.q_proj".
        M: rows of A and C (SCALE-Sim's ifmap rows), at least 1.
        K: the reduction size, at least 1.
        N: columns of B and C (SCALE-Sim's filters), at least 1.
        batch: independent products of this shape in the step (attention: batch * heads).
        a: the role of A ("input", "query", "im2col patches", "grad_output", ...).
        b: the role of B ("weight", "key^T", ...).
        c: the role of C ("output", "scores", "grad_weight", ...).
        phase: "forward" or "backward".
    """

    name: str
    M: int
    K: int
    N: int
    batch: int = 1
    a: str = "input"
    b: str = "weight"
    c: str = "output"
    phase: str = "forward"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"Gemm: name must be a non-empty str, got {self.name!r}")
        for field in ("M", "K", "N", "batch"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"Gemm {self.name}: {field} must be an int, got {type(value).__name__}")
            if value < 1:
                raise ValueError(f"Gemm {self.name}: {field} must be at least 1, got {value}")
            object.__setattr__(self, field, int(value))
        if self.phase not in ("forward", "backward"):
            raise ValueError(f"Gemm {self.name}: phase must be 'forward' or 'backward', got {self.phase!r}")

    @property
    def macs(self) -> int:
        """Multiply-adds of all ``batch`` products: batch * M * K * N."""
        return self.batch * self.M * self.K * self.N


def _shape_2d(x, trans: bool):
    rows, cols = x.shape[-2], x.shape[-1]
    return (cols, rows) if trans else (rows, cols)


class GemmTracer:
    """Context manager recording every GEMM the kernel door runs while it is active.

    ``with GemmTracer(model) as tracer: model(x)`` leaves the products in ``tracer.gemms``.
    See the module docstring for what is recorded and how the model stays unchanged.

    Args:
        model: a ``Layer`` whose parameters and sub-layers name the products (None: products
            are named "gemm", "matmul", "attention" only).
    """

    def __init__(self, model: Layer | None = None):
        if model is not None and not isinstance(model, Layer):
            raise TypeError(f"GemmTracer: model must be a tinytorch Layer, got {type(model).__name__}")
        self.model = model
        self.gemms: list[Gemm] = []
        self._originals: dict = {}
        self._wrapped_layers: list = []
        self._scope: list[str] = []
        self._depth = 0
        self._param_names: dict = {}
        self._forward_names: dict = {}
        self._attention_scopes: dict = {}
        self._keep_alive: list = []
        self._phase = "forward"
        self._counts: dict = {}

    # ------------------------------------------------------------------ naming
    def _weight_name(self, array):
        """The layer name owning ``array`` (or the array it views), or None."""
        for candidate in (array, getattr(array, "base", None)):
            if candidate is not None and id(candidate) in self._param_names:
                return self._param_names[id(candidate)]
        return None

    def _scope_name(self, part: str) -> str:
        where = self._scope[-1] if self._scope else ""
        return f"{where}.{part}" if where else part

    def _unique(self, name: str) -> str:
        """Repeated calls of one layer in one trace get #2, #3 (e.g. a layer used twice)."""
        count = self._counts.get(name, 0) + 1
        self._counts[name] = count
        return name if count == 1 else f"{name}#{count}"

    def _record(self, name, m, k, n, batch, a, b, c):
        if min(m, k, n, batch) < 1:
            return None
        gemm = Gemm(self._unique(name), m, k, n, batch, a, b, c, self._phase)
        self.gemms.append(gemm)
        return gemm

    # ------------------------------------------------------------------ the door's wrappers
    def _outermost(self, original, record):
        def wrapper(*args, **kwargs):
            self._depth += 1
            try:
                result = original(*args, **kwargs)  # the door validates; record what it ran
                if self._depth == 1:
                    record(*args, **kwargs)
                return result
            finally:
                self._depth -= 1
        wrapper.__wrapped__ = original
        wrapper.__doc__ = original.__doc__
        return wrapper

    def _forward_product(self, a, b, m, k, n, batch, part):
        """Record a forward product of A (m x k) and B (k x n); returns the recorded Gemm."""
        b_owner, a_owner = self._weight_name(b), self._weight_name(a)
        if b_owner is not None:
            gemm = self._record(b_owner, m, k, n, batch, "input", "weight", "output")
        elif a_owner is not None:  # weight on the left: record C^T = B^T A^T (weight = filter)
            gemm = self._record(a_owner, n, k, m, batch, "im2col patches" if a.ndim == 2 and b.ndim == 2
                                else "input", "weight", "output")
        else:
            gemm = self._record(self._scope_name(part), m, k, n, batch, "left operand", "right operand", "product")
        if gemm is not None:
            self._forward_names[(id(a), id(b))] = gemm.name
            self._keep_alive.append((a, b))  # the ids stay unique while the trace lives
        return gemm

    def _on_gemm(self, a, b, trans_a=False, trans_b=False, *rest, **kwargs):
        (m, k), (_, n) = _shape_2d(a, trans_a), _shape_2d(b, trans_b)
        self._forward_product(a, b, m, k, n, 1, "gemm")

    def _on_matmul(self, a, b, *rest, **kwargs):
        a, b = np.asarray(a), np.asarray(b)
        m = 1 if a.ndim == 1 else a.shape[-2]
        k = a.shape[-1]
        n = 1 if b.ndim == 1 else b.shape[-1]
        batch_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.ndim > 2 or b.ndim > 2 else ()
        self._forward_product(a, b, m, k, n, math.prod(batch_shape), "matmul")

    def _on_matmul_backward(self, a, b, grad, need=(True, True), *rest, **kwargs):
        a, b, grad = np.asarray(a), np.asarray(b), np.asarray(grad)
        # the forward's name; an operand recomputed in backward (MLPFunction's GELU output)
        # is a new array, so then the weight's owner names it, as in the forward
        name = (self._forward_names.get((id(a), id(b))) or self._weight_name(b) or self._weight_name(a)
                or self._scope_name("matmul"))
        m = 1 if a.ndim == 1 else a.shape[-2]
        k = a.shape[-1]
        n = 1 if b.ndim == 1 else b.shape[-1]
        lead = np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) if a.ndim > 2 or b.ndim > 2 else ()
        batch = math.prod(lead)
        if b.ndim == 2 and a.ndim > 2:  # rows folded into one GEMM (Linear on [B, T, D])
            m, batch = m * batch, 1
        previous, self._phase = self._phase, "backward"
        try:
            a_is_weight, b_is_weight = self._weight_name(a) is not None, self._weight_name(b) is not None
            if b_is_weight:
                a_role, b_role = "input", "weight"
            elif a_is_weight:  # Conv2d: weight @ im2col patches
                a_role, b_role = "weight", "patches"
            else:
                a_role, b_role = "a", "b"
            if need[0]:
                self._record(f"{name}.grad_{a_role}", m, n, k, batch, "grad_output", f"{b_role}^T", f"grad_{a_role}")
            if need[1]:
                self._record(f"{name}.grad_{b_role}", k, m, n, batch, f"{a_role}^T", "grad_output", f"grad_{b_role}")
        finally:
            self._phase = previous

    def _on_attention(self, q, k, v, *rest, **kwargs):
        length, d = q.shape[-2], q.shape[-1]
        keys, dv = k.shape[-2], v.shape[-1]
        batch = math.prod(np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
        scope = self._scope[-1] if self._scope else "attention"
        self._attention_scopes[(id(q), id(k), id(v))] = scope
        self._keep_alive.append((q, k, v))
        self._record(f"{scope}.scores", length, d, keys, batch, "query", "key^T", "scores")
        self._record(f"{scope}.context", length, keys, dv, batch, "probabilities", "value", "context")

    def _on_attention_backward(self, q, k, v, *rest, **kwargs):
        length, d = q.shape[-2], q.shape[-1]
        keys, dv = k.shape[-2], v.shape[-1]
        batch = math.prod(np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]))
        scope = self._attention_scopes.get((id(q), id(k), id(v)), "attention")
        previous, self._phase = self._phase, "backward"
        try:
            self._record(f"{scope}.scores.recompute", length, d, keys, batch, "query", "key^T", "scores")
            self._record(f"{scope}.grad_value", keys, length, dv, batch, "probabilities^T",
                         "grad_context", "grad_value")
            self._record(f"{scope}.grad_probabilities", length, dv, keys, batch, "grad_context",
                         "value^T", "grad_probabilities")
            self._record(f"{scope}.grad_query", length, keys, d, batch, "grad_scores", "key", "grad_query")
            self._record(f"{scope}.grad_key", keys, length, d, batch, "grad_scores^T", "query", "grad_key")
        finally:
            self._phase = previous

    # ------------------------------------------------------------------ layers
    def _wrap_forward(self, name: str, layer: Layer):
        original = layer.forward  # bound method (or an instance attribute set by the user)
        had_own = "forward" in layer.__dict__

        def forward(*args, **kwargs):
            self._scope.append(name)
            try:
                return original(*args, **kwargs)
            finally:
                self._scope.pop()
        forward.__doc__ = original.__doc__
        layer.__dict__["forward"] = forward
        self._wrapped_layers.append((layer, had_own, original))

    def __enter__(self) -> "GemmTracer":
        if self._originals:
            raise RuntimeError("GemmTracer: this tracer is already active")
        if self.model is not None:
            for module_name, module in self.model.named_modules():
                for param_name, value in module._named_members():
                    if isinstance(value, Tensor):
                        self._param_names.setdefault(id(value.data), module_name or param_name)
                        self._keep_alive.append(value.data)
            for module_name, module in self.model.named_modules():
                if module_name:
                    self._wrap_forward(module_name, module)
        hooks = {"gemm": self._on_gemm, "matmul": self._on_matmul, "matmul_backward": self._on_matmul_backward,
                 "attention": self._on_attention, "attention_backward": self._on_attention_backward}
        for name in _DOOR_NAMES:
            original = getattr(_acc, name)
            self._originals[name] = original
            setattr(_acc, name, self._outermost(original, hooks[name]))
        return self

    def __exit__(self, *exc_info) -> None:
        for name, original in self._originals.items():
            setattr(_acc, name, original)
        self._originals.clear()
        for layer, had_own, original in reversed(self._wrapped_layers):
            if had_own:
                layer.__dict__["forward"] = original
            else:
                layer.__dict__.pop("forward", None)
        self._wrapped_layers.clear()
        self._keep_alive.clear()
        self._forward_names.clear()
        self._attention_scopes.clear()


def trace_gemms(model: Layer, *example_inputs, backward: bool = False) -> list[Gemm]:
    """Every GEMM of one forward of ``model`` (and of its backward when asked), in order.

    The model is unchanged afterwards: its layers, the kernel door and (with ``backward``)
    every parameter's ``.grad`` are as before.

    Args:
        model: a tinytorch ``Layer`` (GPT, Sequential, SimpleCNN, ...).
        example_inputs: what ``model(...)`` takes (arrays or Tensors), e.g. token ids [B, T].
        backward: also run ``output.sum().backward()`` and record the gradient products.
    """
    if not isinstance(model, Layer):
        raise TypeError(f"trace_gemms: model must be a tinytorch Layer, got {type(model).__name__}")
    params = model.parameters() if backward else []
    saved_grads = [p.grad for p in params]
    tracer = GemmTracer(model)
    try:
        with tracer:
            out = model(*example_inputs)
            if backward:
                first = out[0] if isinstance(out, (tuple, list)) else out
                if not isinstance(first, Tensor) or not first.requires_grad:
                    raise ValueError("trace_gemms: backward=True needs the model's output to be a Tensor "
                                     "that requires grad (are the parameters frozen?)")
                first.sum().backward()
    finally:
        for p, g in zip(params, saved_grads):
            p.grad = g
    return tracer.gemms


class SimulatedLinear(Linear):
    """A drop-in ``Linear`` that records the GEMM of every forward in ``self.gemms``.

    Computes exactly what ``Linear`` computes (same parameters, same kernels); each call
    appends ``Gemm(name, M=rows, K=in_features, N=out_features)``, rows being the product of
    the input's leading axes.

    Args:
        in_features: size of the last axis of the input.
        out_features: size of the last axis of the output.
        bias: add a learnable bias of shape (out_features,).
        dtype: dtype of the parameters (float32 by default).
        name: the name its products are recorded under.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=np.float32,
                 name: str = "linear"):
        super().__init__(in_features, out_features, bias=bias, dtype=dtype)
        self.name = str(name)
        self.gemms: list[Gemm] = []

    @classmethod
    def from_linear(cls, linear: Linear, name: str = "linear") -> "SimulatedLinear":
        """A SimulatedLinear sharing ``linear``'s weight and bias (no copy).

        Args:
            linear: the ``Linear`` to mirror.
            name: the name its products are recorded under.
        """
        if not isinstance(linear, Linear):
            raise TypeError(f"SimulatedLinear.from_linear: expected a Linear, got {type(linear).__name__}")
        layer = cls.__new__(cls)
        layer.__dict__.update(linear.__dict__)
        layer.name, layer.gemms = str(name), []
        return layer

    def forward(self, x):
        """``x @ weight + bias``, recording the product (M = rows of ``x``).

        Args:
            x: input (..., in_features), a Tensor or array.
        """
        shape = x.shape
        rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
        if rows >= 1 and self.in_features >= 1 and self.out_features >= 1:
            self.gemms.append(Gemm(self.name, rows, self.in_features, self.out_features))
        return super().forward(x)
