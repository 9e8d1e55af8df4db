"""Scorecard section "gemm": the guide's GEMM ladder, each rung measured on one thread.

Design: the ladder is Python loop (ikj over lists), scalar C (the runtime's plain triple
loop, tt_sgemm_reference), blocked + packed with the scalar micro-kernel (the runtime forced
onto ISA "scalar"), the same with the SIMD micro-kernel of the active ISA, and NumPy's BLAS.
Each rung runs at a size it finishes in seconds; GFLOP/s = 2 N^3 / median time
(measure.measure_rounds), and the speedup of a rung is its GFLOP/s over the Python loop's,
as in the guide's table. A guide row is reproduced when this machine's speedup is at least
0.8x the guide's (faster counts as reproduced). Without the runtime the C rungs say why.
benchmarks/bench_gemm.py calls ``sgemm_into``, ``python_loop_gflops`` and ``ladder``; milestone 07
runs ``python_loop_matmul``.

Owns the GEMM ladder section (its rungs, their timing, the guide's rows); assumes the
runtime's ``tt_sgemm`` kernels (the C rungs say why without them) and tinytorch.measure.
"""
from __future__ import annotations

import time

import numpy as np

from ..measure import Threads, blas_threads_limited, measure_rounds
from .results import SectionResult

__all__ = ["sgemm_into", "python_loop_matmul", "python_loop_gflops", "ladder", "run", "GUIDE_ROWS"]

# rung -> (the guide's label, time text, GFLOP/s, speedup): Apple M5 Max, N = 1024
GUIDE_ROWS = {
    "python": ("Python loops", "33.9 ms (128x128)", 0.12, 1.0),
    "scalar_c": ("Scalar C++", "336 ms", 6.4, 53.0),
    "blocked_scalar": None,
    "simd": ("simd_matmul (AVX2/NEON)", "99.4 ms", 21.6, 170.0),
    "blas": ("np.matmul (Accelerate BLAS)", "1.33 ms", 1611.0, 13425.0),
}


def sgemm_into(lib, a, b, c, kernel="tt_sgemm"):
    """A call of the runtime kernel itself, C = A @ B into the preallocated ``c`` (pointers
    made once); returns the zero-argument callable.

    Args:
        lib: the loaded runtime (acceleration.native_library()).
        a: float32 [n, k], contiguous.
        b: float32 [k, m], contiguous.
        c: float32 [n, m] output.
        kernel: "tt_sgemm" or "tt_sgemm_reference".
    """
    from tinytorch._native import check, f32_ptr
    n, k = a.shape
    m = b.shape[1]
    fn, pa, pb, pc = getattr(lib, kernel), f32_ptr(a), f32_ptr(b), f32_ptr(c)
    return lambda: check(fn(0, 0, n, m, k, 1.0, pa, k, pb, m, 0.0, pc, m), kernel)


def python_loop_matmul(a: list, b: list) -> list:
    """C = A @ B by an interpreted ikj triple loop over Python lists: the ladder's first rung
    (milestone 07 runs the same function).

    Args:
        a: [n][k] nested lists of numbers.
        b: [k][m] nested lists of numbers.

    Returns:
        [n][m] nested lists of floats.
    """
    n, k, m = len(a), len(b), len(b[0]) if b else 0
    c = [[0.0] * m for _ in range(n)]
    for i in range(n):
        ai, ci = a[i], c[i]
        for p in range(k):
            aip, bp = ai[p], b[p]
            for j in range(m):
                ci[j] += aip * bp[j]
    return c


def python_loop_gflops(n: int) -> float:
    """GFLOP/s of ``python_loop_matmul`` at N = n.

    Args:
        n: the square size.
    """
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).tolist()
    b = rng.standard_normal((n, n)).tolist()
    t0 = time.perf_counter()
    python_loop_matmul(a, b)
    return 2.0 * n ** 3 / (time.perf_counter() - t0) / 1e9


