"""The LeNet-style network of milestone 04, shared with milestone 06 (which benchmarks it).

conv 1->6 (3x3, pad 1) on 8x8 -> ReLU -> pool to 4x4 -> conv 6->16 (3x3, pad 1) -> ReLU ->
pool to 2x2 -> flatten 64 -> Linear 32 -> ReLU -> Linear 10: 3,350 parameters. The activation
is a parameter so a custom one can be swapped in (milestone 04 does, with QuickGELU).
"""
from __future__ import annotations

from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Flatten, Linear, Sequential
from tinytorch.core.spatial import Conv2d, MaxPool2d


def lenet(activation=ReLU):
    """The LeNet-style network for (N, 1, 8, 8) inputs; ``activation`` is a Layer class."""
    return Sequential(
        Conv2d(1, 6, 3, padding=1), activation(), MaxPool2d(2),
        Conv2d(6, 16, 3, padding=1), activation(), MaxPool2d(2),
        Flatten(), Linear(64, 32), activation(), Linear(32, 10))
