"""The machine the scorecard measured, as the scorecard writes it: every figure means
something only beside this.

Owns the scorecard's wording of the machine (``machine_lines``: Markdown bullets from one
``describe()``) and its optional extras (``missing_extras``, ``missing_sentence``: what a run
loses without matplotlib, threadpoolctl or tqdm). The facts themselves -- CPU model and flags,
topology, the runtime's build report, threads, NumPy's BLAS, the GPU probes, the load -- are
read by tinytorch.measure.machine; ``cpu_model``, ``cpu_flags``, ``blas_description``,
``loadavg`` and ``describe`` are importable from here as well, the same objects.

Assumes: the scorecard extras are optional; a missing one costs the line it names, never
the run.
"""
from __future__ import annotations

from ..measure.machine import blas_description, cpu_flags, cpu_model, describe, loadavg

__all__ = ["cpu_model", "cpu_flags", "blas_description", "loadavg", "describe", "machine_lines",
           "missing_extras", "missing_sentence"]

# The scorecard extra (pyproject.toml): package -> what the run loses without it.
SCORECARD_EXTRAS = {
    "matplotlib": "no PNG plots",
    "threadpoolctl": "NumPy's BLAS could not be held to 1 thread and is not named",
    "tqdm": "plain progress lines instead of bars",
}


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
