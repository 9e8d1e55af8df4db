"""Module-level dataset and collate function for the spawn-worker tests (spawned
workers must be able to import what they unpickle)."""
import numpy as np

from tinytorch.core import random as tt_random
from tinytorch.core.dataloader import Dataset


class SquaresDataset(Dataset):
    """Sample i is (i as float32 vector, i*i); also reports a framework-RNG draw."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return np.full(2, i, np.float32), np.int64(i * i), np.float64(tt_random.get_generator().random())


def sum_collate(samples):
    return np.array([s[0].sum() for s in samples], np.float32), np.array([s[1] for s in samples])
