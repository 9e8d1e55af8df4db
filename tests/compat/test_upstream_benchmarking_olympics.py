"""Upstream's perf.benchmarking classes (Benchmark, BenchmarkSuite, TinyMLPerf, test_unit_*) and
tinytorch.olympics, called the way upstream code calls them. Every number checked is measured:
latencies against a known sleep, memory against a known allocation, accuracies against an
independent argmax, sizes against the parameters' bytes."""
import json
import time

import numpy as np
import pytest

import tinytorch
from tinytorch.core.layers import Linear
from tinytorch.core.quantization import model_size_bytes
from tinytorch.core.tensor import MB_TO_BYTES, Tensor
from tinytorch.perf import benchmarking
from tinytorch.perf.benchmarking import (DEFAULT_MEASUREMENT_RUNS, DEFAULT_WARMUP_RUNS, Benchmark,
                                         BenchmarkResult, BenchmarkSuite, TinyMLPerf)


class Sleepy:
    """forward() sleeps ``ms`` and scores each sample with fixed weights (upstream's mock style)."""

    def __init__(self, name, ms, weights=None):
        self.name, self.ms, self.weights = name, ms, weights

    def forward(self, x):
        if self.ms:
            time.sleep(self.ms * 1e-3)
        data = x.data.reshape(x.shape[0], -1)
        w = self.weights if self.weights is not None else np.zeros((data.shape[1], 2), np.float32)
        return Tensor(data @ w)


