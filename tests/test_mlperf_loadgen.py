"""MLPerf on MLCommons LoadGen (perf/_loadgen.py) and the choice of engine.

  * With LoadGen installed, SingleStream, Offline and Server run through a real SUT and QSL:
    the result's percentiles and samples/s are the numbers in LoadGen's own summary file, the
    verdict is LoadGen's (VALID for these settings), the logs stay in the caller's folder, and the
    accuracy is computed from the responses LoadGen logged, equal to the built-in engine's.
  * Without LoadGen the built-in runner measures, and the result says so and why;
    engine="loadgen" then fails with an ImportError naming the missing package.
  * A model that raises inside LoadGen's callback surfaces as that exception, not a hang.
Runs are kept short (min_duration_ms=200) so the file takes seconds.
"""
from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.tensor import Tensor
from tinytorch.perf import _loadgen
from tinytorch.perf.benchmarking import MLPerf

HAVE_LOADGEN = _loadgen.loadgen_status()[0] is not None
needs_loadgen = pytest.mark.skipif(not HAVE_LOADGEN, reason="mlcommons-loadgen is not installed "
                                   "(pip install tinytorch[mlperf])")


def _model_and_data(n=37):
    rng = np.random.default_rng(3)
    model = Sequential(Linear(5, 16), ReLU(), Linear(16, 4))
    x = rng.standard_normal((n, 5)).astype(np.float32)
    model.eval()
    preds = model(Tensor(x)).data.argmax(1)
    labels = preds.copy()
    wrong = rng.choice(n, size=9, replace=False)  # exactly 9 of n wrong
    labels[wrong] = (labels[wrong] + 1) % 4
    return model, x, labels, preds, (n - 9) / n


@pytest.fixture(scope="module")
def loadgen_run(tmp_path_factory):
    if not HAVE_LOADGEN:
        pytest.skip("mlcommons-loadgen is not installed")
    model, x, labels, preds, expected = _model_and_data()
    log_dir = tmp_path_factory.mktemp("mlperf-logs")
    res = MLPerf(warmup=2, offline_batch_size=8).run_standard_benchmark(
        model, "tiny", test_inputs=x, labels=labels, scenarios=("single_stream", "offline", "server"),
        engine="loadgen", log_dir=str(log_dir), min_duration_ms=200)
    return res, log_dir, preds, expected


@needs_loadgen
def test_loadgen_numbers_are_loadgens_own_summary(loadgen_run):
    res, log_dir, _, _ = loadgen_run
    assert res["engine"] == "loadgen" and "MLCommons LoadGen (mlcommons-loadgen " in res["engine_detail"]
    keys = {"single_stream": "QPS w/ loadgen overhead", "offline": "Samples per second",
            "server": "Completed samples per second"}
    for scenario, rate_key in keys.items():
        d = res[scenario]
        text = open(os.path.join(log_dir, scenario, "mlperf_log_summary.txt"), encoding="utf-8").read()
        scenario_line = re.search(r"Scenario : (\w+)", text).group(1)
        assert scenario_line == _loadgen.SCENARIO_NAMES[scenario]
        for q, field in (("50.00", "p50_latency_ms"), ("90.00", "p90_latency_ms"), ("99.00", "p99_latency_ms")):
            ns = int(re.search(q + r" percentile latency \(ns\)\s*: (\d+)", text).group(1))
            assert d[field] == pytest.approx(ns * 1e-6)
        assert d["p50_latency_ms"] <= d["p90_latency_ms"] <= d["p99_latency_ms"]
        rate = float(re.search(re.escape(rate_key) + r"\s*: ([\d.]+)", text).group(1))
        assert d["throughput_samples_per_s"] == pytest.approx(rate) and rate > 0
        verdict = re.search(r"Result is : (\w+)", text).group(1)
        assert d["verdict"] == verdict == "VALID", text
        assert d["valid"] and d["unmet"] == []
        assert d["samples"] >= 1 and d["log_dir"] == os.path.join(str(log_dir), scenario)
        assert "[VALID]" in res["report"]
    assert res["single_stream"]["samples"] >= 64            # early stopping's floor
    assert res["server"]["samples"] >= 512
    assert res["offline"]["batch_size"] == 8


@needs_loadgen
def test_loadgen_logs_are_kept_where_asked(loadgen_run):
    res, log_dir, _, _ = loadgen_run
    assert res["log_dir"] == str(log_dir) and str(log_dir) in res["report"]
    for sub in ("single_stream", "offline", "server", "accuracy"):
        for name in ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json"):
            assert (log_dir / sub / name).is_file(), (sub, name)


@needs_loadgen
def test_loadgen_accuracy_comes_from_the_logged_responses(loadgen_run):
    res, log_dir, preds, expected = loadgen_run
    answered = _loadgen.read_accuracy_log(str(log_dir / "accuracy" / "mlperf_log_accuracy.json"))
    assert sorted(answered) == list(range(len(preds)))      # every sample once
    assert all(answered[i] == preds[i] for i in answered)    # exactly the model's classes
    assert res["accuracy_samples"] == len(preds)
    assert res["accuracy"] == pytest.approx(expected)


