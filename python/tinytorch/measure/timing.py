"""timing: the clocks and the statistics every measurement of the package uses.

What this file owns
  precise_timer()   context manager; ``.elapsed`` is the wall time of the block in seconds
                    (``time.perf_counter_ns``, the finest monotonic clock Python offers).
  BenchmarkResult   summary of repeated measurements: mean, median, std, min, max,
                    p50/p90/p99 and count (percentiles by linear interpolation, like NumPy).
  benchmark(fn)     time a call repeatedly after warm-up and return a BenchmarkResult.
  measure_rounds    median seconds per call over rounds of per-contender blocks: each contender
                    runs alone after a pause (SETTLE_SECONDS: other libraries' thread pools keep
                    spinning ~0.1 s after a call and would steal the cores), rounds cycle through
                    the contenders so load drift on a shared machine hits all alike (kernels).
  time_steps        one call at a time in alternating rounds (training steps, seconds long).
  spread            (median, p10, p90) of samples.

What it assumes: NumPy only; nothing here judges a number, and timings mean something only on
a quiet machine (machine.loadavg says how quiet it was). tinytorch.perf (the course's
benchmarking API), tinytorch.scorecard and benchmarks/ all time through this file.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["precise_timer", "PreciseTimer", "BenchmarkResult", "benchmark", "SETTLE_SECONDS",
           "measure_rounds", "time_steps", "spread"]

SETTLE_SECONDS = 0.2


class PreciseTimer:
    """Times a ``with`` block. ``elapsed`` (seconds) reads the running time inside the block and
    the final time after it."""

    def __init__(self):
        self._start_ns: int | None = None
        self._end_ns: int | None = None

    def __enter__(self) -> "PreciseTimer":
        self._end_ns = None
        self._start_ns = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> bool:
        self._end_ns = time.perf_counter_ns()
        return False

    @property
    def elapsed_ns(self) -> int:
        """Nanoseconds since the block started (running inside it, final after it)."""
        if self._start_ns is None:
            raise RuntimeError("precise_timer has not been started: use it as `with precise_timer() as t:`")
        end = self._end_ns if self._end_ns is not None else time.perf_counter_ns()
        return end - self._start_ns

    @property
    def elapsed(self) -> float:
        """``elapsed_ns`` in seconds."""
        return self.elapsed_ns * 1e-9

    @property
    def elapsed_ms(self) -> float:
        """``elapsed_ns`` in milliseconds."""
        return self.elapsed_ns * 1e-6


def precise_timer() -> PreciseTimer:
    """``with precise_timer() as t: ...`` then ``t.elapsed`` is the block's time in seconds."""
    return PreciseTimer()


