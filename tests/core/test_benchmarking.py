"""Benchmarking: precise_timer, BenchmarkResult statistics against NumPy, and the MLPerf
runner's built-in engine (scenarios, accuracy, memory, report). No wall-clock thresholds: timing
values are only checked for consistency (ordering, counts), never against a speed. The LoadGen
engine, and the choice between the two, are tested in tests/test_mlperf_loadgen.py."""
import time

import numpy as np
import pytest

from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Dropout, Linear, Sequential
from tinytorch.core.tensor import Tensor
from tinytorch.perf.benchmarking import STANDARD_BENCHMARKS, BenchmarkResult, MLPerf, benchmark, precise_timer


def test_precise_timer_measures_the_block():
    outer_start = time.perf_counter()
    with precise_timer() as t:
        inner_start = time.perf_counter()
        time.sleep(0.01)
        inner = time.perf_counter() - inner_start
    outer = time.perf_counter() - outer_start
    # the timer sits between what the inner and outer clocks saw
    assert inner - 1e-4 <= t.elapsed <= outer + 1e-4
    assert t.elapsed_ms == pytest.approx(t.elapsed * 1e3)
    frozen = t.elapsed
    time.sleep(0.002)
    assert t.elapsed == frozen  # fixed once the block has ended
    with pytest.raises(RuntimeError, match="not been started"):
        precise_timer().elapsed


@pytest.mark.parametrize("values", [[3.0], [1.0, 2.0], [5, 1, 4, 2, 3], list(np.random.default_rng(0).exponential(size=101))])
def test_benchmark_result_statistics_match_numpy(values):
    r = BenchmarkResult("x", values)
    v = np.asarray(values, dtype=np.float64)
    assert r.count == v.size
    assert r.mean == pytest.approx(v.mean())
    assert r.median == pytest.approx(np.median(v))
    assert r.std == pytest.approx(v.std(ddof=1) if v.size > 1 else 0.0)
    assert (r.min, r.max) == (v.min(), v.max())
    for q, got in ((50, r.p50), (90, r.p90), (99, r.p99)):
        assert got == pytest.approx(np.percentile(v, q))
    d = r.to_dict()
    assert d["p90"] == r.p90 and d["count"] == v.size
    assert "median" in str(r)


def test_benchmark_result_bad_input():
    with pytest.raises(ValueError, match="at least one"):
        BenchmarkResult("empty", [])
    with pytest.raises(ValueError, match="non-finite"):
        BenchmarkResult("nan", [1.0, float("nan")])
    with pytest.raises(ValueError, match="percentile"):
        BenchmarkResult("x", [1.0]).percentile(101)


def test_benchmark_calls_warmup_then_iterations():
    calls = []
    r = benchmark(lambda a, b=0: calls.append((a, b)), 1, b=2, warmup=3, iterations=4)
    assert calls == [(1, 2)] * 7 and r.count == 4
    with pytest.raises(ValueError, match="iterations"):
        benchmark(lambda: None, iterations=0)
    with pytest.raises(TypeError, match="callable"):
        benchmark(3)


def _classifier(rng):
    model = Sequential(Linear(4, 8), ReLU(), Dropout(0.5), Linear(8, 3))
    x = rng.standard_normal((40, 4)).astype(np.float32)
    return model, x


def test_mlperf_single_stream_and_offline(rng):
    model, x = _classifier(rng)
    seen_batches = []
    original = model.forward

    def spy(inp):
        seen_batches.append(inp.shape[0])
        return original(inp)

    model.forward = spy
    model.train()
    res = MLPerf(warmup=2, offline_batch_size=16).run_standard_benchmark(model, "toy", test_inputs=x, num_queries=25,
                                                                     engine="builtin")
    ss, off = res["single_stream"], res["offline"]
    assert ss["queries"] == 25
    assert 0 < ss["p50_latency_ms"] <= ss["p90_latency_ms"] <= ss["p99_latency_ms"]
    assert ss["p50_latency_ms"] == pytest.approx(res["latency"].p50 * 1e3)
    assert off["batch_size"] == 16 and off["throughput_samples_per_s"] > 0
    assert off["throughput_samples_per_s"] == pytest.approx(40 / off["total_time_s"])
    # warm-up and single-stream queries are batches of 1; offline passes are 16, 16, 8
    assert seen_batches[:27] == [1] * 27
    assert seen_batches[27:] == [16, 16, 8] * 2   # memory pass + timed pass
    assert res["peak_memory_bytes"] > 0
    assert res["accuracy"] is None
    assert model.training  # restored after running in eval mode


