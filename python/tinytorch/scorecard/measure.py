"""Timing, thread limits and memory counting shared by the scorecard sections and benchmarks/.

Design: one copy of each measuring helper, in the package so the ``tinytorch scorecard``
command (installed, without benchmarks/) and the benchmark scripts (which re-export these
through benchmarks/_common.py) time things the same way.

  measure_rounds  median seconds per call over rounds of per-contender blocks: each contender
                  runs alone after a pause (other libraries' thread pools keep spinning ~0.1 s
                  after a call and would steal the cores), rounds cycle through contenders so
                  load drift on a shared machine hits all alike.
  time_steps      one call at a time in alternating rounds (training steps, seconds long).
  Threads         the runtime, every pool threadpoolctl finds (BLAS, OpenMP) and PyTorch when
                  already imported, on n threads; restored on exit. Without threadpoolctl only
                  the runtime and PyTorch are limited.
  optimizer_state_bytes  bytes of the arrays an optimizer really keeps (not a formula).
  traced_peak     tracemalloc's peak above the level at the start of one call.
"""
from __future__ import annotations

import statistics
import sys
import time
import tracemalloc

import numpy as np

__all__ = ["SETTLE_SECONDS", "measure_rounds", "time_steps", "Threads", "blas_threads_limited",
           "optimizer_state_bytes", "traced_peak"]

SETTLE_SECONDS = 0.2


def measure_rounds(contenders: dict, rounds: int, block_time: float = 0.25) -> dict:
    """Median seconds per call of each zero-argument callable. Each round gives every
    contender one block: a pause (SETTLE_SECONDS), one warm-up call, then calls for about
    `block_time` seconds (at least one); the block's median is kept, and the result is
    the median over rounds. Rounds cycle through the contenders, so slow drifts in the
    machine's load are shared.

    Args:
        contenders: {name: zero-argument callable}.
        rounds: how many rounds (at least one is run).
        block_time: seconds of calls per block.
    """
    per_round = {name: [] for name in contenders}
    for _ in range(max(1, rounds)):
        for name, fn in contenders.items():
            time.sleep(SETTLE_SECONDS)
            fn()
            times = []
            start = time.perf_counter()
            while not times or time.perf_counter() - start < block_time:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            per_round[name].append(statistics.median(times))
    return {name: statistics.median(v) for name, v in per_round.items()}


def time_steps(fns: dict, steps: int, rounds: int, warmup: int = 1) -> dict:
    """{name: array of milliseconds}: `warmup` untimed calls each, then `rounds` rounds in
    which every callable runs `steps` timed calls in turn (load drift hits all alike). For
    work that lasts milliseconds or more, where each call is worth its own sample.

    Args:
        fns: {name: zero-argument callable}.
        steps: timed calls per callable per round.
        rounds: rounds.
        warmup: untimed calls per callable first.
    """
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(steps):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return {name: np.array(v) * 1e3 for name, v in times.items()}


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


def optimizer_state_bytes(opt) -> int:
    """Bytes of every array an optimizer keeps in ``opt.state`` (measured, not a formula).

    Args:
        opt: an optimizer with a ``state`` dict of dicts of arrays.
    """
    return sum(v.nbytes for s in opt.state.values() for v in s.values() if isinstance(v, np.ndarray))


def traced_peak(fn) -> int:
    """Bytes: tracemalloc's peak during one call of ``fn`` above the level at its start
    (NumPy buffers are traced).

    Args:
        fn: a zero-argument callable.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start, _ = tracemalloc.get_traced_memory()
    try:
        fn()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return peak - start
