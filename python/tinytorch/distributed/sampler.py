"""DistributedSampler: each rank's disjoint shard of a dataset's indices, as PyTorch's sampler
(shuffled with ``seed + epoch``, the same permutation on every rank; padding or drop-last).

Owns DistributedSampler; assumes the process group's rank and world size.
"""
from __future__ import annotations

import numpy as np

from . import process_group as _pg

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """Indices of this rank's shard of a dataset, disjoint across ranks, as PyTorch's sampler.

    Args:
        dataset_len: number of samples in the dataset (an int >= 0, or an object with ``len``).
        num_replicas: number of ranks (default ``world_size()``).
        rank: this shard (default ``rank()``).
        shuffle: shuffle with ``seed + epoch`` (the same permutation on every rank).
        seed: base seed of the shuffle.
        drop_last: drop the tail so every rank gets ``len // num_replicas``; otherwise pad by
            repeating the first indices to a multiple of ``num_replicas``.
    """

    def __init__(self, dataset_len, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        n = dataset_len if isinstance(dataset_len, int) else len(dataset_len)
        if n < 0:
            raise ValueError(f"DistributedSampler: dataset length must be >= 0, got {n}")
        self.num_replicas = _pg.world_size() if num_replicas is None else int(num_replicas)
        self.rank = _pg.rank() if rank is None else int(rank)
        if self.num_replicas < 1 or not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"DistributedSampler: rank {self.rank} not in [0, {self.num_replicas})")
        self.n, self.shuffle, self.seed, self.drop_last, self.epoch = n, shuffle, seed, drop_last, 0
        self.num_samples = n // self.num_replicas if drop_last else -(-n // self.num_replicas)

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` in the shuffle seed (call at each epoch start on every rank)."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self):
        idx = (np.random.default_rng(self.seed + self.epoch).permutation(self.n) if self.shuffle
               else np.arange(self.n))
        total = self.num_samples * self.num_replicas
        if self.drop_last:
            idx = idx[:total]
        elif total > len(idx) and len(idx):
            idx = np.concatenate([idx, np.resize(idx, total - len(idx))])
        return iter(idx[self.rank:total:self.num_replicas].tolist())
