"""safetensors_files: state dicts as .safetensors files, and the one place that picks a format.

What this file owns
  * ``save_safetensors(path, arrays, metadata=None)`` / ``load_safetensors(path, who)``:
    name -> array dicts through the ``safetensors`` package's NumPy API. The bytes are made in
    memory and written with ``tinytorch._atomic`` (a crash mid-save keeps the previous file).
    The header's metadata records ``framework``, ``tinytorch_version`` and ``dtypes`` (a JSON
    name -> dtype map) next to whatever the caller adds (save_pretrained adds ``format: pt``,
    which ``transformers`` requires).
  * ``save_state_file(path, arrays)`` / ``load_state_file(path, who)``: what ``Layer.save`` /
    ``Layer.load`` and the LoRA adapter files call. A ``.safetensors`` suffix means safetensors;
    anything else is the older .npz archive (core/state_files.py; ".npz" appended as before),
    so files written by earlier versions still load. Loading picks the reader from the suffix,
    or from the file's first bytes when the suffix says neither.

Why safetensors: the format is a JSON header and raw little-endian bytes, so reading it never
executes code (unlike pickles), and PyTorch, Hugging Face and ONNX tooling read it directly.
A truncated or corrupt file is a ValueError naming the file and what the library found.
Without the package installed both functions raise ImportError saying what to install.

What it assumes: the optional ``safetensors`` package, imported at call time (so the core
imports without it); the .npz side is core/state_files.py's; the atomic write is
``tinytorch._atomic.write_file``; arrays are NumPy arrays of numbers or bools (anything else
is a TypeError naming it).
"""
from __future__ import annotations

import json
import os
import struct

import numpy as np

from .._atomic import write_file
from .state_files import load_arrays, save_arrays

__all__ = ["SUFFIX", "save_safetensors", "load_safetensors", "read_metadata", "save_state_file",
           "load_state_file", "safetensors_missing"]

SUFFIX = ".safetensors"
INSTALL_HINT = "pip install safetensors"


def safetensors_missing() -> str | None:
    """None when the ``safetensors`` package imports, else why not (for ``tinytorch info``)."""
    try:
        import safetensors.numpy  # noqa: F401
    except ImportError as e:
        return f"safetensors is not installed ({e}); {INSTALL_HINT}"
    return None


def _library(who: str):
    try:
        import safetensors
        import safetensors.numpy
    except ImportError:
        raise ImportError(f"{who}: .safetensors files need the safetensors package ({INSTALL_HINT})") from None
    return safetensors


def _tinytorch_metadata(arrays: dict) -> dict:
    from .. import __version__
    return {"framework": "tinytorch", "tinytorch_version": __version__,
            "dtypes": json.dumps({name: str(a.dtype) for name, a in arrays.items()})}


def save_safetensors(path, arrays: dict, metadata: dict | None = None) -> str:
    """Write ``arrays`` (name -> array) to ``path`` as one .safetensors file, atomically;
    returns the path. ``metadata`` (str -> str) is stored beside the framework's own keys."""
    lib = _library("save_safetensors")
    path = os.fspath(path)
    arrays = {str(name): np.ascontiguousarray(a) for name, a in arrays.items()}
    for name, a in arrays.items():
        if a.dtype.kind not in "biuf":
            raise TypeError(f"save_safetensors: {name!r} is a {a.dtype} array; only numbers and bools can be saved")
    meta = _tinytorch_metadata(arrays)
    meta.update({str(k): str(v) for k, v in (metadata or {}).items()})
    write_file(path, lib.numpy.save(arrays, metadata=meta))
    return path


def _refuse(who: str, path: str, why) -> ValueError:
    return ValueError(f"{who}: {path} is not a readable .safetensors file (truncated or corrupt?): {why}")


def load_safetensors(path, who: str = "load_safetensors") -> dict:
    """Every array stored in the .safetensors file at ``path`` (name -> array, in file order);
    ``who`` names the caller in error messages."""
    lib = _library(who)
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except IsADirectoryError:
        raise ValueError(f"{who}: {path} is a folder, not a .safetensors file") from None
    _check_header(data, who, path)
    try:
        return lib.numpy.load(data)
    except Exception as e:  # SafetensorError derives from Exception only
        raise _refuse(who, path, e) from None


def _check_header(data: bytes, who: str, path: str) -> dict:
    """The JSON header, checked to lie inside the file and to describe bytes that are there."""
    if len(data) < 8:
        raise _refuse(who, path, f"{len(data)} bytes, shorter than the 8-byte header size")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise _refuse(who, path, f"the header claims {n} bytes but the file has {len(data) - 8} after the size")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _refuse(who, path, f"the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise _refuse(who, path, "the header is not a JSON object")
    body = len(data) - 8 - n
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        end = entry.get("data_offsets", [0, 0])[1] if isinstance(entry, dict) else None
        if not isinstance(end, int) or end > body:
            raise _refuse(who, path, f"tensor {name!r} ends at byte {end} but the data has {body} bytes")
    return header


def read_metadata(path, who: str = "read_metadata") -> dict:
    """The ``__metadata__`` map of the .safetensors file at ``path`` ({} when there is none);
    ``who`` names the caller in error messages."""
    lib = _library(who)
    path = os.fspath(path)
    try:
        with lib.safe_open(path, framework="np") as f:
            return dict(f.metadata() or {})
    except Exception as e:
        raise _refuse(who, path, e) from None


def _looks_like_safetensors(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(9)
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{"


def save_state_file(path, arrays: dict) -> str:
    """``arrays`` to ``path``: .safetensors for that suffix, else an .npz archive (".npz"
    appended when missing, as before). Returns the path written."""
    if os.fspath(path).endswith(SUFFIX):
        return save_safetensors(path, arrays)
    return save_arrays(path, arrays)


def load_state_file(path, who: str) -> dict:
    """The arrays of the file at ``path`` written by ``save_state_file`` (or any .safetensors /
    .npz file); ``who`` names the caller in error messages."""
    path = os.fspath(path)
    if path.endswith(SUFFIX) or (not path.endswith(".npz") and _looks_like_safetensors(path)):
        return load_safetensors(path, who)
    return load_arrays(path, who)