@needs_loadgen
def test_both_engines_agree_on_accuracy():
    model, x, labels, _, expected = _model_and_data(n=11)
    for engine in ("builtin", "loadgen"):
        res = MLPerf(warmup=0).run_standard_benchmark(model, "tiny", test_inputs=x, labels=labels,
                                                      scenarios=("offline",), engine=engine, min_duration_ms=50)
        assert res["engine"] == engine
        assert res["accuracy"] == pytest.approx(expected), engine


@needs_loadgen
def test_a_failing_model_raises_instead_of_hanging():
    calls = []

    def model(x):
        calls.append(x.shape[0])
        if len(calls) > 40:  # past the warm-up, the memory and calibration passes: inside LoadGen
            raise ValueError("model broke on purpose")
        return np.zeros((x.shape[0], 2), np.float32)

    with pytest.raises(ValueError, match="broke on purpose"):
        MLPerf(warmup=1).run_standard_benchmark(model, "tiny", test_inputs=np.ones((3, 2), np.float32),
                                                scenarios=("single_stream",), engine="loadgen",
                                                min_duration_ms=50)


@needs_loadgen
@pytest.mark.parametrize("n", [1, 7])
def test_loadgen_on_awkward_sample_counts(n, tmp_path):
    rng = np.random.default_rng(n)
    model = Sequential(Linear(3, 5))
    x = rng.standard_normal((n, 3)).astype(np.float32)[:, ::-1]  # a non-contiguous view
    model.eval()
    labels = model(Tensor(np.ascontiguousarray(x))).data.argmax(1)
    res = MLPerf(warmup=1, offline_batch_size=4).run_standard_benchmark(
        model, "tiny", test_inputs=x, labels=labels, scenarios="single_stream", engine="loadgen",
        log_dir=tmp_path, min_duration_ms=50)
    assert res["accuracy"] == 1.0 and res["accuracy_samples"] == n
    assert res["single_stream"]["verdict"] == "VALID" and "offline" not in res and "server" not in res


def test_without_loadgen_the_builtin_runner_measures_and_says_why(monkeypatch):
    monkeypatch.setitem(sys.modules, "mlperf_loadgen", None)  # import now raises ImportError
    model, x, labels, _, expected = _model_and_data(n=13)
    res = MLPerf(warmup=0).run_standard_benchmark(model, "tiny", test_inputs=x, labels=labels)
    assert res["engine"] == "builtin"
    assert "not installed" in res["engine_detail"] and "mlcommons-loadgen" in res["engine_detail"]
    assert res["engine_detail"] in res["report"]
    assert res["accuracy"] == pytest.approx(expected)
    assert "verdict" not in res["single_stream"] and "log_dir" not in res
    with pytest.raises(ImportError, match="engine='loadgen' was requested but MLCommons LoadGen is not installed"):
        MLPerf().run_standard_benchmark(model, "tiny", test_inputs=x, engine="loadgen")


_INVALID_OFFLINE = """================================================
MLPerf Results Summary
================================================
SUT name : PySUT
Scenario : Offline
Mode     : PerformanceOnly
Samples per second: 1723.78
Result is : INVALID
  Min duration satisfied : NO
  Min queries satisfied : Yes
  Early stopping satisfied: Yes
Recommendations:
 * Increase expected QPS so the loadgen pre-generates a larger (coalesced) query.
================================================
Additional Stats
================================================
Min latency (ns)                : 531368
Mean latency (ns)               : 579355
50.00 percentile latency (ns)   : 576747
90.00 percentile latency (ns)   : 581523
99.00 percentile latency (ns)   : 617488
"""


def test_summary_parser_reads_an_invalid_run(tmp_path):
    parsed = _loadgen.parse_summary(_INVALID_OFFLINE)
    assert parsed["Result is"] == "INVALID" and parsed["Scenario"] == "Offline"
    assert parsed["Samples per second"] == "1723.78"
    assert not any(k.startswith("*") or "Increase" in k for k in parsed)
    (tmp_path / "mlperf_log_summary.txt").write_text(_INVALID_OFFLINE)

    class Settings:
        min_duration_ms, offline_expected_qps = 1000, 10.0

    d = _loadgen._scenario_result("offline", str(tmp_path), 5, Settings())
    assert d["verdict"] == "INVALID" and not d["valid"]
    assert d["unmet"] == ["Min duration satisfied"]
    assert d["p99_latency_ms"] == pytest.approx(0.617488) and d["throughput_samples_per_s"] == 1723.78
    (tmp_path / "mlperf_log_summary.txt").write_text("Scenario : Offline\n")
    with pytest.raises(RuntimeError, match="no 'Result is"):
        _loadgen._scenario_result("offline", str(tmp_path), 5, Settings())


def test_accuracy_log_with_a_bad_response_is_an_error(tmp_path):
    path = tmp_path / "acc.json"
    path.write_text('[{"seq_id": 0, "qsl_idx": 4, "data": "0300000000000000"},'
                    ' {"seq_id": 1, "qsl_idx": 2, "data": "FFFFFFFFFFFFFFFF"}]')
    assert _loadgen.read_accuracy_log(str(path)) == {4: 3, 2: -1}
    path.write_text('[{"seq_id": 0, "qsl_idx": 4, "data": "0300"}]')
    with pytest.raises(ValueError, match="sample 4 has 2 bytes"):
        _loadgen.read_accuracy_log(str(path))