def ladder(lib, n_py: int, n_ref: int, n: int, progress=None) -> list:
    """(name, N, GFLOP/s, rung key) for each rung, all on one thread; ``lib`` None skips the
    runtime's rungs.

    Args:
        lib: the loaded runtime, or None.
        n_py: N of the Python loop.
        n_ref: N of the scalar triple loop.
        n: N of the blocked, SIMD and BLAS rungs.
        progress: optional callable(text) after each rung.
    """
    from tinytorch import native

    def step(text):
        if progress:
            progress(text)
    rows = []
    with Threads(1):
        rows.append(("pure-Python loop (ikj, lists)", n_py, python_loop_gflops(n_py), "python"))
        step("Python loop")
        rng = np.random.default_rng(2)
        if lib is not None:
            a = rng.standard_normal((n_ref, n_ref), dtype=np.float32)
            c = np.empty_like(a)
            t = measure_rounds({"ref": sgemm_into(lib, a, a, c, "tt_sgemm_reference")}, 2)["ref"]
            rows.append(("scalar C triple loop (tt_sgemm_reference)", n_ref, 2.0 * n_ref ** 3 / t / 1e9, "scalar_c"))
        step("scalar C")
        a = rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty_like(a)
        if lib is not None:
            active = native.isa()
            try:
                native.set_isa("scalar")
                t = measure_rounds({"s": sgemm_into(lib, a, a, c)}, 2)["s"]
                rows.append(("blocked + packed, scalar micro-kernel (ISA scalar)", n, 2.0 * n ** 3 / t / 1e9,
                             "blocked_scalar"))
            finally:
                native.set_isa(active)
            step("blocked scalar")
            secs = measure_rounds({"simd": sgemm_into(lib, a, a, c), "blas": lambda: np.matmul(a, a, out=c)}, 3)
            rows.append((f"blocked + packed, SIMD micro-kernel (ISA {active})", n, 2.0 * n ** 3 / secs["simd"] / 1e9,
                         "simd"))
        else:
            step("blocked scalar")
            secs = measure_rounds({"blas": lambda: np.matmul(a, a, out=c)}, 3)
        rows.append(("OpenBLAS via NumPy", n, 2.0 * n ** 3 / secs["blas"] / 1e9, "blas"))
        step("SIMD and BLAS")
    return rows


def _threads(key) -> int:
    """Threads a rung ran on, for its share of the peak: 1, except NumPy's BLAS when
    threadpoolctl is missing to hold it there (then it runs on every core)."""
    import os
    return 1 if key != "blas" or blas_threads_limited() else (os.cpu_count() or 1)


def run(ctx) -> SectionResult:
    """Measure the ladder and compare each rung's speedup with the guide's.

    Args:
        ctx: the scorecard Context.
    """
    from tinytorch import native
    from tinytorch.core import acceleration
    from .machine import blas_description

    res = SectionResult("gemm", "")
    lib = acceleration.native_library()
    n_py, n_ref, n = (128, 256, 1024) if ctx.quick else (128, 512, 1024)  # the guide times Python at 128
    bar = ctx.progress(4, "gemm")
    rows = ladder(lib, n_py, n_ref, n, progress=bar.step)
    bar.close()
    by_key = {r[3]: r for r in rows}
    base = by_key["python"][2]
    missing = "" if lib is not None else f"runtime not loaded ({native.reason() or 'native path disabled'})"
    for key, guide in GUIDE_ROWS.items():
        if guide is None:
            continue
        label, g_time, g_gflops, g_speed = guide
        if key not in by_key:
            res.claim(f"GEMM: {label}", f"{g_time}, {g_gflops:g} GFLOP/s, {g_speed:g}x", "not measured", False,
                      missing)
            continue
        name, size, gflops, _ = by_key[key]
        speed = gflops / base
        ms = 2.0 * size ** 3 / gflops / 1e9 * 1e3
        ok = key == "python" or speed >= 0.8 * g_speed
        why = ""
        if key == "python":
            why = "the baseline: the speedups below are over this machine's Python loop"
        elif not ok and key == "blas":
            threads = "on 1 thread" if blas_threads_limited() else \
                "on its default thread count (threadpoolctl is not installed, so it could not be held to 1)"
            why = (f"the guide's BLAS is Apple Accelerate on the M5 Max (matrix units, all cores); here "
                   f"{blas_description()}, {threads}")
        elif not ok:
            why = (f"this rung reached {gflops:.3g} GFLOP/s where the guide's reached {g_gflops:g}, over a "
                   f"Python loop of {base:.3g} GFLOP/s here against the guide's {GUIDE_ROWS['python'][2]:g}")
        res.claim(f"GEMM: {label}", f"{g_time}, {g_gflops:g} GFLOP/s, {g_speed:g}x",
                  f"{ms:.3g} ms (N={size}), {gflops:.3g} GFLOP/s ({ctx.of_fma(gflops, _threads(key))}), {speed:,.0f}x",
                  ok, why)
    res.tables = ["All rungs on one thread (runtime, BLAS); GFLOP/s = 2 N^3 / median time; \"of peak\" is the "
                  "ratio to this machine's measured 1-thread FMA peak.", "",
                  "| Rung | N | GFLOP/s | of peak | Speedup over the Python loop |", "|---|---:|---:|---:|---:|"]
    res.tables += [f"| {r[0]} | {r[1]} | {r[2]:.3g} | {ctx.of_fma(r[2], _threads(r[3])).removesuffix(' of peak')} | "
                   f"{r[2] / base:,.0f}x |" for r in rows]
    res.numbers = {r[3]: {"N": r[1], "gflops": r[2]} for r in rows}
    if ctx.plots_enabled:
        from .report import save_bar_plot
        res.plots.append(save_bar_plot(ctx.path("gemm_ladder.png"), [f"{r[0]} (N={r[1]})" for r in rows],
                                       [r[2] for r in rows], "GEMM ladder, 1 thread", "GFLOP/s (log scale)"))
    return res
