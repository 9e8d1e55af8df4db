"""What every benchmark in benchmarks/ shares: one copy of each, so the reports agree.

Each script starts with ``import _common as C`` (the script's own folder is on sys.path when
it runs) and gets from here, and nowhere else:

  setup        sys.path gains ../python, so the scripts run from a checkout without installing;
               tinytorch and its native module are imported; the load average is recorded at
               import, i.e. when the script starts.
  threads      ``Threads(n)``: the tinytorch runtime, every OpenMP/BLAS pool threadpoolctl finds
               (OpenBLAS, libgomp) and PyTorch (when the script loaded it) on n threads, restored
               on exit. Scripts take ``--threads`` instead of setting OMP_/OPENBLAS_NUM_THREADS
               before NumPy loads: one mechanism, and the report can say what was used.
  machine      ``machine_lines(threads)``: CPU, cores and SMT, caches, SIMD flags, the runtime's
               ISAs, NumPy's BLAS, PyTorch, Python, the thread count and the load average at the
               start and at the time of writing (the machine is shared; the load says how much).
  timing       ``measure_rounds`` (median over rounds of per-contender blocks: kernels) and
               ``time_steps`` (one call at a time in alternating rounds: training steps), with
               ``spread`` for median / p10 / p90.
  ceilings     ``fma_peaks`` builds and runs the package's peak.c (FMA peak per ISA and thread count),
               ``fma_ceiling`` and ``percent_of_peak`` turn it into a "% of peak" that flags
               figures above 100 % instead of printing them; ``copy_bandwidth``.
  options      ``arguments`` / ``parse``: --threads, --quick, --out (a folder or a .md file)
               and --save in every script, with the same meaning. Without --out a report goes to
               build/benchmarks/ (scratch); --save writes the committed record in benchmarks/results/.
  reports      ``write_report`` (title, command, machine, body), ``table`` (Markdown).
  kernels      ``require_native``: the loaded library, through acceleration's door, for the
               scripts that time a kernel into a preallocated output; ``optimizer_state_bytes``.

What it assumes: threadpoolctl is installed (a test dependency; without it only the tinytorch
runtime and PyTorch are limited). PyTorch is optional and imported only by the scripts that
compare against it (``optional_torch()``), so the others neither pay its import nor load its
OpenMP runtime next to ours. Nothing here asserts on timings: benchmarks report, tests check.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
# Where a run writes unless --save or --out says otherwise: build/ is git-ignored scratch, so
# trying a script never overwrites the committed records in benchmarks/results/.
SCRATCH = os.path.join(os.path.dirname(HERE), "build", "benchmarks")
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import tinytorch  # noqa: E402
from tinytorch import native  # noqa: E402
# The measuring helpers live in the package (tinytorch.measure: the one place the package
# measures, shared with `tinytorch scorecard` and tinytorch.perf); re-exported here under the
# names every script calls: C.measure_rounds, C.Threads, C.table, ...
from tinytorch.measure import (  # noqa: E402,F401
    SETTLE_SECONDS, Threads, blas_description, cpu_flags, cpu_model, loadavg, lscpu, measure_rounds,
    optimizer_state_bytes, save_figure, spread, time_steps, write_file)
from tinytorch.measure import markdown_table as table  # noqa: E402,F401
from tinytorch.scorecard.peak import (  # noqa: E402,F401
    copy_bandwidth, fma_ceiling, fma_peaks, measure_ceilings, merge_peaks, percent_of_peak)

try:
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # pragma: no cover - benchmarks want it, tests do not
    threadpool_info = threadpool_limits = None


LOAD_AT_START = loadavg()
STARTED = time.gmtime()


def optional_torch():
    """PyTorch, or None when it is not installed."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


# ----------------------------------------------------------------------------- threads

# Threads: the package's (tinytorch.measure.threads), imported above.


def thread_counts(text: str) -> list[int]:
    """'1,2' -> [1, 2] (sorted, unique, positive): the argparse type of list-valued --threads."""
    try:
        counts = sorted({int(t) for t in str(text).split(",") if t.strip()})
    except ValueError:
        counts = []
    if not counts or counts[0] < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return counts


# ----------------------------------------------------------------------------- machine

# lscpu, cpu_flags, cpu_model, blas_description, loadavg: the package's (tinytorch.measure.machine).


def _load_text(load) -> str:
    return "n/a" if load is None else f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def machine_lines(threads=None) -> list[str]:
    """The Markdown bullet list every report carries. `threads`: an int or a list of counts."""
    cpu = lscpu()
    simd = cpu_flags()
    topology = ", ".join(f"{k} {cpu[k]}" for k in ("Socket(s)", "Core(s) per socket", "Thread(s) per core")
                         if k in cpu)
    caches = ", ".join(f"{k} {cpu[k]}" for k in ("L2 cache", "L3 cache") if k in cpu)
    info = native.info()
    runtime = (f"{info.get('version')}, ISA active `{info.get('isa_active')}` (detected "
               f"{info.get('isa_detected')}, compiled {info.get('isas_compiled')}), threads "
               f"{info.get('threads')} from {info.get('threads_source')}, compiler {info.get('compiler')}" if info.get("available")
               else f"not loaded ({info.get('reason')}): NumPy fallbacks")
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "not installed"
    if isinstance(threads, (list, tuple)):
        threads = ", ".join(map(str, threads))
    lines = [
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical CPUs ({platform.machine()})"
        + (f"; {topology}" if topology else "") + (f"; {caches}" if caches else ""),
        f"- SIMD flags: {' '.join(simd) or 'none found'}",
        f"- tinytorch runtime: {runtime}",
        f"- NumPy {np.__version__}; BLAS: {blas_description()}",
        f"- PyTorch: {torch_version}",
        f"- Python {platform.python_version()} on {platform.system()} {platform.release()}, "
        f"started {time.strftime('%Y-%m-%d %H:%M UTC', STARTED)}",
    ]
    if threads is not None:
        lines.append(f"- threads: {threads} (tinytorch runtime, BLAS and OpenMP via threadpoolctl, "
                     "PyTorch where compared)")
    lines.append(f"- load average (1, 5, 15 min) at start: {_load_text(LOAD_AT_START)}; now: "
                 f"{_load_text(loadavg())} (the machine is shared: load above 0 inflates and "
                 "spreads the timings)")
    return lines


