"""tinytorch.scorecard: the extension guide's scorecard tables, re-measured on this machine.

    tinytorch scorecard [--quick] [--only SECTION ...] [--out DIR]

Design: a registry of sections, one module each (lora, checkpoint, loss_scaling, fusion,
gemm, gelu, attention, contention, offload, scalesim), each with ``run(ctx) -> SectionResult`` (see
results.py). The runner imports a section's module only when it runs (so a broken or slow
import costs nothing to the others), gives it a progress bar, and turns any exception into a
"failed" section with the error, so one failure never loses the rest of the card. A section
whose extension or device is missing reports "unavailable: <reason>" itself. Before measuring
it checks that ``--out`` is a folder it can write (a ValueError naming it otherwise, so a bad
path costs nothing) and measures this machine's ceilings once (peak.py: the FMA peak and the
copy bandwidth, which every speed is printed against). At the end it prints the claim tables
first, then writes ``scorecard.md`` (the sections wrote their PNG plots as they ran), so a
failed write never loses the results. Estimates (seconds, quick / full, measured on a loaded
2-core machine) drive the ETA.

Every measurement lives in its section's module; benchmarks/*.py call those functions for
their larger reports, so each figure is measured by one piece of code.

Owns the section registry, ``run_scorecard`` and ``check_output_folder``; assumes each
section module's ``run(ctx)``, and writes scorecard.md atomically (tinytorch._atomic).
"""
from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
from dataclasses import dataclass

from .._atomic import write_file
from .peak import measure_ceilings
from .progress import RunProgress
from .results import Context, SectionResult

__all__ = ["Section", "SECTIONS", "run_scorecard", "section_names", "check_output_folder"]


@dataclass(frozen=True)
class Section:
    """A registered section.

    Args:
        name: what --only takes; also the module's name in this package.
        title: the heading in scorecard.md.
        quick_seconds: estimated run time with --quick on 2 cores.
        full_seconds: estimated run time of the full run.
    """

    name: str
    title: str
    quick_seconds: float
    full_seconds: float

    def run(self, ctx: Context) -> SectionResult:
        """Import the section's module and run it.

        Args:
            ctx: the run's Context.
        """
        module = importlib.import_module(f"{__name__}.{self.name}")
        return module.run(ctx)


SECTIONS = {s.name: s for s in [
    Section("lora", "1. LoRA: memory of the 4096 x 16384 projection layer", 8, 15),
    Section("checkpoint", "2. Activation checkpointing: peak memory and overhead across depth", 6, 90),
    Section("loss_scaling", "3. Loss scaling: float16 underflow through real backprop", 1, 1),
    Section("fusion", "4. Graph capture and fusion: DRAM traffic and time, eager vs fused", 6, 8),
    Section("gemm", "5a. The GEMM ladder: Python loop, scalar C, blocked, SIMD, BLAS", 6, 30),
    Section("gelu", "5b. Fused bias + GELU", 4, 8),
    Section("attention", "Project: FlashAttention, latency and memory across S", 4, 20),
    Section("contention", "Busy machine: kernels beside busy cores, default threads vs 1", 3, 5),
    Section("offload", "6. Accelerator offload: arithmetic intensity and the GPU GEMM", 4, 20),
    Section("scalesim", "Project: SCALE-Sim, systolic-array cycles of traced GEMMs", 6, 15),
]}


def section_names() -> list:
    """The registered section names, in run order."""
    return list(SECTIONS)


def _run_one(section: Section, ctx: Context) -> SectionResult:
    started = time.perf_counter()
    try:
        result = section.run(ctx)
    except Exception as exc:  # noqa: BLE001 - one section's failure must not lose the card
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        result = SectionResult(section.name, section.title, status="failed", reason=tb)
        print(traceback.format_exc(), file=sys.stderr)
    result.name, result.title = section.name, section.title
    result.seconds = time.perf_counter() - started
    return result


def check_output_folder(out: str) -> str:
    """Create ``out`` if needed and prove it writable (a probe file is written and removed);
    returns it. ValueError naming the folder and the reason otherwise.

    Args:
        out: the output folder.
    """
    if not str(out).strip():
        raise ValueError("the scorecard's output folder is empty: give a folder name")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"cannot write the scorecard into {out!r}: it is a file, not a folder")
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, f".tinytorch-write-probe-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("probe")
        os.remove(probe)
    except OSError as exc:
        raise ValueError(f"cannot write the scorecard into {out!r}: {exc.strerror or exc}") from None
    return out


def run_scorecard(quick: bool = False, only=None, out: str = "scorecard", use_tqdm: bool = True,
                  stream=None, command: str | None = None) -> list:
    """Run the selected sections, write ``out/scorecard.md`` and the plots, print the claim
    tables to ``stream``; returns the SectionResults.

    Args:
        quick: the small variant of every section (31 s in all on a loaded 2-core machine).
        only: section names to run (None: all); unknown names raise ValueError.
        out: the output folder (created); one that cannot be written raises ValueError before
            anything is measured, and a write that fails at the end raises OSError after the
            tables were printed.
        use_tqdm: tqdm progress bars when tqdm is installed (False: plain lines).
        stream: where the tables are printed (stdout by default); progress goes to stderr.
        command: the command line to record in the file (default: this process's argv).
    """
    from . import machine, report

    names = list(only) if only else section_names()
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ValueError(f"unknown scorecard section(s) {unknown}; choose from {section_names()}")
    names = [n for n in section_names() if n in names]  # registry order, no repeats
    stream = stream or sys.stdout
    check_output_folder(out)
    plots_note = report.plotting_unavailable()
    missing = machine.missing_sentence()
    import tinytorch
    started = time.perf_counter()
    ceilings = measure_ceilings(max(1, tinytorch.get_num_threads()), quick=True)
    machine_md = machine.machine_lines() + ceilings.lines() + ([f"- {missing}"] if missing else [])
    estimates = {n: SECTIONS[n].quick_seconds if quick else SECTIONS[n].full_seconds for n in names}
    progress = RunProgress(estimates, use_tqdm=use_tqdm)
    ctx = Context(quick=quick, out=out, progress=progress.bar, plots_enabled=not plots_note, ceilings=ceilings)
    results = []
    for name in names:
        progress.begin(name)
        result = _run_one(SECTIONS[name], ctx)
        progress.end(name, result.seconds, result.status)
        results.append(result)
    seconds = time.perf_counter() - started
    command = command or " ".join(["tinytorch"] + sys.argv[1:])
    text = report.scorecard_markdown(results, machine_md, command, quick, plots_note, seconds)
    print(report.terminal_summary(results, machine_md), file=stream)
    if plots_note:
        print(f"\nno plots: {plots_note}", file=stream)
    stream.flush()  # the tables are out before the file is tried
    path = os.path.join(out, "scorecard.md")
    try:
        write_file(path, text)
    except OSError as exc:
        raise OSError(exc.errno, f"could not write {path} ({exc.strerror or exc}); the tables above are "
                                 "this run's results") from None
    written = [path] + [p for r in results for p in r.plots]
    print(f"\nwrote {', '.join(written)} ({seconds:.0f} s)", file=stream)
    return results
