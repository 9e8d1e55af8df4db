"""Upstream TinyTorch's ``tinytorch.olympics`` (Module 20, the capstone): benchmark a model, then
package the baseline and optimized numbers as a JSON submission.

A thin module over this package's measurements, with upstream's names and keys:

  SimpleMLP(input_size=10, hidden_size=20, output_size=3)   Linear -> ReLU -> Linear, weights
      N(0, 0.01^2) from the framework generator and zero biases (upstream's demo model).
  BenchmarkReport(model_name).benchmark_model(model, X_test, y_test, num_runs=100) -> metrics
      parameter_count   ``Profiler.count_parameters``, plus the int8 weights (and biases) of
                        quantized layers, which are buffers rather than Parameters
      model_size_mb     bytes actually held (``core.quantization.model_size_bytes`` for a Layer,
                        so an int8-quantized model reports its int8 size; upstream assumes 4
                        bytes per parameter), over MB_TO_BYTES
      accuracy          argmax of ``model.forward(X_test)`` against ``y_test`` (measured)
      latency_ms_mean / latency_ms_std   ``benchmark()`` of a one-sample forward, ``num_runs``
                        timed calls after one untimed call (upstream times no warm-up call);
                        also latency_ms_median, which a loaded machine disturbs less
      throughput_samples_per_sec   1000 / latency_ms_mean (one sample per call)
  generate_submission(baseline_report, optimized_report=None, student_name=None,
                      techniques_applied=None) -> dict   (speedup, compression_ratio and
      accuracy_delta when an optimized report is given)
  save_submission(submission, filepath="submission.json") -> filepath
  validate_submission_schema(submission) -> True   (AssertionError naming the first broken
      field: required fields and types, metric ranges, latency order median <= p95 <= p99,
      improvements that agree with the two reports)
  OlympicEvent, qualifies_event(metrics, event) -> bool   the five classroom events and their
      eligibility floors (latency/memory: accuracy >= 0.85; accuracy contest: median latency
      < 100 ms and size < 10 MB; extreme push: accuracy >= 0.80; all-around: none). Invalid
      measurements raise ValueError, missing ones KeyError; the metrics are never changed.

Nothing is printed at import (upstream prints a line per definition); ``benchmark_model`` prints
its summary like upstream. Timings mean something only on a quiet machine: ``system_info``
records the platform, CPU and load average next to them.

Owns upstream's capstone names and submission keys; its measurements are the package's own
(tinytorch.measure, perf.benchmarking, perf.profiling).
"""
from __future__ import annotations

import json
import time
from enum import Enum

import numpy as np

from ._atomic import write_file
from . import __version__
from .core.activations import ReLU
from .core.autograd import no_grad
from .core.layers import Layer, Linear, Parameter
from .core.quantization import QuantizedLinear, model_size_bytes
from .core.random import get_generator
from .core.tensor import MB_TO_BYTES, Tensor
from .measure.machine import system_info
from .perf.benchmarking import benchmark
from .perf.profiling import Profiler

__all__ = ["SimpleMLP", "BenchmarkReport", "generate_submission", "save_submission",
           "validate_submission_schema", "OlympicEvent", "qualifies_event"]


class SimpleMLP(Layer):
    """Upstream's capstone demo model: ``Linear(in, hidden) -> ReLU -> Linear(hidden, out)``.

    Args:
        input_size: features per sample (default 10).
        hidden_size: hidden width (default 20).
        output_size: number of class scores (default 3).
    """

    def __init__(self, input_size: int = 10, hidden_size: int = 20, output_size: int = 3):
        super().__init__()
        self.fc1 = Linear(input_size, hidden_size)
        self.relu = ReLU()
        self.fc2 = Linear(hidden_size, output_size)
        rng = get_generator()
        for fc in (self.fc1, self.fc2):  # upstream's small init: N(0, 0.01^2) weights, zero bias
            fc.weight = Parameter((rng.standard_normal(fc.weight.shape) * 0.01).astype(np.float32))
            fc.bias = Parameter(np.zeros(fc.bias.shape, dtype=np.float32))

    def forward(self, x):
        """Class scores (N, output_size) for ``x`` (N, input_size).

        Args:
            x: Tensor or array of inputs.
        """
        return self.fc2(self.relu(self.fc1(x)))

    def count_parameters(self) -> int:
        """Number of weights and biases, quantized layers' int8 weights included."""
        return _count_weights(self)


