"""tinytorch.core: the stable contracts (tensor, autograd, layers, optimizers, training, data).

Kept light on purpose: importing ``tinytorch.core`` loads nothing heavy; import the
submodule you need (``from tinytorch.core.tensor import Tensor``).

What this file owns: the package itself and nothing more -- it defines no names and imports
no submodule.

What it assumes: every submodule imports on its own (tests/core/test_import_structure.py
imports each alone in a fresh interpreter), and callers import the submodule they need.
"""
