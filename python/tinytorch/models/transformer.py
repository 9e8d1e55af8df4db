"""``tinytorch.models.transformer``: upstream TinyTorch's path of its assembled GPT.

``GPT`` is ``tinytorch.core.transformer.GPT`` (the upstream-convention adapter over
``tinytorch.core.transformers.GPT``) and ``TinyGPT`` is the same class, as upstream's alias;
nothing is redefined here.

Owns only the module path; assumes tinytorch.core.transformer.GPT.
"""
from ..core.transformer import GPT

TinyGPT = GPT

__all__ = ["GPT", "TinyGPT"]
