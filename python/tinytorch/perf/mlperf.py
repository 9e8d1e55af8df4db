"""mlperf: an MLPerf-inference-style runner of one model on one machine.

What this file owns
  MLPerf            ``run_standard_benchmark(model, name, test_inputs=..., labels=...)`` in MLPerf
                    inference's three scenarios for one machine:
                      single_stream: one sample per query, queries back to back; latency
                                     percentiles are the metric (MLPerf reports p90).
                      offline:       all samples available at once, run in batches; throughput
                                     (samples/s) is the metric.
                      server:        queries arrive at random (Poisson) times at a target rate;
                                     latency including queueing (p99) is the metric.
                    plus peak memory and accuracy when labels are given; ``report()`` formats the
                    result as a readable table.

Two engines, and the result says which one measured ("engine", "engine_detail")
  loadgen   MLCommons LoadGen (the optional extra ``tinytorch[mlperf]``), used whenever it is
            installed: a real SUT and QSL (perf/_loadgen.py), LoadGen's own p50/p90/p99 and
            samples/s read from its summary, its VALID/INVALID verdict, and its log files kept
            in ``log_dir``; accuracy comes from the responses LoadGen logged in an AccuracyOnly run.
  builtin   the timing loops below, with ``time.perf_counter_ns``: the fallback when LoadGen is
            missing (the reason is in "engine_detail"), or ``engine="builtin"``. No verdict.

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
  A model is any callable (or object with upstream's ``forward(x)``) taking one batch (a
  ``Tensor`` when the core is importable, else the raw array) and returning an array-like of
  scores; a ``Layer`` is run in eval mode and without gradient recording. Timing numbers are only meaningful when the machine is otherwise quiet.

What it never does
  It never judges a number against a threshold: it measures and reports.

Where it sits: the timers and BenchmarkResult come from tinytorch.measure.timing, the memory
pass from perf/profiling.py, LoadGen from perf/_loadgen.py. tinytorch.perf.benchmarking exports
STANDARD_BENCHMARKS and, as ``MLPerf``, perf/mlperf_classroom.py's subclass of this runner, which
adds upstream's classroom targets and pass/fail verdicts on top of these measurements (the
judging lives there, not here).
"""
from __future__ import annotations

import math
import os
import tempfile
import time

import numpy as np

from ..measure.timing import BenchmarkResult
from ._loadgen import SERVER_QPS_CAP, loadgen_status, run_loadgen
from .profiling import Profiler, runtime_memory_stats

