"""Data loading: Dataset, TensorDataset, DataLoader.

What this file owns
  * ``Dataset``: anything with ``__len__`` and ``__getitem__(i)`` returning one sample
    (an array or a tuple of arrays).
  * ``TensorDataset(*arrays)``: samples are rows of equally long arrays. It also offers
    ``get_batch(indices)`` (fancy indexing, one call per batch instead of one per
    sample), which the DataLoader uses when no ``collate_fn`` is given.
  * ``DataLoader(dataset, batch_size, shuffle, drop_last, seed, collate_fn, num_workers)``:
    yields batches as tuples of Tensors (a single Tensor when samples are single
    arrays). Shuffling draws a fresh permutation every epoch from ``seed``'s own
    generator, or from the framework generator (``manual_seed``) when seed is None.

Workers: with ``num_workers > 0`` batches are built in a pool of processes started
with ``spawn`` (a child forked after OpenMP has run in the parent can hang), so the
dataset and a custom collate_fn must be picklable (defined at module level). Order is
preserved. Worker w seeds its framework generator from a per-epoch base seed + w.

What it assumes: a dataset's samples are arrays (or tuples of arrays) whose fields stack
(``default_collate`` stacks them with NumPy; the loader wraps each field of a batch, from it or
a ``collate_fn``, in a Tensor); randomness
from core/random.py; the augmentation transforms are core/transforms.py's, re-exported here
under upstream's import path.
"""
from __future__ import annotations

import multiprocessing

import numpy as np

from . import random as tt_random
from .random import get_generator
from .tensor import Tensor
from .transforms import Compose, RandomCrop, RandomHorizontalFlip  # noqa: F401  upstream's home for them

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate",
           "RandomHorizontalFlip", "RandomCrop", "Compose"]


class Dataset:
    """Base class: subclasses implement ``__len__`` and ``__getitem__``."""

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__}.__len__ is not defined")

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}.__getitem__ is not defined")


class TensorDataset(Dataset):
    """Rows of one or more arrays (or Tensors) with the same first dimension.

    ``TensorDataset(x, y)[i]`` is ``(x[i], y[i])``; ``arrays`` are kept as NumPy arrays
    (Tensors are unwrapped, not copied).
    """

    def __init__(self, *arrays):
        if not arrays:
            raise ValueError("TensorDataset: needs at least one array")
        self.arrays = tuple(a.data if isinstance(a, Tensor) else np.asarray(a) for a in arrays)
        n = len(self.arrays[0]) if self.arrays[0].ndim else None
        for i, a in enumerate(self.arrays):
            if a.ndim == 0 or len(a) != n:
                raise ValueError(f"TensorDataset: all arrays need the same first dimension; "
                                 f"shapes are {[x.shape for x in self.arrays]} (array {i} differs)")

    def __len__(self):
        return len(self.arrays[0])

    def __getitem__(self, index):
        return tuple(a[index] for a in self.arrays)

    def get_batch(self, indices):
        """The rows at ``indices`` (an integer array) of every array, as a tuple: one fancy
        index per array instead of one ``__getitem__`` per sample."""
        return tuple(a[indices] for a in self.arrays)


def default_collate(samples):
    """Stack a list of ``samples`` into a batch: tuple/list samples give a tuple of stacked
    arrays (one per field), single-array samples one stacked array."""
    first = samples[0]
    if isinstance(first, (tuple, list)):
        return tuple(np.stack([_as_array(s[i]) for s in samples]) for i in range(len(first)))
    return np.stack([_as_array(s) for s in samples])


def _as_array(x):
    return x.data if isinstance(x, Tensor) else np.asarray(x)


def _wrap(b):
    if isinstance(b, np.ndarray):
        # batches are fresh arrays (fancy indexing / stacking): wrap without another copy
        # when the Tensor dtype rule would keep the dtype anyway
        if b.dtype in (np.float16, np.float32) or b.dtype.kind in "iub":
            return Tensor.from_numpy(b)
        return Tensor(b)
    return b


def _to_tensors(batch):
    if isinstance(batch, tuple):
        return tuple(_wrap(b) for b in batch)
    return _wrap(batch)


def _fetch(dataset, indices, collate_fn):
    if collate_fn is None and hasattr(dataset, "get_batch"):
        return dataset.get_batch(indices)
    samples = [dataset[int(i)] for i in indices]
    return (collate_fn or default_collate)(samples)


# worker-process globals (spawned children import this module fresh)
_worker_dataset = None
_worker_collate = None


def _worker_init(dataset, collate_fn, base_seed, counter):
    global _worker_dataset, _worker_collate
    _worker_dataset, _worker_collate = dataset, collate_fn
    with counter.get_lock():
        worker_id = counter.value
        counter.value += 1
    tt_random.manual_seed(int(base_seed) + worker_id)


def _worker_fetch(indices):
    batch = _fetch(_worker_dataset, indices, _worker_collate)
    # ship arrays, not Tensors: smaller pickles, and no graph can cross processes
    if isinstance(batch, tuple):
        return tuple(b.data if isinstance(b, Tensor) else b for b in batch)
    return batch.data if isinstance(batch, Tensor) else batch


class DataLoader:
    """Iterates a dataset in batches of Tensors (a tuple per batch when samples are tuples).

    Args:
        dataset: anything with ``__len__`` and ``__getitem__`` (a ``Dataset``); when it
            has ``get_batch(indices)`` and no ``collate_fn`` is given, that is used.
        batch_size: samples per batch, a positive integer.
        shuffle: draw a fresh permutation every epoch.
        drop_last: drop the final batch when it is smaller than ``batch_size``.
        seed: seed of the loader's own shuffling generator; None shuffles with the
            framework generator (so ``manual_seed`` makes it reproducible).
        collate_fn: turns a list of samples into a batch (default ``default_collate``).
        num_workers: 0 loads in this process; > 0 uses a pool of spawned processes (the
            dataset and collate_fn must then be picklable). Order is preserved.

    ``len(loader)`` is the number of batches per epoch.
    """

    def __init__(self, dataset, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 seed=None, collate_fn=None, num_workers: int = 0):
        if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise TypeError(f"DataLoader: dataset must define __len__ and __getitem__, got {type(dataset).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"DataLoader: batch_size must be a positive integer, got {batch_size!r}")
        if num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be >= 0, got {num_workers}")
        self.dataset, self.batch_size = dataset, int(batch_size)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.collate_fn, self.num_workers = collate_fn, int(num_workers)
        self.seed = seed
        self._generator = None if seed is None else np.random.default_rng(seed)

    def __len__(self):
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _batches(self):
        n = len(self.dataset)
        if self.shuffle:
            order = (self._generator or get_generator()).permutation(n)
        else:
            order = np.arange(n)
        stop = n - n % self.batch_size if self.drop_last else n
        return [order[i:i + self.batch_size] for i in range(0, stop, self.batch_size)]

    def __iter__(self):
        batches = self._batches()
        if self.num_workers == 0:
            for idx in batches:
                yield _to_tensors(_fetch(self.dataset, idx, self.collate_fn))
            return
        ctx = multiprocessing.get_context("spawn")
        base_seed = int((self._generator or get_generator()).integers(0, 2 ** 31))
        counter = ctx.Value("i", 0)
        pool = ctx.Pool(self.num_workers, initializer=_worker_init,
                        initargs=(self.dataset, self.collate_fn, base_seed, counter))
        try:
            for batch in pool.imap(_worker_fetch, batches):
                yield _to_tensors(batch)
        finally:
            pool.terminate()
            pool.join()
