"""Upstream TinyTorch course code, modules 14 and 19, second round (#31): ``BenchmarkResult``
built with upstream's ``metric_name`` keyword, and the per-sample / whole-batch FLOPs of
upstream's ``profile_forward_pass`` report, checked against NumPy statistics and FLOPs counted
by hand."""
import numpy as np
import pytest

from tinytorch.core.layers import Linear
from tinytorch.core.tensor import Tensor
from tinytorch.perf.benchmarking import BenchmarkResult
from tinytorch.perf.profiling import Profiler


def test_benchmark_result_takes_upstreams_metric_name():
    values = [3.0, 1.0, 4.0, 1.0, 5.0]
    r = BenchmarkResult(metric_name="latency_ms", values=values)
    assert r.name == r.metric_name == "latency_ms" and r.count == 5
    assert (r.mean, r.min_val, r.max_val) == (np.mean(values), 1.0, 5.0)
    half = 1.96 * np.std(values, ddof=1) / np.sqrt(5)
    assert (r.ci_lower, r.ci_upper) == pytest.approx((np.mean(values) - half, np.mean(values) + half))
    assert BenchmarkResult("x", [2.0], "ms", {"k": 1}).metadata == {"k": 1}  # ours, positionally
    with pytest.raises(TypeError, match="exactly once"):
        BenchmarkResult("x", [1.0], metric_name="y")
    with pytest.raises(TypeError, match="exactly once"):
        BenchmarkResult(values=[1.0])
    with pytest.raises(ValueError, match="at least one"):
        BenchmarkResult(metric_name="x", values=[])


@pytest.mark.parametrize("batch", [1, 7])
def test_forward_report_gives_per_sample_and_batch_flops(batch):
    layer = Linear(24, 10)
    rep = Profiler().profile_forward_pass(layer, Tensor(np.ones((batch, 24), np.float32)))
    assert rep["flops"] == 2 * 24 * 10
    assert rep["batch_flops"] == batch * rep["flops"] == Profiler().count_flops(layer, (batch, 24))
    seconds = max(rep["latency_ms"] / 1e3, 1e-6)
    assert rep["gflops_per_second"] == pytest.approx(rep["batch_flops"] / 1e9 / seconds, rel=1e-12)
    back = Profiler().profile_backward_pass(layer, Tensor(np.ones((batch, 24), np.float32)))
    assert back["forward_flops"] == rep["batch_flops"] and back["total_flops"] == 3 * rep["batch_flops"]


def test_measure_memory_takes_upstreams_model_and_shape():
    import tracemalloc
    layer = Linear(64, 32)
    rep = Profiler().measure_memory(layer, (16, 64))
    assert rep["peak_memory_mb"] == rep["tracemalloc_peak_bytes"] / 2 ** 20
    assert rep["tracemalloc_peak_bytes"] >= 16 * 32 * 4  # at least the output it produced
    assert rep["parameter_memory_mb"] == pytest.approx((64 * 32 + 32) * 4 / 2 ** 20)
    assert rep["result"].shape == (16, 32) and not rep["result"].requires_grad  # no gradient recording

    class Failing:
        def forward(self, x):
            raise ValueError("bad input")

    for already_tracing in (False, True):
        if already_tracing:
            tracemalloc.start()
        try:
            with pytest.raises(ValueError, match="bad input"):
                Profiler().measure_memory(Failing(), (1, 2))
            assert tracemalloc.is_tracing() is already_tracing  # the caller's tracing state is kept
        finally:
            if already_tracing:
                tracemalloc.stop()
    # our own form is unchanged: a callable and its arguments
    assert Profiler().measure_memory(lambda a, b: a + b, 2, 3)["result"] == 5


def test_memory_benchmark_asks_the_profiler_upstreams_way():
    from tinytorch.perf.benchmarking import Benchmark
    bench = Benchmark([Linear(4, 2), lambda x: x], [], measurement_runs=2)
    calls = []
    real = bench.profiler.measure_memory

    def spy(fn, *args, **kwargs):
        calls.append(args)
        return real(fn, *args, **kwargs)

    bench.profiler.measure_memory = spy
    results = bench.run_memory_benchmark(input_shape=(3, 4))
    assert calls[:2] == [((3, 4),), ((3, 4),)]  # the Linear: measure_memory(model, input_shape)
    assert isinstance(calls[2][0], Tensor) and calls[2][0].shape == (3, 4)  # the plain callable
    assert set(results) == {"model_0", "model_1"} and all(r.count == 2 for r in results.values())


def test_mlperf_label_count_message_names_one_class_index():
    from tinytorch.perf.benchmarking import MLPerf
    with pytest.raises(ValueError, match="one class index per sample"):
        MLPerf().run_standard_benchmark(lambda x: x, "keyword_spotting", test_inputs=[Tensor([1.0])], labels=[])
