"""Upstream TinyTorch's Benchmark and BenchmarkSuite, as thin adapters over this package's measurements.

Code written for the course's Module 19 calls ``Benchmark`` and ``BenchmarkSuite`` from
``tinytorch.perf.benchmarking`` (which re-exports this module's names; upstream's ``MLPerf`` and
``TinyMLPerf`` are perf/mlperf_classroom.py's). Here every number they return is measured by
the one implementation of each measurement:

  latency  ``benchmark()`` (perf_counter_ns, after warm-up) in milliseconds, as upstream;
  memory   ``Profiler.measure_memory`` (tracemalloc peak of one forward pass) in MB;
  accuracy ``model.evaluate(dataset)`` or the argmax of the model's scores against real labels.

What upstream simulates is not passed off as measured here:
  * accuracy without labels: upstream's ``run_accuracy_benchmark`` refuses it (ValueError) unless
    ``simulate=True``; so does this one. With ``simulate=True`` the number is
    ``simulated_accuracy``'s score on a seeded proxy task, and the result says so in its name,
    unit and ``metadata["simulated"]``, and in the report and plots; it is never averaged with a
    measured accuracy, and it ranks nothing in the recommendations;
  * energy: upstream computes joules from latency and memory with made-up coefficients; no
    energy counter is read here (none is portable), so ``results["energy"]`` is empty;
  * memory below 1 MB: upstream once replaced it with a parameter-count estimate; here it is
    the measured peak, however small.

A model is anything with ``forward(x)`` (upstream's protocol) or a callable; it runs with
gradient recording off and, when it is a Layer, in eval mode. Inputs are drawn from the
framework generator (``manual_seed`` makes them reproducible).

The ``test_unit_*`` functions are upstream's self-checks of this module, rewritten to check
measured properties of these adapters; they print one line each and raise AssertionError on
failure.

Owns the upstream classes' arguments, results and reports, and the simulated-accuracy proxy
task; assumes the measurements of tinytorch.measure and perf/profiling.py (none is
re-implemented here).
"""
from __future__ import annotations

import math
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np

from .._atomic import save_figure, write_file
from ..core.autograd import no_grad
from ..core.random import get_generator
from ..core.tensor import MB_TO_BYTES, Tensor
from ..measure.machine import system_info
from ..measure.timing import BenchmarkResult, benchmark
from .profiling import Profiler

__all__ = ["DEFAULT_WARMUP_RUNS", "DEFAULT_MEASUREMENT_RUNS", "Benchmark", "BenchmarkSuite",
           "simulated_accuracy", "test_unit_benchmark_result", "test_unit_benchmark", "test_unit_benchmark_suite"]

DEFAULT_WARMUP_RUNS = 5  # Benchmark's untimed calls before measuring (upstream's default)
DEFAULT_MEASUREMENT_RUNS = 10  # Benchmark's timed calls (upstream's default)

_LOWER_IS_BETTER = ("latency", "memory", "energy")


def _model_name(model, i: int) -> str:
    return getattr(model, "name", None) or f"model_{i}"


def _forward_fn(model):
    """The call upstream code expects: ``model.forward`` when there is one, else the model."""
    fn = getattr(model, "forward", None)
    if fn is None and callable(model):
        fn = model
    if fn is None:
        raise TypeError(f"model {type(model).__name__} has neither forward() nor __call__")

    def run(x):
        with no_grad():
            return fn(x)
    return run


class _EvalMode:
    """Puts a Layer in eval mode for the block and restores its mode after."""

    def __init__(self, model):
        self.model = model
        self.was_training = getattr(model, "training", None)

    def __enter__(self):
        if self.was_training is not None and hasattr(self.model, "eval"):
            self.model.eval()

    def __exit__(self, *exc):
        if self.was_training and hasattr(self.model, "train"):
            self.model.train()
        return False


