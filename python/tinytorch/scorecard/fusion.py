"""Scorecard section "fusion": DRAM traffic and time of an elementwise chain, eager vs fused.

Design: the guide's chain y = (x + bias) * scale on 10^7 float32 elements (x and bias full
arrays, scale a constant) is compiled with ``tinytorch.extensions.compile_graph(fn, x,
bias)``, which returns a CompiledGraph whose ``report()`` gives the DRAM bytes of eager and
fused execution, measured times and the executor that ran. The section also times eager
NumPy against calling the compiled graph itself (measure.measure_rounds) and checks the
fused result against a float64 reference. The extension is optional here: when the API is
missing, returns something else (the older toy tracer returns source text), or fails, the
section reports "unavailable: <reason>" instead of failing. Report fields are looked up by
name (a key or attribute naming eager/fused and bytes/ms/executor), so a dict or an object
both work. Same size in --quick (the claim is about 10^7 elements: ~0.1 s per call).

Owns the fusion section; assumes ``compile_graph`` and its ``report()``, timed with
tinytorch.measure.
"""
from __future__ import annotations

import numpy as np

from ..measure import measure_rounds
from .results import SectionResult, unavailable, within

__all__ = ["chain", "load_compile_graph", "report_fields", "run", "GUIDE", "ELEMENTS", "SCALE"]

ELEMENTS = 10 ** 7
SCALE = 0.5
GUIDE = {"eager_mb": 200.0, "fused_mb": 120.0, "saved": 40.0,
         "eager_reads": "x, bias, t (120 MB)", "eager_writes": "t, y (80 MB)",
         "fused_reads": "x, bias, scale (80 MB)", "fused_writes": "y (40 MB)"}


def chain(x, bias):
    """The guide's elementwise chain (x + bias) * scale, with scale = SCALE.

    Args:
        x: the input.
        bias: the bias (same shape).
    """
    return (x + bias) * SCALE


def load_compile_graph():
    """(compile_graph, '') when the extension is importable, else (None, reason).

    Args:
        (none)
    """
    try:
        from tinytorch import extensions
    except Exception as exc:  # noqa: BLE001 - any import failure means unavailable
        return None, f"tinytorch.extensions failed to import ({type(exc).__name__}: {exc})"
    fn = getattr(extensions, "compile_graph", None)
    if fn is None:
        return None, "tinytorch.extensions has no compile_graph"
    return fn, ""


def _get(report, *words, exclude=()):
    """The first field of ``report`` (dict or object) whose name contains every word."""
    items = report.items() if isinstance(report, dict) else \
        ((k, getattr(report, k)) for k in dir(report) if not k.startswith("_"))
    for key, value in items:
        name = key.lower()
        if all(any(w in name for w in alt.split("|")) for alt in words) and not any(e in name for e in exclude):
            if callable(value):
                continue
            return key, value
    return None, None


def report_fields(report) -> dict:
    """{"eager_bytes", "fused_bytes", "eager_ms", "fused_ms", "executor", "reason"} read from a
    CompiledGraph report (None for a field not found).

    Args:
        report: what ``CompiledGraph.report()`` returned (a dict or an object).
    """
    out = {}
    for which in ("eager", "fused"):
        _, v = _get(report, which, "byte|dram|traffic")
        out[f"{which}_bytes"] = None if v is None else float(v)
        key, v = _get(report, which, "ms|time|second", exclude=("byte",))
        if v is not None and key and "second" in key.lower() and "ms" not in key.lower():
            v = 1e3 * float(v)
        out[f"{which}_ms"] = None if v is None else float(v)
    _, v = _get(report, "executor|path|backend")
    out["executor"] = None if v is None else str(v)
    _, v = _get(report, "reason")
    out["reason"] = "" if v is None else str(v)
    return out


def _rate(ctx, mb, ms):
    """'41.2 GB/s, 1.10x the 1-thread copy': DRAM bytes over time, beside the measured copy. A
    ratio, not a share: the executors may use every thread, np.copyto uses one."""
    gbs = mb / ms  # MB per ms = GB per s
    copy = ctx.ceilings.copy_gbs if ctx.ceilings else None
    return f"{gbs:.1f} GB/s" + (f", {gbs / copy:.2f}x the 1-thread copy" if copy else "")


