"""Profiler: parameter counts, FLOPs checked against hand-derived formulas, memory from
tracemalloc and the runtime counters (separately and together), latency statistics."""
import numpy as np
import pytest

from tinytorch.core.activations import ReLU
from tinytorch.core.attention import MultiHeadAttention
from tinytorch.core.layers import Flatten, Layer, Linear, Sequential
from tinytorch.core.spatial import Conv2d
from tinytorch.core.transformers import GPT
from tinytorch.perf import profiling
from tinytorch.perf.benchmarking import BenchmarkResult
from tinytorch.perf.profiling import Profiler


def test_count_parameters_including_frozen_and_shared():
    model = Sequential(Linear(5, 7), ReLU(), Linear(7, 3, bias=False))
    assert Profiler.count_parameters(model) == 5 * 7 + 7 + 7 * 3
    model[0].bias.requires_grad = False
    assert Profiler.count_parameters(model, trainable_only=True) == 5 * 7 + 7 * 3
    shared = Sequential(model[0], model[0])  # the same layer twice counts once
    assert Profiler.count_parameters(shared) == 5 * 7 + 7
    gpt = GPT(11, 8, 2, 2, 6)
    e, v, t = 8, 11, 6
    per_block = 2 * 2 * e + 4 * (e * e + e) + (e * 4 * e + 4 * e) + (4 * e * e + e)
    assert Profiler.count_parameters(gpt) == v * e + t * e + 2 * per_block + 2 * e + e * v


def test_count_flops_mlp_and_cnn_by_formula():
    p = Profiler()
    mlp = Sequential(Linear(784, 256), ReLU(), Linear(256, 10))
    assert p.count_flops(mlp, (32, 784)) == 2 * 32 * (784 * 256 + 256 * 10)
    cnn = Sequential(Conv2d(3, 8, 3, padding=1), ReLU(), Conv2d(8, 4, 5, stride=2), Flatten(), Linear(4 * 2 * 2, 10))
    # conv1: 8x8 out; conv2: (8 - 5)//2 + 1 = 2x2 out
    expected = 2 * 2 * (8 * 8 * 8 * 3 * 9) + 2 * 2 * (2 * 2 * 4 * 8 * 25) + 2 * 2 * 16 * 10
    assert p.count_flops(cnn, (2, 3, 8, 8)) == expected
    breakdown = p.flop_breakdown(cnn, (2, 3, 8, 8))
    assert set(breakdown) == {"0", "2", "4"}
    # wrappers are removed again: the model computes and records as before
    assert "forward" not in vars(cnn[0])


def test_count_flops_attention_and_gpt():
    p = Profiler()
    mha = MultiHeadAttention(16, 4)
    b, t, e = 2, 5, 16
    assert p.count_flops(mha, (b, t, e)) == 4 * (2 * b * t * e * e) + 2 * 2 * b * t * t * e
    gpt = GPT(vocab_size=13, embed_dim=8, num_layers=2, num_heads=2, max_seq_len=6)
    b, t, e, v = 3, 6, 8, 13
    per_block = 4 * 2 * b * t * e * e + 2 * 2 * b * t * t * e + 2 * (2 * b * t * e * 4 * e)
    assert p.count_flops(gpt, (b, t)) == 2 * per_block + 2 * b * t * e * v  # int ids fed automatically


def test_custom_flops_hook_wins_and_nested_linear_counts_once():
    class Adapter(Layer):  # a Linear-like wrapper around a Linear: count the outer one only
        def __init__(self):
            self.base = Linear(4, 4)

        def flops(self, inputs, output):
            return 1000

        def forward(self, x):
            return self.base(x)

    model = Sequential(Adapter(), Linear(4, 2))
    assert Profiler().flop_breakdown(model, (3, 4)) == {"0": 1000, "1": 2 * 3 * 4 * 2}


def test_count_flops_bad_input():
    with pytest.raises(TypeError, match="named_modules"):
        Profiler().count_flops(lambda x: x, (2, 3))
    with pytest.raises(ValueError, match="non-negative"):
        Profiler().count_flops(Linear(2, 2), (-1, 2))


def test_measure_memory_sees_a_known_allocation():
    def allocate(n):
        a = np.ones(n, dtype=np.float64)  # n * 8 bytes, freed before returning
        return float(a.sum())

    r = Profiler.measure_memory(allocate, 1_000_000)
    assert r["result"] == 1_000_000.0
    assert 8_000_000 <= r["tracemalloc_peak_bytes"] < 8_000_000 + 200_000
    if r["runtime_available"]:
        assert r["runtime_peak_bytes"] >= 0
        assert r["combined_peak_bytes"] == r["tracemalloc_peak_bytes"] + r["runtime_peak_bytes"]
    else:
        assert r["runtime_peak_bytes"] is None and r["combined_peak_bytes"] == r["tracemalloc_peak_bytes"]


def test_measure_memory_reports_runtime_counters_separately(monkeypatch):
    """With a runtime that reports counters, both sources appear, and they add up."""
    state = {"in_use": 1000, "peak": 5000, "allocs": 7}

    class FakeNative:
        @staticmethod
        def memory_stats():
            return {"bytes_in_use": state["in_use"], "peak_bytes": state["peak"], "allocations": state["allocs"]}

        @staticmethod
        def reset_peak_memory():
            state["peak"] = state["in_use"]

    monkeypatch.setattr(profiling.importlib, "import_module",
                        lambda name: FakeNative if name == "tinytorch.native" else __import__(name))

    def work():
        state["peak"] = state["in_use"] + 4096   # the runtime allocated 4 KiB at its peak
        state["allocs"] += 3
        return np.zeros(100_000).sum()           # and NumPy 800 kB

    r = Profiler.measure_memory(work)
    assert r["runtime_available"] and r["runtime_peak_exact"]
    assert r["runtime_peak_bytes"] == 4096
    assert r["runtime_allocations"] == 3
    assert r["tracemalloc_peak_bytes"] >= 800_000
    assert r["combined_peak_bytes"] == r["tracemalloc_peak_bytes"] + 4096


def test_runtime_memory_stats_none_when_unavailable(monkeypatch):
    class Broken:
        @staticmethod
        def memory_stats():
            raise RuntimeError("library not loaded")

    monkeypatch.setattr(profiling.importlib, "import_module", lambda name: Broken)
    assert profiling.runtime_memory_stats() is None
    assert Profiler.measure_memory(lambda: 1)["runtime_peak_bytes"] is None


def test_measure_latency_counts_calls_and_returns_statistics():
    calls = []
    r = Profiler.measure_latency(lambda x: calls.append(x), 5, warmup=2, iterations=7)
    assert isinstance(r, BenchmarkResult)
    assert len(calls) == 9 and r.count == 7
    assert r.min <= r.p50 <= r.p90 <= r.p99 <= r.max
    assert r.median == r.p50 and r.min > 0


def test_profile_summary():
    model = Sequential(Linear(8, 4), ReLU(), Linear(4, 2))
    out = Profiler().profile(model, (5, 8), iterations=3)
    assert out["parameters"] == 8 * 4 + 4 + 4 * 2 + 2
    assert out["flops"] == 2 * 5 * (8 * 4 + 4 * 2)
    assert out["latency"].count == 3 and out["memory"]["tracemalloc_peak_bytes"] > 0
