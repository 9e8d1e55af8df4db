"""Running the real SCALE-Sim: its own interpreter, a subprocess, a progress line, a timeout.

Design. SCALE-Sim 3.0.0 fails under NumPy 2.4 ("only 0-dimensional arrays can be converted
to Python scalars"; NumPy 2.3 works), so it never runs in this process: it runs in an
interpreter of its own, found in this order:

  1. ``TINYTORCH_SCALESIM_PYTHON``: a Python that can ``import scalesim`` (used as given);
  2. the managed virtual environment ``$TINYTORCH_CACHE/scalesim-venv`` (default
     ``~/.cache/tinytorch/scalesim-venv``), created on first use with
     ``pip install scalesim==3.0.0 "numpy<2.4"`` unless ``TINYTORCH_SCALESIM_INSTALL=0``
     (creation holds a file lock, so parallel first uses build it once).

``run_scalesim`` starts ``python -m scalesim.scale -c CFG -t TOPO -l LAYOUT -p OUT -i gemm``
in its own process group, reads its "Running Layer i" lines for a progress display
(tqdm when installed, else one line per layer on stderr), and kills the group when the
timeout passes (``ScaleSimTimeout``). Failures say what to do: ``ScaleSimUnavailable``
carries how to get SCALE-Sim, ``ScaleSimError`` the simulator's last output lines.

Assumes: SCALE-Sim is installed in its own interpreter (a managed virtual environment or
a given one), reached only through a subprocess.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

try:
    import fcntl  # POSIX: the lock around creating the managed environment
except ImportError:  # pragma: no cover - elsewhere the creation is simply not locked
    fcntl = None

__all__ = ["ScaleSimError", "ScaleSimUnavailable", "ScaleSimTimeout", "SCALESIM_REQUIREMENTS",
           "managed_venv_dir", "scalesim_python", "scalesim_status", "run_scalesim", "INSTALL_HINT"]

SCALESIM_REQUIREMENTS = ("scalesim==3.0.0", "numpy<2.4")
PYTHON_ENV, INSTALL_ENV, CACHE_ENV = "TINYTORCH_SCALESIM_PYTHON", "TINYTORCH_SCALESIM_INSTALL", "TINYTORCH_CACHE"
INSTALL_HINT = ("SCALE-Sim runs in its own interpreter: let tinytorch create it (needs PyPI; "
                f"{INSTALL_ENV}=0 forbids it), or make one yourself with `python -m venv DIR && "
                f"DIR/bin/pip install scalesim==3.0.0 \"numpy<2.4\"` and set {PYTHON_ENV}=DIR/bin/python")
_PROBE_TIMEOUT_S = 60
_INSTALL_TIMEOUT_S = 600
_probed: dict = {}  # interpreter path -> (usable, reason), so a process probes each once


class ScaleSimError(RuntimeError):
    """SCALE-Sim ran and failed (its exit status and last output lines are in the message)."""


class ScaleSimUnavailable(ScaleSimError):
    """No interpreter that can run SCALE-Sim (the message says how to get one)."""


class ScaleSimTimeout(ScaleSimError, TimeoutError):
    """SCALE-Sim ran past the timeout and was stopped."""


def managed_venv_dir() -> str:
    """The managed environment's folder: ``$TINYTORCH_CACHE/scalesim-venv``, default
    ``~/.cache/tinytorch/scalesim-venv``."""
    cache = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "tinytorch")
    return os.path.join(cache, "scalesim-venv")


def _venv_python(venv: str) -> str:
    return os.path.join(venv, "Scripts" if os.name == "nt" else "bin", "python")


def _probe(python: str) -> tuple[bool, str]:
    """Can ``python`` import scalesim with a NumPy older than 2.4? Never raises."""
    if python in _probed:
        return _probed[python]
    if not os.path.isfile(python):
        return False, f"{python} does not exist"
    code = "import numpy, scalesim.scale_sim; print(numpy.__version__)"
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{python} could not be run: {exc}"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        result = (False, f"{python} cannot import scalesim: {last}")
    else:
        numpy_version = done.stdout.strip()
        major_minor = tuple(int(p) for p in numpy_version.split(".")[:2] if p.isdigit())
        result = (major_minor < (2, 4), f"{python} (scalesim, numpy {numpy_version})" if major_minor < (2, 4)
                  else f"{python} has numpy {numpy_version}; SCALE-Sim 3.0.0 needs numpy < 2.4")
    _probed[python] = result
    return result


@contextlib.contextmanager
def _lock(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if fcntl is None:
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _create_managed_venv(venv: str) -> tuple[bool, str]:
    """Create the managed environment (venv + pip install); returns (ok, reason)."""
    python = _venv_python(venv)
    steps = [[sys.executable, "-m", "venv", "--clear", venv],
             [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *SCALESIM_REQUIREMENTS]]
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"`{' '.join(step)}` failed: {exc}"
        if done.returncode != 0:
            tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
            return False, f"`{' '.join(step)}` exited {done.returncode}: {tail}"
    _probed.pop(python, None)
    return _probe(python)


def _resolve(install: bool) -> tuple[str | None, str]:
    """(interpreter or None, reason): the SCALE-Sim interpreter, per the module's order."""
    given = os.environ.get(PYTHON_ENV)
    if given:
        ok, reason = _probe(given)
        return (given, reason) if ok else (None, f"{PYTHON_ENV}={given} is not usable: {reason}. {INSTALL_HINT}")
    venv = managed_venv_dir()
    python = _venv_python(venv)
    ok, reason = _probe(python)
    if ok:
        return python, reason
    if not install:
        return None, f"no SCALE-Sim interpreter ({reason}). {INSTALL_HINT}"
    if os.environ.get(INSTALL_ENV, "1") == "0":
        return None, (f"the managed environment {venv} is missing and {INSTALL_ENV}=0 forbids creating it. "
                      f"{INSTALL_HINT}")
    with _lock(venv + ".lock"):
        _probed.pop(python, None)
        ok, reason = _probe(python)  # another process may have built it meanwhile
        if not ok:
            ok, reason = _create_managed_venv(venv)
    return (python, reason) if ok else (None, f"creating {venv} failed: {reason}. {INSTALL_HINT}")


