"""memory: what a measurement counts as memory, in bytes, never a formula.

What this file owns
  traced_peak(fn)           tracemalloc's peak during one call above the level at its start
                            (Python's allocators, NumPy buffers included).
  optimizer_state_bytes     bytes of the arrays an optimizer really keeps in ``opt.state``.
  runtime_memory_stats()    the native runtime's allocator counters (bytes_in_use, peak_bytes,
                            allocations), or None when the runtime does not offer them.
  reset_runtime_peak()      reset the runtime's peak counter (True when it could).

What it assumes: the runtime is reached through ``importlib.import_module("tinytorch.native")``
at call time, so this module imports (and answers None) without the native library.
"""
from __future__ import annotations

import importlib
import tracemalloc

import numpy as np

__all__ = ["traced_call", "traced_peak", "optimizer_state_bytes", "runtime_memory_stats", "reset_runtime_peak"]


def optimizer_state_bytes(opt) -> int:
    """Bytes of every array an optimizer keeps in ``opt.state`` (measured, not a formula).

    Args:
        opt: an optimizer with a ``state`` dict of dicts of arrays.
    """
    return sum(v.nbytes for s in opt.state.values() for v in s.values() if isinstance(v, np.ndarray))


def traced_call(fn, *args, **kwargs):
    """``(result, bytes)``: ``fn(*args, **kwargs)`` and tracemalloc's peak during that call
    above the level at its start (NumPy buffers are traced). Tracing is started for the call
    and stopped after it unless it was already on.
    """
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    start, _ = tracemalloc.get_traced_memory()
    try:
        result = fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, max(0, peak - start)


def traced_peak(fn) -> int:
    """Bytes: tracemalloc's peak during one call of ``fn`` above the level at its start
    (NumPy buffers are traced).

    Args:
        fn: a zero-argument callable.
    """
    return traced_call(fn)[1]


def runtime_memory_stats() -> dict | None:
    """The native runtime's allocator counters, or None when the runtime does not offer them.

    Expected keys: ``bytes_in_use``, ``peak_bytes``, ``allocations``.
    """
    try:
        native = importlib.import_module("tinytorch.native")
    except Exception:
        return None
    fn = getattr(native, "memory_stats", None)
    if fn is None:
        return None
    try:
        stats = fn()
    except Exception:  # library missing or failed to load: the counters do not exist
        return None
    if not isinstance(stats, dict) or "peak_bytes" not in stats:
        return None
    return stats


def reset_runtime_peak() -> bool:
    """Reset the native runtime's peak-bytes counter; True when a reset function ran (the
    runtime offers one and it did not fail), False otherwise (the peak then is not exact)."""
    try:
        native = importlib.import_module("tinytorch.native")
    except Exception:
        return False
    for name in ("reset_peak_memory_stats", "reset_memory_peak", "reset_peak_memory"):
        fn = getattr(native, name, None)
        if fn is not None:
            try:
                fn()
                return True
            except Exception:
                return False
    return False
