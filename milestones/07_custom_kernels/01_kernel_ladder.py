"""Milestone 07: the custom kernels side by side, each with the path that ran.

What it shows
  The silicon and memory boundaries of the extension guide, measured on this machine in one run,
  every row checked against a float64 NumPy reference and labelled with the path that actually
  ran (``tinytorch.extensions.last_path()``, or the reason a path is not available here):

    GEMM ladder        C = A @ B float32: the pure-Python loop, the scalar C triple loop
                       (tt_sgemm_reference), the blocked + packed kernel on its scalar
                       micro-kernel, the same on the SIMD micro-kernel (simd_matmul), and BLAS
                       (NumPy's matmul), GFLOP/s = 2 N^3 / t
    fused bias + GELU  gelu_tanh(x + b): NumPy unfused (the door with native kernels off) vs the
                       fused SIMD kernel (simd_fused_bias_gelu), GB/s of x read + y written
    FlashAttention     softmax(q k^T / sqrt(d)) v, causal: the NumPy reference that materialises
                       the scores vs flash_attention's tiled kernel, with the tracemalloc peak
    fusion compiler    compile_graph on an elementwise chain: eager vs fused time and DRAM bytes
                       (tinytorch.extensions.compile_graph; its report names the executor)
    GPU paths          cuda_matmul, mps_matmul, triton_fused_gelu where a device (or the Triton
                       interpreter) exists; otherwise the row says why not
    INT8 GEMM          a GPT-2 MLP Linear in float32 vs QuantizedLinear (the runtime's u8 x s8
                       kernel, docs/int8.md); its error is the quantization's, against float64

  Times are medians of repeated calls (tinytorch.perf.benchmarking.benchmark) after a warm-up,
  wall-clock on this machine: they move with its load.

Run:    python milestones/07_custom_kernels/01_kernel_ladder.py [--quick] [--json PATH]
        --quick: smaller sizes (a few seconds).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # milestones/: the shared _runtime helper
import _runtime  # noqa: E402

_runtime.load()  # the installed tinytorch (else the checkout's); says which runtime and ISA

from tinytorch import native  # noqa: E402
from tinytorch.core import acceleration  # noqa: E402
from tinytorch.core.acceleration import use_native  # noqa: E402
from tinytorch.extensions import (flash_attention, has_cuda_support, has_mps_support,  # noqa: E402
                                  has_triton_support, last_path, simd_fused_bias_gelu, simd_matmul)
from tinytorch.perf.benchmarking import benchmark  # noqa: E402
from tinytorch.perf.profiling import Profiler  # noqa: E402
from tinytorch.scorecard.gemm import python_loop_matmul  # noqa: E402


def row(section, kernel, size, seconds, rate, error, path):
    """One table row as a dict (seconds/rate/error None when the kernel did not run)."""
    return {"section": section, "kernel": kernel, "size": size, "seconds": seconds, "rate": rate,
            "max_abs_error": error, "path": path}


def unavailable(section, kernel, size, reason):
    """A row for a path that cannot run here, with the reason."""
    return row(section, kernel, size, None, None, None, f"not available: {reason}")


def timed(fn, iterations):
    """(median seconds, the result, the path the last call took)."""
    out = fn()
    path = last_path()
    stats = benchmark(fn, warmup=1, iterations=iterations)
    return stats.median, out, path


def max_error(got, ref):
    """Largest absolute difference to the float64 reference."""
    return float(np.max(np.abs(np.asarray(got, dtype=np.float64) - ref)))


# -------------------------------------------------------------------------------------- GEMM
def gemm_ladder(quick, rng):
    """The GEMM rows: each rung at a size it finishes in well under a second."""
    rows, section = [], "GEMM ladder"
    gflops = lambda n, t: 2.0 * n ** 3 / t / 1e9  # noqa: E731
    n_py = 32 if quick else 64
    a = rng.standard_normal((n_py, n_py)).astype(np.float32)
    start = time.perf_counter()
    c = python_loop_matmul(a.tolist(), a.tolist())
    t = time.perf_counter() - start
    rows.append(row(section, "pure-Python loop (ikj, lists)", f"N={n_py}", t, gflops(n_py, t),
                    max_error(c, a.astype(np.float64) @ a.astype(np.float64)), "python"))

    n_ref = 128 if quick else 256
    a = rng.standard_normal((n_ref, n_ref)).astype(np.float32)
    if native.available():
        from tinytorch._native import check, f32_ptr, lib
        c = np.empty_like(a)
        pa, pc = f32_ptr(a), f32_ptr(c)
        call = lambda: check(lib.tt_sgemm_reference(0, 0, n_ref, n_ref, n_ref, 1.0, pa, n_ref, pa, n_ref,  # noqa: E731
                                                    0.0, pc, n_ref), "tt_sgemm_reference")
        call()
        t = benchmark(call, warmup=0, iterations=3).median
        rows.append(row(section, "scalar C triple loop (tt_sgemm_reference)", f"N={n_ref}", t, gflops(n_ref, t),
                        max_error(c, a.astype(np.float64) @ a.astype(np.float64)), "native:sgemm_reference"))
    else:
        rows.append(unavailable(section, "scalar C triple loop", f"N={n_ref}", native.info()["reason"]))

    n = 256 if quick else 512
    a = rng.standard_normal((n, n)).astype(np.float32)
    ref = a.astype(np.float64) @ a.astype(np.float64)
    if native.available():
        active = native.isa()
        try:
            native.set_isa("scalar")
            t, c, path = timed(lambda: simd_matmul(a, a), 3)
            rows.append(row(section, "blocked + packed, scalar micro-kernel", f"N={n}", t, gflops(n, t),
                            max_error(c, ref), path))
        finally:
            native.set_isa(active)
        t, c, path = timed(lambda: simd_matmul(a, a), 10)
        rows.append(row(section, f"blocked + packed, SIMD micro-kernel ({active})", f"N={n}", t, gflops(n, t),
                        max_error(c, ref), path))
    else:
        rows.append(unavailable(section, "blocked + packed kernels", f"N={n}", native.info()["reason"]))
    out = np.empty_like(a)
    t = benchmark(lambda: np.matmul(a, a, out=out), warmup=1, iterations=10).median
    rows.append(row(section, "BLAS (NumPy's matmul)", f"N={n}", t, gflops(n, t), max_error(out, ref), "numpy:blas"))
    return rows


# ---------------------------------------------------------------------------------- bias + GELU
def bias_gelu_rows(quick, rng):
    """Unfused NumPy vs the fused kernel (and Triton's where it runs)."""
    rows, section = [], "fused bias + GELU"
    m, d = (512, 1024) if quick else (2048, 2048)
    x = rng.standard_normal((m, d)).astype(np.float32)
    b = rng.standard_normal(d).astype(np.float32)
    ref = acceleration.bias_gelu(x.astype(np.float64), b.astype(np.float64))  # float64: the NumPy formula
    gbs = lambda t: 2 * x.nbytes / t / 1e9  # noqa: E731
    with use_native(False):
        t, y, path = timed(lambda: acceleration.bias_gelu(x, b, any_size=True), 5)
    rows.append(row(section, "unfused NumPy (x + b, then gelu)", f"{m}x{d}", t, gbs(t), max_error(y, ref), path))
    t, y, path = timed(lambda: simd_fused_bias_gelu(x, b), 10)
    rows.append(row(section, "fused kernel (simd_fused_bias_gelu)", f"{m}x{d}", t, gbs(t), max_error(y, ref), path))
    if has_triton_support():
        from tinytorch.extensions import triton_fused_gelu
        t, y, path = timed(lambda: triton_fused_gelu(x, b), 3)
        rows.append(row(section, "Triton kernel (triton_fused_gelu)", f"{m}x{d}", t, gbs(t), max_error(y, ref), path))
    else:
        from tinytorch.extensions.triton_gelu import triton_build_info
        rows.append(unavailable(section, "Triton kernel (triton_fused_gelu)", f"{m}x{d}", triton_build_info()["detail"]))
    return rows


# ------------------------------------------------------------------------------ FlashAttention
def attention_rows(quick, rng):
    """The NumPy reference (scores materialised) vs flash_attention, causal."""
    rows, section = [], "FlashAttention"
    bh, s, dh = (4, 256, 64) if quick else (8, 1024, 64)
    q, k, v = (rng.standard_normal((bh, s, dh)).astype(np.float32) for _ in range(3))
    ref, _ = acceleration.attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                                    causal=True)
    flops = 4.0 * bh * s * s * dh / 2  # causal: half the score matrix
    for label, native_on in (("reference (scores materialised, NumPy)", False), ("flash_attention (tiled)", True)):
        with use_native(native_on):
            t, y, path = timed(lambda: flash_attention(q, k, v, causal=True), 3)
            peak = Profiler.measure_memory(lambda: flash_attention(q, k, v, causal=True))["tracemalloc_peak_bytes"]
        r = row(section, label, f"{bh}x{s}x{dh}", t, flops / t / 1e9, max_error(y, ref), path)
        r["peak_bytes"] = peak
        rows.append(r)
    return rows


