"""Upstream TinyTorch's older package path ``tinytorch.text`` (tokenization and embeddings).

Upstream's earlier layout exported its text modules here; its current one keeps them under
``tinytorch.core``. Both paths import here, and both are the same modules of this project:
``tinytorch.text.embeddings`` re-exports ``tinytorch.core.embeddings`` and
``tinytorch.text.tokenization`` re-exports ``tinytorch.core.tokenization`` (one
implementation each; see docs/compat.md).

Owns only the package path; assumes the core modules it names.
"""
__all__ = ["embeddings", "tokenization"]
