"""Shared pieces of the kernel benchmarks (bench_gemm.py, bench_gelu.py).

What it owns: the timer (medians over rounds of per-contender blocks, so a burst of load
from other processes hits every contender alike while no library runs next to another
library's still-spinning thread pool), the machine description written into every result
file, the measured ceilings (the FMA peak from benchmarks/peak.c, compiled here at run
time, and the copy bandwidth), thread control for the runtime, NumPy's BLAS and PyTorch,
and Markdown table formatting.

What it assumes: tinytorch is importable (installed, or PYTHONPATH=python) and its native
library is loaded; threadpoolctl is installed (it is a test dependency); PyTorch is
optional. Nothing here asserts on timings: benchmarks report, tests check correctness.
"""
from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import tinytorch  # noqa: E402
from tinytorch import native  # noqa: E402

try:
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # pragma: no cover - benchmarks need it, tests do not
    threadpool_info = threadpool_limits = None

try:
    import torch
except ImportError:
    torch = None


# Thread pools of other libraries keep spinning after a call (OpenBLAS's workers for up to
# ~0.1 s, OpenMP runtimes for less) and steal the cores from whoever runs next. Each
# contender therefore runs in its own block after this pause, not call-by-call interleaved.
SETTLE_SECONDS = 0.2


def measure_rounds(contenders: dict, rounds: int, block_time: float = 0.25) -> dict:
    """Median seconds per call of each zero-argument callable. Each round gives every
    contender one block: a pause (SETTLE_SECONDS), one warm-up call, then calls for about
    `block_time` seconds (at least one); the block's median is kept, and the result is
    the median over rounds. Rounds cycle through the contenders, so slow drifts in the
    machine's load are shared."""
    per_round = {name: [] for name in contenders}
    for _ in range(max(1, rounds)):
        for name, fn in contenders.items():
            time.sleep(SETTLE_SECONDS)
            fn()
            times = []
            start = time.perf_counter()
            while not times or time.perf_counter() - start < block_time:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            per_round[name].append(statistics.median(times))
    return {name: statistics.median(v) for name, v in per_round.items()}


class Threads:
    """Context manager: the runtime, NumPy's BLAS and PyTorch all on `n` threads."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        self.before = tinytorch.get_num_threads()
        tinytorch.set_num_threads(self.n)
        self.limit = threadpool_limits(self.n) if threadpool_limits else None
        if torch is not None:
            self.torch_before = torch.get_num_threads()
            torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        tinytorch.set_num_threads(self.before)
        if self.limit is not None:
            self.limit.restore_original_limits()
        if torch is not None:
            torch.set_num_threads(self.torch_before)
        return False


def blas_description() -> str:
    """Which BLAS NumPy runs, as threadpoolctl reports it (library, version, kernel)."""
    if threadpool_info is None:
        return "threadpoolctl not installed"
    parts = []
    for entry in threadpool_info():
        if entry.get("user_api") == "blas":
            parts.append(f"{entry.get('internal_api')} {entry.get('version')} "
                         f"(kernel: {entry.get('architecture')}, threading: "
                         f"{entry.get('threading_layer')})")
    env = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS_") or k == "OMP_NUM_THREADS"}
    text = "; ".join(parts) or "no BLAS found by threadpoolctl"
    return text + (f"; environment: {env}" if env else "; no OPENBLAS_* variables set")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_lines() -> list[str]:
    info = native.info()
    lines = [
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical CPUs ({platform.machine()})",
        f"- tinytorch runtime: {info.get('version')}, ISA active `{info.get('isa_active')}` "
        f"(detected {info.get('isa_detected')}, compiled {info.get('isas_compiled')}), "
        f"OpenMP {info.get('openmp')}, compiler {info.get('compiler')}",
        f"- NumPy {np.__version__}; BLAS: {blas_description()}",
        f"- PyTorch: {torch.__version__ if torch is not None else 'not installed'}",
        f"- Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
    ]
    try:
        load = os.getloadavg()
        lines.append(f"- load average at start: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
                     f"(the machine is shared; see the noise notes)")
    except OSError:
        pass
    return lines


def fma_peak(threads: int) -> dict:
    """{isa: GFLOP/s} from benchmarks/peak.c (register-only FMA loop), {} if no compiler."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None or platform.machine() not in ("x86_64", "AMD64"):
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "peak")
        build = subprocess.run([cc, "-O2", "-o", exe, os.path.join(HERE, "peak.c"), "-lpthread"],
                               capture_output=True, text=True)
        if build.returncode != 0:
            return {}
        out = subprocess.run([exe, str(threads), "60000000"], capture_output=True, text=True)
    peaks = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "peak":
            peaks[parts[1]] = float(parts[3])
    return peaks


def copy_bandwidth(nbytes: int = 381 * 2 ** 20, rounds: int = 5) -> float:
    """GB/s of np.copyto between two preallocated arrays, counting read + write bytes."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    t = measure_rounds({"copy": lambda: np.copyto(dst, src)}, rounds, block_time=0.5)["copy"]
    return 2 * nbytes / t / 1e9


def table(header: list[str], rows: list[list]) -> list[str]:
    def cell(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def require_native():
    if not native.available():
        sys.exit(f"the native runtime is not available: {native.reason()}")
    from tinytorch.core import acceleration
    rt = acceleration._runtime()
    if rt is None:
        sys.exit("the native path is disabled (TINYTORCH_DISABLE_NATIVE?)")
    return rt
