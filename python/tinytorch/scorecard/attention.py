"""Scorecard section "attention": FlashAttention's latency and memory across S.

Design: q, k, v [1, H, S, d] float32; ``flash_attention`` (the runtime's tiled kernel, online
softmax) against the stock ``attention(..., flash=False)`` of
tinytorch.core.attention (the whole S x S score matrix; the core's default is the tiled path),
forward + backward through autograd, on one thread. Time: medians of
measure.measure_rounds. Memory: the tracemalloc peak above the inputs (NumPy's allocations:
outputs, saved tensors, score matrices) plus the runtime's storage peak (the kernel's
workspace), and the RSS peak where /proc allows it. The guide's claims checked: the memory
of the tiled version stays O(S d) (its peak in units of one [H, S, d] array does not grow
with S) while the stock one grows as S^2; the tiled version is faster at the largest S; and
the size of the S x S matrices at S = 4096, 32 heads, from the formula. --quick: S = 256,
512, 1024, 2048 with 4 heads; full: S = 512 .. 4096 with 8 heads.
benchmarks/bench_attention.py calls ``peak_memory`` and ``flops``.

Owns the attention section; assumes ``flash_attention`` and the core's
``attention``, timed with tinytorch.measure.
"""
from __future__ import annotations

import tracemalloc

import numpy as np

from ..measure import Threads, measure_rounds
from .results import SectionResult

__all__ = ["peak_memory", "flops", "score_matrix_bytes", "run"]


