"""Keep freed NumPy buffers in the heap (glibc), so a training step does not page-fault.

Every step allocates the same activations and gradients again. glibc's malloc serves a
request above its mmap threshold (128 KiB to start) with a fresh ``mmap``; freeing it unmaps
it, and the next step's array of the same size faults every 4 KiB page in again. A 1.6 MB
activation costs ~0.3 ms of page faults each time it is created: on the small CNN of
bench_training.py that was more than half of the step (11 ms -> 5.4 ms with this module).
PyTorch avoids it with its caching allocator; here two ``mallopt`` settings do it for every
NumPy array of the process: requests up to MMAP_THRESHOLD come from the heap, and up to
TRIM_THRESHOLD of free memory at its top is kept for reuse instead of being returned.

Applied once, at ``import tinytorch``, only on Linux with glibc (elsewhere nothing happens);
``TINYTORCH_MALLOC=default`` leaves the allocator alone. ``tuning()`` says what was done.

Owns the two mallopt settings, made once at import; assumes glibc (elsewhere, or with
TINYTORCH_MALLOC=default, nothing is changed).
"""
from __future__ import annotations

import os
import sys

from . import _native

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "apply", "tuning"]

MMAP_THRESHOLD = 256 << 20   # bytes: larger requests still get their own mapping
TRIM_THRESHOLD = 512 << 20   # bytes of free heap top kept before returning memory
_M_TRIM_THRESHOLD = -1       # glibc's mallopt parameter numbers (malloc.h)
_M_MMAP_THRESHOLD = -3

_state = "not applied"


def apply() -> str:
    """Set the two thresholds (once); returns ``tuning()``."""
    global _state
    if _state != "not applied":
        return _state
    if os.environ.get("TINYTORCH_MALLOC", "").strip().lower() == "default":
        _state = "left alone (TINYTORCH_MALLOC=default)"
        return _state
    if not sys.platform.startswith("linux"):
        _state = f"left alone (no glibc mallopt on {sys.platform})"
        return _state
    controls = _native.libc_malloc_controls()
    if controls is None:
        _state = "left alone (not glibc)"
        return _state
    mallopt, gnu_get_libc_version = controls
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    version = gnu_get_libc_version().decode()
    _state = (f"glibc {version} mallopt: mmap threshold {MMAP_THRESHOLD >> 20} MiB, trim threshold "
              f"{TRIM_THRESHOLD >> 20} MiB (freed arrays are reused without page faults; "
              "TINYTORCH_MALLOC=default turns this off)") if ok else f"glibc {version} refused mallopt"
    return _state


def tuning() -> str:
    """What ``apply`` did, in one line (for ``tinytorch info``)."""
    return _state
