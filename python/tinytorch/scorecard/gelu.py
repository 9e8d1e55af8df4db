"""Scorecard section "gelu": fused bias + GELU against the unfused NumPy expression.

Design: the guide's row is y = gelu_tanh(x + bias) at 4096 x 768 float32: the textbook
NumPy expression (every intermediate a full array written to and read back from DRAM)
against ``simd_fused_bias_gelu`` (one pass, intermediates in registers), on one thread,
medians of measure.measure_rounds. The copy of the same bytes is timed beside them: the
memory floor a one-pass kernel approaches. Reproduced when this machine's speedup is at
least 0.8x the guide's 8.6x. benchmarks/bench_gelu.py calls ``numpy_unfused``,
``numpy_unfused_backward`` and ``python_loop_ns_per_element``.

Owns the gelu section and the unfused expression bench_gelu.py reuses; assumes
``simd_fused_bias_gelu``, timed with tinytorch.measure.
"""
from __future__ import annotations

import math
import time

import numpy as np

from ..measure import Threads, measure_rounds
from .results import SectionResult

__all__ = ["numpy_unfused", "numpy_unfused_backward", "python_loop_ns_per_element", "run", "GUIDE"]

S = math.sqrt(2.0 / math.pi)
GUIDE = {"shape": (4096, 768), "unfused_ms": 26.5, "fused_ms": 3.06, "speedup": 8.6}


def numpy_unfused(x, b):
    """The textbook expression 0.5 u (1 + tanh(sqrt(2/pi)(u + 0.044715 u^3))), u = x + b.

    Args:
        x: the input [rows, cols].
        b: the bias [cols].
    """
    u = x + b
    return 0.5 * u * (1.0 + np.tanh(S * (u + 0.044715 * u * u * u)))


def numpy_unfused_backward(x, b, g):
    """(grad_x, grad_bias) of the textbook expression, unfused.

    Args:
        x: the input [rows, cols].
        b: the bias [cols].
        g: the upstream gradient [rows, cols].
    """
    u = x + b
    t = np.tanh(S * (u + 0.044715 * u * u * u))
    gx = g * (0.5 * (1 + t) + 0.5 * u * (1 - t * t) * S * (1 + 3 * 0.044715 * u * u))
    return gx, gx.sum(axis=0)


def python_loop_ns_per_element(n: int = 20000) -> float:
    """Nanoseconds per element of the GELU in a pure-Python loop (math.tanh).

    Args:
        n: elements timed.
    """
    xs = np.random.default_rng(0).standard_normal(n).tolist()
    t0 = time.perf_counter()
    out = [0.5 * u * (1.0 + math.tanh(S * (u + 0.044715 * u * u * u))) for u in xs]
    assert len(out) == n
    return (time.perf_counter() - t0) / n * 1e9


def run(ctx) -> SectionResult:
    """Time the guide's shape and compare with its row.

    Args:
        ctx: the scorecard Context.
    """
    from tinytorch.core import acceleration
    from tinytorch.extensions import simd_fused_bias_gelu

    res = SectionResult("gelu", "")
    rows, cols = GUIDE["shape"]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    b = rng.standard_normal(cols, dtype=np.float32)
    y = np.empty_like(x)
    bar = ctx.progress(2, "gelu")
    fused = simd_fused_bias_gelu(x, b)
    path = acceleration.last_path()
    err = float(np.max(np.abs(fused.astype(np.float64) - numpy_unfused(x.astype(np.float64), b.astype(np.float64)))))
    bar.step(f"parity (path {path})")
    with Threads(1):
        ms = {k: v * 1e3 for k, v in measure_rounds(
            {"unfused": lambda: numpy_unfused(x, b), "fused": lambda: simd_fused_bias_gelu(x, b),
             "copy": lambda: np.copyto(y, x)}, 2 if ctx.quick else 5).items()}
    bar.step("timed")
    bar.close()
    speed = ms["unfused"] / ms["fused"]
    native_ran = path.startswith("native")
    least_bytes = (2 * rows * cols + cols) * 4  # read x and the bias, write y

    def rate(key):  # effective GB/s over the least bytes, beside this machine's copy bandwidth
        gbs = least_bytes / (ms[key] / 1e3) / 1e9
        return f"{gbs:.1f} GB/s, {ctx.of_copy(gbs)}"
    res.claim(f"Bias + GELU ({rows} x {cols}): unfused NumPy", f"{GUIDE['unfused_ms']} ms, 1.0x",
              f"{ms['unfused']:.2f} ms ({rate('unfused')}), 1.0x", None, "the baseline")
    ok = speed >= 0.8 * GUIDE["speedup"]
    why = "" if ok else (f"the kernel did not run natively (path {path})" if not native_ran else
                         f"unfused NumPy takes {ms['unfused']:.1f} ms here (guide: {GUIDE['unfused_ms']} ms)")
    res.claim(f"Bias + GELU ({rows} x {cols}): simd_fused_bias_gelu",
              f"{GUIDE['fused_ms']} ms, {GUIDE['speedup']}x", f"{ms['fused']:.2f} ms ({rate('fused')}), {speed:.1f}x",
              ok, why)
    res.tables = [f"One thread; medians of per-contender blocks. Fused path `{path}`; max |fused - float64 "
                  f"reference| = {err:.1e}. A copy of the same bytes (read x, write y) takes {ms['copy']:.2f} ms: "
                  f"the fused kernel runs at {ms['fused'] / ms['copy']:.2f}x the memory floor."]
    res.numbers = dict(ms, speedup=speed, path=path, max_error=err)
    if ctx.plots_enabled:
        from .report import save_bar_plot
        res.plots.append(save_bar_plot(ctx.path("gelu.png"), ["NumPy unfused", "simd_fused_bias_gelu",
                                                             "copy of the same bytes"],
                                       [ms["unfused"], ms["fused"], ms["copy"]],
                                       f"bias + GELU, {rows} x {cols} float32, 1 thread", "ms (log scale)"))
    return res