# ----------------------------------------------------------------------------- fusion compiler
def fusion_rows(quick, rng):
    """compile_graph on an elementwise chain, guarded: the compiler is optional."""
    section, n = "fusion compiler", (1 << 18) if quick else (1 << 22)
    try:
        from tinytorch.extensions import compile_graph
    except ImportError as exc:
        return [unavailable(section, "compile_graph", f"n={n}", f"tinytorch.extensions.compile_graph: {exc}")]
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))

    def chain(a, b):
        return a * b + a * 2.0 - b * 0.5

    ref = chain(x.astype(np.float64), y.astype(np.float64))
    try:
        graph = compile_graph(chain, x, y)
        fused = graph(x, y)
        report = graph.report(x, y)
    except Exception as exc:  # an executor that is not built here: say so, do not fail
        return [unavailable(section, "compile_graph", f"n={n}", f"{type(exc).__name__}: {exc}")]
    eager = chain(x, y)
    reason = f" ({report.reason})" if report.reason else ""
    r_eager = row(section, "eager NumPy (one pass per op)", f"n={n}", report.eager_seconds,
                  report.eager_bytes / report.eager_seconds / 1e9, max_error(eager, ref), "numpy")
    r_fused = row(section, "compile_graph (one fused loop)", f"n={n}", report.fused_seconds,
                  report.eager_bytes / report.fused_seconds / 1e9, max_error(fused, ref), report.path + reason)
    r_eager["dram_bytes"], r_fused["dram_bytes"] = report.eager_bytes, report.fused_bytes
    return [r_eager, r_fused]


