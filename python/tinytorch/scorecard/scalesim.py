"""Scorecard section "scalesim": simulated systolic-array cycles of a TinyGPT's GEMMs.

Design: the guide's project traces every GEMM (M, K, N) of a TinyTorch model and runs them
through SCALE-Sim on a 32 x 32 edge array and a 128 x 128 datacenter array. This section
uses ``tinytorch.extensions.scalesim`` (``trace_gemms(model, *inputs)`` -> Gemm list,
``ArrayConfig(rows, cols, dataflow)``, ``simulate(gemms, config, engine="auto")`` -> result
with ``.engine``, ``.layers``, ``.total_cycles``) on a small GPT, weight stationary, and
files the guide's qualitative claims (the larger array takes fewer cycles; small GEMMs leave
most of it idle) plus a reference GEMM whose cycles were measured once with SCALE-Sim itself
(docs/toolchain-notes.md: M = 128, K = 256, N = 64, ws: 3,551 cycles on 32 x 32, 1,019 on
128 x 128). The extension is optional here: missing or failing, the section says
"unavailable: <reason>". The engine that produced the cycles (SCALE-Sim or a fallback
model) is stated in every row.

Owns the scalesim section; assumes tinytorch.extensions.scalesim (``simulate`` with
engine="auto") and the core's GPT.
"""
from __future__ import annotations

from .results import SectionResult, unavailable, within

__all__ = ["load_api", "layer_field", "run", "REFERENCE_GEMM"]

# (M, K, N) -> {array: cycles}, weight stationary, measured with SCALE-Sim 3.0.0
REFERENCE_GEMM = {"mkn": (128, 256, 64), "cycles": {32: 3551, 128: 1019}, "util": {32: 57.7, 128: 12.6}}


def load_api():
    """(module, '') when tinytorch.extensions.scalesim has the names used here, else (None, reason).

    Args:
        (none)
    """
    try:
        from tinytorch.extensions import scalesim
    except Exception as exc:  # noqa: BLE001 - any import failure means unavailable
        return None, f"tinytorch.extensions.scalesim is not importable ({type(exc).__name__}: {exc})"
    missing = [n for n in ("Gemm", "trace_gemms", "ArrayConfig", "simulate") if not hasattr(scalesim, n)]
    if missing:
        return None, f"tinytorch.extensions.scalesim lacks {missing}"
    return scalesim, ""


def layer_field(layer, *names):
    """The first of ``names`` present on a layer result (attribute or key), else None.

    Args:
        layer: one entry of a simulation result's ``.layers``.
        names: candidate field names.
    """
    for n in names:
        if isinstance(layer, dict) and n in layer:
            return layer[n]
        if hasattr(layer, n):
            return getattr(layer, n)
    return None


def _model(quick):
    import numpy as np
    from tinytorch.core import random as tt_random
    from tinytorch.core.transformers import GPT
    tt_random.manual_seed(0)
    embed, layers, seq = (64, 2, 32) if quick else (128, 4, 64)
    model = GPT(vocab_size=64, embed_dim=embed, num_layers=layers, num_heads=4, max_seq_len=seq)
    tokens = np.random.default_rng(0).integers(0, 64, (1, seq))
    return model, tokens, f"GPT: vocab 64, d = {embed}, {layers} layers, 4 heads, {seq} tokens"


def _utilisation(result):
    vals = [layer_field(layer, "utilization", "utilisation", "compute_util", "util") for layer in result.layers]
    vals = [float(v) for v in vals if v is not None]
    return sum(vals) / len(vals) if vals else None


