"""Docstrings and exports.

1. Every public name of tinytorch.core, .perf, .extensions, .backends, .scorecard, .measure and
   tinytorch.native has a docstring, and every callable's docstring names each of its
   parameters (what ``help(Trainer)`` shows a new user).

   Public: the names in a module's ``__all__`` when it has one, else the names not starting
   with ``_`` that the module defines itself (not imported ones). For a public class: its own
   docstring (not an inherited one, nor the signature line a dataclass generates), its
   constructor's parameters (named in the class or the ``__init__`` docstring, PyTorch
   style), and every public method, classmethod, staticmethod and property defined in the
   class body. Skipped: ``self``/``cls``, ``*args``/``**kwargs``, parameters whose name starts
   with ``_`` (private hooks such as ``_seen``), and dunder methods other than ``__init__``
   (``__call__``, ``__len__``, ``__getitem__``, ... are trivial or documented by the class).
   A method without a docstring of its own passes when it inherits one (``help()`` shows
   that) that names all its parameters.

   The failure message lists every offender, one a line, so one run shows all the work.

2. Every submodule of those packages is reachable as a module through its package attribute:
   no function exported by the package shadows a module of the same name (as
   ``from .checkpoint import checkpoint`` once hid ``tinytorch.extensions.checkpoint``).
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
import re
import types

import pytest

import tinytorch  # noqa: F401

PACKAGES = ["tinytorch.core", "tinytorch.perf", "tinytorch.extensions", "tinytorch.backends", "tinytorch.scorecard",
            "tinytorch.measure"]
MODULES = ["tinytorch.native", "tinytorch.olympics"]

# Offenders this check tolerates, each with its reason. Keys are "module.qualname" (the whole
# callable) or "module.qualname:parameter". Keep it small; an entry that no longer matches an
# offender fails the test, so entries are removed as soon as they are fixed.
ALLOWED: dict[str, str] = {}


def _package_modules(pkg_name):
    """(submodule short name, full name) of every public submodule of a package."""
    pkg = importlib.import_module(pkg_name)
    out = []
    for info in pkgutil.walk_packages(pkg.__path__, pkg_name + "."):
        short = info.name.rsplit(".", 1)[1]
        if not short.startswith("_"):
            out.append((short, info.name))
    return out


def _modules():
    names = list(MODULES) + list(PACKAGES)
    for pkg_name in PACKAGES:
        names += [full for _, full in _package_modules(pkg_name)]
    return [importlib.import_module(n) for n in sorted(set(names))]


def _public_names(mod):
    if hasattr(mod, "__all__"):
        return list(mod.__all__)
    out = []
    for name, obj in vars(mod).items():
        if name.startswith("_") or isinstance(obj, types.ModuleType):
            continue
        if getattr(obj, "__module__", None) == mod.__name__ and callable(obj):
            out.append(name)
    return out


def _own_class_doc(cls):
    """The class's own docstring: an inherited one, or the signature line that dataclasses
    generate, does not count."""
    doc = cls.__dict__.get("__doc__")
    if doc and dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "("):
        return None
    return doc


def _params(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    out = []
    for i, p in enumerate(sig.parameters.values()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if i == 0 and p.name in ("self", "cls"):
            continue
        if p.name.startswith("_"):
            continue
        out.append(p.name)
    return out


def _mentions(doc, name):
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(name) + r"(?![A-Za-z0-9_])", doc or "") is not None


def _inherited_doc(cls, name):
    for base in cls.__mro__[1:]:
        attr = base.__dict__.get(name)
        if attr is not None:
            fn = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
            doc = getattr(fn, "__doc__", None)
            if doc and doc.strip():
                return doc
    return None


def _check_callable(qual, fn, doc, problems):
    """problems gets (qual, parameter or None, message)."""
    if not (doc and doc.strip()):
        problems.append((qual, None, f"{qual}: no docstring"))
        return
    for p in _params(fn):
        if not _mentions(doc, p):
            problems.append((qual, p, f"{qual}: docstring does not mention parameter {p!r}"))


def _check_class(qual, cls, problems):
    doc = _own_class_doc(cls)
    if not (doc and doc.strip()):
        problems.append((qual, None, f"{qual}: no class docstring"))
    init = cls.__dict__.get("__init__")
    if init is None and dataclasses.is_dataclass(cls):
        init = cls.__init__  # the generated constructor: its fields are the arguments
    if init is not None and doc and doc.strip():
        init_doc = doc + "\n" + (getattr(init, "__doc__", None) or "")
        for p in _params(init):
            if not _mentions(init_doc, p):
                problems.append((qual, p, f"{qual}: constructor parameter {p!r} is not described "
                                          "in the class (or __init__) docstring"))
    for name, attr in vars(cls).items():
        if name.startswith("_"):
            continue
        mq = f"{qual}.{name}"
        if isinstance(attr, property):
            if not (attr.fget and attr.fget.__doc__ and attr.fget.__doc__.strip()):
                problems.append((mq, None, f"{mq}: property without a docstring"))
            continue
        if isinstance(attr, (staticmethod, classmethod)):
            fn = attr.__func__
        elif inspect.isfunction(attr):
            fn = attr
        else:
            continue
        _check_callable(mq, fn, fn.__doc__ or _inherited_doc(cls, name), problems)


def collect_problems():
    """Every (qualname, parameter or None, message) offender, allowed ones included."""
    problems, seen = [], set()
    for mod in _modules():
        if not (mod.__doc__ and mod.__doc__.strip()):
            problems.append((mod.__name__, None, f"{mod.__name__}: no module docstring"))
        for name in _public_names(mod):
            obj = getattr(mod, name, None)
            if obj is None:
                problems.append((f"{mod.__name__}.{name}", None,
                                 f"{mod.__name__}.{name}: listed in __all__ but missing"))
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue  # constants and instances: nothing to call
            qual = f"{obj.__module__}.{obj.__qualname__}"
            if qual in seen:  # re-exports are checked where they are defined
                continue
            seen.add(qual)
            if inspect.isclass(obj):
                _check_class(qual, obj, problems)
            else:
                _check_callable(qual, obj, obj.__doc__, problems)
    return problems


def _is_allowed(qual, param):
    return qual in ALLOWED or (param is not None and f"{qual}:{param}" in ALLOWED)


def test_public_api_is_documented():
    problems = [msg for qual, param, msg in collect_problems() if not _is_allowed(qual, param)]
    assert not problems, (f"{len(problems)} docstring problem(s):\n  " + "\n  ".join(problems))


def test_allow_list_is_small_explained_and_current():
    assert len(ALLOWED) <= 12, "the allow-list is meant for a few exceptions, not a backlog"
    for key, reason in ALLOWED.items():
        assert isinstance(reason, str) and len(reason.split()) >= 5, f"{key}: give a reason"
    hit = set()
    for qual, param, _ in collect_problems():
        if qual in ALLOWED:
            hit.add(qual)
        if param is not None and f"{qual}:{param}" in ALLOWED:
            hit.add(f"{qual}:{param}")
    stale = sorted(set(ALLOWED) - hit)
    assert not stale, ("allow-list entries that no longer match an offender (fixed or renamed: "
                       "remove them):\n  " + "\n  ".join(stale))


def test_help_of_trainer_describes_its_arguments():
    from tinytorch.core.training import Trainer
    doc = inspect.getdoc(Trainer)
    assert doc, "help(Trainer) shows no class docstring"
    for p in ("model", "optimizer", "loss_fn", "scheduler", "grad_clip_norm", "progress",
              "scheduler_interval"):
        assert _mentions(doc, p), p
    for method in ("train_epoch", "evaluate", "save_checkpoint", "load_checkpoint"):
        assert inspect.getdoc(getattr(Trainer, method)), method


# ------------------------------------------------------------------ exports: no shadowing

def test_checkpoint_module_and_function_are_both_reachable():
    import tinytorch.extensions as ext
    mod = importlib.import_module("tinytorch.extensions.activation_checkpoint")
    assert isinstance(mod, types.ModuleType)
    assert ext.activation_checkpoint is mod
    # the guide's name and import: ``from tinytorch.extensions import checkpoint``
    from tinytorch.extensions import checkpoint, checkpoint_sequential
    assert inspect.isfunction(checkpoint) and checkpoint is mod.checkpoint
    assert inspect.isfunction(checkpoint_sequential) and checkpoint_sequential is mod.checkpoint_sequential
    assert ext.checkpoint is checkpoint
    assert mod.CheckpointFunction.__module__ == "tinytorch.extensions.activation_checkpoint"


# the parent is the direct one: walk_packages also yields modules of nested packages
_SUBMODULES = sorted({(f.rsplit(".", 1)[0], s, f) for p in PACKAGES for s, f in _package_modules(p)})


@pytest.mark.parametrize("pkg_name, short, full", _SUBMODULES, ids=[f for _, _, f in _SUBMODULES])
def test_submodule_is_not_shadowed(pkg_name, short, full):
    pkg = importlib.import_module(pkg_name)
    mod = importlib.import_module(full)
    assert isinstance(mod, types.ModuleType)
    attr = getattr(pkg, short, None)
    assert attr is mod, (
        f"{pkg_name}.{short} is {attr!r}, not the module {full}: the package exports a name that "
        f"shadows its submodule, so `import {full} as m` and `{pkg_name}.{short}` give the "
        f"{type(attr).__name__}. Rename the module file (as checkpoint.py became "
        f"activation_checkpoint.py) or the exported name.")


def test_extension_modules_reachable():
    """The extension modules users import by path are modules (none shadowed)."""
    for short in ("activation_checkpoint", "lora", "loss_scaler", "mixed_precision", "optimizers",
                  "simd_ops", "template"):
        mod = importlib.import_module(f"tinytorch.extensions.{short}")
        assert isinstance(mod, types.ModuleType), short
        assert getattr(importlib.import_module("tinytorch.extensions"), short) is mod, short


if __name__ == "__main__":
    for qual, param, msg in collect_problems():
        print(("(allowed) " if _is_allowed(qual, param) else "") + msg)