# ------------------------------------------------------------------------------------ GPU paths
def gpu_rows(quick, rng):
    """cuda_matmul and mps_matmul where a device exists, else the reason."""
    rows, section = [], "GPU paths"
    n = 256 if quick else 1024
    a = rng.standard_normal((n, n)).astype(np.float32)
    ref = a.astype(np.float64) @ a.astype(np.float64)
    if has_cuda_support():
        from tinytorch.extensions import cuda_matmul
        t, c, path = timed(lambda: cuda_matmul(a, a), 5)
        rows.append(row(section, "CUDA (cuda_matmul, tiled)", f"N={n}", t, 2.0 * n ** 3 / t / 1e9, max_error(c, ref), path))
    else:
        from tinytorch.extensions.cuda_ops import cuda_build_info
        rows.append(unavailable(section, "CUDA (cuda_matmul)", f"N={n}", cuda_build_info()["detail"]))
    if has_mps_support():
        from tinytorch.extensions import mps_matmul
        t, c, path = timed(lambda: mps_matmul(a, a), 5)
        rows.append(row(section, "Metal (mps_matmul)", f"N={n}", t, 2.0 * n ** 3 / t / 1e9, max_error(c, ref), path))
    else:
        from tinytorch.extensions.mps_ops import mps_build_info
        rows.append(unavailable(section, "Metal (mps_matmul)", f"N={n}", mps_build_info()["detail"]))
    return rows


