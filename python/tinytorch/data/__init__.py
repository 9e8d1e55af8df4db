"""Small datasets shipped inside the package (no download at run time).

``load_digits()``: the UCI "Optical Recognition of Handwritten Digits" 8x8 images
(1,797 samples, 10 classes, pixel values 0..16), stored in ``digits.npz`` as uint8
images (1797, 8, 8) and int64 labels. Licence: CC BY 4.0, see LICENSE-digits.txt.

``digits_split(test_fraction, seed)`` gives a fixed, class-stratified train/test split
as float32 images scaled to [0, 1], which is what the tests and milestones use.

Owns load_digits and digits_split; assumes only NumPy and the bundled digits.npz.
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["load_digits", "digits_split", "DIGITS_PATH"]

DIGITS_PATH = os.path.join(os.path.dirname(__file__), "digits.npz")


def load_digits():
    """(images uint8 (1797, 8, 8), labels int64 (1797,))."""
    with np.load(DIGITS_PATH, allow_pickle=False) as f:
        return f["images"].copy(), f["labels"].copy()


def digits_split(test_fraction: float = 0.2, seed: int = 0):
    """(x_train, y_train, x_test, y_test); x as float32 (N, 8, 8) in [0, 1].

    Each class is shuffled with ``seed`` and its last ``test_fraction`` goes to test, so
    both parts keep the class balance.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"digits_split: test_fraction must be in (0, 1), got {test_fraction}")
    images, labels = load_digits()
    rng = np.random.default_rng(seed)
    train_idx, test_idx = [], []
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(labels == c))
        n_test = int(round(len(idx) * test_fraction))
        test_idx.append(idx[len(idx) - n_test:])
        train_idx.append(idx[:len(idx) - n_test])
    train_idx = rng.permutation(np.concatenate(train_idx))
    test_idx = np.sort(np.concatenate(test_idx))
    x = images.astype(np.float32) / 16.0
    return x[train_idx], labels[train_idx], x[test_idx], labels[test_idx]
