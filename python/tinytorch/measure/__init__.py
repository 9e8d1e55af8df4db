"""tinytorch.measure: the one place the package measures -- clocks, threads, memory, the machine
and the writing of reports.

    timing.py    precise_timer, BenchmarkResult, benchmark, measure_rounds, time_steps, spread
    threads.py   Threads(n) (runtime, BLAS/OpenMP pools, PyTorch on n threads), blas_threads_limited
    memory.py    traced_peak, optimizer_state_bytes, runtime_memory_stats, reset_runtime_peak
    machine.py   cpu_model, cpu_flags, cpuinfo, lscpu, blas_description, loadavg, describe,
                 system_info
    reports.py   markdown_table, and the atomic write_file / save_figure

Who uses it: tinytorch.perf (the course's benchmarking and profiling API), tinytorch.scorecard
(the `tinytorch scorecard` command), tinytorch.olympics and the scripts of benchmarks/ (through
benchmarks/_common.py). It sits below all of them: it imports nothing of theirs, and nothing of
the core at import (the runtime is reached at call time), so a measurement never pulls in the
thing it measures.

Owns the package-level names of the five modules (the same objects). Assumes: nothing
optional at import; threadpoolctl, matplotlib and the runtime are looked up at call time.
"""
from __future__ import annotations

from .machine import (blas_description, cpu_flags, cpu_model, cpuinfo, describe, loadavg, lscpu,
                      system_info)
from .memory import optimizer_state_bytes, reset_runtime_peak, runtime_memory_stats, traced_peak
from .reports import markdown_table, save_figure, write_file
from .threads import Threads, blas_threads_limited
from .timing import (SETTLE_SECONDS, BenchmarkResult, PreciseTimer, benchmark, measure_rounds,
                     precise_timer, spread, time_steps)

__all__ = ["precise_timer", "PreciseTimer", "BenchmarkResult", "benchmark", "SETTLE_SECONDS",
           "measure_rounds", "time_steps", "spread", "Threads", "blas_threads_limited",
           "traced_peak", "optimizer_state_bytes", "runtime_memory_stats", "reset_runtime_peak",
           "cpuinfo", "lscpu", "cpu_model", "cpu_flags", "blas_description", "loadavg", "describe",
           "system_info", "markdown_table", "write_file", "save_figure"]
