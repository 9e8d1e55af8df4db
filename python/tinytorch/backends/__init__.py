"""tinytorch.backends: the registry behind the kernel door, and its one switch and one report.

A back end is one folder here (or one file, for an out-of-tree one) whose package ends with
one registration line:

    register("cpu:avx2", probe=..., ops={"gemm": gemm, "matmul": matmul, ...}, priority=100)

  name      what `tinytorch info` and this registry call it
  probe()   -> (usable now, why or why not); never raises, never imports a heavy package
  ops       op name -> implementation. An implementation takes the door's arguments
            (see tinytorch.core.acceleration) and returns its result, or NotImplemented
            to decline a call (a dtype or a size it does not serve); the next back end
            in priority order then gets it. A back end serving the door's ops registers
            ``door_ops(<its modules>)``: DOOR_OPS names them once
  priority  higher first; the NumPy back end (priority 0) serves every call last
  native    True for anything but the NumPy fallback: use_native(False) skips these

The door (tinytorch.core.acceleration) asks routes(op) for the usable implementations of
an op, in order, and calls the first that does not decline. Probes run once and are
cached until refresh() (native.set_isa calls it); the switch clears the route cache too.

Built in, one folder each, in the order a call meets them:
  cpu/        cpu:scalar, cpu:avx2, cpu:avx512, cpu:neon: the runtime's kernels, one file per
              family of runtime/cpu/; the entry of the active ISA is the usable one
  triton/     Triton kernels (bias-GELU, FlashAttention forward) on an NVIDIA GPU or under
              TRITON_INTERPRET=1; cuda/: the CUDA SGEMM stages; mps/: Metal on Apple GPUs.
              These serve their extensions' own ops, not the door's (devices.py: what the
              three share: the driver probe and the per-thread LastRun report)
  fusion/     compile_graph's executors (the tile interpreter, generated C) behind the
              "fusion_run" op, the C-compiler search and the compiled-kernel cache
  template/   the worked example (docs/extending.md): the "scaled_matmul" op of
              extensions/template.py, one tt_sgemm call with alpha folded in
  reference/  numpy: the NumPy formulas of every door op (the package's formula library),
              never declines (numpy_fallback and attention_reference are its old names)
Nothing here imports tinytorch.extensions: the extensions call down, through routes().

Owns the registry, DOOR_OPS, the switch and the report; assumes a back end's probe never
raises (one that does counts as unusable, with the exception as its reason).
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

from .. import _native

__all__ = ["Backend", "DOOR_OPS", "door_ops", "register", "unregister", "registered", "routes", "status", "why_unused",
           "refresh", "all_backends", "use_native", "set_native_enabled", "native_enabled",
           "last_path", "record_path", "record_native_path"]


@dataclass(frozen=True)
class Backend:
    """One registered back end (made by ``register``; see the module docstring).

    Args:
        name: registry name, e.g. "cpu:avx2".
        probe: ``probe() -> (usable now, why)``; never raises.
        ops: op name -> implementation taking the door's arguments (or returning
            NotImplemented to decline a call).
        priority: higher is tried first; NumPy is 0.
        native: False only for the NumPy fallback; ``use_native(False)`` skips the others.
        description: one line for ``tinytorch info``.
    """

    name: str
    probe: Callable[[], tuple]
    ops: dict = field(default_factory=dict)
    priority: int = 0
    native: bool = True
    description: str = ""


# The door's ops (tinytorch.core.acceleration), named once: every back end that serves the
# door registers ``door_ops(...)`` of its modules, so a new op is added here and nowhere else.
DOOR_OPS = ("gemm", "matmul", "bias_gelu", "bias_gelu_backward", "attention", "attention_backward",
            "layer_norm", "layer_norm_backward", "softmax", "log_softmax", "softmax_backward",
            "log_softmax_backward", "cross_entropy", "cross_entropy_backward", "adam_step",
            "embedding", "embedding_backward", "im2col", "col2im", "max_pool2d",
            "max_pool2d_backward", "relu", "relu_backward", "quantize_rows", "quantized_pack",
            "quantized_matmul", "quantized_linear")


def door_ops(*modules) -> dict:
    """{op: implementation} for every name of DOOR_OPS, each taken from the first of
    ``modules`` that defines it (ValueError naming the ops none defines).

    Args:
        modules: the back end's modules (or any objects with the ops as attributes).
    """
    ops, missing = {}, []
    for name in DOOR_OPS:
        impl = next((getattr(m, name) for m in modules if callable(getattr(m, name, None))), None)
        if impl is None:
            missing.append(name)
        ops[name] = impl
    if missing:
        raise ValueError(f"door_ops: no implementation of {', '.join(missing)}")
    return ops


_registry: dict[str, Backend] = {}
_probed: dict[str, tuple] = {}
_routes: dict[str, tuple] = {}


def register(name: str, *, probe, ops=None, priority: int = 0, native: bool = True,
             description: str = "") -> Backend:
    """Add a back end (see the module docstring) and return its ``Backend``. A name may be
    registered once (ValueError otherwise).

    Args:
        name: registry name ("cpu:avx2", "numpy", ...).
        probe: ``probe() -> (usable: bool, detail: str)``, cached until ``refresh()``.
        ops: dict op name ("gemm", "matmul", "bias_gelu", ...) -> implementation.
        priority: higher is tried first.
        native: True for anything but the NumPy fallback (``use_native(False)`` skips it).
        description: one line shown by ``tinytorch info``.
    """
    if name in _registry:
        raise ValueError(f"register: a back end named {name!r} is already registered")
    backend = Backend(name, probe, dict(ops or {}), priority, native, description)
    _registry[name] = backend
    refresh()
    return backend


def unregister(name: str) -> None:
    """Remove the back end registered as ``name`` (KeyError if none) and forget the routes."""
    if _registry.pop(name, None) is None:
        raise KeyError(f"unregister: no back end named {name!r}")
    refresh()


def refresh() -> None:
    """Forget probe results and routes (after something they depend on changed)."""
    _probed.clear()
    _routes.clear()


def registered() -> list[Backend]:
    """Every registered back end, highest priority first."""
    return sorted(_registry.values(), key=lambda b: -b.priority)


def status(name: str) -> tuple:
    """(usable now, detail) of the back end registered as ``name``, probed once and cached;
    a probe that raises counts as unusable."""
    if name not in _probed:
        try:
            ok, detail = _registry[name].probe()
        except Exception as exc:  # noqa: BLE001 - a broken probe means "not usable", with why
            ok, detail = False, f"its probe failed: {exc!r}"
        _probed[name] = (bool(ok), str(detail))
    return _probed[name]


def why_unused(name: str) -> str:
    """Why the back end registered as ``name`` serves no call now: its probe's reason, or the
    package's switch when the probe says it is usable.

    Args:
        name: registry name ("cuda", "mps", "triton", ...).
    """
    ok, why = status(name)
    if ok:
        return "native back ends are turned off (use_native(False) or TINYTORCH_DISABLE_NATIVE=1)"
    return why


def routes(op: str) -> tuple:
    """The implementations of ``op`` (e.g. "matmul") that may run now, in the order the door
    tries them: usable back ends serving it, highest priority first, native ones only while
    enabled."""
    found = _routes.get(op)
    if found is None:
        found = _routes[op] = tuple(
            b.ops[op] for b in registered()
            if op in b.ops and (_native_enabled or not b.native) and status(b.name)[0])
    return found


def all_backends() -> dict[str, tuple]:
    """name -> (usable, detail with the ops it serves), for `tinytorch info`. An op list that
    an earlier back end already showed reads "the same as <that back end>", so a long list is
    printed once."""
    out = {}
    shown = {}  # op list -> the first back end that showed it
    for b in registered():
        ok, detail = status(b.name)
        ops = ", ".join(sorted(b.ops)) if b.ops else "none (a probe only)"
        if b.ops and ops in shown:
            ops = f"the same as {shown[ops]}"
        elif b.ops:
            shown[ops] = b.name
        if ok and b.native and not _native_enabled:
            ok, detail = False, "turned off (use_native(False) or TINYTORCH_DISABLE_NATIVE=1); " + detail
        out[b.name] = (ok, f"{detail}  [ops: {ops}]")
    return out


# --------------------------------------------------------------------------------------
# The switch: one for the whole package
# --------------------------------------------------------------------------------------

_native_enabled = os.environ.get("TINYTORCH_DISABLE_NATIVE", "").strip().lower() not in (
    "1", "true", "yes", "on")


def set_native_enabled(enabled: bool) -> None:
    """Allow (``enabled=True``) or forbid (False) every native back end, process-wide."""
    global _native_enabled
    _native_enabled = bool(enabled)
    _routes.clear()


def native_enabled() -> bool:
    """True unless the native path was turned off (it may still be unavailable)."""
    return _native_enabled


@contextmanager
def use_native(enabled: bool = True):
    """``with use_native(False):`` runs the NumPy path everywhere (parity tests, benchmarks);
    ``enabled=True`` allows native back ends inside the block. The previous setting is
    restored on exit."""
    previous = _native_enabled
    set_native_enabled(enabled)
    try:
        yield
    finally:
        set_native_enabled(previous)


# --------------------------------------------------------------------------------------
# The report: one, per thread
# --------------------------------------------------------------------------------------

_report_state = threading.local()
_path_names: dict = {}


def last_path() -> str:
    """What the calling thread's most recent kernel call ran: "numpy", or "native:" + the
    runtime's own kernel-path report ("native:sgemm:avx2", ...); "none" before any call."""
    return getattr(_report_state, "path", "none")


def record_path(name: str) -> None:
    """File ``name`` as this thread's last path (a back end or extension with its own path)."""
    _report_state.path = name


def record_native_path() -> None:
    """File the runtime's report of the kernel that just ran on this thread (it is set inside
    the kernel, so it proves which machine code executed)."""
    raw = _native.lib.tt_last_kernel_path()
    name = _path_names.get(raw)
    if name is None:
        name = _path_names[raw] = "native:" + raw.decode()
    _report_state.path = name


# The built-in back ends register themselves on import.
from . import cpu, template, triton, cuda, mps, fusion, reference  # noqa: E402,F401
