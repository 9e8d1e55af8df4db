"""The machine the scorecard measured: every figure means something only beside this.

Design: plain facts read at run time, never guessed: the CPU model and flags from
/proc/cpuinfo (platform.processor() elsewhere), topology from lscpu when present, the
runtime's own build report (ISA active, OpenMP, library path), the thread count the runtime
uses, NumPy and the BLAS threadpoolctl finds (with the OPENBLAS_* environment, which changes
the kernel OpenBLAS picks), the GPU probes of tinytorch.backends, and the load average (the
machine may be shared: load inflates timings). benchmarks/_common.py re-exports
``cpu_model`` and ``blas_description`` from here.
"""
from __future__ import annotations

import os
import platform
import subprocess

import numpy as np

__all__ = ["cpu_model", "cpu_flags", "blas_description", "loadavg", "describe", "machine_lines",
           "missing_extras", "missing_sentence"]

# The scorecard extra (pyproject.toml): package -> what the run loses without it.
SCORECARD_EXTRAS = {
    "matplotlib": "no PNG plots",
    "threadpoolctl": "NumPy's BLAS could not be held to 1 thread and is not named",
    "tqdm": "plain progress lines instead of bars",
}

SIMD_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_bf16", "neon", "asimd")


def _lscpu() -> dict:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}


def _cpuinfo(key: str) -> str:
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
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def cpu_flags() -> list:
    """The SIMD-related CPU flags present (avx2, fma, avx512f, neon, ...)."""
    present = set(_cpuinfo("flags").split() + _cpuinfo("Features").split())
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


def _importable(name: str) -> bool:
    try:
        __import__(name)
    except Exception:  # noqa: BLE001 - a broken install counts as missing
        return False
    return True


def missing_extras() -> dict:
    """{package: what the scorecard loses without it} for each scorecard extra not importable."""
    return {name: loss for name, loss in SCORECARD_EXTRAS.items() if not _importable(name)}


def missing_sentence() -> str:
    """One sentence naming the missing scorecard extras, what each costs and how to install
    them; '' when nothing is missing."""
    missing = missing_extras()
    if not missing:
        return ""
    listed = "; ".join(f"{name} ({loss})" for name, loss in missing.items())
    return (f"Not installed: {listed}; `python3 -m pip install \"tinytorch[scorecard]\"` (in a clone: "
            f"`python3 -m pip install \".[scorecard]\"`) adds them.")


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
    cpu = _lscpu()
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


def machine_lines(desc: dict | None = None) -> list:
    """The machine as Markdown bullets.

    Args:
        desc: a ``describe()`` result (measured now when None).
    """
    d = desc or describe()
    rt = d["runtime"]
    runtime = (f"libtinytorch {rt.get('version')} ({rt.get('build_type')}, {rt.get('compiler')}), "
               f"ISA in use **{d['isa']}** (compiled {', '.join(rt.get('isas_compiled') or [])}; "
               f"detected {', '.join(rt.get('isa_detected') or [])}), threads from {rt.get('threads_source') or 'the default'}"
               if rt.get("available") else f"NOT LOADED ({rt.get('reason')}): every kernel ran its NumPy fallback")
    load = d["load"]
    gpu = "; ".join(f"{k}: {'yes' if ok else 'no'} ({why})" for k, (ok, why) in d["gpus"].items())
    return [
        f"- CPU: {d['cpu']}, {d['logical_cpus']} logical CPUs ({d['arch']})"
        + (f"; {d['topology']}" if d["topology"] else "") + (f"; {d['caches']}" if d["caches"] else ""),
        f"- SIMD flags: {' '.join(d['flags']) or 'none found'}",
        f"- runtime: {runtime}",
        f"- library: {d['library'] or 'none'}",
        f"- threads: {d['threads']} (runtime default; gemm, gelu, checkpoint and attention time on 1 thread, "
        "offload's CPU column on the default)",
        f"- NumPy {d['numpy']}; BLAS: {d['blas']}",
        f"- accelerators: {gpu}",
        f"- Python {d['python']} on {d['os']}",
        "- load average (1, 5, 15 min) at start: "
        + ("n/a" if load is None else f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        + " (load above 0 means other work shared the cores: timings are inflated and spread)",
    ]
