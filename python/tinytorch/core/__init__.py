"""tinytorch.core: the stable contracts (tensor, autograd, layers, optimizers, training, data).

Kept light on purpose: importing ``tinytorch.core`` loads nothing heavy; import the
submodule you need (``from tinytorch.core.tensor import Tensor``).
"""
