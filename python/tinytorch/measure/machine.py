"""machine: the facts that say where a number was measured, read at run time, never guessed.

What this file owns
  cpuinfo(key), lscpu()   /proc/cpuinfo fields and lscpu's table (empty where absent)
  cpu_model, cpu_flags    the CPU's model name; the SIMD flags present (SIMD_FLAGS)
  blas_description        the BLAS NumPy runs (threadpoolctl) and the OPENBLAS_* environment
  loadavg                 1/5/15-minute load (a shared machine inflates timings)
  describe()              all of it plus the runtime's build report, its ISA and threads, the
                          GPU probes of tinytorch.backends: the scorecard's and benchmarks'
                          machine sections are written from these
  system_info()           the short dict upstream's benchmarking classes carry (platform,
                          processor, python_version, numpy_version, cpu_count, loadavg)

What it assumes: nothing is imported that a bare machine lacks (threadpoolctl is optional and
looked up at call time); the runtime and the registry are imported inside describe(), so this
module imports without the native library.
"""
from __future__ import annotations

import os
import platform
import subprocess

import numpy as np

__all__ = ["SIMD_FLAGS", "cpuinfo", "lscpu", "cpu_model", "cpu_flags", "blas_description",
           "loadavg", "describe", "system_info"]

SIMD_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "neon", "asimd")


def lscpu() -> dict:
    """lscpu's "key: value" lines as a dict ({} where lscpu is missing or fails)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}


def cpuinfo(key: str) -> str:
    """The value of the first /proc/cpuinfo line starting with ``key`` ("" where there is none).

    Args:
        key: the field name, e.g. "model name", "flags" (x86) or "Features" (Arm).
    """
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_model() -> str:
    """The CPU's model name (or the platform's processor / machine string)."""
    return cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_flags() -> list:
    """The SIMD-related CPU flags present (avx2, fma, avx512f, neon, ...)."""
    present = set(cpuinfo("flags").split() + cpuinfo("Features").split())
    return [f for f in SIMD_FLAGS if f in present]


def blas_description() -> str:
    """Which BLAS NumPy runs, as threadpoolctl reports it (library, version, kernel), and the
    OPENBLAS_* / OMP_NUM_THREADS environment."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "not identified (threadpoolctl is not installed)"
    parts = [f"{e.get('internal_api')} {e.get('version')} (kernel: {e.get('architecture')}, "
             f"threading: {e.get('threading_layer')})"
             for e in threadpool_info() if e.get("user_api") == "blas"]
    env = {k: v for k, v in os.environ.items()
           if k.startswith("OPENBLAS_") or k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    text = "; ".join(parts) or "no BLAS found by threadpoolctl"
    return text + (f"; environment: {env}" if env else "; no OPENBLAS_*/OMP_NUM_THREADS set")


def loadavg():
    """(1, 5, 15)-minute load averages, or None where the OS has none."""
    try:
        return os.getloadavg()
    except (OSError, AttributeError):
        return None


def describe() -> dict:
    """The machine as a dict: cpu, logical_cpus, topology, flags, runtime (the build report),
    isa, threads, library, numpy, blas, gpus ({probe: (ok, detail)}), load."""
    import tinytorch
    from tinytorch import backends, native
    cpu = lscpu()
    info = native.info()
    gpus = {}
    for name in ("cuda", "triton", "mps"):
        try:
            gpus[name] = backends.status(name)
        except Exception as exc:  # noqa: BLE001 - a probe must not break the description
            gpus[name] = (False, f"probe failed: {exc}")
    return {
        "cpu": cpu_model(), "logical_cpus": os.cpu_count(), "arch": platform.machine(),
        "topology": ", ".join(f"{k} {cpu[k]}" for k in ("Socket(s)", "Core(s) per socket",
                                                         "Thread(s) per core") if k in cpu),
        "caches": ", ".join(f"{k} {cpu[k]}" for k in ("L2 cache", "L3 cache") if k in cpu),
        "flags": cpu_flags(), "runtime": info,
        "isa": info.get("isa_active") if info.get("available") else None,
        "threads": tinytorch.get_num_threads(), "library": info.get("library"),
        "numpy": np.__version__, "blas": blas_description(), "gpus": gpus, "load": loadavg(),
        "python": platform.python_version(), "os": f"{platform.system()} {platform.release()}",
    }


def system_info() -> dict:
    """Where the numbers were measured, as upstream's benchmarking classes record it: platform,
    processor (the CPU's model name), Python, NumPy, cores and load average."""
    load = tuple(round(v, 2) for v in os.getloadavg()) if hasattr(os, "getloadavg") else None
    return {"platform": platform.platform(), "processor": cpu_model(),
            "python_version": platform.python_version(), "numpy_version": np.__version__,
            "cpu_count": os.cpu_count() or 1, "loadavg": load}
