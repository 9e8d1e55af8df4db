"""``tinytorch.text.embeddings``: upstream TinyTorch's older path of ``tinytorch.core.embeddings``.

Every name is the object defined in ``tinytorch.core.embeddings`` (``text.embeddings.Embedding
is core.embeddings.Embedding``); nothing is redefined here.

Owns only the module path; assumes tinytorch.core.embeddings.
"""
from ..core.embeddings import *  # noqa: F401,F403  (the one implementation)
from ..core.embeddings import __all__  # noqa: F401
