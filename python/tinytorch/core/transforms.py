"""Data augmentation transforms (upstream TinyTorch's ``dataloader`` transforms).

  RandomHorizontalFlip(p=0.5)    flip the last (width) axis with probability p
  RandomCrop(size, padding=4)    zero-pad H and W by ``padding``, then crop ``size`` at a
                                 random offset; images are (H, W), (C, H, W) with C <= 4,
                                 or (H, W, C)
  Compose(transforms)            apply transforms in order

Each takes an ndarray or a Tensor and returns the same kind (a Tensor result has no autograd
history: augmentation happens on input data). Randomness comes from the framework generator
(``core.random``), so ``manual_seed`` makes it reproducible.

What this file owns: the three transforms above (upstream TinyTorch's names and arguments).

What it assumes: an image is an ndarray or Tensor in one of the layouts above (RandomCrop
tells (C, H, W) from (H, W, C) by C <= 4); every random draw comes from ``get_generator()``
(core/random.py); NumPy slicing and padding do the work.
"""
from __future__ import annotations

import numpy as np

from .random import get_generator
from .tensor import Tensor

__all__ = ["RandomHorizontalFlip", "RandomCrop", "Compose"]


def _unwrap(x):
    return (x.data, True) if isinstance(x, Tensor) else (np.asarray(x), False)


class RandomHorizontalFlip:
    """Flip an image left-right with probability ``p``.

    Args:
        p: flip probability in [0, 1] (default 0.5); ValueError outside.
    """

    def __init__(self, p: float = 0.5):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomHorizontalFlip: probability must be between 0 and 1, got {p}")
        self.p = float(p)

    def __call__(self, x):
        """``x`` flipped along its last axis (or unchanged), same kind as ``x``."""
        if get_generator().random() >= self.p:
            return x
        data, is_tensor = _unwrap(x)
        out = np.flip(data, axis=-1).copy()
        return Tensor(out) if is_tensor else out


class RandomCrop:
    """Zero-pad then randomly crop back to ``size`` (CIFAR-style translation).

    Args:
        size: output (H, W), or an int for a square.
        padding: pixels of zeros added on each side of H and W (default 4).
    """

    def __init__(self, size, padding: int = 4):
        self.size = (int(size), int(size)) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
        if len(self.size) != 2 or min(self.size) < 1:
            raise ValueError(f"RandomCrop: size must be a positive int or (H, W), got {size!r}")
        if padding < 0:
            raise ValueError(f"RandomCrop: padding must be >= 0, got {padding}")
        self.padding = int(padding)

    def __call__(self, x):
        """A ``size`` crop of the padded ``x`` ((H, W), (C, H, W) or (H, W, C)), same kind."""
        data, is_tensor = _unwrap(x)
        p, (th, tw) = self.padding, self.size
        if data.ndim == 2:
            hw_axes = (0, 1)
        elif data.ndim == 3:
            hw_axes = (1, 2) if data.shape[0] <= 4 else (0, 1)
        else:
            raise ValueError(f"RandomCrop: expected a 2-D or 3-D image, got shape {data.shape}")
        pad = [(0, 0)] * data.ndim
        for a in hw_axes:
            pad[a] = (p, p)
        padded = np.pad(data, pad, mode="constant", constant_values=0)
        h, w = padded.shape[hw_axes[0]], padded.shape[hw_axes[1]]
        if th > h or tw > w:
            raise ValueError(f"RandomCrop: crop {self.size} is larger than the padded image ({h}, {w})")
        g = get_generator()
        top, left = int(g.integers(0, h - th + 1)), int(g.integers(0, w - tw + 1))
        index = [slice(None)] * data.ndim
        index[hw_axes[0]] = slice(top, top + th)
        index[hw_axes[1]] = slice(left, left + tw)
        out = padded[tuple(index)].copy()
        return Tensor(out) if is_tensor else out


class Compose:
    """Chain transforms: ``Compose([t1, t2])(x) == t2(t1(x))``.

    Args:
        transforms: list of callables.
    """

    def __init__(self, transforms):
        self.transforms = list(transforms)

    def __call__(self, x):
        """``x`` passed through every transform in order."""
        for t in self.transforms:
            x = t(x)
        return x
