"""Transformers: LayerNorm, the GELU MLP, the pre-LN block and a small GPT.

What this file owns
  LayerNorm(normalized_shape, eps=1e-5)   normalises over the trailing dims; one Function with
                  the closed-form backward  dx = rstd * (dxh - mean(dxh) - xh * mean(dxh * xh))
                  where xh is the normalised input and dxh = dy * weight.
  MLP(embed_dim, hidden_dim=4*embed_dim)  fc1 -> GELU (tanh form) -> fc2, both ordinary Linear.
                  When fc1 is a plain ``Linear`` its bias is fused into the GELU through
                  ``acceleration.bias_gelu`` (one pass over the hidden activations, and the hook
                  the fused native kernel plugs into); if a tool replaced fc1 (an adapter, say),
                  the MLP simply calls it and then the GELU.
  TransformerBlock  pre-LN:  x = x + attn(ln1(x), causal)   then   x = x + mlp(ln2(x))
  GPT(vocab_size, embed_dim, num_layers, num_heads, max_seq_len, dropout=0.0,
      layer_norm_eps=1e-5, tie_weights=False)
                  token embedding + learned positions -> blocks -> ln_f -> lm_head (logits).
                  ``tie_weights=True`` makes lm_head a ``TiedLMHead`` (logits = x @ wte^T, the
                  token table shared, as GPT-2 does); the default keeps a separate Linear.
                  ``GPT.from_pretrained(folder)`` / ``save_pretrained(folder)`` read and write a
                  Hugging Face GPT-2 folder (core/gpt2_format.py owns the name mapping).
                  Sub-layers are reachable through ``named_modules()``, e.g.
                  "blocks.0.attn.q_proj", "blocks.1.mlp.fc1", "lm_head".
                  ``generate(idx, max_new_tokens, temperature=1.0, top_k=None, seed=None,
                  use_cache=False)`` samples autoregressively; ``use_cache=True`` decodes
                  incrementally through a KV cache (kv_cache.py) with the same logits.

Initialisation (GPT-2's): weights N(0, 0.02), biases zero, the two residual projections of
each block (attn.out_proj, mlp.fc2) N(0, 0.02 / sqrt(2 * num_layers)) so the residual stream
does not grow with depth; all draws come from the framework generator (``manual_seed``).

Bad input raises ValueError: ids out of range (naming id and vocab size), a sequence longer
than ``max_seq_len``, heads not dividing the embedding size.

What it assumes: the kernel door (core/acceleration.py) for ``layer_norm`` and its backward,
the fused ``bias_gelu`` (forward and backward) and the MLP's GEMMs; attention from
core/attention.py, embeddings from core/embeddings.py, KV-cache decoding from
core/kv_cache.py, the folder format from core/gpt2_format.py; token ids are integers (or a
float Tensor of whole numbers: embeddings.check_token_ids).
"""
from __future__ import annotations

import math

import numpy as np

from . import acceleration as _acc
from .activations import gelu
from .attention import MultiHeadAttention
from .autograd import Function, no_grad
from .embeddings import Embedding, PositionalEmbedding, check_token_ids
from .gpt2_format import load_gpt2_folder, save_gpt2_folder
from .kv_cache import generate_with_cache
from .layers import Dropout, Layer, Linear, Parameter
from .random import get_generator
from .tensor import Tensor

__all__ = ["LayerNorm", "MLP", "TransformerBlock", "TiedLMHead", "GPT", "sample_next_token"]


# ============================================================================ LayerNorm

class LayerNormFunction(Function):
    """Layer norm over the trailing ``ndims`` dims, through ``acceleration.layer_norm`` (the
    trailing dims are folded into one last axis; the runtime's kernel serves float32)."""

    def forward(self, x, weight, bias, eps, ndims):
        d = math.prod(x.shape[x.ndim - ndims:])
        x2 = x.reshape(x.shape[:x.ndim - ndims] + (d,))
        w2 = None if weight is None else weight.reshape(d)
        b2 = None if bias is None else bias.reshape(d)
        y, mean, rstd = _acc.layer_norm(x2, w2, b2, eps)
        self.x2, self.w2, self.mean, self.rstd = x2, w2, mean, rstd
        self.shape = x.shape
        self.wshape = None if weight is None else weight.shape
        self.bshape = None if bias is None else bias.shape
        return y.reshape(x.shape)

    def backward(self, g):
        need = tuple(self.needs_input_grad) + (False,) * (3 - len(self.needs_input_grad))
        need = (need[0], need[1] and self.w2 is not None, need[2] and self.bshape is not None)
        gx, gw, gb = _acc.layer_norm_backward(self.x2, self.w2, self.mean, self.rstd,
                                              g.reshape(self.x2.shape), need)
        if gx is not None:
            gx = gx.reshape(self.shape)
        if gw is not None:
            gw = gw.reshape(self.wshape)
        if gb is not None:
            gb = gb.reshape(self.bshape)
        return gx, gw, gb