def _accuracy(model, dataset):
    """Measured accuracy of ``model`` on ``dataset``, or None when it cannot be measured.

    ``model.evaluate(dataset)`` when the model has it (upstream's hook); else ``dataset`` must be
    an ``(inputs, labels)`` pair with integer labels: argmax of the scores against them."""
    if hasattr(model, "evaluate"):
        value = model.evaluate(dataset)
        return None if value is None else float(value)
    if not (isinstance(dataset, (tuple, list)) and len(dataset) == 2):
        return None
    inputs, labels = dataset
    labels = np.asarray(getattr(labels, "data", labels)).reshape(-1)
    if labels.dtype.kind not in "iu" and not np.all(np.mod(labels, 1) == 0):
        return None
    x = inputs if isinstance(inputs, Tensor) else Tensor(np.asarray(inputs))
    with _EvalMode(model):
        scores = np.asarray(getattr(_forward_fn(model)(x), "data", None))
    if scores.ndim != 2 or scores.shape[0] != labels.shape[0]:
        raise ValueError(f"accuracy: scores of shape {scores.shape} do not match {labels.shape[0]} labels")
    return float(np.mean(scores.argmax(axis=1) == labels.astype(np.int64)))


_PROBE_FEATURES = 4  # features of each probe vector of the simulated-accuracy proxy task


