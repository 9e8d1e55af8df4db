"""Shared start-up for every milestone: load tinytorch, say which runtime runs, and report at
the end which kernel paths ran.

    import _runtime                      # the milestone's folder's parent is on sys.path
    tinytorch = _runtime.load()          # prints the runtime banner (stderr warning if NumPy only)
    ...
    with _runtime.track_kernel_paths() as paths:
        train(...)
    _runtime.report(paths)               # "kernel paths: native:sgemm:avx2 (812 calls), numpy (96 calls)"

Which tinytorch is imported
  The installed package when there is one (``pip install .`` or the editable ``pip install -e .``,
  whose library is built into the checkout). Only when ``tinytorch`` is not importable at all
  does this fall back to the checkout's ``python/`` folder, and then it says so: that folder
  holds ``libtinytorch.so`` only after an editable install.

Why it speaks up
  Without the native library every kernel silently falls back to NumPy: the milestone still
  runs, only slower and without exercising the runtime. ``load()`` prints the library path,
  its version and the active instruction set, or a loud warning on stderr with the fix.

How the paths are seen
  Every heavy operation goes through one door, ``tinytorch.core.acceleration`` (gemm, matmul,
  matmul_backward, bias_gelu, bias_gelu_backward), and the door files what each call ran in
  ``acceleration.last_path()``. ``track_kernel_paths()`` wraps those public functions for the
  duration of the ``with`` block and counts ``last_path()`` after each call; it changes no
  result. "numpy" among the paths is expected: calls below the native size floor (and float64)
  are served by NumPy on purpose.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import importlib
import importlib.util
import os
import sys

CHECKOUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CHECKOUT_PYTHON = os.path.join(CHECKOUT, "python")

# The kernel API of tinytorch.core.acceleration (its docstring's contract).
_DOOR_FUNCTIONS = ("gemm", "matmul", "matmul_backward", "bias_gelu", "bias_gelu_backward")

_FIX = ("Fix: from the repository root run `python -m pip install .` (or `python -m pip install -e .` "
        "to work on the code), then run this milestone again; `tinytorch info` shows what is loaded.")


def _import_tinytorch():
    """(module, where) -- the installed package if importable, else the checkout's python/."""
    if importlib.util.find_spec("tinytorch") is not None:
        return importlib.import_module("tinytorch"), "installed package"
    sys.path.insert(0, CHECKOUT_PYTHON)
    importlib.invalidate_caches()
    return importlib.import_module("tinytorch"), "checkout's python/ folder (tinytorch is not installed)"


def _warn(lines):
    bar = "!" * 78
    print("\n".join([bar, *lines, bar]), file=sys.stderr, flush=True)


def load(say=print):
    """Import tinytorch, print which runtime it loaded (or warn on stderr), return the module."""
    tinytorch, where = _import_tinytorch()
    from tinytorch.core import acceleration

    package_dir = os.path.dirname(os.path.abspath(tinytorch.__file__))
    if where == "installed package" and package_dir.startswith(CHECKOUT_PYTHON + os.sep):
        where = "installed package, editable: pip install -e ."
    say(f"tinytorch {tinytorch.__version__} from {package_dir} ({where})")
    info = tinytorch.native.info()
    if not info["available"]:
        say("runtime   none: every kernel runs on NumPy (see the warning on stderr)")
        lines = ["WARNING: the native runtime libtinytorch is NOT loaded, so every kernel in this run",
                 "falls back to NumPy (slower, and the runtime's kernels are not exercised).",
                 f"Reason: {info['reason']}"]
        if os.environ.get("TINYTORCH_LIB"):
            lines.append("TINYTORCH_LIB is set: it must name a built libtinytorch.so "
                         "(unset it to use the installed library).")
        _warn(lines + [_FIX])
        return tinytorch
    isa = info.get("isa_active")
    say(f"runtime   libtinytorch {info.get('version')} ({info.get('build_type', '?')}) at {info['library']}")
    say(f"ISA       {isa} active (compiled: {', '.join(info.get('isas_compiled', []))}; "
        f"CPU supports: {', '.join(info.get('isa_detected', []))}); {info.get('threads', 1)} threads")
    say(machine_line())
    if not acceleration.native_available():
        _warn(["WARNING: libtinytorch is loaded but native kernels are turned off "
               "(TINYTORCH_DISABLE_NATIVE=1 or use_native(False)):",
               "every kernel in this run falls back to NumPy. Unset TINYTORCH_DISABLE_NATIVE to use it."])
    return tinytorch


def machine_line() -> str:
    """"machine   <CPU>, N CPUs, load average L": the context every timing of a milestone needs."""
    import platform
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return (f"machine   {cpu}, {os.cpu_count()} CPUs{load} (timings are wall-clock and move with "
            f"the machine's load)")


@contextlib.contextmanager
def track_kernel_paths():
    """Count ``acceleration.last_path()`` after every call through the kernel door inside the
    block. Yields a ``collections.Counter`` {path: calls}."""
    from tinytorch.core import acceleration

    seen = collections.Counter()
    originals = {}

    def wrap(fn):
        @functools.wraps(fn)
        def counted(*args, **kwargs):
            out = fn(*args, **kwargs)
            seen[acceleration.last_path()] += 1
            return out
        return counted

    for name in _DOOR_FUNCTIONS:
        fn = getattr(acceleration, name, None)
        if callable(fn):
            originals[name] = fn
            setattr(acceleration, name, wrap(fn))
    try:
        yield seen
    finally:
        for name, fn in originals.items():
            setattr(acceleration, name, fn)


def report(seen, say=print):
    """Print the kernel paths that ran (most calls first); warn on stderr when none was native."""
    if not seen:
        say("kernel paths: none (no call went through tinytorch.core.acceleration)")
        return
    parts = [f"{path} ({n} calls)" for path, n in seen.most_common()]
    say("kernel paths: " + ", ".join(parts))
    if "numpy" in seen and len(seen) > 1:
        say("  (numpy: calls below the native size floor, e.g. small matrices or one-token decoding steps, run on NumPy on purpose)")
    if not any(path.startswith("native:") for path in seen):
        from tinytorch import native
        if native.available():
            _warn(["WARNING: no kernel call took a native path in this run: everything ran on NumPy.",
                   "(The library is loaded: were native kernels turned off, or every call below the size floor?)"])
        else:
            print("WARNING: every kernel ran on NumPy: libtinytorch is not loaded (see the warning at "
                  "the start). " + _FIX, file=sys.stderr, flush=True)


def print_table(headers, rows, say=print):
    """Print ``rows`` (sequences of cells, already formatted as text) under ``headers`` as a
    Markdown table whose columns line up in a terminal."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    say(line(cells[0]))
    say("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        say(line(r))


def add_json_option(parser):
    """Add ``--json PATH``: where ``save_results`` writes the final numbers (tests read them)."""
    parser.add_argument("--json", metavar="PATH", default=None,
                        help="also write the final numbers to this JSON file")


def save_results(path, results):
    """Write ``results`` (a JSON-friendly dict) to ``path`` when one was given."""
    if path:
        import json
        from tinytorch._atomic import write_file  # all or nothing, like the package's writers
        write_file(path, json.dumps(results, indent=2, default=float))