@dataclass
class BenchmarkResult:
    """Statistics over repeated measurements (``values``, in ``unit``).

    Args:
        name: label shown by ``str()`` and ``to_dict()`` (keyword ``metric_name`` too,
            upstream TinyTorch's name).
        values: the measurements (any array-like, flattened to float64; at least one, all
            finite).
        unit: their unit ("s" by default; ``str()`` shows seconds as ms).
        metadata: free-form extra information, carried along.
    """

    name: str
    values: np.ndarray
    unit: str = "s"
    metadata: dict = field(default_factory=dict)

    def __init__(self, name: str | None = None, values=None, unit: str = "s", metadata: dict | None = None,
                 *, metric_name: str | None = None):
        # upstream TinyTorch writes BenchmarkResult(metric_name=..., values=...): one of the two names
        if (name is None) == (metric_name is None):
            raise TypeError("BenchmarkResult: give name (or upstream's metric_name) exactly once")
        if values is None:
            raise TypeError("BenchmarkResult: values are required")
        self.name, self.values, self.unit = name if metric_name is None else metric_name, values, unit
        self.metadata = {} if metadata is None else metadata
        self.__post_init__()

    def __post_init__(self):
        v = np.asarray(self.values, dtype=np.float64).reshape(-1)
        if v.size == 0:
            raise ValueError(f"BenchmarkResult {self.name!r} needs at least one measurement")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"BenchmarkResult {self.name!r} got non-finite measurements")
        self.values = v

    @property
    def count(self) -> int:
        """Number of measurements."""
        return int(self.values.size)

    @property
    def mean(self) -> float:
        """Arithmetic mean."""
        return float(self.values.mean())

    @property
    def median(self) -> float:
        """Median (the 50th percentile)."""
        return float(np.median(self.values))

    @property
    def std(self) -> float:
        """Sample standard deviation (n - 1 in the divisor); 0 for one measurement."""
        # Sample standard deviation (n - 1); zero for a single measurement.
        return float(self.values.std(ddof=1)) if self.count > 1 else 0.0

    @property
    def min(self) -> float:
        """Smallest measurement."""
        return float(self.values.min())

    @property
    def max(self) -> float:
        """Largest measurement."""
        return float(self.values.max())

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile, q in [0, 100], by linear interpolation (NumPy's default)."""
        if not 0 <= q <= 100:
            raise ValueError(f"percentile must be in [0, 100], got {q}")
        return float(np.percentile(self.values, q))

    @property
    def p50(self) -> float:
        """50th percentile."""
        return self.percentile(50)

    @property
    def p90(self) -> float:
        """90th percentile (MLPerf's single-stream metric)."""
        return self.percentile(90)

    @property
    def p99(self) -> float:
        """99th percentile."""
        return self.percentile(99)

    # upstream TinyTorch's names for the same statistics (docs/compat.md)
    @property
    def metric_name(self) -> str:
        """``name``."""
        return self.name

    @property
    def min_val(self) -> float:
        """``min``."""
        return self.min

    @property
    def max_val(self) -> float:
        """``max``."""
        return self.max

    @property
    def ci_lower(self) -> float:
        """Lower end of the normal-approximation 95% interval of the mean, mean - 1.96 std / sqrt(n)."""
        return self.mean - 1.96 * self.std / float(np.sqrt(self.count))

    @property
    def ci_upper(self) -> float:
        """Upper end of the normal-approximation 95% interval of the mean, mean + 1.96 std / sqrt(n)."""
        return self.mean + 1.96 * self.std / float(np.sqrt(self.count))

    def to_dict(self) -> dict:
        """Name, unit and every statistic as a plain dict (JSON-friendly)."""
        return {"name": self.name, "unit": self.unit, "count": self.count, "mean": self.mean,
                "median": self.median, "std": self.std, "min": self.min, "max": self.max,
                "p50": self.p50, "p90": self.p90, "p99": self.p99}

    def __str__(self) -> str:
        scale, unit = (1e3, "ms") if self.unit == "s" else (1.0, self.unit)
        return (f"{self.name}: median {self.median * scale:.3f} {unit} "
                f"(mean {self.mean * scale:.3f} ± {self.std * scale:.3f}, "
                f"p90 {self.p90 * scale:.3f}, p99 {self.p99 * scale:.3f}, "
                f"min {self.min * scale:.3f}, max {self.max * scale:.3f}, n={self.count})")


def benchmark(fn, *args, warmup: int = 3, iterations: int = 20, name: str | None = None,
              **kwargs) -> BenchmarkResult:
    """Call ``fn(*args, **kwargs)`` ``warmup`` times untimed, then ``iterations`` times timed;
    returns a BenchmarkResult of the timed calls in seconds, labelled ``name`` (default:
    fn's ``__name__``)."""
    if not callable(fn):
        raise TypeError(f"benchmark needs a callable, got {type(fn).__name__}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative int, got {warmup!r}")
    if not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be a positive int, got {iterations!r}")
    for _ in range(warmup):
        fn(*args, **kwargs)
    times = np.empty(iterations)
    for i in range(iterations):
        start = time.perf_counter_ns()
        fn(*args, **kwargs)
        times[i] = (time.perf_counter_ns() - start) * 1e-9
    return BenchmarkResult(name or getattr(fn, "__name__", "fn"), times)


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


def spread(samples) -> tuple[float, float, float]:
    """(median, 10th percentile, 90th percentile) of ``samples``.

    Args:
        samples: the measurements (any array-like of numbers, at least one).
    """
    return (float(np.median(samples)), float(np.percentile(samples, 10)),
            float(np.percentile(samples, 90)))