def simulated_accuracy(model, dataset, num_samples: int = 32) -> float:
    """A SIMULATED accuracy: agreement with a seeded proxy task, not a measurement of ``dataset``.

    Upstream's classroom stand-in for a model with neither ``evaluate`` nor labels:
    ``num_samples`` probe vectors of 4 features from a generator seeded by the CRC-32 of
    ``repr(dataset)`` (the dataset only picks the probes, it is never ground truth; a repr that
    holds an object address gives a per-process probe), each labelled 1 when its features sum
    above 0; the model predicts 1 when its output sums above 0. A model that passes its input
    through scores 1.0, one that ignores it about 0.5. The score depends only on what the model
    computes, never on its name or position. Callers label the result simulated
    (``Benchmark.run_accuracy_benchmark(simulate=True)`` does).

    Args:
        model: ``forward(x)`` model or callable; called on (1, 4) float32 Tensors.
        dataset: seeds the probes (its repr).
        num_samples: number of probes (default 32).

    Raises:
        ValueError: ``num_samples`` is not a positive int.
        TypeError: the model has neither forward() nor __call__.
        RuntimeError: a probe call failed or gave a non-numeric or non-finite output ("no score
            was measured": a broken model never gets a chance-level number).
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples < 1:
        raise ValueError(f"simulated_accuracy: num_samples must be a positive int, got {num_samples!r}")
    run = _forward_fn(model)
    rng = np.random.default_rng(zlib.crc32(repr(dataset).encode("utf-8")))
    probes = rng.standard_normal((int(num_samples), _PROBE_FEATURES)).astype(np.float32)
    truth = probes.astype(np.float64).sum(axis=1) > 0
    agreed = 0
    with _EvalMode(model):
        for i, probe in enumerate(probes):
            try:
                out = run(Tensor(probe.reshape(1, -1)))
                total = float(np.asarray(getattr(out, "data", out), dtype=np.float64).sum())
            except Exception as exc:  # noqa: BLE001 - any failure means nothing was scored
                raise RuntimeError(f"simulated accuracy: the model failed on probe {i} "
                                   f"({type(exc).__name__}: {exc}); no score was measured") from exc
            if not math.isfinite(total):
                raise RuntimeError(f"simulated accuracy: the model's output on probe {i} sums to {total}; "
                                   "no score was measured")
            agreed += bool(total > 0) == bool(truth[i])
    return agreed / int(num_samples)


def _checked_accuracy(value, model_name: str, j: int) -> float:
    if not (isinstance(value, float) and math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"Benchmark: the accuracy of {model_name} on dataset {j} is {value!r}; "
                         "an accuracy must be finite and in [0, 1]")
    return value


class Benchmark:
    """Latency, memory and accuracy of several models, each as a ``BenchmarkResult``.

    Args:
        models: the models (``forward(x)`` or callables); ``model.name`` labels the results.
        datasets: for the accuracy: ``(inputs, labels)`` pairs, or anything the models'
            own ``evaluate(dataset)`` accepts.
        warmup_runs: untimed calls before each latency measurement (default 5).
        measurement_runs: timed calls, and memory passes, per model (default 10).
    """

    def __init__(self, models, datasets, warmup_runs: int = DEFAULT_WARMUP_RUNS,
                 measurement_runs: int = DEFAULT_MEASUREMENT_RUNS):
        if not isinstance(warmup_runs, int) or warmup_runs < 0:
            raise ValueError(f"Benchmark: warmup_runs must be a non-negative int, got {warmup_runs!r}")
        if not isinstance(measurement_runs, int) or measurement_runs < 1:
            raise ValueError(f"Benchmark: measurement_runs must be a positive int, got {measurement_runs!r}")
        self.models, self.datasets = list(models), list(datasets)
        self.warmup_runs, self.measurement_runs = warmup_runs, measurement_runs
        self.results = {}
        self.profiler = Profiler()
        self.system_info = system_info()

    def _input(self, input_shape):
        return Tensor(get_generator().standard_normal(tuple(input_shape)).astype(np.float32))

    def run_latency_benchmark(self, input_shape=(1, 28, 28)) -> dict:
        """Per model, the latency of one forward pass in ms (``benchmark()``'s timings).

        Args:
            input_shape: shape of the random float32 input (default upstream's (1, 28, 28)).
        """
        results = {}
        for i, model in enumerate(self.models):
            name = _model_name(model, i)
            x = self._input(input_shape)
            with _EvalMode(model):
                timed = benchmark(_forward_fn(model), x, warmup=self.warmup_runs,
                                  iterations=self.measurement_runs)
            results[name] = BenchmarkResult(f"{name}_latency_ms", timed.values * 1e3, unit="ms",
                                            metadata={"input_shape": tuple(input_shape), **self.system_info})
        self.results["latency"] = results
        return results

    def run_accuracy_benchmark(self, simulate: bool = False) -> dict:
        """Per model, its accuracy on each dataset (0-1), as a ``BenchmarkResult``.

        Measured whenever it can be: ``model.evaluate(dataset)`` (upstream's hook) or the argmax
        of the scores against an ``(inputs, integer labels)`` dataset. A model that cannot be
        measured on a dataset is a ValueError, as upstream: no number nobody measured. With
        ``simulate=True`` (upstream's classroom opt-in) such a model is scored by
        ``simulated_accuracy`` on a seeded proxy task instead, and its result says so: name
        ``<model>_accuracy_simulated``, unit ``"fraction (simulated)"``,
        ``metadata["simulated"] = True`` (False for a measured result). One result never mixes
        measured and simulated numbers (ValueError). With no datasets the result is empty.

        Args:
            simulate: score unmeasurable models on the proxy task (default False).
        """
        if not isinstance(simulate, bool):
            raise TypeError(f"run_accuracy_benchmark: simulate must be True or False, got {simulate!r}")
        results = {}
        for i, model in enumerate(self.models):
            if not self.datasets:
                break
            name = _model_name(model, i)
            scores = [_accuracy(model, d) for d in self.datasets]
            unmeasured = [j for j, a in enumerate(scores) if a is None]
            if unmeasured and not simulate:
                raise ValueError(
                    f"run_accuracy_benchmark: {name} cannot be scored on dataset {unmeasured[0]}: accuracy "
                    "requires model.evaluate(dataset) or an (inputs, integer labels) dataset. Pass "
                    "simulate=True only for a classroom probe (a seeded proxy-task score, marked "
                    "simulated, not a measurement)")
            if unmeasured and len(unmeasured) < len(scores):
                raise ValueError(
                    f"run_accuracy_benchmark: {name} can be measured on some datasets but not on "
                    f"{unmeasured}; a mean of measured and simulated accuracies means nothing: "
                    "benchmark the labelled and the unlabelled datasets separately")
            simulated = bool(unmeasured)
            if simulated:
                values = [simulated_accuracy(model, d) for d in self.datasets]
                print(f"   {name}: no evaluate() and no labels: accuracy is SIMULATED (seeded proxy task), "
                      "not measured")
            else:
                values = [_checked_accuracy(a, name, j) for j, a in enumerate(scores)]
            results[name] = BenchmarkResult(
                f"{name}_accuracy_simulated" if simulated else f"{name}_accuracy", values,
                unit="fraction (simulated)" if simulated else "fraction",
                metadata={"num_datasets": len(values), "simulated": simulated, **self.system_info})
        self.results["accuracy"] = results
        return results

    def run_memory_benchmark(self, input_shape=(1, 28, 28)) -> dict:
        """Per model, the peak Python-heap memory (tracemalloc, NumPy buffers included) of one
        forward pass in MB, ``measurement_runs`` times: upstream's
        ``profiler.measure_memory(model, input_shape)["peak_memory_mb"]`` (zeros of that shape),
        or for a plain callable model the same peak of one call on a random float32 input.

        Args:
            input_shape: shape of the input (default (1, 28, 28)).
        """
        results = {}
        for i, model in enumerate(self.models):
            name = _model_name(model, i)
            with _EvalMode(model):
                if hasattr(model, "forward") or not callable(model):  # upstream's call: (model, input_shape)
                    peaks = [self.profiler.measure_memory(model, tuple(input_shape))["peak_memory_mb"]
                             for _ in range(self.measurement_runs)]
                else:
                    run, x = _forward_fn(model), self._input(input_shape)
                    peaks = [self.profiler.measure_memory(run, x)["tracemalloc_peak_bytes"] / MB_TO_BYTES
                             for _ in range(self.measurement_runs)]
            results[name] = BenchmarkResult(f"{name}_memory_mb", peaks, unit="MB",
                                            metadata={"input_shape": tuple(input_shape), **self.system_info})
        self.results["memory"] = results
        return results

    def compare_models(self, metric: str = "latency") -> list:
        """Run one benchmark and return one dict per model: model, metric, mean, std,
        ci_lower, ci_upper, count.

        Args:
            metric: ``"latency"``, ``"memory"`` or ``"accuracy"``.
        """
        runners = {"latency": self.run_latency_benchmark, "memory": self.run_memory_benchmark,
                   "accuracy": self.run_accuracy_benchmark}
        if metric not in runners:
            raise ValueError(f"compare_models: unknown metric {metric!r}; use one of {sorted(runners)}")
        return [{"model": name, "metric": metric, "mean": r.mean, "std": r.std,
                 "ci_lower": r.ci_lower, "ci_upper": r.ci_upper, "count": r.count}
                for name, r in runners[metric]().items()]


class BenchmarkSuite:
    """All of ``Benchmark``'s measurements at once, with a Markdown report and plots.

    Args:
        models: the models (see ``Benchmark``).
        datasets: datasets for the accuracy (see ``Benchmark``).
        output_dir: folder for the report and plots (created; default "benchmark_results").
    """

    def __init__(self, models, datasets, output_dir: str = "benchmark_results"):
        self.models, self.datasets = list(models), list(datasets)
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.benchmark = Benchmark(self.models, self.datasets)
        self.results = {}

    def run_full_benchmark(self, input_shape=(1, 28, 28), simulate: bool = False) -> dict:
        """``{"latency", "accuracy", "memory", "energy"}`` -> {model name: BenchmarkResult}.
        ``"energy"`` is always empty: no energy counter is measured (upstream's is simulated).

        Args:
            input_shape: input of the latency and memory runs (default upstream's (1, 28, 28)).
            simulate: ``Benchmark.run_accuracy_benchmark``'s opt-in to simulated accuracies
                for models that cannot be measured (default False: a ValueError for them).
        """
        self.results = {"latency": self.benchmark.run_latency_benchmark(input_shape),
                        "accuracy": self.benchmark.run_accuracy_benchmark(simulate=simulate),
                        "memory": self.benchmark.run_memory_benchmark(input_shape),
                        "energy": {}}
        return self.results

    def _simulated(self, metric: str) -> bool:
        return any(r.metadata.get("simulated") for r in (self.results.get(metric) or {}).values())

    def _best(self, metric: str):
        results = self.results.get(metric) or {}
        if not results or self._simulated(metric):  # a simulated score ranks nothing
            return None
        pick = min if metric in _LOWER_IS_BETTER else max
        return pick(results.items(), key=lambda kv: kv[1].mean)[0]

    def generate_report(self) -> str:
        """The results as Markdown (system information, per-metric results, the best model per
        metric), also written to ``output_dir/benchmark_report.md``. Returns the text."""
        if not self.results:
            return "No benchmark results available. Run run_full_benchmark() first."
        units = {"latency": "ms", "accuracy": "fraction", "memory": "MB", "energy": "J"}
        lines = ["# ML Model Benchmark Report", "", "## System Information", ""]
        lines += [f"- {k}: {v}" for k, v in self.benchmark.system_info.items()]
        lines += ["", "## Benchmark Results Summary", ""]
        for metric, results in self.results.items():
            simulated = " - SIMULATED: a seeded proxy-task score, not a measurement" if self._simulated(metric) else ""
            lines.append(f"### {metric.capitalize()} ({units.get(metric, '')}){simulated}")
            if not results:
                why = ("not measured (no energy counter; upstream's figure is simulated)"
                       if metric == "energy" else "not measured (no datasets)")
                lines += [f"- {why}", ""]
                continue
            lines += [f"- **{name}**: {r.mean:.4f} ± {r.std:.4f} (median {r.median:.4f}, n={r.count})"
                      for name, r in results.items()]
            lines.append("")
        lines += ["## Recommendations", ""]
        for metric, label in (("latency", "lowest latency"), ("memory", "lowest peak memory"),
                              ("accuracy", "highest accuracy")):
            best = self._best(metric)
            why = "simulated, not measured" if self._simulated(metric) else "not measured"
            lines.append(f"- {label}: {best}" if best else f"- {label}: n/a ({why})")
        lines += ["", "Timings were taken on the machine above; a loaded machine inflates them."]
        text = "\n".join(lines) + "\n"
        write_file(self.output_dir / "benchmark_report.md", text)
        return text

    def _pyplot(self):
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as exc:
            print(f"plotting skipped: matplotlib is not importable ({exc})")
            return None
        return plt

    def plot_results(self, save_plots: bool = True):
        """Bar chart (mean ± std) of every measured metric; saved to
        ``output_dir/benchmark_comparison.png``. Returns the path, or None when nothing was
        plotted (no results, or matplotlib missing: the reason is printed).

        Args:
            save_plots: write the PNG (default True); False only builds the figure.
        """
        measured = {m: r for m, r in self.results.items() if r}
        if not measured:
            print("plotting skipped: no measured results (run run_full_benchmark() first)")
            return None
        plt = self._pyplot()
        if plt is None:
            return None
        fig, axes = plt.subplots(1, len(measured), figsize=(5 * len(measured), 4), squeeze=False)
        for ax, (metric, results) in zip(axes[0], measured.items()):
            names = list(results)
            ax.bar(names, [results[n].mean for n in names], yerr=[results[n].std for n in names], capsize=4)
            ax.set_title(f"{metric} (SIMULATED, not measured)" if self._simulated(metric) else metric)
            ax.tick_params(axis="x", rotation=30)
        fig.tight_layout()
        path = None
        if save_plots:
            path = self.output_dir / "benchmark_comparison.png"
            save_figure(fig, path, dpi=100)
        plt.close(fig)
        return path

    def plot_pareto_frontier(self, x_metric: str = "latency", y_metric: str = "accuracy"):
        """Scatter of the models on two measured metrics, saved to
        ``output_dir/pareto_<x>_vs_<y>.png``; returns the path, or None (reason printed).

        Args:
            x_metric: metric on the x axis (default "latency").
            y_metric: metric on the y axis (default "accuracy").
        """
        xs, ys = self.results.get(x_metric) or {}, self.results.get(y_metric) or {}
        names = [n for n in xs if n in ys]
        if not names:
            print(f"plotting skipped: no model has both {x_metric} and {y_metric} measured")
            return None
        plt = self._pyplot()
        if plt is None:
            return None
        fig, ax = plt.subplots(figsize=(6, 5))
        ax.scatter([xs[n].mean for n in names], [ys[n].mean for n in names])
        for n in names:
            ax.annotate(n, (xs[n].mean, ys[n].mean), xytext=(4, 4), textcoords="offset points")
        label = {m: f"{m} (SIMULATED, not measured)" if self._simulated(m) else m for m in (x_metric, y_metric)}
        ax.set_xlabel(label[x_metric])
        ax.set_ylabel(label[y_metric])
        path = self.output_dir / f"pareto_{x_metric}_vs_{y_metric}.png"
        save_figure(fig, path, dpi=100)
        plt.close(fig)
        return path


# -- upstream's self-checks, over these adapters ---------------------------------------------
class _Sleeper:
    """A model whose forward takes at least ``ms`` milliseconds and scores every sample [0, 0]."""

    def __init__(self, name: str, ms: float):
        self.name, self.ms = name, ms

    def forward(self, x):
        if self.ms:
            time.sleep(self.ms * 1e-3)
        return Tensor(np.zeros((x.shape[0], 2), dtype=np.float32))


def test_unit_benchmark_result():
    """BenchmarkResult's statistics equal NumPy's on 1..5 (mean 3, sample std, 95% interval)."""
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    r = BenchmarkResult("test_metric", values)
    assert r.mean == 3.0 and r.median == 3.0 and r.count == 5
    assert abs(r.std - np.std(values, ddof=1)) < 1e-12
    assert r.min_val == 1.0 and r.max_val == 5.0
    half = 1.96 * np.std(values, ddof=1) / np.sqrt(5)
    assert abs(r.ci_lower - (3.0 - half)) < 1e-12 and abs(r.ci_upper - (3.0 + half)) < 1e-12
    assert r.to_dict()["mean"] == 3.0
    print("test_unit_benchmark_result: ok")


def test_unit_benchmark():
    """A 3 ms model measures slower than a 0 ms one; without labels the accuracy is refused, and
    simulate=True gives a result marked simulated."""
    models = [_Sleeper("fast_model", 0.0), _Sleeper("slow_model", 3.0)]
    bench = Benchmark(models, [{"data": "no labels"}], warmup_runs=1, measurement_runs=3)
    lat = bench.run_latency_benchmark()
    assert set(lat) == {"fast_model", "slow_model"}
    assert lat["slow_model"].min >= 3.0 and lat["slow_model"].median > lat["fast_model"].median
    try:
        bench.run_accuracy_benchmark()
        raise AssertionError("an unlabelled dataset was scored without simulate=True")
    except ValueError as exc:
        assert "evaluate" in str(exc)
    sim = bench.run_accuracy_benchmark(simulate=True)
    assert all(r.metadata["simulated"] and r.unit == "fraction (simulated)" for r in sim.values())
    assert all(r.min >= 0 for r in bench.run_memory_benchmark().values())
    rows = bench.compare_models("latency")
    assert [row["model"] for row in rows] == ["fast_model", "slow_model"]
    print("test_unit_benchmark: ok")


def test_unit_benchmark_suite():
    """The suite measures latency, memory and a real accuracy and writes its report."""
    x = np.zeros((4, 3), dtype=np.float32)
    labels = np.array([1, 1, 0, 1])  # _Sleeper scores [0, 0] -> argmax 0 -> accuracy 1/4
    models = [_Sleeper("efficient_model", 0.0), _Sleeper("accurate_model", 1.0)]
    with tempfile.TemporaryDirectory() as tmp:
        suite = BenchmarkSuite(models, [(x, labels)], output_dir=tmp)
        results = suite.run_full_benchmark()
        assert set(results) == {"latency", "accuracy", "memory", "energy"} and results["energy"] == {}
        assert all(abs(r.mean - 0.25) < 1e-12 for r in results["accuracy"].values())
        report = suite.generate_report()
        assert "System Information" in report and "Recommendations" in report
        assert (Path(tmp) / "benchmark_report.md").read_text() == report
    print("test_unit_benchmark_suite: ok")
