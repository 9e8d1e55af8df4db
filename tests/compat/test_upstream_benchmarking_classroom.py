"""Upstream's current Module 19 contract, as adapted here (docs/compat.md, the Benchmark and
MLPerf/TinyMLPerf rows): a simulated accuracy is opt-in, labelled and never mixed with a measured
one; a probe that fails scores nothing; the course's MLPerf judges measured numbers against
per-instance classroom targets, and a run without labels, or a task that failed, is never
compliant. Expected values are computed independently of the code under test."""
import json
import math

import numpy as np
import pytest

from tinytorch.core.tensor import Tensor
from tinytorch.perf import benchmarking
from tinytorch.perf.benchmarking import (STANDARD_BENCHMARKS, Benchmark, BenchmarkSuite, MLPerf, TinyMLPerf,
                                         simulated_accuracy as _simulated_accuracy)
from tinytorch.perf.mlperf import MLPerf as MLPerfRunner


def test_upstream_names_are_the_package_objects():
    assert benchmarking._simulated_accuracy is _simulated_accuracy  # upstream's private name
    assert benchmarking.MLPerf is MLPerf and issubclass(MLPerf, MLPerfRunner)


class PassThrough:
    def __init__(self, name="pass"):
        self.name = name

    def forward(self, x):
        return x


class Constant:
    """Ignores its input: every output sums to ``value``."""

    def __init__(self, value, name="const"):
        self.value, self.name = value, name

    def forward(self, x):
        return Tensor(np.full((x.shape[0], 2), self.value / 2, dtype=np.float32))


class Linear2:
    """Scores x @ w (forward only, not callable: upstream's protocol)."""

    def __init__(self, w, name="lin"):
        self.w, self.name = w, name

    def forward(self, x):
        return Tensor(x.data.reshape(x.shape[0], -1) @ self.w)


# ---------------------------------------------------------------- _simulated_accuracy

def test_simulated_accuracy_depends_on_the_output_not_the_name():
    data = {"d": "1"}
    assert _simulated_accuracy(PassThrough("a"), data) == 1.0  # labels are "features sum > 0"
    assert _simulated_accuracy(PassThrough("zzz_accurate"), data) == 1.0
    # a model that ignores its input: always-1 and always-0 predictions split the probes exactly
    for n in (1, 7, 32):  # odd and prime probe counts
        up, down = _simulated_accuracy(Constant(1.0), data, n), _simulated_accuracy(Constant(-1.0), data, n)
        assert up + down == pytest.approx(1.0) and (up * n) == pytest.approx(round(up * n))
    assert _simulated_accuracy(Constant(1.0), data) == _simulated_accuracy(Constant(1.0), dict(data))


def test_simulated_accuracy_never_scores_a_failed_probe():
    class Broken:
        def forward(self, x):
            raise ValueError("broken forward")

    class NaNs:
        def forward(self, x):
            return Tensor(np.full((1, 2), np.nan, dtype=np.float32))

    class Words:
        def forward(self, x):
            return "yes"

    for model in (Broken(), NaNs(), Words()):
        with pytest.raises(RuntimeError, match="no score was measured"):
            _simulated_accuracy(model, {})
    with pytest.raises(TypeError, match="forward"):
        _simulated_accuracy(object(), {})
    for bad in (0, -3, 2.5, True):
        with pytest.raises(ValueError, match="num_samples"):
            _simulated_accuracy(PassThrough(), {}, bad)


# ---------------------------------------------------------------- Benchmark.run_accuracy_benchmark

