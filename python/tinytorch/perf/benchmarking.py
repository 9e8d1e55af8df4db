"""Benchmarking: timers, summary statistics and an MLPerf-inference-style runner.

What this file owns
  precise_timer()   context manager; ``.elapsed`` is the wall time of the block in seconds
                    (``time.perf_counter_ns``, the finest monotonic clock Python offers).
  BenchmarkResult   summary of repeated measurements: mean, median, std, min, max,
                    p50/p90/p99 and count (percentiles by linear interpolation, like NumPy).
  benchmark(fn)     time a call repeatedly after warm-up and return a BenchmarkResult.
  MLPerf            ``run_standard_benchmark(model, name, test_inputs=..., labels=...)`` in the two
                    MLPerf inference scenarios that make sense on one machine:
                      single-stream: one sample per query, queries back to back; latency
                                     percentiles are the metric (MLPerf reports p90).
                      offline:       all samples available at once, run in batches; throughput
                                     (samples/s) is the metric.
                    plus peak memory and accuracy when labels are given; ``report()`` formats the
                    result as a readable table.

Memory fields (bytes; each measured over one untimed offline pass, since tracing slows code)
  python_peak_bytes           peak of what Python's allocators held above the level at the start
                              of the pass (tracemalloc). NumPy array buffers are counted here, so
                              this covers Tensor data, activations and the kernels' outputs.
  peak_memory_bytes           the same number, under its older name.
  runtime_storage_peak_bytes  the native runtime's peak_bytes counter (``tinytorch.native.
                              memory_stats()``) over the pass, reset at its start: runtime-owned
                              storage only (``tt_storage_*`` buffers, live ones included). Tensor
                              data are NumPy arrays and GEMM packing buffers are private, so this
                              is usually the bytes already in use, often 0, even when native
                              kernels ran. None when the runtime is not loaded.
  runtime_storage_allocations runtime storage allocations during the pass (None without runtime).

What it assumes
  A model is any callable taking one batch (a ``Tensor`` when the core is importable, else the raw
  array) and returning an array-like of scores; a ``Layer`` is run in eval mode and without
  gradient recording. Timing numbers are only meaningful when the machine is otherwise quiet.

What it never does
  It never judges a number against a threshold: it measures and reports.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["precise_timer", "PreciseTimer", "BenchmarkResult", "benchmark", "MLPerf",
           "STANDARD_BENCHMARKS"]


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
        name: label shown by ``str()`` and ``to_dict()``.
        values: the measurements (any array-like, flattened to float64; at least one, all
            finite).
        unit: their unit ("s" by default; ``str()`` shows seconds as ms).
        metadata: free-form extra information, carried along.
    """

    name: str
    values: np.ndarray
    unit: str = "s"
    metadata: dict = field(default_factory=dict)

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


# MLPerf Tiny task shapes, used to make synthetic inputs when none are given
# (accuracy then cannot be measured). Shapes are per sample, without the batch axis.
STANDARD_BENCHMARKS = {
    "keyword_spotting": {"input_shape": (490,), "description": "49x10 MFCC features, 12 classes"},
    "visual_wake_words": {"input_shape": (3, 96, 96), "description": "96x96 RGB, person / no person"},
    "image_classification": {"input_shape": (3, 32, 32), "description": "32x32 RGB, 10 classes"},
    "anomaly_detection": {"input_shape": (640,), "description": "5 frames x 128 log-mel bins"},
}


def _to_numpy(x) -> np.ndarray:
    data = getattr(x, "data", x)
    return np.asarray(data)


