"""Upstream TinyTorch's ``tinytorch.models`` package: ``GPT`` and ``TinyGPT``.

Upstream assembles its GPT in ``tinytorch/models/transformer.py`` from the core bricks; here
``models.GPT`` (and ``TinyGPT``, the same class) is ``tinytorch.core.transformer.GPT``, the
upstream-convention adapter over this project's one GPT (``tinytorch.core.transformers.GPT``):
``GPT(vocab_size, embed_dim, num_layers, num_heads, max_seq_len=1024)``, integral float token
Tensors accepted, ``forward(tokens, start_pos=0)``, ``generate(prompt, max_new_tokens=50,
temperature=1.0)``.

Owns only the package path; assumes tinytorch.core.transformer (through models/transformer.py).
"""
from .transformer import GPT, TinyGPT

__all__ = ["GPT", "TinyGPT"]
