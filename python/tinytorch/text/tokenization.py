"""``tinytorch.text.tokenization``: upstream TinyTorch's older path of ``tinytorch.core.tokenization``.

Every name is the object defined in ``tinytorch.core.tokenization``; nothing is redefined here.

Owns only the module path; assumes tinytorch.core.tokenization.
"""
from ..core.tokenization import *  # noqa: F401,F403  (the one implementation)
from ..core.tokenization import __all__  # noqa: F401