def test_mlperf_accuracy_against_labels(rng):
    model, x = _classifier(rng)
    model.eval()
    preds = model(Tensor(x)).data.argmax(1)
    labels = preds.copy()
    labels[:10] = (labels[:10] + 1) % 3  # exactly 10 of 40 wrong
    res = MLPerf().run_standard_benchmark(model, "toy", test_inputs=x, labels=labels, engine="builtin")
    assert res["accuracy"] == pytest.approx(0.75)
    assert res["engine"] == "builtin" and "built-in runner" in res["report"]
    report = res["report"]
    for text in ("single-stream", "offline", "p90", "samples/s", "accuracy       75.00%", "peak memory"):
        assert text in report


def test_mlperf_standard_benchmark_synthetic_inputs_and_scenarios():
    model = Sequential(Linear(490, 12))
    res = MLPerf().run_standard_benchmark(model, "keyword_spotting", num_samples=8, scenarios=("offline",),
                                          engine="builtin")
    assert res["num_samples"] == 8 and "single_stream" not in res and "offline" in res
    assert STANDARD_BENCHMARKS["keyword_spotting"]["input_shape"] == (490,)


def test_mlperf_bad_input(rng):
    model, x = _classifier(rng)
    with pytest.raises(ValueError, match="not a standard benchmark"):
        MLPerf().run_standard_benchmark(model, "mystery")
    with pytest.raises(ValueError, match="labels has 3 entries"):
        MLPerf().run_standard_benchmark(model, "toy", test_inputs=x, labels=np.zeros(3, int))
    with pytest.raises(ValueError, match="scenario"):
        MLPerf().run_standard_benchmark(model, "toy", test_inputs=x, scenarios=("multi_stream",))
    with pytest.raises(ValueError, match="scenarios is empty"):
        MLPerf().run_standard_benchmark(model, "toy", test_inputs=x, scenarios=())
    with pytest.raises(ValueError, match="engine must be"):
        MLPerf().run_standard_benchmark(model, "toy", test_inputs=x, engine="fast")
    with pytest.raises(ValueError, match="server_target_qps"):
        MLPerf().run_standard_benchmark(model, "toy", test_inputs=x, scenarios=("server",), server_target_qps=0)
    with pytest.raises(TypeError, match="callable"):
        MLPerf().run_standard_benchmark(3, "toy", test_inputs=x)


def test_mlperf_builtin_server_scenario_waits_for_poisson_arrivals(rng):
    model, x = _classifier(rng)
    res = MLPerf(warmup=1).run_standard_benchmark(model, "toy", test_inputs=x, scenarios=("server",),
                                                  num_queries=30, server_target_qps=500.0, engine="builtin")
    srv = res["server"]
    assert set(res) >= {"server"} and "single_stream" not in res and "offline" not in res
    assert srv["queries"] == 30 and srv["target_qps"] == 500.0
    assert 0 <= srv["p50_latency_ms"] <= srv["p90_latency_ms"] <= srv["p99_latency_ms"]
    # 30 arrivals at 500/s take about 60 ms: the run cannot be faster than its arrival schedule
    expected_span = np.cumsum(np.random.default_rng(0).exponential(1 / 500.0, 30))[-1]
    assert srv["throughput_samples_per_s"] <= 30 / expected_span * 1.0001
    assert "server         target 500.0 queries/s" in res["report"]