class MLPerf:
    """MLPerf-inference-style runner for one model on one machine.

    Args:
        warmup: untimed single-sample calls before measuring.
        offline_batch_size: batch size of the offline scenario.
        seed: seed of the synthetic inputs made when no ``test_inputs`` are given.
    """

    def __init__(self, warmup: int = 3, offline_batch_size: int = 32, seed: int = 0):
        if offline_batch_size < 1:
            raise ValueError(f"offline_batch_size must be >= 1, got {offline_batch_size}")
        self.warmup = int(warmup)
        self.offline_batch_size = int(offline_batch_size)
        self.seed = seed

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _make_runner(model):
        if not callable(model):
            raise TypeError(f"model must be callable, got {type(model).__name__}")
        try:
            from ..core.tensor import Tensor
            from ..core.autograd import no_grad
        except Exception:  # the core is not importable: feed raw arrays
            Tensor, no_grad = None, None

        def run(batch: np.ndarray) -> np.ndarray:
            x = Tensor(batch) if Tensor is not None else batch
            if no_grad is not None:
                with no_grad():
                    return _to_numpy(model(x))
            return _to_numpy(model(x))

        return run

    def _inputs(self, benchmark_name: str, test_inputs, num_samples: int) -> np.ndarray:
        if test_inputs is not None:
            arr = _to_numpy(test_inputs)
            if arr.ndim < 1 or arr.shape[0] == 0:
                raise ValueError(f"test_inputs must hold at least one sample along axis 0, got shape {arr.shape}")
            return arr
        if benchmark_name not in STANDARD_BENCHMARKS:
            raise ValueError(f"no test_inputs given and {benchmark_name!r} is not a standard benchmark; "
                             f"pass test_inputs or use one of {sorted(STANDARD_BENCHMARKS)}")
        shape = STANDARD_BENCHMARKS[benchmark_name]["input_shape"]
        rng = np.random.default_rng(self.seed)
        return rng.standard_normal((num_samples,) + tuple(shape)).astype(np.float32)

    @staticmethod
    def _predictions(scores: np.ndarray) -> np.ndarray:
        if scores.ndim >= 2 and scores.shape[-1] > 1:
            return scores.argmax(axis=-1)
        return (scores.reshape(scores.shape[0], -1)[:, 0] > 0).astype(np.int64)

    # -- the benchmark ----------------------------------------------------------------------
    def run_standard_benchmark(self, model, benchmark_name: str, test_inputs=None, labels=None,
                               num_queries: int | None = None, scenarios=("single_stream", "offline"),
                               num_samples: int = 64) -> dict:
        """Run the scenarios and return a dict of metrics (times in ms, memory in bytes).

        Args:
            model: a callable taking one batch (a Tensor) and returning scores; a Layer is
                run in eval mode without gradient recording.
            benchmark_name: label of the run; one of ``STANDARD_BENCHMARKS`` lets inputs be
                synthesised from its shape when ``test_inputs`` is None.
            test_inputs: samples along axis 0 (array or Tensor).
            labels: optional class labels, one per sample, for the accuracy (argmax of the
                scores, or score > 0 for a single output).
            num_queries: single-stream queries, cycling through the samples (default: one
                per sample).
            scenarios: any of ``"single_stream"`` and ``"offline"``.
            num_samples: how many synthetic samples to make when ``test_inputs`` is None.

        The result has "single_stream" (p50/p90/p99/mean latency in ms), "offline"
        (throughput), the memory fields of the module docstring, "accuracy" and "report"
        (the ``report()`` text).
        """
        from .profiling import Profiler, runtime_memory_stats

        unknown = set(scenarios) - {"single_stream", "offline"}
        if unknown:
            raise ValueError(f"unknown scenario(s) {sorted(unknown)}; use 'single_stream' and/or 'offline'")
        inputs = self._inputs(benchmark_name, test_inputs, num_samples)
        n = inputs.shape[0]
        if labels is not None:
            labels = _to_numpy(labels).reshape(-1)
            if labels.shape[0] != n:
                raise ValueError(f"labels has {labels.shape[0]} entries but test_inputs has {n} samples")
        num_queries = n if num_queries is None else int(num_queries)
        if num_queries < 1:
            raise ValueError(f"num_queries must be >= 1, got {num_queries}")

        run = self._make_runner(model)
        was_training = getattr(model, "training", None)
        if hasattr(model, "eval"):
            model.eval()
        try:
            for i in range(min(self.warmup, n)):
                run(inputs[i:i + 1])
            result = {"benchmark_name": benchmark_name, "num_samples": n,
                      "model": type(model).__name__}
            if "single_stream" in scenarios:
                lat = np.empty(num_queries)
                for q in range(num_queries):
                    i = q % n
                    start = time.perf_counter_ns()
                    run(inputs[i:i + 1])
                    lat[q] = (time.perf_counter_ns() - start) * 1e-9
                stats = BenchmarkResult("single_stream latency", lat)
                result["single_stream"] = {
                    "queries": num_queries, "p50_latency_ms": stats.p50 * 1e3,
                    "p90_latency_ms": stats.p90 * 1e3, "p99_latency_ms": stats.p99 * 1e3,
                    "mean_latency_ms": stats.mean * 1e3, "throughput_samples_per_s": 1.0 / stats.mean}
                result["latency"] = stats
            scores_batches = []

            def offline_pass():
                scores_batches.clear()
                for s in range(0, n, self.offline_batch_size):
                    scores_batches.append(run(inputs[s:s + self.offline_batch_size]))

            def memory_pass():
                offline_pass()
                return runtime_memory_stats()  # read before anything else can allocate

            memory = Profiler().measure_memory(memory_pass)
            if "offline" in scenarios:
                start = time.perf_counter_ns()
                offline_pass()
                total = (time.perf_counter_ns() - start) * 1e-9
                result["offline"] = {"batch_size": self.offline_batch_size, "total_time_s": total,
                                     "throughput_samples_per_s": n / total if total > 0 else math.inf}
            result["python_peak_bytes"] = memory["tracemalloc_peak_bytes"]
            result["peak_memory_bytes"] = result["python_peak_bytes"]  # the older name
            rt = memory["result"]
            # The counter's peak is this pass's only if it was reset at the start of the pass.
            exact = rt is not None and memory["runtime_peak_exact"]
            result["runtime_storage_peak_bytes"] = int(rt["peak_bytes"]) if exact else None
            result["runtime_storage_allocations"] = memory["runtime_allocations"] if exact else None
            scores = np.concatenate([s.reshape(s.shape[0], -1) if s.ndim == 1 else s
                                     for s in scores_batches], axis=0)
            if labels is not None:
                preds = self._predictions(scores)
                result["accuracy"] = float(np.mean(preds == labels))
            else:
                result["accuracy"] = None
        finally:
            if was_training and hasattr(model, "train"):
                model.train()
        result["report"] = self.report(result)
        return result

    @staticmethod
    def report(result: dict) -> str:
        """A readable, fixed-width summary of ``run_standard_benchmark``'s result."""
        lines = [f"MLPerf-style inference benchmark: {result['benchmark_name']} "
                 f"({result['model']}, {result['num_samples']} samples)"]
        ss = result.get("single_stream")
        if ss:
            lines.append(f"  single-stream  {ss['queries']} queries: p50 {ss['p50_latency_ms']:.3f} ms, "
                         f"p90 {ss['p90_latency_ms']:.3f} ms, p99 {ss['p99_latency_ms']:.3f} ms, "
                         f"{ss['throughput_samples_per_s']:.1f} samples/s")
        off = result.get("offline")
        if off:
            lines.append(f"  offline        batch {off['batch_size']}: "
                         f"{off['throughput_samples_per_s']:.1f} samples/s "
                         f"({off['total_time_s'] * 1e3:.2f} ms total)")
        mem = result["python_peak_bytes"]
        rt = result.get("runtime_storage_peak_bytes")
        if rt is None:
            rt_txt = "n/a (runtime not loaded)"
        else:
            rt_txt = (f"{rt / 2**20:.2f} MiB, {result.get('runtime_storage_allocations')} allocations "
                      f"(tt_storage_* buffers only; Tensor data are NumPy arrays, counted above)")
        lines.append(f"  peak memory    Python heap (tracemalloc) {mem / 2**20:.2f} MiB")
        lines.append(f"                 runtime-owned storage {rt_txt}")
        acc = result.get("accuracy")
        lines.append("  accuracy       " + ("n/a (no labels)" if acc is None else f"{acc * 100:.2f}%"))
        return "\n".join(lines)
