"""threads: holding every thread pool of the process to one count while something is timed.

What this file owns
  Threads(n)             context manager: the tinytorch runtime, every pool threadpoolctl
                         finds (BLAS, OpenMP) and PyTorch when already imported, on n threads;
                         restored on exit. Without threadpoolctl only the runtime and PyTorch
                         are limited.
  blas_threads_limited() whether Threads limits NumPy's BLAS too (threadpoolctl installed).

What it assumes: threadpoolctl is optional (looked up at call time); PyTorch is never
imported here (only limited when sys.modules already has it); the runtime's thread count is
tinytorch.get_num_threads / set_num_threads, read when the block is entered.
"""
from __future__ import annotations

import sys

__all__ = ["Threads", "blas_threads_limited"]


def _threadpool_limits():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits


def blas_threads_limited() -> bool:
    """Whether ``Threads`` limits NumPy's BLAS too (it needs threadpoolctl)."""
    return _threadpool_limits() is not None


class Threads:
    """Context manager: the runtime, threadpoolctl's pools (BLAS, OpenMP) and PyTorch on `n`
    threads. PyTorch is limited only if it is already imported (sys.modules), so entering
    this never imports it.

    Args:
        n: the thread count (>= 1).
    """

    def __init__(self, n: int):
        if int(n) < 1:
            raise ValueError(f"thread count must be >= 1, got {n}")
        self.n = int(n)

    def __enter__(self):
        import tinytorch
        self._tt = tinytorch
        self.before = tinytorch.get_num_threads()
        tinytorch.set_num_threads(self.n)
        limits = _threadpool_limits()
        self.limit = limits(self.n) if limits else None
        self.torch = sys.modules.get("torch")
        if self.torch is not None:
            self.torch_before = self.torch.get_num_threads()
            self.torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        self._tt.set_num_threads(self.before)
        if self.limit is not None:
            self.limit.restore_original_limits()
        if self.torch is not None:
            self.torch.set_num_threads(self.torch_before)
        return False