class LayerNorm(Layer):
    """PyTorch's LayerNorm over the trailing ``normalized_shape`` dims (weight 1, bias 0).

    Args:
        normalized_shape: int or tuple: the trailing dims to normalise over (usually the
            embedding size D); the input is (..., *normalized_shape).
        eps: added to the variance (biased, like PyTorch) before the square root.
        elementwise_affine: learn a per-element weight (and bias) of normalized_shape.
        bias: with elementwise_affine, also learn the bias.
        dtype: dtype of the weight and bias (float32).
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype=np.float32):
        shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else tuple(normalized_shape)
        if not shape or any(int(s) < 1 for s in shape):
            raise ValueError(f"LayerNorm: normalized_shape must be positive, got {normalized_shape!r}")
        self.normalized_shape = tuple(int(s) for s in shape)
        self.eps = float(eps)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype)) if elementwise_affine and bias else None

    def forward(self, x):
        """Normalise ``x`` (..., *normalized_shape) to zero mean and unit variance over the
        trailing dims, then scale and shift."""
        if not isinstance(x, Tensor):
            x = Tensor(x)
        n = len(self.normalized_shape)
        if x.shape[x.ndim - n:] != self.normalized_shape or x.ndim < n:
            raise ValueError(f"LayerNorm: expected input ending in {self.normalized_shape}, got {x.shape}")
        return LayerNormFunction.apply(x, self.weight, self.bias, eps=self.eps, ndims=n)

    @property
    def gamma(self):
        """The scale Parameter ``weight`` (upstream TinyTorch's name)."""
        return self.weight

    @property
    def beta(self):
        """The shift Parameter ``bias`` (upstream TinyTorch's name)."""
        return self.bias

    def extra_repr(self):
        """``normalized_shape, eps=...`` for repr()."""
        return f"{self.normalized_shape}, eps={self.eps}"


# ============================================================================ MLP

def _dropout_arg(dropout: float, dropout_prob: float | None, who: str) -> float:
    """``dropout``, or upstream's keyword ``dropout_prob`` in its place (not both)."""
    if dropout_prob is None:
        return dropout
    if dropout != 0.0:
        raise TypeError(f"{who}: give dropout or upstream's dropout_prob, not both")
    return dropout_prob


class LinearBiasGELUFunction(Function):
    """gelu(x @ W + b): the GEMM through ``acceleration.gemm``, bias + GELU fused in one pass."""

    def forward(self, x, weight, bias):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        h = _acc.gemm(x2, weight)
        self.x2, self.weight, self.bias, self.h, self.lead = x2, weight, bias, h, lead
        return _acc.bias_gelu(h, bias).reshape(lead + (weight.shape[1],))

    def backward(self, g):
        need = self.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])
        gh, gb = _acc.bias_gelu_backward(self.h, self.bias, g2)
        gx, gw = _acc.matmul_backward(self.x2, self.weight, gh, need[:2])  # of h = x2 @ weight
        if gx is not None:
            gx = gx.reshape(self.lead + (self.weight.shape[0],))
        return gx, gw, (gb if need[2] else None)


