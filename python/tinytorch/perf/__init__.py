"""Performance tools: profiling (parameters, FLOPs, memory, latency) and benchmarking
(precise_timer, BenchmarkResult, the MLPerf-style runner). Nothing here changes a model.

Owns only these short names; assumes benchmarking.py and profiling.py.
"""
from .benchmarking import MLPerf, BenchmarkResult, benchmark, precise_timer
from .profiling import Profiler

__all__ = ["MLPerf", "BenchmarkResult", "benchmark", "precise_timer", "Profiler"]