# ------------------------------------------------------------------------------ INT8 GEMM
def int8_rows(quick, rng):
    """A GPT-2 MLP Linear (768 -> 3072) in float32 and as QuantizedLinear (the runtime's INT8
    GEMM: per-row u8 activations, s8 weights, exact int32 sums; docs/int8.md)."""
    from tinytorch.core.layers import Linear
    from tinytorch.core.quantization import QuantizedLinear
    rows, section = [], "INT8 GEMM"
    m, k, n = (16, 768, 3072) if quick else (64, 768, 3072)
    lin = Linear(k, n)
    x = rng.standard_normal((m, k)).astype(np.float32)
    ref = x.astype(np.float64) @ lin.weight.data.astype(np.float64) + lin.bias.data
    gops = lambda t: 2.0 * m * n * k / t / 1e9  # noqa: E731
    t, y, path = timed(lambda: lin(x), 10)
    rows.append(row(section, "float32 Linear", f"{m}x{k}x{n}", t, gops(t), max_error(y.data, ref), path))
    ql = QuantizedLinear.from_linear(lin)
    t, y, path = timed(lambda: ql(x), 10)
    rows.append(row(section, "int8 QuantizedLinear", f"{m}x{k}x{n}", t, gops(t), max_error(y, ref), path))
    return rows


SECTIONS = {"gemm": gemm_ladder, "gelu": bias_gelu_rows, "attention": attention_rows,
            "fusion": fusion_rows, "gpu": gpu_rows, "int8": int8_rows}
UNITS = {"GEMM ladder": "GFLOP/s", "fused bias + GELU": "GB/s", "FlashAttention": "GFLOP/s",
         "fusion compiler": "GB/s (eager bytes)", "GPU paths": "GFLOP/s", "INT8 GEMM": "GOP/s"}


def main(argv=None):
    parser = argparse.ArgumentParser(description="The custom kernels side by side, each with the path that ran.")
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append", help="run only this section (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    _runtime.add_json_option(parser)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    with _runtime.track_kernel_paths() as paths:
        for name in args.only or SECTIONS:
            print(f"measuring {name} ...", flush=True)
            rows += SECTIONS[name](args.quick, rng)
    print()
    for section in dict.fromkeys(r["section"] for r in rows):
        print(f"{section} ({UNITS[section]}; error = max |result - float64 reference|):")
        table = []
        for r in (r for r in rows if r["section"] == section):
            ran = r["seconds"] is not None
            extra = ""
            if "peak_bytes" in r:
                extra = f", peak {r['peak_bytes'] / 2**20:.1f} MiB"
            if "dram_bytes" in r:
                extra = f", DRAM {r['dram_bytes'] / 2**20:.1f} MiB"
            table.append([r["kernel"], r["size"], f"{r['seconds'] * 1e3:.3f} ms{extra}" if ran else "-",
                          f"{r['rate']:.2f}" if ran else "-", f"{r['max_abs_error']:.1e}" if ran else "-", r["path"]])
        _runtime.print_table(["kernel", "size", "median time", "rate", "error", "path that ran"], table)
        print()
    for r in rows:
        if r["max_abs_error"] is not None and not math.isfinite(r["max_abs_error"]):
            print(f"WARNING: {r['kernel']} returned non-finite values", file=sys.stderr)
    _runtime.report(paths)
    _runtime.save_results(args.json, {"milestone": "07_custom_kernels", "rows": rows})
    return rows


if __name__ == "__main__":
    main()
