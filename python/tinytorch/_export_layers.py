"""_export_layers: the layer emitters of tinytorch.export (one per layer type) and their graph builder.

What this file owns: ``emit(graph, layer, x, where)``, which looks the layer's exact type up in
``EMITTERS`` and appends that layer's fixed ONNX pattern to the graph, returning the name of the
output value. Exact types, not isinstance: a subclass may have changed ``forward``, so it is
refused (``UnsupportedLayerError`` naming the layer and its path in the model) rather than
exported as its parent. Each emitter mirrors the forward it stands for, arithmetic included:

  Linear          MatMul (weight stored (in, out), as ours) + Add bias
  Conv2d          Conv (pads top/left = bottom/right, as our zero padding); MaxPool2d MaxPool,
                  AvgPool2d AveragePool(count_include_pad=1); Flatten(1, -1) Flatten(axis=1)
  activations     Relu, Sigmoid, Tanh, SiLU = x * Sigmoid(x), Softmax / LogSoftmax(axis),
                  GELU as Gelu(approximate="tanh"): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
                  the form core/activations and the fused MLP use ("none": the erf form)
  LayerNorm       LayerNormalization(axis = -len(normalized_shape), epsilon = eps)
  GPT             Gather (token table) + Slice of the position table to the input's length,
                  blocks, ln_f, head (Linear, or TiedLMHead: MatMul with Transpose of the very
                  token-table initializer, so the tie survives in the file)
  TransformerBlock  x + attn(ln1(x)), then x + mlp(ln2(x))
  MultiHeadAttention  q/k/v projections, heads split by Reshape [0, 0, H, hd] + Transpose,
                  scores = q k^T * (1/sqrt(hd)), causal: Where(Trilu(ones[T, T]), scores, -inf)
                  built once per graph from the runtime length, Softmax, @ v, merge, out_proj
  Dropout         the identity when p == 0 or in eval mode; refused while it would drop
  Sequential      its layers in order

Parameters become initializers named as in ``model.named_parameters()`` (one per Parameter
object, so a tied table is stored once). Assumes the onnx package is importable (the caller
checked); opset 21 (Gelu needs 20).
"""
from __future__ import annotations

import math

import numpy as np

from .core.activations import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .core.attention import MultiHeadAttention
from .core.embeddings import Embedding, PositionalEmbedding
from .core.layers import Dropout, Flatten, Identity, Linear, Sequential
from .core.spatial import AvgPool2d, Conv2d, MaxPool2d, as_pair
from .core.transformers import GPT, MLP, LayerNorm, TiedLMHead, TransformerBlock

__all__ = ["UnsupportedLayerError", "Graph", "emit", "EMITTERS"]


class UnsupportedLayerError(NotImplementedError, ValueError):
    """A layer (or a setting of one) that ``to_onnx`` has no ONNX mapping for; the message
    names the layer's type and its path in the model. Both a NotImplementedError and a
    ValueError, so either ``except`` catches it."""