__all__ = ["MLPerf", "STANDARD_BENCHMARKS"]


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
    """MLPerf-inference benchmark of one model on one machine: MLCommons LoadGen when it is
    installed, the built-in runner otherwise (or on request).

    Args:
        warmup: untimed single-sample calls before measuring.
        offline_batch_size: batch size of the offline scenario (and of LoadGen's offline
            query, answered in batches of this size).
        seed: seed of the synthetic inputs made when no ``test_inputs`` are given, and of the
            built-in server scenario's arrival times.
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
        call = model if callable(model) else getattr(model, "forward", None)  # upstream's forward(x) protocol
        if not callable(call):
            raise TypeError(f"model must be callable or have forward(x), got {type(model).__name__}")
        try:
            from ..core.tensor import Tensor
            from ..core.autograd import no_grad
        except Exception:  # the core is not importable: feed raw arrays
            Tensor, no_grad = None, None

        def run(batch: np.ndarray) -> np.ndarray:
            x = Tensor(batch) if Tensor is not None else batch
            if no_grad is not None:
                with no_grad():
                    return _to_numpy(call(x))
            return _to_numpy(call(x))

        return run

    def _synthetic_shape(self, benchmark_name: str):
        """Per-sample shape of the synthetic inputs of ``benchmark_name`` (None: no such task)."""
        task = STANDARD_BENCHMARKS.get(benchmark_name)
        return None if task is None else tuple(task["input_shape"])

    def _inputs(self, benchmark_name: str, test_inputs, num_samples: int) -> np.ndarray:
        if test_inputs is not None:
            arr = _to_numpy(test_inputs)
            if arr.ndim < 1 or arr.shape[0] == 0:
                raise ValueError(f"test_inputs must hold at least one sample along axis 0, got shape {arr.shape}")
            return arr
        shape = self._synthetic_shape(benchmark_name)
        if shape is None:
            raise ValueError(f"no test_inputs given and {benchmark_name!r} is not a standard benchmark; "
                             f"pass test_inputs or use one of {sorted(STANDARD_BENCHMARKS)}")
        rng = np.random.default_rng(self.seed)
        return rng.standard_normal((num_samples,) + tuple(shape)).astype(np.float32)

    @staticmethod
    def _predictions(scores: np.ndarray) -> np.ndarray:
        if scores.ndim >= 2 and scores.shape[-1] > 1:
            return scores.argmax(axis=-1)
        return (scores.reshape(scores.shape[0], -1)[:, 0] > 0).astype(np.int64)

    @staticmethod
    def _choose_engine(engine: str):
        """("loadgen" | "builtin", detail): LoadGen's version, or why the built-in runner runs."""
        if engine not in ("auto", "loadgen", "builtin"):
            raise ValueError(f"engine must be 'auto', 'loadgen' or 'builtin', got {engine!r}")
        if engine == "builtin":
            return "builtin", "built-in runner (requested)"
        lg, detail = loadgen_status()
        if lg is not None:
            return "loadgen", f"MLCommons LoadGen ({detail})"
        if engine == "loadgen":
            raise ImportError(f"engine='loadgen' was requested but {detail}")
        return "builtin", f"built-in runner ({detail})"

    @staticmethod
    def _latency_stats(seconds, queries: int) -> dict:
        stats = BenchmarkResult("latency", seconds)
        return {"engine": "builtin", "queries": queries, "p50_latency_ms": stats.p50 * 1e3,
                "p90_latency_ms": stats.p90 * 1e3, "p99_latency_ms": stats.p99 * 1e3,
                "mean_latency_ms": stats.mean * 1e3}, stats

    def _builtin_server(self, run, inputs, queries: int, target_qps: float) -> dict:
        """Poisson arrivals at ``target_qps``, one sample per query, served in arrival order;
        latency = completion - scheduled arrival (queueing included, as in MLPerf's Server)."""
        n = inputs.shape[0]
        arrivals = np.cumsum(np.random.default_rng(self.seed).exponential(1.0 / target_qps, queries))
        lat = np.empty(queries)
        start = time.perf_counter()
        for q in range(queries):
            wait = arrivals[q] - (time.perf_counter() - start)
            if wait > 0:
                time.sleep(wait)
            i = q % n
            run(inputs[i:i + 1])
            lat[q] = (time.perf_counter() - start) - arrivals[q]
        total = time.perf_counter() - start
        out, _ = self._latency_stats(np.maximum(lat, 0.0), queries)
        out.update(target_qps=target_qps, throughput_samples_per_s=queries / total)
        return out

    # -- the benchmark ----------------------------------------------------------------------
    def run_standard_benchmark(self, model, benchmark_name: str, test_inputs=None, labels=None,
                               num_queries: int | None = None, scenarios=("single_stream", "offline"),
                               num_samples: int = 64, engine: str = "auto", log_dir: str | None = None,
                               min_duration_ms: int = 1000, server_target_qps: float | None = None) -> dict:
        """Run the scenarios and return a dict of metrics (times in ms, memory in bytes).

        Args:
            model: a callable (or an object with ``forward(x)``) taking one batch (a Tensor)
                and returning scores; a Layer is
                run in eval mode without gradient recording.
            benchmark_name: label of the run; one of ``STANDARD_BENCHMARKS`` lets inputs be
                synthesised from its shape when ``test_inputs`` is None.
            test_inputs: samples along axis 0 (array or Tensor).
            labels: optional class labels, one per sample, for the accuracy (argmax of the
                scores, or score > 0 for a single output). With LoadGen it is computed from
                the responses LoadGen logged in an AccuracyOnly run.
            num_queries: queries of the built-in single-stream and server scenarios, cycling
                through the samples (default: one per sample); LoadGen's minimum query count.
            scenarios: any of ``"single_stream"``, ``"offline"`` and ``"server"``.
            num_samples: how many synthetic samples to make when ``test_inputs`` is None.
            engine: ``"auto"`` (LoadGen when installed, else the built-in runner),
                ``"loadgen"`` (ImportError naming the reason when it is missing) or
                ``"builtin"``.
            log_dir: where LoadGen writes its logs, one subfolder per scenario (kept); default
                a new temporary folder. Unused by the built-in runner.
            min_duration_ms: LoadGen's minimum duration of each scenario.
            server_target_qps: arrival rate of the server scenario; default half the
                single-sample capacity measured in a calibration (capped at 1000/s).

        The result has one entry per scenario ("single_stream", "offline", "server": p50 /
        p90 / p99 / mean latency in ms and throughput_samples_per_s; with LoadGen also its
        verdict "VALID"/"INVALID", the unmet constraints, the log folder and the parsed
        summary), "engine" ("loadgen" or "builtin") and "engine_detail" (LoadGen's version,
        or why the built-in runner measured), the memory fields of the module docstring,
        "accuracy" and "report" (the ``report()`` text).
        """
        if isinstance(scenarios, str):
            scenarios = (scenarios,)
        unknown = set(scenarios) - {"single_stream", "offline", "server"}
        if unknown:
            raise ValueError(f"unknown scenario(s) {sorted(unknown)}; use 'single_stream', 'offline' "
                             "and/or 'server'")
        if not scenarios:
            raise ValueError("scenarios is empty; name at least one of 'single_stream', 'offline', 'server'")
        engine_name, engine_detail = self._choose_engine(engine)
        if int(min_duration_ms) < 0:
            raise ValueError(f"min_duration_ms must be >= 0, got {min_duration_ms}")
        if server_target_qps is not None and not server_target_qps > 0:
            raise ValueError(f"server_target_qps must be > 0, got {server_target_qps}")
        inputs = self._inputs(benchmark_name, test_inputs, num_samples)
        n = inputs.shape[0]
        if labels is not None:
            labels = _to_numpy(labels).reshape(-1)
            if labels.shape[0] != n:
                raise ValueError(f"labels has {labels.shape[0]} entries but test_inputs has {n} samples "
                                 "(give one class index per sample)")
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
                      "model": type(model).__name__, "engine": engine_name, "engine_detail": engine_detail}
            if engine_name == "builtin" and "single_stream" in scenarios:
                lat = np.empty(num_queries)
                for q in range(num_queries):
                    i = q % n
                    start = time.perf_counter_ns()
                    run(inputs[i:i + 1])
                    lat[q] = (time.perf_counter_ns() - start) * 1e-9
                ss, stats = self._latency_stats(lat, num_queries)
                ss["throughput_samples_per_s"] = 1.0 / stats.mean
                result["single_stream"] = ss
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
            start = time.perf_counter_ns()
            offline_pass()  # the built-in offline scenario, and the calibration of LoadGen's
            total = (time.perf_counter_ns() - start) * 1e-9
            throughput = n / total if total > 0 else math.inf
            if engine_name == "builtin" and "offline" in scenarios:
                result["offline"] = {"engine": "builtin", "batch_size": self.offline_batch_size,
                                     "total_time_s": total, "throughput_samples_per_s": throughput}
            scores = np.concatenate([s.reshape(s.shape[0], -1) if s.ndim == 1 else s
                                     for s in scores_batches], axis=0)
            result["accuracy"] = None
            if engine_name == "builtin" and labels is not None:
                result["accuracy"] = float(np.mean(self._predictions(scores) == labels))
            needs_latency = engine_name == "loadgen" or ("server" in scenarios and server_target_qps is None)
            if engine_name == "loadgen":  # LoadGen's offline calibration: the faster of two passes
                start = time.perf_counter_ns()
                offline_pass()
                again = (time.perf_counter_ns() - start) * 1e-9
                throughput = max(throughput, n / again if again > 0 else math.inf)
            median_s, mean_s = self._calibrate_latency(run, inputs) if needs_latency else (None, None)
            server_target_qps = server_target_qps or (min(0.5 / mean_s, SERVER_QPS_CAP) if needs_latency else None)
            if engine_name == "builtin" and "server" in scenarios:
                qps = server_target_qps
                result["server"] = self._builtin_server(run, inputs, num_queries, qps)
            if engine_name == "loadgen":
                self._run_loadgen(result, run, inputs, scenarios, labels, num_queries, log_dir,
                                  min_duration_ms, median_s, throughput, server_target_qps)
            result["python_peak_bytes"] = memory["tracemalloc_peak_bytes"]
            result["peak_memory_bytes"] = result["python_peak_bytes"]  # the older name
            rt = memory["result"]
            # The counter's peak is this pass's only if it was reset at the start of the pass.
            exact = rt is not None and memory["runtime_peak_exact"]
            result["runtime_storage_peak_bytes"] = int(rt["peak_bytes"]) if exact else None
            result["runtime_storage_allocations"] = memory["runtime_allocations"] if exact else None
        finally:
            if was_training and hasattr(model, "train"):
                model.train()
        result["report"] = self.report(result)
        return result

    @staticmethod
    def _calibrate_latency(run, inputs, calls: int = 16):
        """(median, mean) single-sample latency in seconds over ``calls`` calls. The median is
        LoadGen's expected SingleStream latency (an overestimate would make it pre-generate too
        few queries to fill the minimum duration); the mean sets the default server rate (so a
        machine whose latency has a long tail is not offered more queries than it can serve)."""
        n = inputs.shape[0]
        times = np.empty(calls)
        for q in range(calls):
            i = q % n
            start = time.perf_counter_ns()
            run(inputs[i:i + 1])
            times[q] = (time.perf_counter_ns() - start) * 1e-9
        return max(float(np.median(times)), 1e-6), max(float(np.mean(times)), 1e-6)

    def _run_loadgen(self, result, run, inputs, scenarios, labels, num_queries, log_dir,
                     min_duration_ms, latency_s, throughput, server_target_qps):
        """LoadGen's tests (perf/_loadgen.py) filed into ``result``."""
        if log_dir is None:
            log_dir = tempfile.mkdtemp(prefix="tinytorch-mlperf-")
        log_dir = os.path.abspath(os.fspath(log_dir))
        os.makedirs(log_dir, exist_ok=True)

        def predict(indices):
            return self._predictions(run(inputs[indices]))

        order = [s for s in ("single_stream", "offline", "server") if s in scenarios]
        out = run_loadgen(predict, inputs.shape[0], order, log_dir=log_dir,
                          batch_size=self.offline_batch_size, min_duration_ms=int(min_duration_ms),
                          min_queries=num_queries, latency_s=latency_s, throughput=throughput,
                          server_qps=server_target_qps, labels=labels)
        for s in order:
            result[s] = out[s]
        if "offline" in out:
            result["offline"]["batch_size"] = self.offline_batch_size
        result["log_dir"] = log_dir
        if labels is not None:
            result["accuracy"] = out["accuracy"]
            result["accuracy_samples"] = out["accuracy_samples"]
        result["engine_detail"] = f"MLCommons LoadGen ({out['engine_version']})"

    @staticmethod
    def report(result: dict) -> str:
        """A readable, fixed-width summary of ``run_standard_benchmark``'s result.

        Args:
            result: the dict ``run_standard_benchmark`` returned.
        """
        lines = [f"MLPerf inference benchmark: {result['benchmark_name']} "
                 f"({result['model']}, {result['num_samples']} samples)",
                 f"  measured by    {result.get('engine_detail', result.get('engine', 'builtin'))}"]

        def verdict(d):
            if d.get("engine") != "loadgen":
                return ""
            unmet = f", unmet: {', '.join(d['unmet'])}" if d.get("unmet") else ""
            return f"  [{d['verdict']}{unmet}]"

        ss = result.get("single_stream")
        if ss:
            count = ss.get("queries", ss.get("samples"))
            lines.append(f"  single-stream  {count} queries: p50 {ss['p50_latency_ms']:.3f} ms, "
                         f"p90 {ss['p90_latency_ms']:.3f} ms, p99 {ss['p99_latency_ms']:.3f} ms, "
                         f"{ss['throughput_samples_per_s']:.1f} samples/s" + verdict(ss))
        off = result.get("offline")
        if off:
            extra = (f" ({off['total_time_s'] * 1e3:.2f} ms total)" if "total_time_s" in off
                     else f" ({off['samples']} samples in one query)")
            lines.append(f"  offline        batch {off['batch_size']}: "
                         f"{off['throughput_samples_per_s']:.1f} samples/s{extra}" + verdict(off))
        srv = result.get("server")
        if srv:
            lines.append(f"  server         target {srv['target_qps']:.1f} queries/s: p50 {srv['p50_latency_ms']:.3f} ms, "
                         f"p99 {srv['p99_latency_ms']:.3f} ms, {srv['throughput_samples_per_s']:.1f} samples/s"
                         + verdict(srv))
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
        if result.get("log_dir"):
            lines.append(f"  LoadGen logs   {result['log_dir']}")
        return "\n".join(lines)
