"""gpt2_format: our GPT <-> a Hugging Face GPT-2 folder (config.json + model.safetensors).

What this file owns: ``load_gpt2_folder`` (behind ``GPT.from_pretrained``) and
``save_gpt2_folder`` (behind ``GPT.save_pretrained``), the config translation and the one
weight-name mapping both directions use (``_LAYOUT``). It reads safetensors only (never
pytorch_model.bin: that is a pickle), and it needs no network and no ``transformers``.

Names (Hugging Face -> ours), per block N; the "transformer." prefix is optional on load:
  transformer.wte.weight (V, D)            token_embedding.weight
  transformer.wpe.weight (P, D)            position_embedding.weight
  transformer.h.N.ln_1 / ln_2              blocks.N.ln1 / ln2
  transformer.h.N.attn.c_attn (D, 3D)      blocks.N.attn.q_proj / k_proj / v_proj: the fused
                                           columns [0:D], [D:2D], [2D:3D] (bias likewise)
  transformer.h.N.attn.c_proj              blocks.N.attn.out_proj
  transformer.h.N.mlp.c_fc / c_proj        blocks.N.mlp.fc1 / fc2
  transformer.ln_f                         ln_f
  lm_head.weight (V, D)                    tied: not stored (it is wte); untied: lm_head.weight^T
GPT-2's Conv1D keeps its weight (in, out), the layout of our Linear, so nothing is transposed
except an untied lm_head (an nn.Linear, stored (out, in)).

How the two models differ, and what the loader does about it:
  * GELU: GPT-2's "gelu_new" (and "gelu_pytorch_tanh") is the tanh form our MLP computes; any
    other activation_function is refused, naming it.
  * LayerNorm eps: layer_norm_epsilon -> GPT(layer_norm_eps=...) (ours defaults to 1e-5 too).
  * Attention: both scale by 1/sqrt(head_dim) with a causal mask; scale_attn_weights=False and
    scale_attn_by_inverse_layer_idx=True change that scale and are refused; cross-attention too.
    reorder_and_upcast_attn only upcasts to float32, which our float32 model already is.
  * Biases on every projection in both; neither lm_head has one.
  * Positions: a learned absolute table in both (n_positions -> max_seq_len).
  * Head: tie_word_embeddings -> GPT(tie_weights=True) (one shared table, as in GPT-2).
  * MLP width: n_inner must be None or 4 * n_embd (our blocks use a 4x MLP).
  * Dropout: the *_pdrop values are not used on load (GPT(dropout=...) is the caller's choice,
    0 by default); save_pretrained writes our dropout into all three.

What it assumes: the model is our GPT (core/transformers.py, passed in as ``gpt_class`` or as
the model, so this file never imports it): its parameter names, ``state_dict`` /
``load_state_dict(strict=True)``, and plain ``Linear`` projections (an adapter is refused on
save); the bytes go through core/safetensors_files.py (the optional ``safetensors`` package),
config.json through the atomic ``tinytorch._atomic.write_file``; float weights are loaded as
float32, our model's dtype.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .._atomic import write_file
from .layers import Linear
from .safetensors_files import load_safetensors, save_safetensors

__all__ = ["load_gpt2_folder", "save_gpt2_folder", "CONFIG_NAME", "WEIGHTS_NAME"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
_PREFIX = "transformer."
# Where the fused c_attn columns go, in order (a test swaps two to prove parity can fail).
QKV_ORDER = ("q_proj", "k_proj", "v_proj")
_TANH_GELUS = ("gelu_new", "gelu_pytorch_tanh")
# Hugging Face per-block name -> ours (weights and biases alike), c_attn handled apart.
_BLOCK_LAYOUT = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_proj": "attn.out_proj",
                 "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2"}
_TOP_LAYOUT = {"wte.weight": "token_embedding.weight", "wpe.weight": "position_embedding.weight",
               "ln_f.weight": "ln_f.weight", "ln_f.bias": "ln_f.bias"}
_PROJECTIONS = tuple(f".attn.{p}" for p in QKV_ORDER) + (".attn.out_proj", ".mlp.fc1", ".mlp.fc2")
# Buffers some checkpoints store (the causal mask): not weights, skipped.
_BUFFERS = (".attn.bias", ".attn.masked_bias")


def _read_config(folder: str) -> dict:
    path = os.path.join(folder, CONFIG_NAME)
    if not os.path.isfile(path):
        raise ValueError(f"GPT.from_pretrained: {folder} has no {CONFIG_NAME} (expected a folder written "
                         "by save_pretrained)")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    if config.get("model_type", "gpt2") != "gpt2":
        raise ValueError(f"GPT.from_pretrained: {path} describes a {config.get('model_type')!r} model, not gpt2")
    refusals = [
        (config.get("activation_function", "gelu_new") not in _TANH_GELUS,
         f"activation_function={config.get('activation_function')!r} (only the tanh GELU, "
         f"{' or '.join(_TANH_GELUS)}, is what our MLP computes)"),
        (not config.get("scale_attn_weights", True), "scale_attn_weights=false (attention without 1/sqrt(d))"),
        (config.get("scale_attn_by_inverse_layer_idx", False), "scale_attn_by_inverse_layer_idx=true"),
        (config.get("add_cross_attention", False), "add_cross_attention=true (a decoder with cross-attention)"),
        (config.get("n_inner") not in (None, 4 * config.get("n_embd", 0)),
         f"n_inner={config.get('n_inner')} (our blocks use a 4 * n_embd MLP)"),
    ]
    for refused, what in refusals:
        if refused:
            raise ValueError(f"GPT.from_pretrained: {path} has {what}, which this GPT cannot reproduce")
    return config


def _read_weights(folder: str) -> dict:
    path = os.path.join(folder, WEIGHTS_NAME)
    if not os.path.isfile(path):
        others = [n for n in ("model.safetensors.index.json", "pytorch_model.bin") if os.path.exists(os.path.join(folder, n))]
        why = f" (found {others[0]}: only a single {WEIGHTS_NAME} is read; a .bin is a pickle)" if others else ""
        raise ValueError(f"GPT.from_pretrained: {folder} has no {WEIGHTS_NAME}{why}")
    stored = load_safetensors(path, "GPT.from_pretrained")
    return {(k[len(_PREFIX):] if k.startswith(_PREFIX) else k): v for k, v in stored.items()
            if not k.endswith(_BUFFERS)}


def _ours_from_hf(hf: dict, config: dict, tie: bool) -> dict:
    """Our state dict from Hugging Face names (prefix removed); KeyError naming the first
    weight the file lacks, ValueError naming the first one it has that we would not use."""
    d = int(config["n_embd"])
    hf = dict(hf)
    ours = {}

    def take(name):
        if name not in hf:
            raise KeyError(f"GPT.from_pretrained: {WEIGHTS_NAME} has no tensor {_PREFIX + name!r}")
        return hf.pop(name)

    for theirs, mine in _TOP_LAYOUT.items():
        ours[mine] = take(theirs)
    for n in range(int(config["n_layer"])):
        for theirs, mine in _BLOCK_LAYOUT.items():
            for kind in ("weight", "bias"):
                ours[f"blocks.{n}.{mine}.{kind}"] = take(f"h.{n}.{theirs}.{kind}")
        w, b = take(f"h.{n}.attn.c_attn.weight"), take(f"h.{n}.attn.c_attn.bias")
        if w.shape != (d, 3 * d) or b.shape != (3 * d,):
            raise ValueError(f"GPT.from_pretrained: h.{n}.attn.c_attn is {w.shape} / {b.shape}, "
                             f"expected ({d}, {3 * d}) / ({3 * d},)")
        for i, proj in enumerate(QKV_ORDER):
            ours[f"blocks.{n}.attn.{proj}.weight"] = w[:, i * d:(i + 1) * d]
            ours[f"blocks.{n}.attn.{proj}.bias"] = b[i * d:(i + 1) * d]
    head = hf.pop("lm_head.weight", None)
    if not tie:
        if head is None:
            raise KeyError(f"GPT.from_pretrained: tie_word_embeddings is false but {WEIGHTS_NAME} has no "
                           "'lm_head.weight'")
        ours["lm_head.weight"] = head.T
    elif head is not None and not np.array_equal(head, ours["token_embedding.weight"]):
        raise ValueError("GPT.from_pretrained: tie_word_embeddings is true but lm_head.weight differs "
                         "from transformer.wte.weight")
    if hf:
        raise ValueError(f"GPT.from_pretrained: {WEIGHTS_NAME} has tensors this GPT-2 layout does not use, "
                         f"first {sorted(hf)[0]!r} (of {len(hf)})")
    return {k: np.ascontiguousarray(v, dtype=np.float32) if v.dtype.kind == "f" else v for k, v in ours.items()}


def load_gpt2_folder(gpt_class, folder, dropout: float = 0.0):
    """A ``gpt_class`` (our GPT) built from the config of the GPT-2 folder ``folder`` and
    loaded with its weights (``dropout`` is the new model's dropout rate: GPT-2 folders do
    not say it); see the module docstring for the mapping and the refusals."""
    folder = os.fspath(folder)
    config = _read_config(folder)
    tie = bool(config.get("tie_word_embeddings", True))
    state = _ours_from_hf(_read_weights(folder), config, tie)
    model = gpt_class(vocab_size=int(config["vocab_size"]), embed_dim=int(config["n_embd"]),
                      num_layers=int(config["n_layer"]), num_heads=int(config["n_head"]),
                      max_seq_len=int(config["n_positions"]), dropout=dropout,
                      layer_norm_eps=float(config.get("layer_norm_epsilon", 1e-5)), tie_weights=tie)
    model.load_state_dict(state, strict=True)
    return model


def _tied(model) -> bool:
    # A tied head holds the embedding's own Parameter (TiedLMHead); asked by identity, so this
    # module never imports core/transformers (which imports it: no cycle).
    return getattr(model.lm_head, "weight", None) is model.token_embedding.weight


def _hf_from_ours(model) -> dict:
    for name, m in model.named_modules():
        if name.endswith(_PROJECTIONS) and type(m) is not Linear:
            raise ValueError(f"GPT.save_pretrained: {name} is a {type(m).__name__}, not a plain Linear "
                             "(merge adapters first: extensions.lora.merge_and_unload)")
    tied = _tied(model)
    if not tied and type(model.lm_head) is not Linear:
        raise ValueError(f"GPT.save_pretrained: lm_head is a {type(model.lm_head).__name__}, not a Linear")
    ours = model.state_dict()
    hf = {_PREFIX + theirs: ours[mine] for theirs, mine in _TOP_LAYOUT.items()}
    for n in range(model.num_layers):
        for theirs, mine in _BLOCK_LAYOUT.items():
            for kind in ("weight", "bias"):
                hf[f"{_PREFIX}h.{n}.{theirs}.{kind}"] = ours[f"blocks.{n}.{mine}.{kind}"]
        for kind, axis in (("weight", 1), ("bias", 0)):
            hf[f"{_PREFIX}h.{n}.attn.c_attn.{kind}"] = np.concatenate(
                [ours[f"blocks.{n}.attn.{proj}.{kind}"] for proj in QKV_ORDER], axis=axis)
    if not tied:
        hf["lm_head.weight"] = np.ascontiguousarray(ours["lm_head.weight"].T)
    return hf


def save_gpt2_folder(model, folder) -> None:
    """Write ``model`` (our GPT) as a GPT-2 folder: config.json and model.safetensors, each
    replaced atomically; the folder is created when missing."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    blocks = model.blocks
    eps = blocks[0].ln1.eps if blocks else model.ln_f.eps
    pdrop = float(model.dropout.p)
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
              "vocab_size": model.vocab_size, "n_positions": model.max_seq_len, "n_embd": model.embed_dim,
              "n_layer": model.num_layers, "n_head": model.num_heads, "n_inner": None,
              "activation_function": "gelu_new", "layer_norm_epsilon": eps,
              "resid_pdrop": pdrop, "embd_pdrop": pdrop, "attn_pdrop": pdrop,
              "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
              "reorder_and_upcast_attn": False, "initializer_range": 0.02,
              "tie_word_embeddings": _tied(model),
              "bos_token_id": None, "eos_token_id": None, "dtype": "float32"}
    # "format": "pt" is what transformers requires of a safetensors file's metadata
    save_safetensors(os.path.join(folder, WEIGHTS_NAME), _hf_from_ours(model), metadata={"format": "pt"})
    write_file(os.path.join(folder, CONFIG_NAME), json.dumps(config, indent=2) + "\n")