# ----------------------------------------------------------------------------- timing

# measure_rounds (with SETTLE_SECONDS), time_steps and spread: the package's (tinytorch.measure.timing),
# so the scorecard command and these scripts time things the same way.


# ----------------------------------------------------------------------------- ceilings

# fma_peaks, merge_peaks, fma_ceiling, percent_of_peak, copy_bandwidth: the package's
# (tinytorch.scorecard.peak, with peak.c beside it), imported above.


# ----------------------------------------------------------------------------- reports

def arguments(doc: str, report_name: str, threads=1, quick: dict | None = None) -> argparse.ArgumentParser:
    """A parser with the options every script has; the script adds its own and calls parse().
      --threads  an int (default `threads`), or, when `threads` is a list, thread counts to
                 measure in turn ("1,2" or "1 2")
      --quick    a smoke run: parse() sets every attribute named in `quick` to its value there
                 (the smallest sizes the script allows), overriding the other options
      --out      a folder, or a .md file, for the report and its figures
      --save     write into benchmarks/results/ (the committed records) instead of the scratch
                 folder build/benchmarks/ that a run without --out uses"""
    ap = argparse.ArgumentParser(description=doc.strip().split("\n")[0])
    if isinstance(threads, list):
        ap.add_argument("--threads", type=thread_counts, nargs="+", default=[threads],
                        help=f"thread counts, comma- or space-separated (default {','.join(map(str, threads))})")
    else:
        ap.add_argument("--threads", type=int, default=threads, help=f"threads (default {threads})")
    quick = dict(quick or {})
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run" + (": " + ", ".join(f"{k}={v}" for k, v in quick.items()) if quick else ""))
    ap.add_argument("--out", default=None,
                    help=f"report file (.md) or folder (default: build/benchmarks/{report_name}; "
                         f"with --save benchmarks/results/{report_name})")
    ap.add_argument("--save", action="store_true",
                    help="write the committed record in benchmarks/results/ (when --out is not given)")
    ap.set_defaults(report_name=report_name, quick_overrides=quick)
    return ap


def parse(ap: argparse.ArgumentParser) -> argparse.Namespace:
    """parse_args, plus: the --quick overrides applied, args.threads flattened to a sorted list
    when it is one, and args.report, the report's path (see report_path)."""
    args = ap.parse_args()
    if args.quick:
        for name, value in args.quick_overrides.items():
            setattr(args, name, value)
    if isinstance(args.threads, list):
        args.threads = sorted({n for group in args.threads for n in group})
    if args.out is None:
        args.out = RESULTS if args.save else SCRATCH
    args.report = report_path(args.out, args.report_name)
    return args


def report_path(out: str, report_name: str) -> str:
    """`out` as given when it names a .md file, else report_name inside that folder; the folder
    is created. Figures go next to the report."""
    path = out if out.endswith(".md") else os.path.join(out, report_name)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return path


def command() -> str:
    """How this run was started, for the report (run from the repository root)."""
    script = os.path.relpath(os.path.abspath(sys.argv[0]), os.path.dirname(HERE))
    return " ".join(["python", script] + sys.argv[1:])


def ceiling_lines(threads=None) -> list[str]:
    """This machine's measured FMA peak (1..max(threads) threads) and copy bandwidth as bullets,
    so every report names the ceilings its speeds are relative to (tinytorch.scorecard.peak)."""
    counts = threads if isinstance(threads, (list, tuple)) else [threads or 1]
    return measure_ceilings(max(counts), quick=True).lines()


def write_report(path: str, title: str, body: list[str], threads=None) -> str:
    """Writes '# title', the command, the machine and its measured ceilings, then `body`
    (Markdown lines); returns the text."""
    lines = [f"# {title}", "", f"Command: `{command()}`", "", "## Machine", ""]
    lines += machine_lines(threads) + ceiling_lines(threads) + [""] + list(body)
    text = "\n".join(lines).rstrip("\n") + "\n"
    write_file(path, text)  # atomic: a killed run keeps the previous report
    print(f"wrote {path}")
    return text


# table: the package's markdown_table (tinytorch.measure.reports), imported above.


# ----------------------------------------------------------------------------- misc

def require_native():
    """The loaded libtinytorch (ctypes, every prototype declared once in tinytorch._native),
    taken through acceleration's door for raw calls; exits when it is missing or turned off.
    The kernel benchmarks call it directly to time a kernel into a preallocated output."""
    if not native.available():
        sys.exit(f"the native runtime is not available: {native.reason()}")
    from tinytorch.core import acceleration
    lib = acceleration.native_library()
    if lib is None:
        sys.exit("the native path is disabled (TINYTORCH_DISABLE_NATIVE?)")
    return lib


# optimizer_state_bytes: the package's (tinytorch.measure.memory), imported above.
