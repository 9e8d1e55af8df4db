"""state_files: the .npz archives of state dicts and checkpoints, written and read safely.

``Layer.save`` / ``Layer.load`` and ``Trainer.save_checkpoint`` / ``load_checkpoint`` share
these three steps so each exists once:

  * ``save_arrays``: ``np.savez`` into a file that replaces the target atomically
    (``tinytorch._atomic``: a crash mid-save leaves the previous archive intact);
  * ``load_arrays``: every array of an archive, read without pickles; anything that is not
    an .npz archive (a plain .npy array, a text file) is a ValueError that says so;
  * ``checked_cast``: a stored array converted to the dtype of the array it is loaded into,
    refused with a ValueError naming it when the conversion would change what it means:
    complex values (the imaginary part would be dropped), booleans, strings or objects, an
    integer that the target dtype cannot hold exactly, a finite float that overflows it.
    Narrowing float64 to float32 (rounding only) is allowed, as in PyTorch.

What this file owns: ``save_arrays``, ``load_arrays`` and ``checked_cast``, the three steps
above, so every .npz writer and reader of the package shares them.

What it assumes: NumPy's .npz format (``np.savez`` / ``np.load(allow_pickle=False)``), and
``tinytorch._atomic.replacing`` for the temp-file, fsync and rename; the caller names what
is being loaded (``who``, ``what``) so the errors can say it.
"""
from __future__ import annotations

import os
import zipfile

import numpy as np

from .._atomic import replacing

__all__ = ["save_arrays", "load_arrays", "checked_cast"]


def save_arrays(path, arrays: dict, exact_path: bool = False) -> str:
    """Write ``arrays`` (name -> array) as one .npz at ``path`` (".npz" is appended when
    missing, as ``np.savez`` does, unless ``exact_path``); returns the path written.

    Args:
        path: the target file.
        arrays: the arrays, stored under their names.
        exact_path: write at ``path`` whatever its suffix (Trainer checkpoints: upstream code
            names them "ckpt.pkl" and loads that same name back).
    """
    path = os.fspath(path)
    if not path.endswith(".npz") and not exact_path:
        path += ".npz"
    with replacing(path) as f:
        np.savez(f, **arrays)
    return path


def load_arrays(path, who: str) -> dict:
    """Every array stored in the .npz archive at ``path``, read with ``allow_pickle=False``.

    Args:
        path: the archive.
        who: the caller's name, for the error messages ("Layer.load", ...).
    """
    try:
        loaded = np.load(path, allow_pickle=False)
    except (ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"{who}: {os.fspath(path)} is not a readable .npz archive ({e})") from None
    if not isinstance(loaded, np.lib.npyio.NpzFile):
        raise ValueError(f"{who}: {os.fspath(path)} holds a single array (a .npy file), not an .npz "
                         "archive of named arrays as written by save")
    try:
        with loaded as f:
            return {k: f[k] for k in f.files}
    except (ValueError, zipfile.BadZipFile, EOFError, OSError) as e:
        raise ValueError(f"{who}: {os.fspath(path)} is a damaged .npz archive ({e})") from None


def checked_cast(value, dtype, what: str) -> np.ndarray:
    """``value`` as an array of ``dtype``, or ValueError naming ``what`` when the conversion
    would change its meaning (see the module docstring).

    Args:
        value: the stored array.
        dtype: the dtype it is loaded into.
        what: what the value is ("key 'fc.weight'"), for the message.
    """
    value = np.asarray(value)
    dtype = np.dtype(dtype)
    src = value.dtype
    if src == dtype:
        return value
    if src.kind not in "biuf" or dtype.kind not in "iuf":
        raise ValueError(f"{what}: a {src} array cannot be loaded into {dtype} (it is not a real number)")
    if src.kind == "b":
        raise ValueError(f"{what}: a bool array cannot be loaded into {dtype} (save the numbers, not a mask)")
    with np.errstate(all="ignore"):
        out = value.astype(dtype)
        if src.kind in "iu" or dtype.kind in "iu":
            exact = np.array_equal(out.astype(src), value) and (
                dtype.kind != "f" or bool(np.isfinite(out).all()))
            if not exact:
                raise ValueError(f"{what}: {src} values do not fit {dtype} exactly "
                                 f"(range {value.min()}..{value.max()})")
        elif bool((np.isinf(out) & np.isfinite(value)).any()):
            raise ValueError(f"{what}: {src} values overflow {dtype} (largest magnitude "
                             f"{np.abs(value[np.isfinite(value)]).max()})")
    return out