class Graph:
    """The nodes and initializers of the graph being built; names are unique per graph.

    Args:
        helper, numpy_helper, onnx: the onnx modules (imported lazily by the caller).
        names: ``{id(parameter): name}`` from the root model's ``named_parameters()``.
    """

    def __init__(self, onnx, helper, numpy_helper, names):
        self.onnx, self.helper, self.numpy_helper = onnx, helper, numpy_helper
        self.nodes, self.arrays, self.names, self.cache, self._n = [], {}, names, {}, 0

    def fresh(self, hint: str) -> str:
        """A new value name starting with ``hint``."""
        self._n += 1
        return f"{hint}_{self._n}"

    def op(self, op_type: str, inputs, hint: str = "", **attrs) -> str:
        """Append one node with a single output; returns the output's name."""
        out = self.fresh(hint or op_type)
        self.nodes.append(self.helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def param(self, tensor, fallback: str) -> str:
        """The initializer name of a Parameter (or array), registered once per object."""
        key = id(tensor)
        name = self.names.get(key, fallback)
        if name not in self.arrays:
            self.arrays[name] = np.ascontiguousarray(getattr(tensor, "data", tensor), dtype=np.float32)
        return name

    def const(self, value, dtype=np.int64) -> str:
        """A small constant (shapes, axes, scalars) as an initializer."""
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh("const")
        self.arrays[name] = arr
        return name


def emit(g: Graph, layer, x: str, where: str, **kw) -> str:
    """Append ``layer``'s ONNX pattern reading value ``x``; returns the output value's name.
    Raises UnsupportedLayerError naming the layer's type and ``where`` when no emitter fits."""
    fn = EMITTERS.get(type(layer))
    if fn is None:
        hint = ("; merge the adapters first (tinytorch.extensions.lora.merge_and_unload)"
                if type(layer).__name__ == "LoRALinear" else "")
        raise UnsupportedLayerError(f"to_onnx: cannot export layer {type(layer).__name__} at "
                                    f"'{where or '<model>'}' (no ONNX mapping for this layer type){hint}")
    return fn(g, layer, x, where, **kw)


def _sub(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _refuse(layer, where: str, why: str):
    raise UnsupportedLayerError(f"to_onnx: cannot export layer {type(layer).__name__} at "
                                f"'{where or '<model>'}': {why}")


# ------------------------------------------------------------------ dense, spatial, containers

def _linear(g, m, x, where):
    y = g.op("MatMul", [x, g.param(m.weight, _sub(where, "weight"))], "matmul")
    return y if m.bias is None else g.op("Add", [y, g.param(m.bias, _sub(where, "bias"))], "linear")


def _conv2d(g, m, x, where):
    (ph, pw), ins = m.padding, [x, g.param(m.weight, _sub(where, "weight"))]
    if m.bias is not None:
        ins.append(g.param(m.bias, _sub(where, "bias")))
    return g.op("Conv", ins, "conv", kernel_shape=list(m.kernel_size), strides=list(m.stride),
                pads=[ph, pw, ph, pw])


def _pool(op_type, **extra):
    def fn(g, m, x, where):
        k = as_pair(m.kernel_size, "kernel_size")
        s = k if m.stride is None else as_pair(m.stride, "stride")
        (ph, pw) = as_pair(m.padding, "padding")
        return g.op(op_type, [x], "pool", kernel_shape=list(k), strides=list(s), pads=[ph, pw, ph, pw], **extra)
    return fn


def _flatten(g, m, x, where):
    if (m.start_dim, m.end_dim) != (1, -1):
        _refuse(m, where, f"only Flatten(start_dim=1, end_dim=-1) is mapped, got ({m.start_dim}, {m.end_dim})")
    return g.op("Flatten", [x], "flatten", axis=1)


def _dropout(g, m, x, where):
    if m.training and m.p > 0:
        _refuse(m, where, f"Dropout(p={m.p}) in training mode would drop; call model.eval() before exporting")
    return x


def _sequential(g, m, x, where):
    for i, layer in enumerate(m.layers):
        x = emit(g, layer, x, _sub(where, str(i)))
    return x


def _gelu(g, x, approximate):
    return g.op("Gelu", [x], "gelu", approximate=approximate)


# ------------------------------------------------------------------ transformer parts

def _layer_norm(g, m, x, where):
    n = len(m.normalized_shape)
    scale = (g.param(m.weight, _sub(where, "weight")) if m.weight is not None
             else g.const(np.ones(m.normalized_shape), np.float32))
    ins = [x, scale] + ([g.param(m.bias, _sub(where, "bias"))] if m.bias is not None else [])
    return g.op("LayerNormalization", ins, "layer_norm", axis=-n, epsilon=m.eps)


def _embedding(g, m, ids, where):
    return g.op("Gather", [g.param(m.weight, _sub(where, "weight")), ids], "embedding", axis=0)


def _positions(g, m, x, where):
    t = g.op("Shape", [x], "seq_len", start=-2, end=-1)                  # [T] of x [..., T, D]
    rows = g.op("Slice", [g.param(m.weight, _sub(where, "weight")), g.const([0]), t, g.const([0])], "positions")
    return g.op("Add", [x, rows], "with_positions")


def _causal_where(g, x, scores):
    """Keep scores[..., i, j] for j <= i, -inf elsewhere; the [T, T] condition is built once per
    graph from the runtime sequence length of ``x`` [B, T, E]."""
    if "causal" not in g.cache:
        t = g.op("Shape", [x], "seq_len", start=1, end=2)
        tt = g.op("Concat", [t, t], "mask_shape", axis=0)
        ones = g.op("ConstantOfShape", [tt], "ones",
                    value=g.numpy_helper.from_array(np.ones(1, np.float32)))
        lower = g.op("Trilu", [ones], "lower", upper=0)
        g.cache["causal"] = g.op("Cast", [lower], "causal", to=g.onnx.TensorProto.BOOL)
    return g.op("Where", [g.cache["causal"], scores, g.const(-np.inf, np.float32)], "masked")


def _attention(g, m, x, where, causal=False):
    if m.training and m.dropout > 0:
        _refuse(m, where, f"attention dropout {m.dropout} in training mode; call model.eval() before exporting")
    heads = g.const([0, 0, m.num_heads, m.head_dim])

    def split(proj, name, perm):
        y = emit(g, proj, x, _sub(where, name))
        return g.op("Transpose", [g.op("Reshape", [y, heads], name)], name + "_heads", perm=perm)

    q = split(m.q_proj, "q_proj", [0, 2, 1, 3])                         # [B, H, T, hd]
    k_t = split(m.k_proj, "k_proj", [0, 2, 3, 1])                       # [B, H, hd, T]
    v = split(m.v_proj, "v_proj", [0, 2, 1, 3])
    scores = g.op("Mul", [g.op("MatMul", [q, k_t], "qk"), g.const(1.0 / math.sqrt(m.head_dim), np.float32)],
                  "scores")
    if causal:
        scores = _causal_where(g, x, scores)
    out = g.op("MatMul", [g.op("Softmax", [scores], "probs", axis=-1), v], "attend")
    merged = g.op("Reshape", [g.op("Transpose", [out], "merge", perm=[0, 2, 1, 3]),
                              g.const([0, 0, m.embed_dim])], "heads_merged")
    return emit(g, m.out_proj, merged, _sub(where, "out_proj"))


def _mlp(g, m, x, where):
    h = _gelu(g, emit(g, m.fc1, x, _sub(where, "fc1")), "tanh")        # MLP.forward: always the tanh form
    return emit(g, m.dropout, emit(g, m.fc2, h, _sub(where, "fc2")), _sub(where, "dropout"))


def _block(g, m, x, where):
    a = emit(g, m.attn, emit(g, m.ln1, x, _sub(where, "ln1")), _sub(where, "attn"), causal=m.causal)
    x = g.op("Add", [x, emit(g, m.resid_dropout, a, _sub(where, "resid_dropout"))], "residual")
    return g.op("Add", [x, emit(g, m.mlp, emit(g, m.ln2, x, _sub(where, "ln2")), _sub(where, "mlp"))], "residual")


def _tied_head(g, m, x, where):
    table = g.param(m.weight, _sub(where, "weight"))                    # the token table's own name
    return g.op("MatMul", [x, g.op("Transpose", [table], "table_t", perm=[1, 0])], "logits")


def _gpt(g, m, ids, where):
    x = emit(g, m.token_embedding, ids, _sub(where, "token_embedding"))
    x = emit(g, m.position_embedding, x, _sub(where, "position_embedding"))
    x = emit(g, m.dropout, x, _sub(where, "dropout"))
    for i, block in enumerate(m.blocks):
        x = emit(g, block, x, _sub(where, f"blocks.{i}"))
    return emit(g, m.lm_head, emit(g, m.ln_f, x, _sub(where, "ln_f")), _sub(where, "lm_head"))


def _unary(op_type):
    return lambda g, m, x, where: g.op(op_type, [x], op_type.lower())


EMITTERS = {
    Linear: _linear, Conv2d: _conv2d, Flatten: _flatten, Sequential: _sequential,
    MaxPool2d: _pool("MaxPool"), AvgPool2d: _pool("AveragePool", count_include_pad=1),
    Dropout: _dropout, Identity: lambda g, m, x, where: x,
    ReLU: _unary("Relu"), Sigmoid: _unary("Sigmoid"), Tanh: _unary("Tanh"),
    SiLU: lambda g, m, x, where: g.op("Mul", [x, g.op("Sigmoid", [x])], "silu"),
    GELU: lambda g, m, x, where: _gelu(g, x, m.approximate),
    Softmax: lambda g, m, x, where: g.op("Softmax", [x], "softmax", axis=m.axis),
    LogSoftmax: lambda g, m, x, where: g.op("LogSoftmax", [x], "log_softmax", axis=m.axis),
    LayerNorm: _layer_norm, Embedding: _embedding, PositionalEmbedding: _positions,
    MultiHeadAttention: _attention, MLP: _mlp, TransformerBlock: _block,
    TiedLMHead: _tied_head, GPT: _gpt,
}