class MLPFunction(Function):
    """gelu(x @ W1 + b1) @ W2 + b2, saving x and the pre-activation h = x @ W1 only.

    The GELU output a (as large as h) is what fc2's backward needs for W2's gradient; rather
    than hold it from the forward to the backward (4 x D floats per position, per block: a
    sixth of a GPT's saved activations), the backward recomputes it from h with the same
    kernel, so every bit equals the unfused fc1 -> GELU -> fc2 path, and only one block's a
    is alive at a time. The cost is one bias-GELU pass per block in the backward."""

    def forward(self, x, w1, b1, w2, b2):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        h = _acc.gemm(x2, w1)
        out = _acc.gemm(_acc.bias_gelu(h, b1), w2)
        if b2 is not None:
            out += b2
        self.x2, self.w1, self.b1, self.h, self.w2, self.lead = x2, w1, b1, h, w2, lead
        return out.reshape(lead + (w2.shape[1],))

    def backward(self, g):
        need = self.needs_input_grad
        g2 = g.reshape(-1, g.shape[-1])
        a = _acc.bias_gelu(self.h, self.b1)  # fc2's input, recomputed (same bits as the forward's)
        ga, gw2 = _acc.matmul_backward(a, self.w2, g2, (any(need[:3]), need[3]))
        del a
        gb2 = g2.sum(axis=0) if need[4] else None
        gx = gw1 = gb1 = None
        if ga is not None:
            gh, gb1 = _acc.bias_gelu_backward(self.h, self.b1, ga)
            del ga
            gx, gw1 = _acc.matmul_backward(self.x2, self.w1, gh, need[:2])  # of h = x2 @ w1
            if gx is not None:
                gx = gx.reshape(self.lead + (self.w1.shape[0],))
        return gx, gw1, (gb1 if need[2] else None), gw2, gb2


class MLP(Layer):
    """Position-wise feed-forward: fc2(gelu_tanh(fc1(x))), then dropout.

    Args:
        embed_dim: input and output width D.
        hidden_dim: width of the hidden layer (default 4 * embed_dim).
        bias: whether fc1 and fc2 have biases (fc1's bias is fused into the GELU).
        dropout: dropout probability on the output (training mode only).
        dropout_prob: upstream TinyTorch's name for ``dropout`` (give one of them).

    Shape: (..., D) -> (..., D).
    """

    def __init__(self, embed_dim: int, hidden_dim: int | None = None, bias: bool = True, dropout: float = 0.0,
                 *, dropout_prob: float | None = None):
        dropout = _dropout_arg(dropout, dropout_prob, "MLP")
        hidden_dim = 4 * embed_dim if hidden_dim is None else hidden_dim
        self.embed_dim, self.hidden_dim = int(embed_dim), int(hidden_dim)
        self.fc1 = Linear(embed_dim, hidden_dim, bias=bias)
        self.fc2 = Linear(hidden_dim, embed_dim, bias=bias)
        self.dropout = Dropout(dropout)

    @property
    def dropout_prob(self) -> float:
        """The output dropout probability (upstream TinyTorch's name for ``dropout.p``)."""
        return self.dropout.p

    def forward(self, x):
        """fc2(gelu(fc1(x))) for ``x`` (..., embed_dim): one MLPFunction node when fc1 (with a
        bias) and fc2 are plain Linears, fc1 + GELU fused when only fc1 is."""
        if not isinstance(x, Tensor):
            x = Tensor(x)
        fused_fc1 = type(self.fc1) is Linear and self.fc1.bias is not None
        if fused_fc1 and x.shape[-1] != self.fc1.in_features:
            raise ValueError(f"MLP: input has {x.shape[-1]} features, fc1 expects {self.fc1.in_features}")
        if fused_fc1 and type(self.fc2) is Linear:  # the whole MLP as one node (saves less)
            fc1, fc2 = self.fc1, self.fc2
            return self.dropout(MLPFunction.apply(x, fc1.weight, fc1.bias, fc2.weight, fc2.bias))
        if fused_fc1:  # fc2 replaced (LoRA, int8, ...): it runs as its own layer
            h = LinearBiasGELUFunction.apply(x, self.fc1.weight, self.fc1.bias)
        else:
            h = gelu(self.fc1(x), approximate="tanh")
        return self.dropout(self.fc2(h))

    def flops(self, input_shapes, output_shape) -> int:
        """GEMM FLOPs of one call (the profiler asks: the fused paths skip fc1.forward,
        and MLPFunction fc2.forward too).
        ``input_shapes`` is the list of input shapes (the first is (..., D)); ``output_shape``
        is accepted for the profiler's protocol and not needed."""
        rows = math.prod(input_shapes[0][:-1])
        return 2 * rows * (self.embed_dim * self.hidden_dim + self.hidden_dim * self.embed_dim)


# ============================================================================ block

