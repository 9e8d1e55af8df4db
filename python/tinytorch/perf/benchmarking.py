"""Benchmarking: the course's import path of the timers, the statistics and the runners.

``tinytorch.perf.benchmarking`` is where course code (Module 19) and this package's guide
import from; this file owns no implementation, only that path. Each name is the same object
as in the module that owns it:

  precise_timer, PreciseTimer, BenchmarkResult, benchmark
                    tinytorch.measure.timing (the package's one set of clocks and statistics)
  STANDARD_BENCHMARKS
                    perf/mlperf.py (the MLPerf-inference-style runner, LoadGen or built-in)
  Benchmark, BenchmarkSuite, DEFAULT_WARMUP_RUNS, DEFAULT_MEASUREMENT_RUNS, three of
  upstream's test_unit_* self-checks, and simulated_accuracy (also under upstream's private
  name _simulated_accuracy)
                    perf/benchmark_suite.py (upstream's classes, as adapters; docs/compat.md)
  MLPerf, TinyMLPerf, test_unit_tinymlperf
                    perf/mlperf_classroom.py: that runner plus upstream's classroom targets,
                    verdicts and compliance reports (the course's MLPerf, and its older name)

The order of the floors: measure.timing <- perf/profiling.py <- perf/mlperf.py,
perf/benchmark_suite.py <- perf/mlperf_classroom.py <- this file; none of them imports this
file, so there is no circle.

Assumes: the names keep their meaning where they are defined; a new timer or runner is
written in its own module and only named here.
"""
from __future__ import annotations

from ..measure.timing import BenchmarkResult, PreciseTimer, benchmark, precise_timer
from .benchmark_suite import (DEFAULT_MEASUREMENT_RUNS, DEFAULT_WARMUP_RUNS, Benchmark, BenchmarkSuite,
                              simulated_accuracy, test_unit_benchmark, test_unit_benchmark_result,
                              test_unit_benchmark_suite)
from .mlperf import STANDARD_BENCHMARKS
from .mlperf_classroom import MLPerf, TinyMLPerf, test_unit_tinymlperf

_simulated_accuracy = simulated_accuracy  # upstream's (private) name, imported by its tests

__all__ = ["precise_timer", "PreciseTimer", "BenchmarkResult", "benchmark", "MLPerf",
           "STANDARD_BENCHMARKS",
           # upstream TinyTorch's Module 19 names, from benchmark_suite.py and mlperf_classroom.py
           "DEFAULT_WARMUP_RUNS", "DEFAULT_MEASUREMENT_RUNS", "Benchmark", "BenchmarkSuite",
           "simulated_accuracy", "TinyMLPerf", "test_unit_benchmark_result", "test_unit_benchmark",
           "test_unit_benchmark_suite", "test_unit_tinymlperf"]