def _count_weights(model) -> int:
    """``Profiler.count_parameters`` plus the weights and biases that quantized layers hold as
    int8/float buffers instead of Parameters (so quantizing a model keeps its count)."""
    total = Profiler.count_parameters(model)
    if isinstance(model, Layer):
        for _, m in model.named_modules():
            if isinstance(m, QuantizedLinear):
                total += int(m.weight_q.size) + (0 if m.bias is None else int(m.bias.size))
    return total


def _model_bytes(model) -> int:
    if isinstance(model, Layer):
        return model_size_bytes(model)
    return int(sum(np.asarray(getattr(p, "data", p)).nbytes for p in model.parameters()))


class BenchmarkReport:
    """Measures one model for a submission; ``metrics`` holds the numbers after
    ``benchmark_model``.

    Args:
        model_name: label of the model in the submission (default "model").
    """

    def __init__(self, model_name: str = "model"):
        self.model_name = model_name
        self.metrics = {}
        self.system_info = system_info()
        self.timestamp = time.strftime("%Y-%m-%d %H:%M:%S")

    def benchmark_model(self, model, X_test, y_test, num_runs: int = 100) -> dict:
        """Measure parameters, size, accuracy and single-sample latency; returns ``metrics``.

        Args:
            model: a model with ``forward(x)`` and ``parameters()`` (a Layer is run in eval
                mode, without gradient recording).
            X_test: test inputs (Tensor or array), samples along axis 0.
            y_test: integer class labels, one per sample.
            num_runs: timed single-sample forward passes (default 100).
        """
        if not isinstance(num_runs, int) or num_runs < 1:
            raise ValueError(f"benchmark_model: num_runs must be a positive int, got {num_runs!r}")
        x = X_test if isinstance(X_test, Tensor) else Tensor(np.asarray(X_test))
        labels = np.asarray(getattr(y_test, "data", y_test)).reshape(-1)
        if x.ndim < 1 or x.shape[0] != labels.shape[0] or x.shape[0] == 0:
            raise ValueError(f"benchmark_model: {labels.shape[0]} labels for inputs of shape {x.shape}; "
                             "give one label per sample (at least one sample)")
        if labels.dtype.kind not in "iu" and not np.all(np.mod(labels, 1) == 0):
            raise TypeError("benchmark_model: y_test must hold integer class labels")
        params = _count_weights(model)
        size_mb = _model_bytes(model) / MB_TO_BYTES
        was_training = getattr(model, "training", None)
        if was_training is not None:
            model.eval()
        try:
            with no_grad():
                scores = np.asarray(model.forward(x).data)
                one = x[:1]
                timed = benchmark(model.forward, one, warmup=1, iterations=num_runs)
        finally:
            if was_training:
                model.train()
        if scores.ndim != 2 or scores.shape[0] != labels.shape[0]:
            raise ValueError(f"benchmark_model: expected scores (N, classes), got shape {scores.shape}")
        accuracy = float(np.mean(scores.argmax(axis=1) == labels.astype(np.int64)))
        lat_ms = timed.values * 1e3
        mean_ms = float(lat_ms.mean())
        self.metrics = {"parameter_count": int(params), "model_size_mb": float(size_mb),
                        "accuracy": accuracy, "latency_ms_mean": mean_ms,
                        "latency_ms_std": float(lat_ms.std()),
                        "latency_ms_median": float(np.median(lat_ms)),
                        "throughput_samples_per_sec": 1e3 / mean_ms if mean_ms > 0 else float("inf")}
        print(f"Benchmark results for {self.model_name}: {params:,} parameters, {size_mb:.4f} MB, "
              f"accuracy {accuracy * 100:.1f}%, latency {mean_ms:.3f} ms ± {lat_ms.std():.3f} ms")
        return self.metrics