class TransformerBlock(Layer):
    """Pre-LN block: x + attn(ln1(x)), then x + mlp(ln2(x)); causal self-attention by default.

    Args:
        embed_dim: model width D; input and output are [B, T, D].
        num_heads: attention heads (must divide embed_dim).
        mlp_ratio: the MLP's hidden width is mlp_ratio * embed_dim.
        dropout: dropout probability in attention, the MLP and the residual branch.
        causal: each position attends only to itself and earlier positions.
        bias: whether the projections have biases.
        layer_norm_eps: eps of both LayerNorms.
        ff_dim: the MLP's hidden width, overriding mlp_ratio (upstream TinyTorch's argument).
        dropout_prob: upstream TinyTorch's name for ``dropout`` (give one of them).
    """

    def __init__(self, embed_dim: int, num_heads: int, mlp_ratio: int = 4, dropout: float = 0.0,
                 causal: bool = True, bias: bool = True, layer_norm_eps: float = 1e-5,
                 ff_dim: int | None = None, *, dropout_prob: float | None = None):
        dropout = _dropout_arg(dropout, dropout_prob, "TransformerBlock")
        if ff_dim is not None and (not isinstance(ff_dim, (int, np.integer)) or ff_dim < 1):
            raise ValueError(f"TransformerBlock: ff_dim must be a positive int, got {ff_dim!r}")
        self.ln1 = LayerNorm(embed_dim, eps=layer_norm_eps)
        self.attn = MultiHeadAttention(embed_dim, num_heads, bias=bias, dropout=dropout)
        self.ln2 = LayerNorm(embed_dim, eps=layer_norm_eps)
        hidden = mlp_ratio * embed_dim if ff_dim is None else int(ff_dim)
        self.mlp = MLP(embed_dim, hidden, bias=bias, dropout=dropout)
        self.resid_dropout = Dropout(dropout)
        self.causal = bool(causal)

    @property
    def attention(self):
        """The attention layer ``attn`` (upstream TinyTorch's name; ``enable_kv_cache`` swaps
        it for a ``CachedAttention`` around the same layer)."""
        return self.attn

    def forward(self, x, kv_cache=None):
        """``x`` [B, T, D] -> [B, T, D]. ``kv_cache`` (a LayerKVCache) makes the attention
        append this call's keys/values and attend over the cached ones too."""
        x = x + self.resid_dropout(self.attn(self.ln1(x), causal=self.causal, kv_cache=kv_cache))
        return x + self.mlp(self.ln2(x))


# ============================================================================ sampling

def sample_next_token(logits: np.ndarray, temperature: float = 1.0, top_k: int | None = None,
                      rng: np.random.Generator | None = None) -> np.ndarray:
    """One token id per row of ``logits`` [B, V] (an int array [B]).

    Args:
        logits: unnormalised scores, an array [B, V].
        temperature: divides the logits; 0 means greedy (argmax), < 1 sharpens, > 1 flattens.
        top_k: sample only among the k highest logits of each row (None: all).
        rng: NumPy Generator to draw from (default: the framework generator).
    """
    if not isinstance(temperature, (int, float, np.integer, np.floating)) or not np.isfinite(temperature) \
            or temperature < 0:
        raise ValueError(f"sample_next_token: temperature must be a finite number >= 0, got {temperature!r}")
    logits = np.asarray(logits, dtype=np.float64)
    if temperature == 0:
        return logits.argmax(axis=-1)
    z = logits / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = np.partition(z, -top_k, axis=-1)[:, -top_k][:, None]
        z = np.where(z < kth, -np.inf, z)
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    cdf = np.cumsum(p, axis=-1)
    rng = get_generator() if rng is None else rng
    u = rng.random(z.shape[0]) * cdf[:, -1]
    # Inverse-CDF sampling: the first index whose cumulative mass exceeds u.
    return np.minimum((cdf <= u[:, None]).sum(axis=-1), z.shape[-1] - 1)


# ============================================================================ GPT

class TiedLMHead(Layer):
    """Logits ``x @ weight^T`` with ``weight`` the token embedding's (V, D) table itself (the
    same Parameter, so ``named_parameters()`` lists it once, under the embedding's name, and
    training updates both uses): GPT-2's tied output head.

    Args:
        embedding: the ``Embedding`` whose table is shared.
    """

    def __init__(self, embedding: Embedding):
        self.weight = embedding.weight

    def forward(self, x):
        """``x`` (..., D) -> (..., V): one 2-D GEMM against the transposed table."""
        lead = x.shape[:-1]
        return (x.reshape(-1, x.shape[-1]) @ self.weight.T).reshape(*lead, self.weight.shape[0])

    def extra_repr(self):
        """The shared table's shape for repr()."""
        return f"tied to the token embedding {self.weight.shape}"


