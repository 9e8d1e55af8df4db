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
