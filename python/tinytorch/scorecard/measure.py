"""The scorecard's names for the package's measuring helpers (they live in tinytorch.measure).

Owns nothing: ``tinytorch.scorecard.measure`` was where measure_rounds, time_steps, Threads,
blas_threads_limited, optimizer_state_bytes and traced_peak were defined before the package
gained one place to measure; this path keeps importing them, as the same objects, for code
written against it. The scorecard's sections import tinytorch.measure directly.

Assumes: tinytorch.measure imports on a bare machine (nothing optional at import).
"""
from __future__ import annotations

from ..measure.memory import optimizer_state_bytes, traced_peak
from ..measure.threads import Threads, blas_threads_limited
from ..measure.timing import SETTLE_SECONDS, measure_rounds, time_steps

__all__ = ["SETTLE_SECONDS", "measure_rounds", "time_steps", "Threads", "blas_threads_limited",
           "optimizer_state_bytes", "traced_peak"]
