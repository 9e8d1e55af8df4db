"""_atomic: the one way the package writes a file, all or nothing.

A writer that opens its target and writes into it leaves a 0-byte or half-written file when
the process dies mid-write, and the previous good file is gone. Every file the package
writes (checkpoints, state dicts, shards, tokenizers, reports, the fusion cache) goes
through ``replacing(path)`` instead: the bytes go to a temporary file in the target's own
folder (so the final rename never crosses a file system), are flushed and fsync'ed, the
file gets the target's permission bits (an existing target keeps its mode, a new one gets
what ``open`` would give it under the umask, or ``mode`` when the caller forces one), and
``os.replace`` moves it into place; the folder is fsync'ed so the rename itself survives a
crash. A reader sees the old file or the new one, never a mix; on an error the temporary
file is removed and the target is untouched.

Assumes: a POSIX-like rename that replaces its target in one step (os.replace); a folder
whose entries cannot be fsynced is skipped (fsync_folder).
"""
from __future__ import annotations

import contextlib
import os
import tempfile

__all__ = ["replacing", "write_file", "save_figure"]


def _umask() -> int:
    """The process umask without changing it (Linux reports it; elsewhere set and restore)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _final_mode(path: str, mode) -> int:
    if mode is not None:
        return mode
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


@contextlib.contextmanager
def replacing(path, text: bool = False, mode=None, encoding: str = "utf-8", newline=None):
    """A file object to write ``path``'s new content into; it replaces ``path`` atomically
    when the block ends without an exception (see the module docstring).

    Args:
        path: the target file (str or path-like).
        text: open the temporary file in text mode (``encoding``, ``newline``) instead of binary.
        mode: permission bits to force (e.g. 0o600); None keeps an existing file's mode.
        encoding: text mode's encoding.
        newline: text mode's newline translation (as ``open``).
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        os.fchmod(fd, _final_mode(path, mode))
        with (os.fdopen(fd, "w", encoding=encoding, newline=newline) if text else os.fdopen(fd, "wb")) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_folder(folder)


def fsync_folder(folder: str) -> None:
    """Flush ``folder``'s entry list to disk (after a rename into it, so the new name survives
    a power loss); a platform without directory descriptors, or a failing fsync, is skipped.

    Args:
        folder: the directory that received the file.
    """
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform without directory descriptors
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file(path, data, mode=None) -> None:
    """Replace ``path`` with ``data`` (bytes, or str written as UTF-8) atomically.

    Args:
        path: the target file.
        data: the whole new content.
        mode: permission bits to force; None keeps an existing file's mode.
    """
    with replacing(path, text=isinstance(data, str), mode=mode) as f:
        f.write(data)


def save_figure(fig, path, **kwargs) -> None:
    """``fig.savefig`` into ``path`` atomically; the format comes from the file's extension.

    Args:
        fig: a matplotlib Figure.
        path: the image file.
        kwargs: passed to ``savefig`` (dpi, ...).
    """
    ext = os.path.splitext(os.fspath(path))[1].lstrip(".").lower()
    with replacing(path) as f:
        fig.savefig(f, format=ext or None, **kwargs)
