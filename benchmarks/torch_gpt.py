"""torch_gpt: our GPT (tinytorch.core.transformers.GPT) written in torch.nn, the one PyTorch
reference model of the GPT benchmarks (bench_gpt.py and bench_kv_cache.py through it,
bench_scale.py, profile_gpt.py).

Owns the twin's architecture -- pre-LN blocks, separate q/k/v/out projections, tanh-GELU MLP,
learned positions, and the head either tied to the token table or a bias-free Linear, as ours
-- with a past-key-values loop for decoding and per-block torch.utils.checkpoint for training,
and the copy of our weights into it. Two benchmarks that compare against PyTorch must compare
against the same model, so there is one definition.

Assumes: the twin's modules carry our parameter names ("blocks.0.attn.q_proj.weight", ...),
so weights go across by name; our Linear weight is (in, out) and torch's (out, in). torch is
passed in by the caller, so this file imports without it.
"""
from __future__ import annotations

import numpy as np


def build_torch_gpt(torch, cfg: dict, tie_weights: bool = True):
    """Our GPT's architecture in torch.nn at ``cfg`` (vocab_size, embed_dim, num_layers,
    num_heads, max_seq_len), with fresh weights (``copy_weights`` brings ours across).

    Args:
        torch: the torch module.
        cfg: the GPT configuration, as GPT(**cfg) takes it.
        tie_weights: logits = x @ token_embedding.weight^T (as GPT(tie_weights=True)); False
            gives a separate bias-free ``lm_head`` Linear, as our default GPT.
    Returns a module whose forward(idx, past=None, use_past=False, checkpointed=False) gives
    the logits, and (logits, the new past) when ``use_past``.
    """
    nn, F = torch.nn, torch.nn.functional
    e, h, L = cfg["embed_dim"], cfg["num_heads"], cfg["num_layers"]

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(e, e) for _ in range(4))

        def forward(self, x, past=None, use_past=False):
            b, t, _ = x.shape
            split = lambda z: z.view(b, t, h, e // h).transpose(1, 2)  # noqa: E731
            q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
            if past is not None:  # the simple past-key-values loop: append and attend over all
                k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
            if past is not None and t > 1:
                raise ValueError("multi-token steps after a past are not used here")
            # one query alone needs no mask (it sees every key, itself included)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
            out = self.out_proj(o.transpose(1, 2).reshape(b, t, e))
            return (out, (k, v)) if use_past else out

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(e, 4 * e), nn.Linear(4 * e, e)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(e), Attn(), nn.LayerNorm(e), MLP()

        def forward(self, x, past=None, use_past=False):
            a = self.attn(self.ln1(x), past, use_past)
            if use_past:
                a, kv = a
            x = x + a
            x = x + self.mlp(self.ln2(x))
            return (x, kv) if use_past else x

    class TorchGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(cfg["vocab_size"], e)
            self.position_embedding = nn.Module()
            self.position_embedding.weight = nn.Parameter(torch.zeros(cfg["max_seq_len"], e))
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(e)
            if not tie_weights:
                self.lm_head = nn.Linear(e, cfg["vocab_size"], bias=False)

        def forward(self, idx, past=None, use_past=False, checkpointed=False):
            offset = 0 if past is None else past[0][0].shape[2]
            x = self.token_embedding(idx) + self.position_embedding.weight[offset: offset + idx.shape[1]]
            new_past = []
            for i, block in enumerate(self.blocks):
                if use_past:
                    x, kv = block(x, None if past is None else past[i], True)
                    new_past.append(kv)
                elif checkpointed:
                    x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
            x = self.ln_f(x)
            logits = x @ self.token_embedding.weight.T if tie_weights else self.lm_head(x)
            return (logits, new_past) if use_past else logits

    return TorchGPT()


def copy_weights(torch, model, names, values) -> None:
    """Copy our parameters into the twin ``model``, by name.

    Args:
        torch: the torch module.
        model: a ``build_torch_gpt`` module of the same configuration.
        names: our parameter names, in order; they must be exactly the twin's.
        values: their arrays in the same order, any iterable: they are read one at a time, so
            a large model's weights can stream from files. A Linear's 2-D weight goes across
            transposed (ours (in, out), torch's (out, in)); embeddings as they are.
    Raises RuntimeError naming the differences when the parameter sets differ.
    """
    theirs = dict(model.named_parameters())
    names = list(names)
    if sorted(names) != sorted(theirs):
        raise RuntimeError(f"parameter sets differ: ours {sorted(set(names) - set(theirs))}, "
                           f"torch's {sorted(set(theirs) - set(names))}")
    with torch.no_grad():
        for name, value in zip(names, values):
            is_linear = value.ndim == 2 and "embedding" not in name
            # a C-ordered copy: torch.from_numpy needs a writable array (a memory map is not)
            theirs[name].copy_(torch.from_numpy(np.array(value.T if is_linear else value, order="C")))