def generate_submission(baseline_report, optimized_report=None, student_name=None,
                        techniques_applied=None) -> dict:
    """The submission dict (JSON-ready): version, type, timestamp, system information, the
    baseline and, when given, the optimized metrics with the improvements (speedup = baseline
    latency / optimized latency, compression_ratio = baseline size / optimized size,
    accuracy_delta = optimized - baseline accuracy).

    Args:
        baseline_report: a ``BenchmarkReport`` after ``benchmark_model``.
        optimized_report: optional second ``BenchmarkReport``.
        student_name: optional submitter name.
        techniques_applied: optional list of the optimizations used (e.g. ["quantization"]).
    """
    for name, rep in (("baseline_report", baseline_report), ("optimized_report", optimized_report)):
        if rep is not None and not getattr(rep, "metrics", None):
            raise ValueError(f"generate_submission: {name} has no metrics; call benchmark_model() first")
    submission = {"tinytorch_version": __version__, "submission_type": "capstone_benchmark",
                  "timestamp": baseline_report.timestamp, "system_info": baseline_report.system_info,
                  "baseline": {"model_name": baseline_report.model_name, "metrics": baseline_report.metrics}}
    if student_name:
        submission["student_name"] = student_name
    if optimized_report is not None:
        b, o = baseline_report.metrics, optimized_report.metrics
        submission["optimized"] = {"model_name": optimized_report.model_name, "metrics": o,
                                   "techniques_applied": list(techniques_applied or [])}
        submission["improvements"] = _improvements(b, o)
    return submission


def _improvements(b: dict, o: dict) -> dict:
    """speedup (median latencies when both reports have them, else means), compression ratio
    and accuracy delta of metrics ``o`` over ``b``; the denominators are floored (1e-6 ms,
    1e-9 MB) so an empty or fully pruned model gives a large finite number, as upstream."""
    key = "latency_ms_median" if "latency_ms_median" in b and "latency_ms_median" in o else "latency_ms_mean"
    return {"speedup": float(b[key] / max(o[key], 1e-6)),
            "compression_ratio": float(b["model_size_mb"] / max(o["model_size_mb"], 1e-9)),
            "accuracy_delta": float(o["accuracy"] - b["accuracy"])}


def _finite_number(value) -> bool:
    return type(value) in (int, float) and bool(np.isfinite(value))


def validate_submission_schema(submission: dict) -> bool:
    """True when ``submission`` follows the capstone contract; AssertionError (upstream's
    exception) naming the first field that does not.

    Required: ``tinytorch_version``, ``submission_type``, ``timestamp`` (strings),
    ``system_info`` (dict with ``platform`` and ``python_version``) and ``baseline``. Every
    report section (``baseline``, ``optimized``) has a ``model_name`` and ``metrics`` with
    finite numbers: ``parameter_count`` a positive int, ``model_size_mb`` and
    ``latency_ms_mean`` positive, ``accuracy`` in [0, 1]; optional latency fields are
    positive (``latency_ms_std`` non-negative) and median <= p95 <= p99. ``improvements``
    needs ``optimized`` and must equal what ``generate_submission`` computes from the two.

    Args:
        submission: the dict from ``generate_submission`` (or loaded from its JSON).
    """
    assert isinstance(submission, dict), f"submission must be a dict, got {type(submission).__name__}"
    for field in ("tinytorch_version", "submission_type", "timestamp", "system_info", "baseline"):
        assert field in submission, f"Missing required field: {field}"
    for field in ("tinytorch_version", "submission_type", "timestamp"):
        assert isinstance(submission[field], str), f"{field} must be a string"
    assert isinstance(submission["system_info"], dict), "system_info must be a dict"
    for field in ("platform", "python_version"):
        assert field in submission["system_info"], f"system_info is missing {field}"
    for section in ("baseline", "optimized"):
        if section not in submission:
            continue
        report = submission[section]
        assert isinstance(report, dict), f"{section} must be a dict"
        assert isinstance(report.get("model_name"), str), f"{section} is missing model_name"
        m = report.get("metrics")
        assert isinstance(m, dict), f"{section} is missing metrics"
        for key in ("parameter_count", "model_size_mb", "accuracy", "latency_ms_mean"):
            assert key in m, f"Missing metric in {section}: {key}"
            assert _finite_number(m[key]), f"{section}.{key} must be a finite number, got {m[key]!r}"
        assert 0 <= m["accuracy"] <= 1, f"{section}.accuracy must be in [0, 1], got {m['accuracy']}"
        assert type(m["parameter_count"]) is int and m["parameter_count"] > 0, \
            f"{section}.parameter_count must be a positive int, got {m['parameter_count']!r}"
        assert m["model_size_mb"] > 0, f"{section}.model_size_mb must be positive"
        assert m["latency_ms_mean"] > 0, f"{section}.latency_ms_mean must be positive"
        for key in ("latency_ms_median", "latency_ms_std", "latency_ms_p95", "latency_ms_p99",
                    "throughput_samples_per_sec"):
            if key in m:
                assert _finite_number(m[key]), f"{section}.{key} must be a finite number, got {m[key]!r}"
                assert m[key] >= 0 if key == "latency_ms_std" else m[key] > 0, \
                    f"{section}.{key} must be {'non-negative' if key == 'latency_ms_std' else 'positive'}"
        tail = [k for k in ("latency_ms_median", "latency_ms_p95", "latency_ms_p99") if k in m]
        for lo, hi in zip(tail, tail[1:]):
            assert m[lo] <= m[hi], f"{section}.{hi} must not be below {section}.{lo}"
    if "improvements" in submission:
        assert "optimized" in submission, "improvements need an optimized report"
        got = submission["improvements"]
        assert isinstance(got, dict), "improvements must be a dict"
        want = _improvements(submission["baseline"]["metrics"], submission["optimized"]["metrics"])
        for key, value in want.items():
            assert _finite_number(got.get(key)), f"improvements.{key} must be a finite number"
            assert np.isclose(got[key], value, rtol=1e-6, atol=1e-12), \
                f"improvements.{key} = {got[key]} disagrees with the reports ({value})"
    return True


