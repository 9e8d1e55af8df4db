"""tinytorch.native: what the native runtime is and whether it is in use.

    >>> import tinytorch
    >>> tinytorch.native.available()
    True
    >>> tinytorch.native.info()["isa_active"]
    'avx2'

When the library is missing or cannot be loaded, `available()` is False,
`info()["reason"]` says why, and every kernel falls back to NumPy.

Owns the public runtime view (available, info, set_isa, memory_stats); assumes the one
binding, tinytorch._native.
"""
from __future__ import annotations

from . import _native


def available() -> bool:
    """True when libtinytorch is loaded and its kernels are used."""
    return _native.available()


def reason() -> str:
    """Why the library is unavailable ('' when it is available)."""
    return _native.reason()


def info() -> dict:
    """Version, library path, ISAs (compiled, detected, active), threads and where their
    count came from (``threads_source``), and the reason when unavailable. Always returns a dict; never raises."""
    if not _native.available():
        return {"available": False, "version": None, "library": None, "isas_compiled": [],
                "isa_detected": [], "isa_active": None, "threads": 1, "threads_source": "",
                "reason": _native.reason()}
    try:
        data = _native.build_info()
    except ValueError as exc:  # a malformed report must not break `tinytorch info`
        return {"available": True, "version": None, "library": _native.library_path(),
                "isas_compiled": [], "isa_detected": [], "isa_active": None, "threads": 1,
                "threads_source": "", "reason": f"tt_build_info() returned malformed JSON: {exc}"}
    data.update(available=True, library=_native.library_path(), reason="")
    return data


def set_isa(name: str) -> None:
    """Force the kernels onto one instruction set ``name``: 'scalar', 'avx2', 'avx512' or
    'neon'. Raises RuntimeError if this CPU or build lacks it (it is never executed)."""
    _native.set_isa(name)
    from . import backends
    backends.refresh()  # the cpu:<isa> entries' probes depend on the active ISA


def isa() -> str:
    """The instruction set the kernels use now."""
    return _native.isa_active()


def memory_stats() -> dict:
    """Runtime allocation counters: bytes_in_use, peak_bytes, allocations, frees."""
    return _native.memory_stats()


def thread_stats() -> dict:
    """The runtime thread pool's counters since start or :func:`reset_thread_stats`:
    jobs (parallel calls offered to the pool), solo_jobs (run alone: the pool was busy with
    another thread's call), chunks_caller / chunks_workers (who ran the chunks), stalls
    (joins that waited long for a preempted worker), one_core_jobs (calls whose workers ran
    only on the caller's own core, which gains nothing), backed_off_jobs (run alone during the
    back-off either of those starts), workers (pool threads). RuntimeError when not loaded."""
    return _native.thread_stats()


def reset_thread_stats() -> None:
    """Zero the thread pool's counters and end any back-off period."""
    _native.check(_native.require().tt_thread_stats_reset(), "reset_thread_stats")


def reset_peak_memory() -> None:
    """Reset the runtime's ``peak_bytes`` counter to the bytes in use now (the profiler calls
    this before a measured pass). RuntimeError when the library is not loaded."""
    _native.require().tt_memory_reset_peak()


def last_kernel_path() -> str:
    """Path the calling thread's last native kernel call took, e.g. 'sgemm:avx2'."""
    return _native.last_kernel_path()