def scalesim_status(install: bool = False) -> tuple[bool, str]:
    """(usable, reason): whether SCALE-Sim can run here and with which interpreter. Never raises.

    Args:
        install: create the managed environment when it is missing (needs PyPI; refused when
            ``TINYTORCH_SCALESIM_INSTALL=0``).
    """
    python, reason = _resolve(install)
    return python is not None, reason


def scalesim_python(install: bool = True) -> str:
    """The interpreter that runs SCALE-Sim; raises ScaleSimUnavailable (with how to get it) if none.

    Args:
        install: create the managed environment on first use when needed.
    """
    python, reason = _resolve(install)
    if python is None:
        raise ScaleSimUnavailable(reason)
    return python


class _Progress:
    """A layer counter on stderr: tqdm when installed, else a line per layer; silent if off."""

    def __init__(self, total: int, enabled: bool, label: str):
        self.bar = None
        self.enabled, self.total, self.label = enabled, total, label
        if enabled:
            try:
                from tqdm import tqdm  # noqa: PLC0415  (optional: only for the display)
                self.bar = tqdm(total=total, desc=label, unit="layer", leave=False)
            except ImportError:
                self.bar = None

    def layer_done(self, index: int):
        if self.bar is not None:
            self.bar.update(1)
        elif self.enabled:
            print(f"{self.label}: layer {index}/{self.total}", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def run_scalesim(paths: dict, output_dir: str, layers: int, timeout: float | None = 600.0,
                 progress: bool = False, python: str | None = None) -> str:
    """Run ``python -m scalesim.scale ... -i gemm`` on written inputs; returns its stdout.

    Args:
        paths: {"config", "topology", "layout"} file paths (``files.write_inputs``).
        output_dir: the folder SCALE-Sim writes ``<run_name>/`` into (``-p``).
        layers: the number of topology rows (for the progress display).
        timeout: seconds before the run is killed (ScaleSimTimeout); None waits forever.
        progress: show a per-layer progress display on stderr.
        python: the interpreter to use (default: ``scalesim_python()``).
    """
    if timeout is not None and not timeout > 0:
        raise ValueError(f"run_scalesim: timeout must be positive seconds or None, got {timeout!r}")
    python = python or scalesim_python()
    command = [python, "-m", "scalesim.scale", "-c", paths["config"], "-t", paths["topology"],
               "-l", paths["layout"], "-p", output_dir, "-i", "gemm"]
    stderr_path = os.path.join(output_dir, "scalesim.stderr")
    os.makedirs(output_dir, exist_ok=True)
    bar = _Progress(layers, progress, "SCALE-Sim")
    stdout_lines: list[str] = []
    with open(stderr_path, "w") as stderr_file:
        try:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr_file, text=True,
                                    cwd=output_dir, start_new_session=True)
        except OSError as exc:
            bar.close()
            raise ScaleSimUnavailable(f"could not start {python}: {exc}. {INSTALL_HINT}") from None

        def read_stdout():
            for line in proc.stdout:
                stdout_lines.append(line)
                if line.startswith("Running Layer"):
                    bar.layer_done(sum(1 for s in stdout_lines if s.startswith("Running Layer")))

        reader = threading.Thread(target=read_stdout, daemon=True)
        reader.start()
        started = time.monotonic()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise ScaleSimTimeout(f"SCALE-Sim ran past the timeout of {timeout:g} s on {layers} GEMM(s) and was "
                                  f"stopped; pass a larger timeout= (or fewer/smaller GEMMs)") from None
        finally:
            reader.join(timeout=5)
            bar.close()
    elapsed = time.monotonic() - started
    out = "".join(stdout_lines)
    if proc.returncode != 0 or "ERROR" in out:
        with open(stderr_path) as f:
            err_tail = " | ".join(f.read().replace("\r", "\n").strip().splitlines()[-4:])
        out_tail = " | ".join(out.strip().splitlines()[-4:])
        raise ScaleSimError(f"SCALE-Sim exited {proc.returncode} after {elapsed:.1f} s: {out_tail} {err_tail}".strip())
    return out
