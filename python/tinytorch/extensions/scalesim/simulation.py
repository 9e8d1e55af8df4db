"""simulate(): a list of GEMMs on an ArrayConfig, through the real SCALE-Sim or the closed form.

Design. ``engine="scalesim"`` writes the three input files (files.py), runs the simulator in
its own interpreter (runner.py) and parses its reports (reports.py): the per-layer figures
are SCALE-Sim's own, unchanged. ``engine="analytical"`` evaluates the paper's formulas
(analytical.py). ``engine="auto"`` takes SCALE-Sim when it can run here (creating the
managed environment on first use, unless ``TINYTORCH_SCALESIM_INSTALL=0``) and otherwise the
analytical model, with the reason in ``result.reason``. SCALE-Sim simulates each layer on
its own, so products of one shape are simulated once and the figures reused for every
product of that shape (``deduplicate``): a 4-block GPT costs one block's simulation.

Assumes: the files, runner and reports modules for the real SCALE-Sim and analytical.py
for the closed form; a temporary folder per run.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile

from .analytical import analytical_layer
from .config import ArrayConfig
from .files import write_inputs
from .reports import find_run_dir, parse_run
from .results import LayerResult, SimulationResult
from .runner import run_scalesim, scalesim_python, scalesim_status
from .trace import Gemm

__all__ = ["simulate", "ENGINES"]

ENGINES = ("auto", "scalesim", "analytical")
_auto_refusal: dict = {}  # why "auto" could not use SCALE-Sim in this process (probed once)


def _check(gemms, config, engine):
    if engine not in ENGINES:
        raise ValueError(f"simulate: engine must be one of {ENGINES}, got {engine!r}")
    if not isinstance(config, ArrayConfig):
        raise TypeError(f"simulate: config must be an ArrayConfig, got {type(config).__name__}")
    if isinstance(gemms, Gemm):
        gemms = [gemms]
    gemms = list(gemms)
    if not gemms:
        raise ValueError("simulate: no GEMMs given (trace_gemms(model, x) records a model's)")
    for i, g in enumerate(gemms):
        if not isinstance(g, Gemm):
            raise TypeError(f"simulate: item {i} is a {type(g).__name__}, not a Gemm")
    return gemms


def _with_identity(result: LayerResult, gemm: Gemm) -> LayerResult:
    """``result`` (simulated for gemm's shape) under gemm's own name and batch."""
    return dataclasses.replace(result, name=gemm.name, batch=gemm.batch)


def _run_scalesim(gemms, config, timeout, progress, keep_output, with_traces, deduplicate):
    python = scalesim_python(install=True)
    shapes = list(dict.fromkeys((g.M, g.K, g.N) for g in gemms)) if deduplicate else None
    simulated = ([Gemm(f"{config.run_name}_{i}_{m}x{k}x{n}", m, k, n) for i, (m, k, n) in enumerate(shapes)]
                 if deduplicate else gemms)
    workdir = keep_output or tempfile.mkdtemp(prefix="tinytorch-scalesim-")
    os.makedirs(workdir, exist_ok=True)
    try:
        paths = write_inputs(simulated, config, workdir)
        output = os.path.join(workdir, "output")
        run_scalesim(paths, output, layers=len(simulated), timeout=timeout, progress=progress, python=python)
        parsed = parse_run(find_run_dir(output, config.run_name), simulated, with_traces=with_traces)
    finally:
        if keep_output is None:
            shutil.rmtree(workdir, ignore_errors=True)
    if deduplicate:
        by_shape = dict(zip(shapes, parsed))
        parsed = [by_shape[(g.M, g.K, g.N)] for g in gemms]
    return [_with_identity(r, g) for r, g in zip(parsed, gemms)], python


def simulate(gemms, config: ArrayConfig, engine: str = "auto", timeout: float | None = 600.0,
             progress: bool = False, keep_output: str | None = None, with_traces: bool = False,
             deduplicate: bool = True) -> SimulationResult:
    """Cycles, utilisation and memory traffic of ``gemms`` on the array ``config``.

    With SCALE-Sim the per-layer figures are exactly the simulator's (``cycles`` is its
    "Total Cycles" column); ``result.engine`` says which engine ran and ``result.reason`` why.

    Args:
        gemms: a ``Gemm`` or a sequence of them (e.g. ``trace_gemms(model, x)``).
        config: the ``ArrayConfig``.
        engine: "scalesim" (the real simulator; ScaleSimUnavailable, saying how to get it, when
            it cannot run), "analytical" (the closed-form model) or "auto" (SCALE-Sim when it
            can run, else the model).
        timeout: seconds SCALE-Sim may run (ScaleSimTimeout after); None waits forever.
        progress: show SCALE-Sim's progress per layer on stderr.
        keep_output: a folder to keep SCALE-Sim's inputs, reports and traces in (default: a
            temporary folder, removed afterwards).
        with_traces: read SCALE-Sim's trace files for the peak DRAM bandwidth per operand.
        deduplicate: simulate each distinct (M, K, N) once and reuse its figures.
    """
    gemms = _check(gemms, config, engine)
    reason = ""
    if engine == "auto":
        if "reason" not in _auto_refusal:
            ok, why = scalesim_status(install=True)
            if ok:
                engine, reason = "scalesim", f"SCALE-Sim is available: {why}"
            else:
                _auto_refusal["reason"] = why
        if engine == "auto":
            engine, reason = "analytical", f"SCALE-Sim cannot run here, so the analytical model ran: " \
                                           f"{_auto_refusal['reason']}"
    if engine == "analytical":
        layers = [analytical_layer(g, config) for g in gemms]
        return SimulationResult("analytical", config, tuple(layers), reason or "the analytical model was asked for")
    layers, python = _run_scalesim(gemms, config, timeout, progress, keep_output, with_traces, deduplicate)
    return SimulationResult("scalesim", config, tuple(layers), reason or f"SCALE-Sim ran with {python}",
                            output_dir=keep_output)