class Allocates:
    """forward() holds an 8 MiB buffer while it runs: the memory benchmark must see it."""
    name = "allocates"

    def forward(self, x):
        buf = np.ones(8 * MB_TO_BYTES // 8, dtype=np.float64)
        return Tensor(np.array([[buf[0], 0.0]], dtype=np.float32))


def test_module_paths_and_defaults_are_upstreams():
    assert (DEFAULT_WARMUP_RUNS, DEFAULT_MEASUREMENT_RUNS) == (5, 10)
    for name in ["Benchmark", "BenchmarkSuite", "TinyMLPerf", "test_unit_benchmark_result",
                 "test_unit_benchmark", "test_unit_benchmark_suite", "test_unit_tinymlperf",
                 "DEFAULT_WARMUP_RUNS", "DEFAULT_MEASUREMENT_RUNS"]:
        assert name in benchmarking.__all__ and hasattr(benchmarking, name)
    b = Benchmark([Sleepy("m", 0)], [])
    assert (b.warmup_runs, b.measurement_runs) == (5, 10)
    assert {"platform", "processor", "python_version", "cpu_count"} <= set(b.system_info)


@pytest.mark.parametrize("name", ["test_unit_benchmark_result", "test_unit_benchmark",
                                  "test_unit_benchmark_suite", "test_unit_tinymlperf"])
def test_upstreams_self_checks_pass(name, capsys):
    getattr(benchmarking, name)()
    assert f"{name}: ok" in capsys.readouterr().out


def test_latency_benchmark_measures_the_sleep_in_ms():
    bench = Benchmark([Sleepy("fast", 0.0), Sleepy("slow", 3.0)], [], warmup_runs=1, measurement_runs=4)
    res = bench.run_latency_benchmark(input_shape=(1, 5))
    assert isinstance(res["slow"], BenchmarkResult) and res["slow"].unit == "ms"
    assert res["slow"].count == 4 and res["slow"].min >= 3.0
    assert res["fast"].median < res["slow"].median
    rows = bench.compare_models("latency")
    assert {r["model"] for r in rows} == {"fast", "slow"}
    slow = next(r for r in rows if r["model"] == "slow")
    assert slow["ci_lower"] <= slow["mean"] <= slow["ci_upper"] and slow["mean"] >= 3.0
    with pytest.raises(ValueError, match="metric"):
        bench.compare_models("energy")
    with pytest.raises(ValueError, match="measurement_runs"):
        Benchmark([], [], measurement_runs=0)


def test_accuracy_is_measured_from_labels_never_made_up():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((31, 4)).astype(np.float32)  # prime sample count
    w = rng.standard_normal((4, 3)).astype(np.float32)
    labels = rng.integers(0, 3, 31)
    expected = float(np.mean((x.astype(np.float64) @ w).argmax(axis=1) == labels))
    bench = Benchmark([Sleepy("scored", 0.0, w), Sleepy("no_labels", 0.0)], [(x, labels)])
    acc = bench.run_accuracy_benchmark()
    assert acc["scored"].mean == pytest.approx(expected)
    with pytest.raises(ValueError, match="evaluate"):  # no number nobody measured (simulate=True opts in)
        Benchmark([Sleepy("m", 0.0)], [{"data": "unlabelled"}]).run_accuracy_benchmark()


def test_model_evaluate_hook_is_used_for_accuracy():
    class Evaluates(Sleepy):
        def evaluate(self, dataset):
            return dataset["acc"]
    acc = Benchmark([Evaluates("e", 0)], [{"acc": 0.25}, {"acc": 0.75}]).run_accuracy_benchmark()
    assert acc["e"].values.tolist() == [0.25, 0.75]


def test_memory_benchmark_sees_a_known_allocation():
    res = Benchmark([Allocates()], [], measurement_runs=2).run_memory_benchmark(input_shape=(1, 2))
    assert res["allocates"].unit == "MB" and res["allocates"].count == 2
    assert res["allocates"].min >= 8.0  # the 8 MiB buffer, measured (not a parameter estimate)


def test_benchmark_suite_report_plots_and_no_simulated_energy(tmp_path):
    rng = np.random.default_rng(1)
    x, labels = rng.standard_normal((6, 3)).astype(np.float32), np.array([0, 1, 0, 1, 1, 0])
    w = rng.standard_normal((3, 2)).astype(np.float32)
    suite = BenchmarkSuite([Sleepy("a", 0.0, w), Sleepy("b", 1.0, -w)], [(x, labels)], output_dir=tmp_path / "out")
    suite.benchmark.measurement_runs = 3
    suite.benchmark.warmup_runs = 1
    results = suite.run_full_benchmark(input_shape=(1, 3))
    assert results["energy"] == {}
    acc_a = float(np.mean((x @ w).argmax(1) == labels))
    assert results["accuracy"]["a"].mean == pytest.approx(acc_a)
    assert results["accuracy"]["b"].mean == pytest.approx(float(np.mean((x @ -w).argmax(1) == labels)))
    report = suite.generate_report()
    assert (tmp_path / "out" / "benchmark_report.md").read_text() == report
    for needle in ("System Information", "Recommendations", "Energy", "not measured"):
        assert needle in report
    best = "a" if results["latency"]["a"].mean < results["latency"]["b"].mean else "b"
    assert f"lowest latency: {best}" in report
    path = suite.plot_results()
    assert path is not None and path.exists() and path.stat().st_size > 0
    pareto = suite.plot_pareto_frontier("latency", "accuracy")
    assert pareto.exists()
    assert suite.plot_pareto_frontier("latency", "energy") is None  # nothing measured to plot


def test_tinymlperf_upstream_shapes_real_latency_and_accuracy(tmp_path):
    seen = []

    class Records(Sleepy):
        def forward(self, x):
            seen.append(x.shape)
            return super().forward(x)
    perf = TinyMLPerf(random_seed=42)
    assert perf.benchmarks["visual_wake_words"]["input_shape"] == (1, 96, 96, 3)
    r = perf.run_standard_benchmark(Records("m", 1.0), "anomaly_detection", num_runs=7)
    assert set(seen) == {(1, 640)}
    assert r["accuracy"] is None and r["accuracy_met"] is None and r["synthetic_labels"] is True
    assert r["compliant"] is False  # no labels: never compliant
    assert r["num_runs"] == 7 and r["mean_latency_ms"] >= 1.0 and r["max_latency_ms"] >= r["p99_latency_ms"]
    assert r["throughput_fps"] == pytest.approx(1e3 / r["mean_latency_ms"])
    assert r["latency_met"] is (r["p99_latency_ms"] <= 50)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((11, 640)).astype(np.float32)
    w = rng.standard_normal((640, 2)).astype(np.float32)
    labels = rng.integers(0, 2, 11)
    r2 = perf.run_standard_benchmark(Sleepy("scored", 0.0, w), "anomaly_detection", num_runs=11,
                                     test_inputs=x, labels=labels)
    assert r2["accuracy"] == pytest.approx(float(np.mean((x.astype(np.float64) @ w).argmax(1) == labels)))
    assert r2["accuracy_met"] is (r2["accuracy"] >= 0.85)
    with pytest.raises(ValueError, match="unknown benchmark"):
        perf.run_standard_benchmark(Sleepy("m", 0), "speech")
    with pytest.raises(ValueError, match="labels"):
        perf.run_standard_benchmark(Sleepy("m", 0), "anomaly_detection", labels=[0, 1])
    out = tmp_path / "tiny.json"
    summary = perf.generate_compliance_report({"anomaly_detection": r2, "broken": {"error": "boom"}}, str(out))
    data = json.loads(out.read_text())
    assert data["benchmarks"]["anomaly_detection"]["accuracy"] == r2["accuracy"]
    assert data["errors"] == {"broken": "boom"}
    assert "Compliance Rate" in summary and (tmp_path / "tiny_summary.md").read_text() == summary


def test_tinymlperf_run_all_reports_failures_per_task():
    class OnlyAudio(Sleepy):
        def forward(self, x):
            if x.ndim != 2:
                raise ValueError("images not supported")
            return super().forward(x)
    res = TinyMLPerf().run_all_benchmarks(OnlyAudio("audio", 0.0), num_runs=2)
    assert set(res) == set(TinyMLPerf.benchmarks)
    assert "error" in res["visual_wake_words"] and "images not supported" in res["visual_wake_words"]["error"]
    assert res["keyword_spotting"]["num_runs"] == 2


# ------------------------------------------------------------------ tinytorch.olympics

def test_olympics_module_paths():
    from tinytorch import olympics
    import tinytorch.olympics as direct
    assert olympics is direct and tinytorch.olympics is direct
    assert set(olympics.__all__) == {"SimpleMLP", "BenchmarkReport", "generate_submission", "save_submission",
                                     "validate_submission_schema", "OlympicEvent", "qualifies_event"}


def test_simple_mlp_matches_a_float64_reference():
    from tinytorch.olympics import SimpleMLP
    tinytorch.manual_seed(0)
    m = SimpleMLP()
    assert m.count_parameters() == 10 * 20 + 20 + 20 * 3 + 3
    assert abs(m.fc1.weight.data.std() - 0.01) < 0.003 and not m.fc1.bias.data.any()
    m2 = SimpleMLP(7, 13, 5)  # odd/prime sizes
    x = np.random.default_rng(2).standard_normal((3, 7)).astype(np.float32)
    W1, b1, W2, b2 = (p.data.astype(np.float64) for p in m2.parameters())
    ref = np.maximum(x @ W1 + b1, 0) @ W2 + b2
    np.testing.assert_allclose(m2.forward(Tensor(x)).data, ref, rtol=1e-5, atol=1e-7)


def test_benchmark_report_measures_and_submission_round_trips(tmp_path, capsys):
    from tinytorch.olympics import BenchmarkReport, SimpleMLP, generate_submission, save_submission
    from tinytorch.perf.quantization import quantize_model
    tinytorch.manual_seed(1)
    model = SimpleMLP(16, 32, 3)
    model.fc1.weight.data *= 100  # make the scores non-trivial
    rng = np.random.default_rng(4)
    X, y = rng.standard_normal((23, 16)).astype(np.float32), rng.integers(0, 3, 23)
    base = BenchmarkReport("baseline")
    m = base.benchmark_model(model, Tensor(X), y, num_runs=5)
    assert "baseline" in capsys.readouterr().out
    expected_acc = float(np.mean(model.forward(Tensor(X)).data.argmax(1) == y))
    assert m["accuracy"] == pytest.approx(expected_acc)
    assert m["parameter_count"] == 16 * 32 + 32 + 32 * 3 + 3
    assert m["model_size_mb"] == pytest.approx(m["parameter_count"] * 4 / MB_TO_BYTES)
    assert m["latency_ms_mean"] > 0 and m["throughput_samples_per_sec"] == pytest.approx(1e3 / m["latency_ms_mean"])
    quantize_model(model)  # in place, int8 weights: the size is measured, not assumed fp32
    opt = BenchmarkReport("int8")
    o = opt.benchmark_model(model, X, y, num_runs=5)
    assert o["parameter_count"] == m["parameter_count"]  # int8 weights are still counted
    assert o["latency_ms_median"] > 0
    assert o["model_size_mb"] == pytest.approx(model_size_bytes(model) / MB_TO_BYTES)
    sub = generate_submission(base, opt, student_name="ada", techniques_applied=["quantization"])
    assert sub["improvements"]["compression_ratio"] == pytest.approx(m["model_size_mb"] / o["model_size_mb"])
    assert sub["improvements"]["compression_ratio"] > 2
    assert sub["improvements"]["speedup"] == pytest.approx(m["latency_ms_median"] / o["latency_ms_median"])
    assert sub["improvements"]["accuracy_delta"] == pytest.approx(o["accuracy"] - m["accuracy"])
    assert sub["student_name"] == "ada" and sub["optimized"]["techniques_applied"] == ["quantization"]
    path = save_submission(sub, str(tmp_path / "sub.json"))
    assert json.loads(open(path).read()) == json.loads(json.dumps(sub))
    assert "optimized" not in generate_submission(base)


def test_benchmark_report_bad_input():
    from tinytorch.olympics import BenchmarkReport, SimpleMLP, generate_submission
    m = SimpleMLP()
    with pytest.raises(ValueError, match="labels"):
        BenchmarkReport().benchmark_model(m, np.zeros((4, 10), np.float32), np.zeros(3, int))
    with pytest.raises(TypeError, match="integer"):
        BenchmarkReport().benchmark_model(m, np.zeros((2, 10), np.float32), np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="benchmark_model"):
        generate_submission(BenchmarkReport())


def test_plots_fall_back_with_the_reason_when_matplotlib_is_missing(tmp_path, monkeypatch, capsys):
    import sys
    suite = BenchmarkSuite([Sleepy("a", 0.0)], [], output_dir=tmp_path)
    suite.benchmark.measurement_runs = 2
    suite.run_full_benchmark(input_shape=(1, 3))
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import now raises ImportError
    assert suite.plot_results() is None
    assert "matplotlib is not importable" in capsys.readouterr().out
    assert not (tmp_path / "benchmark_comparison.png").exists()


def test_system_info_describes_the_machine():
    info = Benchmark([], []).system_info
    assert info["cpu_count"] >= 1 and info["processor"] and info["numpy_version"] == np.__version__
    from tinytorch.olympics import BenchmarkReport
    assert BenchmarkReport().system_info.keys() == info.keys()