def test_unmeasurable_accuracy_is_refused_unless_simulation_is_asked_for(capsys):
    batches = [(Tensor([[1, 2, 3, 4]]), np.array([0]))]  # a list of batches: not an (inputs, labels) pair
    bench = Benchmark([PassThrough("p"), Constant(-1.0, "c")], [batches, {"d": "2"}])
    with pytest.raises(ValueError, match=r"evaluate\(dataset\).*simulate=True"):
        bench.run_accuracy_benchmark()
    assert "accuracy" not in bench.results
    res = bench.run_accuracy_benchmark(simulate=True)
    assert "SIMULATED" in capsys.readouterr().out
    for name, model in (("p", PassThrough()), ("c", Constant(-1.0))):
        r = res[name]
        assert r.metadata["simulated"] is True and r.unit == "fraction (simulated)"
        assert r.metric_name == f"{name}_accuracy_simulated"
        assert r.values.tolist() == [_simulated_accuracy(model, d) for d in (batches, {"d": "2"})]
    with pytest.raises(TypeError, match="simulate"):
        bench.run_accuracy_benchmark(simulate="yes")


def test_measured_accuracy_stays_measured_and_is_never_mixed_with_a_simulated_one():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((13, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    labels = rng.integers(0, 3, 13)
    expected = float(np.mean((x.astype(np.float64) @ w).argmax(1) == labels))
    r = Benchmark([Linear2(w)], [(x, labels)]).run_accuracy_benchmark(simulate=True)["lin"]
    assert r.metadata["simulated"] is False and r.unit == "fraction" and r.metric_name == "lin_accuracy"
    assert r.mean == pytest.approx(expected)
    with pytest.raises(ValueError, match="measured and simulated"):
        Benchmark([Linear2(w)], [(x, labels), {"d": "x"}]).run_accuracy_benchmark(simulate=True)
    assert Benchmark([Linear2(w)], []).run_accuracy_benchmark() == {}


def test_an_evaluate_hook_must_return_an_accuracy():
    class Evaluates(PassThrough):
        def __init__(self, value):
            super().__init__("e")
            self.value = value

        def evaluate(self, dataset):
            return self.value

    assert Benchmark([Evaluates(0.5)], [{}]).run_accuracy_benchmark()["e"].mean == 0.5
    for bad in (1.5, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"finite and in \[0, 1\]"):
            Benchmark([Evaluates(bad)], [{}]).run_accuracy_benchmark()
    with pytest.raises(ValueError, match="evaluate"):  # evaluate() gave no score: nothing was measured
        Benchmark([Evaluates(None)], [{}]).run_accuracy_benchmark()


def test_suite_report_labels_a_simulated_accuracy(tmp_path):
    suite = BenchmarkSuite([PassThrough("a"), Constant(1.0, "b")], [{"d": "1"}], output_dir=tmp_path)
    suite.benchmark.warmup_runs, suite.benchmark.measurement_runs = 0, 2
    with pytest.raises(ValueError, match="evaluate"):
        suite.run_full_benchmark(input_shape=(1, 4))
    results = suite.run_full_benchmark(input_shape=(1, 4), simulate=True)
    assert all(r.metadata["simulated"] for r in results["accuracy"].values())
    report = suite.generate_report()
    assert "### Accuracy (fraction) - SIMULATED" in report
    assert "highest accuracy: n/a (simulated, not measured)" in report
    assert "lowest latency: " in report and "lowest latency: n/a" not in report


# ---------------------------------------------------------------- MLPerf (the course's class)

def test_mlperf_targets_belong_to_the_instance_and_drive_the_synthetic_inputs():
    a, b = MLPerf(), MLPerf(random_seed=7)
    assert isinstance(a, MLPerfRunner) and b.seed == b.random_seed == 7 and a.random_seed == 0
    assert set(a.benchmarks) == set(STANDARD_BENCHMARKS)
    for name, cfg in a.benchmarks.items():
        assert cfg["input_shape"] == (1,) + tuple(STANDARD_BENCHMARKS[name]["input_shape"])
        assert 0 < cfg["target_accuracy"] <= 1 and cfg["max_latency_ms"] > 0 and cfg["description"]
    a.benchmarks["keyword_spotting"]["target_accuracy"] = 0
    assert b.benchmarks["keyword_spotting"]["target_accuracy"] == 0.9
    t1, t2 = TinyMLPerf(), TinyMLPerf()
    t1.benchmarks["anomaly_detection"]["max_latency_ms"] = 1
    assert t2.benchmarks["anomaly_detection"]["max_latency_ms"] == 50 == TinyMLPerf.benchmarks["anomaly_detection"]["max_latency_ms"]
    with pytest.raises(ValueError, match="same seed"):
        MLPerf(seed=1, random_seed=2)

    seen = []

    class Records:
        def forward(self, x):
            seen.append(x.data.copy())
            return Tensor(np.zeros((x.shape[0], 2), np.float32))

    perf = MLPerf(random_seed=3)
    perf.benchmarks["anomaly_detection"]["input_shape"] = (1, 5)
    perf.run_standard_benchmark(Records(), "anomaly_detection", num_runs=3)
    first = [s for s in seen if s.shape == (1, 5)]
    seen.clear()
    MLPerf(random_seed=3).run_standard_benchmark(Records(), "keyword_spotting", num_runs=2)
    assert {s.shape[1:] for s in seen} == {tuple(STANDARD_BENCHMARKS["keyword_spotting"]["input_shape"])}
    seen.clear()
    again = MLPerf(random_seed=3)
    again.benchmarks["anomaly_detection"]["input_shape"] = (1, 5)
    again.run_standard_benchmark(Records(), "anomaly_detection", num_runs=3)
    assert first and all(np.array_equal(p, q) for p, q in zip(first, [s for s in seen if s.shape == (1, 5)]))


def test_mlperf_num_runs_is_exactly_that_many_timed_queries():
    res = MLPerf(warmup=0).run_standard_benchmark(Constant(1.0), "anomaly_detection", num_runs=5)
    assert res["engine"] == "builtin" and res["single_stream"]["queries"] == 5 and res["num_samples"] == 5
    assert res["num_runs"] == 5 and res["latency"].count == 5
    ms = res["latency"].values * 1e3
    assert res["mean_latency_ms"] == pytest.approx(ms.mean()) and res["max_latency_ms"] == pytest.approx(ms.max())
    assert res["p99_latency_ms"] == pytest.approx(np.percentile(ms, 99))
    assert res["throughput_fps"] == pytest.approx(1e3 / res["mean_latency_ms"])
    perf = MLPerf()
    with pytest.raises(ValueError, match="num_runs"):
        perf.run_standard_benchmark(Constant(1.0), "anomaly_detection", num_runs=0)
    with pytest.raises(ValueError, match="not both"):
        perf.run_standard_benchmark(Constant(1.0), "anomaly_detection", num_runs=2, num_queries=2)
    with pytest.raises(TypeError, match="num_runs=5"):
        perf.run_standard_benchmark(Constant(1.0), "anomaly_detection", 5)
    with pytest.raises(TypeError, match="forward"):
        perf.run_standard_benchmark(object(), "anomaly_detection", num_runs=1)


def test_mlperf_verdicts_judge_measured_numbers_only():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((17, 640)).astype(np.float32)
    w = rng.standard_normal((640, 2)).astype(np.float32)
    labels = rng.integers(0, 2, 17)
    acc = float(np.mean((x.astype(np.float64) @ w).argmax(1) == labels))
    perf = MLPerf()
    perf.benchmarks["anomaly_detection"].update(target_accuracy=acc, max_latency_ms=1e6)
    r = perf.run_standard_benchmark(Linear2(w), "anomaly_detection", test_inputs=x, labels=labels, num_runs=17)
    assert r["accuracy"] == pytest.approx(acc) and r["synthetic_labels"] is False and r["official_mlperf"] is False
    assert r["accuracy_met"] is True and r["latency_met"] is True and r["compliant"] is True
    assert "classroom" in r["report"] and "PASS" in r["report"].splitlines()[-1]
    perf.benchmarks["anomaly_detection"]["target_accuracy"] = min(1.0, acc + 1 / 17)
    r = perf.run_standard_benchmark(Linear2(w), "anomaly_detection", test_inputs=x, labels=labels, num_runs=17)
    assert r["accuracy_met"] is (acc + 1 / 17 <= acc) and r["compliant"] is False
    perf.benchmarks["anomaly_detection"].update(target_accuracy=0, max_latency_ms=1e-9)
    r = perf.run_standard_benchmark(Linear2(w), "anomaly_detection", test_inputs=x, labels=labels, num_runs=3)
    assert r["latency_met"] is False and r["compliant"] is False
    # without labels: no accuracy, never compliant, even against a zero target
    perf.benchmarks["anomaly_detection"]["max_latency_ms"] = 1e6
    r = perf.run_standard_benchmark(Linear2(w), "anomaly_detection", num_runs=2)
    assert r["accuracy"] is None and r["accuracy_met"] is None and r["synthetic_labels"] is True
    assert r["latency_met"] is True and r["compliant"] is False
    perf.benchmarks["anomaly_detection"]["target_accuracy"] = 1.5
    with pytest.raises(ValueError, match="target_accuracy"):
        perf.run_standard_benchmark(Linear2(w), "anomaly_detection", num_runs=1)
    # a task with no targets keeps the runner's plain result
    toy = perf.run_standard_benchmark(Linear2(w), "toy", test_inputs=x[:4], num_runs=2)
    assert "compliant" not in toy and "synthetic_labels" not in toy and toy["single_stream"]["queries"] == 2


def test_compliance_report_counts_failed_and_unlabelled_tasks(tmp_path):
    perf = MLPerf()
    ok = dict(accuracy=1.0, mean_latency_ms=1, p99_latency_ms=1, throughput_fps=1000, target_accuracy=0.9,
              target_latency_ms=10, accuracy_met=True, latency_met=True, compliant=True, model_name="m")
    unlabelled = dict(ok, accuracy=None, accuracy_met=None, compliant=False, synthetic_labels=True)
    rep = perf._compile_report_data({"a": ok, "b": ok})
    assert rep["summary"]["compliance_rate"] == 1.0 and rep["summary"]["overall_compliant"] is True
    rep = perf._compile_report_data({"a": ok, "b": unlabelled, "c": {"error": "shape"}})
    s = rep["summary"]
    assert (s["total_benchmarks"], s["compliant_benchmarks"], s["failed_benchmarks"], s["synthetic_label_benchmarks"]) == (3, 1, 1, 1)
    assert s["compliance_rate"] == pytest.approx(1 / 3) and s["overall_compliant"] is False
    assert rep["errors"] == {"c": "shape"} and rep["model_name"] == "m" and "not official MLPerf" in rep["benchmark_suite"]
    empty = perf._compile_report_data({})["summary"]
    assert empty["compliance_rate"] is None and empty["overall_compliant"] is False
    out = tmp_path / "r.json"
    text = perf.generate_compliance_report({"a": ok, "b": unlabelled, "c": {"error": "shape"}}, str(out))
    assert json.loads(out.read_text())["summary"]["compliant_benchmarks"] == 1
    assert (tmp_path / "r_summary.md").read_text() == text
    assert "NON-COMPLIANT" in text and "n/a (no labels: not measured)" in text and "error: shape" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r_summary.md"]  # no temp files left


def test_mlperf_run_all_benchmarks_reports_each_failure():
    class OnlyVectors(Constant):
        def forward(self, x):
            if x.ndim != 2:
                raise ValueError("images not supported")
            return super().forward(x)

    res = MLPerf(warmup=0).run_all_benchmarks(OnlyVectors(1.0), num_runs=2)
    assert set(res) == set(STANDARD_BENCHMARKS)
    assert "images not supported" in res["visual_wake_words"]["error"]
    assert res["keyword_spotting"]["num_runs"] == 2 and res["keyword_spotting"]["compliant"] is False
    assert not MLPerf()._compile_report_data(res)["summary"]["overall_compliant"]
    assert math.isfinite(res["anomaly_detection"]["mean_latency_ms"])
