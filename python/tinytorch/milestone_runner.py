"""`tinytorch milestone NAME [--quick]`: find the milestone scripts and run the ones NAME selects.

The milestones (milestones/ at the repository root) are end-to-end scripts. The wheel ships a
copy inside the package (tinytorch/milestones, pyproject.toml's wheel.packages), so the command
works after a plain `pip install .` anywhere, not only in a checkout. This module finds the
folder, names each script and runs the chosen ones in a fresh interpreter (the same Python),
passing the options through.

Where the milestones are looked for, first hit wins
  1. the folder named by the environment variable TINYTORCH_MILESTONES;
  2. the checkout this package was imported from (python/tinytorch -> ../../milestones), which is
     where an editable install (`pip install -e .`) imports it from;
  3. the copy shipped in the installed package (tinytorch/milestones);
  4. ./milestones under the current directory.
A folder counts when it holds _runtime.py, the helper every milestone imports.

Names
  A script's name is "<folder>/<script>" without ".py", e.g. "04_1998_cnn/01_lecun_tinydigits".
  NAME selects every script whose name contains it (case-insensitive): "04", "cnn", "lora",
  "05_2017_transformer" (all of milestone 05, in order), "mlperf", "kernels". `tinytorch
  milestone list` prints them all.

Owns finding and running the milestone scripts; assumes the scripts run alone in a fresh
interpreter (sys.executable), their exit status being the verdict.
"""
from __future__ import annotations

import os
import subprocess
import sys

__all__ = ["find_milestones_dir", "milestone_scripts", "select_milestones", "run_milestones"]

ENV_VAR = "TINYTORCH_MILESTONES"


def _is_milestones_dir(path) -> bool:
    return bool(path) and os.path.isfile(os.path.join(path, "_runtime.py"))


def find_milestones_dir():
    """(path, None) of the milestones folder, or (None, the places looked at)."""
    package = os.path.dirname(os.path.abspath(__file__))
    candidates = [(f"${ENV_VAR}", os.environ.get(ENV_VAR)),
                  ("the checkout of this package", os.path.join(package, os.pardir, os.pardir, "milestones")),
                  ("the installed package", os.path.join(package, "milestones")),
                  ("the current directory", os.path.join(os.getcwd(), "milestones"))]
    for _, path in candidates:
        if _is_milestones_dir(path):
            return os.path.normpath(path), None
    looked = "; ".join(f"{label}: {os.path.normpath(p) if p else 'not set'}" for label, p in candidates)
    return None, (f"no milestones/ folder found (looked at {looked}). A wheel ships them in the package; "
                  f"this install has none: reinstall with `pip install .`, run from a checkout, or set "
                  f"{ENV_VAR}=/path/to/milestones")


def milestone_scripts(folder) -> dict:
    """{name: script path} for every milestone script under ``folder``, in run order.

    Args:
        folder: the milestones folder.
    """
    out = {}
    for sub in sorted(os.listdir(folder)):
        subdir = os.path.join(folder, sub)
        if not os.path.isdir(subdir) or not sub[:1].isdigit():
            continue
        for name in sorted(os.listdir(subdir)):
            if name.endswith(".py") and name[:1].isdigit():
                out[f"{sub}/{name[:-3]}"] = os.path.join(subdir, name)
    return out


def select_milestones(scripts: dict, name: str) -> dict:
    """The scripts whose name contains ``name`` (case-insensitive); ValueError listing the
    available names when none does.

    Args:
        scripts: what ``milestone_scripts`` returned.
        name: the NAME given on the command line.
    """
    key = name.strip().lower().removesuffix(".py").strip("/")
    chosen = {n: p for n, p in scripts.items() if key and key in n.lower()}
    if not chosen:
        raise ValueError(f"no milestone matches {name!r}; available: {', '.join(scripts)}")
    return chosen


def run_milestones(name: str, extra_args=(), say=print) -> int:
    """Run every milestone matching ``name`` with ``extra_args``; returns the first non-zero
    exit status (0 when all succeed), 2 when the name or the folder is not found.

    Args:
        name: a milestone name or part of one ("list" prints them and runs nothing).
        extra_args: options passed to each script (e.g. ["--quick"]).
        say: where progress lines go.
    """
    folder, reason = find_milestones_dir()
    if folder is None:
        print(f"tinytorch milestone: {reason}", file=sys.stderr)
        return 2
    scripts = milestone_scripts(folder)
    if name == "list":
        for n, p in scripts.items():
            say(f"{n:45s} {p}")
        return 0
    try:
        chosen = select_milestones(scripts, name)
    except ValueError as exc:
        print(f"tinytorch milestone: {exc}", file=sys.stderr)
        return 2
    status = 0
    for n, path in chosen.items():
        say(f"=== milestone {n}: {sys.executable} {path} {' '.join(extra_args)}".rstrip())
        sys.stdout.flush()
        rc = subprocess.call([sys.executable, path, *extra_args])
        if rc != 0:
            say(f"=== milestone {n} exited with status {rc}")
            status = status or rc
    return status