class OlympicEvent(Enum):
    """The five classroom capstone events (upstream's names and string values)."""
    LATENCY_SPRINT = "latency_sprint"
    MEMORY_CHALLENGE = "memory_challenge"
    ACCURACY_CONTEST = "accuracy_contest"
    ALL_AROUND = "all_around"
    EXTREME_PUSH = "extreme_push"


def qualifies_event(metrics: dict, event) -> bool:
    """Whether ``metrics`` meet ``event``'s eligibility floor; never changes ``metrics``.

    Latency sprint and memory challenge need accuracy >= 0.85; the accuracy contest needs
    median latency < 100 ms and model size < 10 MB; extreme push needs accuracy >= 0.80;
    all-around has no floor. False means valid measurements that miss the floor.

    Args:
        metrics: a ``BenchmarkReport.metrics`` dict (``accuracy``, ``latency_ms_median``,
            ``model_size_mb`` are read; a missing one raises KeyError).
        event: an ``OlympicEvent`` or its string value (an unknown name raises ValueError).
    """
    try:
        event = OlympicEvent(event)
    except ValueError:
        raise ValueError(f"qualifies_event: unknown event {event!r}; expected one of "
                         f"{[e.value for e in OlympicEvent]}") from None
    accuracy, latency, size = (metrics[k] for k in ("accuracy", "latency_ms_median", "model_size_mb"))
    values = np.array([accuracy, latency, size], dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"qualifies_event: measurements must be finite, got accuracy={accuracy}, "
                         f"latency_ms_median={latency}, model_size_mb={size}")
    if not 0 <= accuracy <= 1 or latency <= 0 or size <= 0:
        raise ValueError(f"qualifies_event: accuracy must be in [0, 1] and latency and size positive, got "
                         f"accuracy={accuracy}, latency_ms_median={latency}, model_size_mb={size}")
    if event in (OlympicEvent.LATENCY_SPRINT, OlympicEvent.MEMORY_CHALLENGE):
        return bool(accuracy >= 0.85)
    if event is OlympicEvent.ACCURACY_CONTEST:
        return bool(latency < 100.0 and size < 10.0)
    if event is OlympicEvent.EXTREME_PUSH:
        return bool(accuracy >= 0.80)
    return True


def save_submission(submission: dict, filepath: str = "submission.json") -> str:
    """Write ``submission`` as indented JSON to ``filepath`` and return ``filepath``.

    Args:
        submission: the dict from ``generate_submission``.
        filepath: where to write (default "submission.json").
    """
    write_file(filepath, json.dumps(submission, indent=2))
    print(f"Submission saved to: {filepath}")
    return filepath