def _status_bytes(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_memory(fn) -> dict:
    """Bytes above the state before one call of fn: {"traced": tracemalloc peak, "runtime":
    runtime storage peak (0 without the runtime), "rss": peak RSS (None where unreadable)}.

    Args:
        fn: a zero-argument callable.
    """
    from tinytorch import native
    native_on = native.available()
    tracemalloc.start()
    tracemalloc.reset_peak()
    traced0 = tracemalloc.get_traced_memory()[0]
    if native_on:
        native.reset_peak_memory()
        runtime0 = native.memory_stats()["bytes_in_use"]
    try:
        rss_ok = _reset_peak_rss()
        rss0 = _status_bytes("VmRSS")
    except OSError:
        rss_ok = False
    fn()
    rss = _status_bytes("VmHWM") - rss0 if rss_ok else None
    traced = tracemalloc.get_traced_memory()[1] - traced0
    tracemalloc.stop()
    runtime = native.memory_stats()["peak_bytes"] - runtime0 if native_on else 0
    return {"traced": traced, "runtime": runtime, "rss": rss}


def flops(s: int, d: int, heads: int, causal: bool) -> float:
    """Forward FLOPs of attention: 4 S^2 d per head (S (S + 1) / 2 visible pairs when causal).

    Args:
        s: sequence length.
        d: head dimension.
        heads: heads.
        causal: causal masking.
    """
    pairs = s * (s + 1) / 2 if causal else s * s
    return 4.0 * pairs * d * heads


def score_matrix_bytes(s: int, heads: int, batch: int = 1, matrices: int = 2) -> int:
    """Bytes of the float32 S x S score and probability matrices of standard attention.

    Args:
        s: sequence length.
        heads: heads.
        batch: batch size.
        matrices: how many S x S matrices are kept (scores and weights: 2).
    """
    return matrices * batch * heads * s * s * 4


def _fwd_bwd(fn, q, k, v):
    from tinytorch.core.tensor import Tensor

    def call():
        ts = [Tensor.from_numpy(x, requires_grad=True) for x in (q, k, v)]
        o = fn(*ts)
        o.backward(np.ones_like(o.data))
        return o.data
    return call


def _gflops(row, which, d, heads):
    """GFLOP/s of a measured fwd+bwd row: the forward's FLOPs x 3.5 (the backward counted as
    2.5 forwards, FlashAttention's convention), over its time."""
    return flops(row["S"], d, heads, False) * 3.5 / (row[f"{which}_ms"] / 1e3) / 1e9


def run(ctx) -> SectionResult:
    """Measure flash and stock attention across S and check the guide's claims.

    Args:
        ctx: the scorecard Context.
    """
    from tinytorch.core.attention import attention
    from tinytorch.extensions import flash_attention, last_path

    def stock_attention(q, k, v):  # the S x S path (the core's default is FlashAttention now)
        return attention(q, k, v, flash=False)

    res = SectionResult("attention", "")
    seqs, heads, d = ((256, 512, 1024, 2048), 4, 64) if ctx.quick else ((512, 1024, 2048, 4096), 8, 64)
    bar = ctx.progress(len(seqs), "attention")
    rng = np.random.default_rng(0)
    rows = []
    path = ""
    worst_err = 0.0
    with Threads(1):
        for s in seqs:
            q, k, v = (rng.standard_normal((1, heads, s, d)).astype(np.float32) for _ in range(3))
            got = flash_attention(q, k, v)
            path = last_path()
            worst_err = max(worst_err, float(np.abs(got - stock_attention(q, k, v)).max()))
            fns = {"flash": _fwd_bwd(flash_attention, q, k, v), "stock": _fwd_bwd(stock_attention, q, k, v)}
            ms = {n: 1e3 * t for n, t in measure_rounds(fns, 1 if (ctx.quick or s >= 2048) else 2,
                                                          block_time=0.2).items()}
            mem = {n: peak_memory(fn) for n, fn in fns.items()}
            unit = heads * s * d * 4
            rows.append({"S": s, "flash_ms": ms["flash"], "stock_ms": ms["stock"],
                         "flash_bytes": mem["flash"]["traced"] + mem["flash"]["runtime"],
                         "stock_bytes": mem["stock"]["traced"] + mem["stock"]["runtime"],
                         "flash_rss": mem["flash"]["rss"], "stock_rss": mem["stock"]["rss"], "unit": unit})
            bar.step(f"S = {s}")
    bar.close()
    first, last = rows[0], rows[-1]
    flash_growth = (last["flash_bytes"] / last["unit"]) / (first["flash_bytes"] / first["unit"])
    stock_growth = last["stock_bytes"] / first["stock_bytes"]
    s_ratio = last["S"] / first["S"]
    ok_mem = flash_growth < 1.5
    res.claim(f"Memory: tiled attention is O(S d), no S x S matrix (S = {first['S']} -> {last['S']})",
              "the O(S^2) footprint is eliminated",
              f"flash peak / [H,S,d]: {first['flash_bytes'] / first['unit']:.2f} -> "
              f"{last['flash_bytes'] / last['unit']:.2f} (x{flash_growth:.2f}); stock peak x{stock_growth:.1f} "
              f"for S x{s_ratio:.0f} (S^2: x{s_ratio ** 2:.0f})", ok_mem,
              "" if ok_mem else "the flash peak per [H,S,d] grew with S")
    ok_time = last["flash_ms"] < last["stock_ms"]
    res.claim(f"Latency: tiled attention beats the S x S version (fwd+bwd, S = {last['S']}, {heads} heads, d = {d})",
              "stock attention is memory-bandwidth bound; tiling removes the S x S traffic",
              f"flash {last['flash_ms']:.1f} ms = {_gflops(last, 'flash', d, heads):.0f} GFLOP/s "
              f"({ctx.of_fma(_gflops(last, 'flash', d, heads), 1)}) vs stock {last['stock_ms']:.1f} ms = "
              f"{_gflops(last, 'stock', d, heads):.0f} GFLOP/s ({last['stock_ms'] / last['flash_ms']:.1f}x)", ok_time,
              "" if ok_time else f"flash was slower (path {path})")
    guide_bytes = score_matrix_bytes(4096, 32)
    res.claim("S x S score + weight matrices at S = 4096, 32 heads (batch 1)", "hundreds of megabytes per batch",
              f"{guide_bytes / 2**30:.1f} GiB by the formula 2 H S^2 x 4 B (float32)", False,
              "understated: the two float32 matrices take gigabytes, not hundreds of megabytes")
    lines = [f"q, k, v [1, {heads}, S, {d}] float32, non-causal, forward + backward, 1 thread. flash path "
             f"`{path}`; max |flash - stock| forward = {worst_err:.1e}. Memory: tracemalloc peak + runtime "
             "workspace above the inputs.", "",
             "| S | flash ms | stock ms | stock / flash | flash peak MiB | stock peak MiB | flash / [H,S,d] | "
             "flash RSS MiB | stock RSS MiB |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def rss(v):
        return "n/a" if v is None else f"{v / 2**20:.0f}"
    for r in rows:
        lines.append(f"| {r['S']} | {r['flash_ms']:.1f} | {r['stock_ms']:.1f} | {r['stock_ms'] / r['flash_ms']:.1f}x | "
                     f"{r['flash_bytes'] / 2**20:.1f} | {r['stock_bytes'] / 2**20:.1f} | "
                     f"{r['flash_bytes'] / r['unit']:.2f} | {rss(r['flash_rss'])} | {rss(r['stock_rss'])} |")
    res.tables = lines
    res.numbers = {"rows": rows, "path": path, "max_error": worst_err}
    if ctx.plots_enabled:
        from .report import save_line_plot
        S = [r["S"] for r in rows]
        res.plots.append(save_line_plot(ctx.path("attention_latency.png"), S,
                                        {"flash": [r["flash_ms"] for r in rows],
                                         "stock (S x S)": [r["stock_ms"] for r in rows]},
                                        f"attention fwd+bwd, {heads} heads, d = {d}, 1 thread", "S", "ms"))
        res.plots.append(save_line_plot(ctx.path("attention_memory.png"), S,
                                        {"flash": [r["flash_bytes"] / 2**20 for r in rows],
                                         "stock (S x S)": [r["stock_bytes"] / 2**20 for r in rows]},
                                        "attention fwd+bwd peak memory above the inputs", "S", "MiB"))
    return res