def run(ctx) -> SectionResult:
    """Compile the chain, read its report, time both ways; unavailable when the API is not.

    Args:
        ctx: the scorecard Context.
    """
    title = ""
    compile_graph, why = load_compile_graph()
    if compile_graph is None:
        return unavailable("fusion", title, why)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(ELEMENTS, dtype=np.float32)
    bias = rng.standard_normal(ELEMENTS, dtype=np.float32)
    bar = ctx.progress(3, "fusion")
    try:
        graph = compile_graph(chain, x, bias)
    except Exception as exc:  # noqa: BLE001 - the extension's failure is the section's reason
        bar.close()
        return unavailable("fusion", title, f"compile_graph(fn, x, bias) raised {type(exc).__name__}: {exc}")
    if not hasattr(graph, "report"):
        bar.close()
        return unavailable("fusion", title, f"compile_graph returned {type(graph).__name__}, not a CompiledGraph "
                                            "with .report() (the graph-fusion extension is not installed)")
    bar.step("compiled")
    try:
        fused = np.asarray(graph(x, bias)) if callable(graph) else None
        fields = report_fields(graph.report())
    except Exception as exc:  # noqa: BLE001
        bar.close()
        return unavailable("fusion", title, f"running the compiled graph failed: {type(exc).__name__}: {exc}")
    if fields["eager_bytes"] is None or fields["fused_bytes"] is None:
        bar.close()
        return unavailable("fusion", title, f"CompiledGraph.report() gives no eager/fused DRAM bytes: {fields}")
    bar.step("report")
    res = SectionResult("fusion", title)
    err = None
    ms = {}
    if fused is not None:
        ref = (x.astype(np.float64) + bias.astype(np.float64)) * SCALE
        err = float(np.max(np.abs(fused.astype(np.float64) - ref)))
        ms = {k: 1e3 * v for k, v in measure_rounds({"eager": lambda: chain(x, bias),
                                                     "fused": lambda: graph(x, bias)},
                                                    2 if ctx.quick else 4, block_time=0.3).items()}
    bar.step("timed")
    bar.close()
    eager_mb, fused_mb = fields["eager_bytes"] / 1e6, fields["fused_bytes"] / 1e6
    saved = 100 * (1 - fused_mb / eager_mb)
    res.claim("Eager define-by-run: DRAM traffic", f"{GUIDE['eager_mb']:.0f} MB (reads {GUIDE['eager_reads']}, "
              f"writes {GUIDE['eager_writes']})", f"{eager_mb:.1f} MB (the extension's count)",
              within(eager_mb, GUIDE["eager_mb"], 0.02))
    res.claim("Fused single loop: DRAM traffic and saving", f"{GUIDE['fused_mb']:.0f} MB, {GUIDE['saved']:.1f} % "
              "reduction", f"{fused_mb:.1f} MB, {saved:.1f} % reduction",
              within(fused_mb, GUIDE["fused_mb"], 0.02) and abs(saved - GUIDE["saved"]) < 1.0)
    eager_ms = ms.get("eager", fields["eager_ms"])
    fused_ms = ms.get("fused", fields["fused_ms"])
    if eager_ms and fused_ms:
        expect = eager_mb / fused_mb
        ok = fused_ms < eager_ms
        res.claim("Time follows traffic: fused faster than eager", f"fewer DRAM round-trips (bytes ratio "
                  f"{expect:.2f}x)", f"eager {eager_ms:.1f} ms ({_rate(ctx, eager_mb, eager_ms)}), fused {fused_ms:.1f} "
                  f"ms ({_rate(ctx, fused_mb, fused_ms)}) ({eager_ms / fused_ms:.2f}x; "
                  f"executor {fields['executor']})", ok, "" if ok else
                  f"the fused executor ({fields['executor']}) was not faster on this run"
                  + (f": {fields['reason']}" if fields["reason"] else ""))
    res.tables = [f"y = (x + bias) * {SCALE} on {ELEMENTS:,} float32 elements. Report of the compiled graph: "
                  f"{fields}. " + (f"Max |fused - float64 reference| = {err:.1e}; times measured here "
                                   "(medians of blocks) unless the graph is not callable." if err is not None else
                                   "The compiled graph is not callable: times are the report's.")]
    res.numbers = dict(fields, eager_mb=eager_mb, fused_mb=fused_mb, saved=saved, measured_ms=ms, max_error=err)
    if ctx.plots_enabled:
        from .report import save_bar_plot
        res.plots.append(save_bar_plot(ctx.path("fusion_traffic.png"), ["eager", "fused", "guide: eager",
                                                                      "guide: fused"],
                                       [eager_mb, fused_mb, GUIDE["eager_mb"], GUIDE["fused_mb"]],
                                       "DRAM traffic of (x + bias) * scale, 10^7 float32", "MB", log=False))
    return res