def run(ctx) -> SectionResult:
    """Trace, simulate on two arrays, compare with the claims.

    Args:
        ctx: the scorecard Context.
    """
    title = ""
    api, why = load_api()
    if api is None:
        return unavailable("scalesim", title, why)
    arrays = (32, 128)
    bar = ctx.progress(2 + len(arrays), "scalesim")
    try:
        model, tokens, described = _model(ctx.quick)
        gemms = list(api.trace_gemms(model, tokens))
        bar.step(f"traced {len(gemms)} GEMMs")
        if not gemms:
            bar.close()
            return unavailable("scalesim", title, "trace_gemms found no GEMM in the model")
        results = {}
        for n in arrays:
            results[n] = api.simulate(gemms, api.ArrayConfig(n, n, "ws"), engine="auto")
            bar.step(f"{n} x {n}: {results[n].engine}")
    except Exception as exc:  # noqa: BLE001 - the extension's failure is the section's reason
        bar.close()
        return unavailable("scalesim", title, f"tracing or simulating failed: {type(exc).__name__}: {exc}")
    res = SectionResult("scalesim", title)
    small, big = results[32], results[128]
    engines = {n: r.engine for n, r in results.items()}
    ok = big.total_cycles < small.total_cycles
    res.claim(f"{described}: 128 x 128 vs 32 x 32 array (ws), total cycles",
              "a larger array finishes the same GEMMs in fewer cycles",
              f"{small.total_cycles:,} -> {big.total_cycles:,} cycles "
              f"({small.total_cycles / max(1, big.total_cycles):.1f}x fewer; engine {engines[128]})", ok,
              "" if ok else "the larger array was not faster for these GEMMs")
    u_small, u_big = _utilisation(small), _utilisation(big)
    if u_small is not None and u_big is not None:
        ok_u = u_big < u_small
        res.claim("Utilisation: small GEMMs leave a large array idle", "the array size must match the workload",
                  f"mean utilisation {u_small:.1f} % on 32 x 32, {u_big:.1f} % on 128 x 128", ok_u,
                  "" if ok_u else "utilisation did not fall on the larger array")
    try:
        m, k, n = REFERENCE_GEMM["mkn"]
        ref = api.Gemm("reference", m, k, n) if not _takes_keywords(api.Gemm) else api.Gemm(name="reference", M=m,
                                                                                         K=k, N=n)
        for size in arrays:
            r = api.simulate([ref], api.ArrayConfig(size, size, "ws"), engine="auto")
            want = REFERENCE_GEMM["cycles"][size]
            exact = "scalesim" in str(r.engine).lower()
            ok_r = within(r.total_cycles, want, 0.02 if exact else 0.5)
            res.claim(f"Reference GEMM M={m} K={k} N={n}, ws, {size} x {size}",
                      f"{want:,} cycles (SCALE-Sim 3.0.0, toolchain notes)",
                      f"{r.total_cycles:,} cycles (engine {r.engine})", ok_r,
                      "" if ok_r else ("SCALE-Sim's count differs" if exact else
                                       f"engine {r.engine} is a model, not SCALE-Sim: more than 50 % off"))
    except Exception as exc:  # noqa: BLE001 - the reference row is a cross-check only
        res.tables.append(f"(reference GEMM row skipped: {type(exc).__name__}: {exc})")
    bar.step("reference GEMM")
    bar.close()
    lines = ["| GEMM | M | K | N | cycles 32 x 32 | cycles 128 x 128 |", "|---|---:|---:|---:|---:|---:|"]
    for i, g in enumerate(gemms):
        def cyc(r):
            if i >= len(r.layers):
                return "n/a"
            c = layer_field(r.layers[i], "cycles", "total_cycles", "compute_cycles")
            return "n/a" if c is None else f"{int(c):,}"
        name = layer_field(g, "name") or f"gemm{i}"
        lines.append(f"| {name} | {layer_field(g, 'M', 'm')} | {layer_field(g, 'K', 'k')} | {layer_field(g, 'N', 'n')} | "
                     f"{cyc(small)} | {cyc(big)} |")
    res.tables = [f"{described}; {len(gemms)} GEMMs traced; engines: {engines}.", ""] + lines + res.tables
    res.numbers = {"gemms": len(gemms), "cycles": {n: r.total_cycles for n, r in results.items()}, "engines": engines}
    if ctx.plots_enabled:
        from .report import save_bar_plot
        res.plots.append(save_bar_plot(ctx.path("scalesim_cycles.png"), [f"{n} x {n} (ws)" for n in arrays],
                                       [results[n].total_cycles for n in arrays],
                                       f"Simulated cycles of the traced GEMMs ({engines[32]})", "cycles (log)"))
    return res


def _takes_keywords(cls) -> bool:
    import inspect
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False
    return "M" in params