class GPT(Layer):
    """Decoder-only transformer language model. ``forward(idx [B, T]) -> logits [B, T, vocab]``.

    Args:
        vocab_size: number of token ids V.
        embed_dim: model width D (divisible by num_heads).
        num_layers: number of TransformerBlocks (may be 0).
        num_heads: attention heads per block.
        max_seq_len: context window: the most positions one forward may see (default 1024,
            upstream TinyTorch's).
        dropout: dropout probability throughout (training mode only).
        layer_norm_eps: eps of every LayerNorm (GPT-2's ``layer_norm_epsilon``).
        tie_weights: the output head reuses the token embedding's table (``TiedLMHead``), as
            GPT-2 does; False (the default) keeps a separate ``Linear`` head.

    GPT-2's initialisation (see the module docstring), from the framework generator.
    """

    input_dtype = np.int64  # what a profiler should feed it

    def __init__(self, vocab_size: int, embed_dim: int, num_layers: int, num_heads: int,
                 max_seq_len: int = 1024, dropout: float = 0.0, layer_norm_eps: float = 1e-5,
                 tie_weights: bool = False):
        for name, v in (("vocab_size", vocab_size), ("embed_dim", embed_dim), ("num_heads", num_heads),
                        ("max_seq_len", max_seq_len)):
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"GPT: {name} must be a positive int, got {v!r}")
        if not isinstance(num_layers, (int, np.integer)) or num_layers < 0:
            raise ValueError(f"GPT: num_layers must be a non-negative int, got {num_layers!r}")
        if embed_dim % num_heads != 0:
            raise ValueError(f"GPT: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
        self.vocab_size, self.embed_dim = int(vocab_size), int(embed_dim)
        self.num_layers, self.num_heads, self.max_seq_len = int(num_layers), int(num_heads), int(max_seq_len)
        self.token_embedding = Embedding(vocab_size, embed_dim)
        self.position_embedding = PositionalEmbedding(max_seq_len, embed_dim)
        self.dropout = Dropout(dropout)
        self.blocks = [TransformerBlock(embed_dim, num_heads, dropout=dropout, layer_norm_eps=layer_norm_eps)
                       for _ in range(num_layers)]
        self.ln_f = LayerNorm(embed_dim, eps=layer_norm_eps)
        self.tie_weights = bool(tie_weights)
        self.lm_head = TiedLMHead(self.token_embedding) if tie_weights else Linear(embed_dim, vocab_size, bias=False)
        self._init_weights()

    @classmethod
    def from_pretrained(cls, folder) -> "GPT":
        """A GPT holding the weights of the Hugging Face GPT-2 folder ``folder`` (config.json
        and model.safetensors, as ``save_pretrained`` writes them); see core/gpt2_format.py."""
        return load_gpt2_folder(cls, folder)

    def save_pretrained(self, folder) -> None:
        """Write this GPT as a Hugging Face GPT-2 folder (config.json, model.safetensors) that
        ``GPT2LMHeadModel.from_pretrained`` and ``GPT.from_pretrained`` read."""
        save_gpt2_folder(self, folder)

    def _init_weights(self) -> None:
        rng = get_generator()
        residual_std = 0.02 / math.sqrt(2 * max(self.num_layers, 1))
        for name, module in self.named_modules():
            if isinstance(module, Linear):
                std = residual_std if name.endswith(("attn.out_proj", "mlp.fc2")) else 0.02
                module.weight.data[...] = rng.normal(0.0, std, module.weight.shape)
                if module.bias is not None:
                    module.bias.data[...] = 0.0
            elif isinstance(module, Embedding):
                module.weight.data[...] = rng.normal(0.0, 0.02, module.weight.shape)

    @property
    def head_dim(self) -> int:
        """``embed_dim // num_heads``."""
        return self.embed_dim // self.num_heads

    def _check_idx(self, idx, offset: int = 0) -> np.ndarray:
        arr = check_token_ids(idx, self.vocab_size, "GPT")
        if arr.ndim != 2:
            raise ValueError(f"GPT: token ids must be [batch, seq], got shape {arr.shape}")
        if offset + arr.shape[1] > self.max_seq_len:
            where = f" after {offset} cached tokens" if offset else ""
            raise ValueError(f"GPT: sequence length {arr.shape[1]}{where} exceeds max_seq_len={self.max_seq_len}")
        return arr

    def forward(self, idx, kv_cache=None, start_pos: int | None = None):
        """Logits [B, T, vocab_size] for every position of ``idx``, integer ids [B, T] with
        T <= max_seq_len. With ``kv_cache`` (a KVCache) the ids continue the cached sequence.

        ``start_pos`` is the position of the first id (default: 0, or the cached length); it is
        how upstream TinyTorch's cached decoding feeds one token at a time. When
        ``perf.memoization.enable_kv_cache`` recorded a cache on the model (``_kv_cache``), a
        call with ``start_pos`` (and no ``kv_cache``) decodes into that cache and leaves the
        commit to the caller: ``forward(ids, start_pos=cache.seq_pos)`` then
        ``cache.advance()``. A call without either is an ordinary full forward."""
        advance = kv_cache is not None
        if start_pos is not None:
            if not isinstance(start_pos, (int, np.integer)) or isinstance(start_pos, bool) or start_pos < 0:
                raise ValueError(f"GPT: start_pos must be a non-negative int, got {start_pos!r}")
            if kv_cache is None:
                kv_cache = getattr(self, "_kv_cache", None)
            if kv_cache is not None and start_pos != kv_cache.length:
                raise ValueError(f"GPT: start_pos={start_pos} but the cache holds {kv_cache.length} tokens")
        offset = (0 if start_pos is None else int(start_pos)) if kv_cache is None else kv_cache.length
        arr = self._check_idx(idx, offset)
        x = self.token_embedding(arr)
        x = self.position_embedding(x, offset=offset)
        x = self.dropout(x)
        for i, block in enumerate(self.blocks):
            x = block(x, kv_cache=None if kv_cache is None else kv_cache.layer(i))
        logits = self.lm_head(self.ln_f(x))
        if advance:
            kv_cache.advance(arr.shape[1])
        return logits

    def _sample_next_token(self, logits, temperature: float = 1.0):
        """One id per row of ``logits`` [B, V] (upstream TinyTorch's method name):
        ``sample_next_token(logits, temperature)``, greedy at temperature 0."""
        return sample_next_token(logits, temperature)

    def generate(self, idx, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
                 seed: int | None = None, use_cache: bool = False):
        """Append ``max_new_tokens`` sampled ids to ``idx`` ([B, T] or [T]).

        The context is the last ``max_seq_len`` tokens. ``seed`` makes sampling reproducible
        without touching the framework generator; without it the framework generator is used.
        Returns the same kind as ``idx`` (ndarray or Tensor), with the prompt first.

        ``temperature`` and ``top_k`` shape the sampling as in ``sample_next_token``
        (temperature 0 is greedy). ``use_cache=True`` decodes through a KV cache (one new
        token per step instead of re-running the whole context), with the same logits.
        """
        tensor_in = isinstance(idx, Tensor)
        arr = check_token_ids(idx, self.vocab_size, "GPT.generate")
        squeeze = arr.ndim == 1
        if squeeze:
            arr = arr[None, :]
        if arr.ndim != 2 or arr.shape[1] == 0:
            raise ValueError(f"GPT.generate: needs a non-empty prompt of shape [batch, seq] or [seq], "
                             f"got {np.shape(idx)}")
        if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
            raise ValueError(f"GPT.generate: max_new_tokens must be a non-negative int, got {max_new_tokens!r}")
        if temperature < 0 or not np.isfinite(temperature):
            raise ValueError(f"GPT.generate: temperature must be >= 0, got {temperature}")
        if top_k is not None and (not isinstance(top_k, (int, np.integer)) or top_k < 1):
            raise ValueError(f"GPT.generate: top_k must be a positive int or None, got {top_k!r}")
        rng = np.random.default_rng(seed) if seed is not None else get_generator()

        def sample(logits_last):
            return sample_next_token(logits_last, temperature, top_k, rng)

        out = arr.astype(np.int64)
        was_training = self.training
        self.eval()
        try:
            with no_grad():
                if use_cache:
                    out = generate_with_cache(self, out, int(max_new_tokens), sample)
                else:
                    for _ in range(int(max_new_tokens)):
                        logits = self.forward(out[:, -self.max_seq_len:]).data[:, -1, :]
                        out = np.concatenate([out, sample(logits)[:, None].astype(np.int64)], axis=1)
        finally:
            self.train(was_training)
        if squeeze:
            out = out[0]
        return Tensor(out) if tensor_in else out

    def extra_repr(self):
        """The constructor sizes for repr()."""
        return (f"vocab_size={self.vocab_size}, embed_dim={self.embed_dim}, num_layers={self.num_layers}, "
                f"num_heads={self.num_heads}, max_seq_len={self.max_seq_len}")
