"""Scorecard section "offload": when offloading to an accelerator pays, measured where a GPU
exists and napkin arithmetic (labelled so) where none does.

Design: the guide's arithmetic intensities are recomputed from their formulas (GEMM:
2 N^3 FLOPs over 3 N^2 float32 values moved = N / 6 FLOP/byte; bias + GELU: about 12 FLOPs
per 8 bytes), and its mps_matmul table is mirrored row by row: the CPU column (np.matmul,
the machine's default threads) is measured here; the GPU columns are measured only when a
device is usable: tinytorch's own cuda_matmul / mps_matmul when ``has_cuda_support()`` /
``has_mps_support()`` say a kernel runs, else PyTorch's CUDA or MPS device when PyTorch is
installed and the backends' probe finds a GPU (PyTorch is imported only then). Without a
device each GPU cell says why (the probe's reason), and a napkin column (labelled) gives the
host-to-device transfer time of the three matrices at an assumed link bandwidth, the floor
an offload must beat. --quick stops at N = 2048.
"""
from __future__ import annotations

import importlib.util

import numpy as np

from ..measure import measure_rounds
from .results import SectionResult, within

__all__ = ["gemm_intensity", "gelu_intensity", "gpu_matmul_timer", "run", "GUIDE_MPS", "ASSUMED_LINK_GBPS"]

# N -> (np.matmul CPU ms, mps_matmul with copies ms, GPU kernel alone ms, speedup)
GUIDE_MPS = {256: (0.02, 0.72, 0.21, 0.03), 1024: (1.28, 1.06, 0.37, 1.2), 2048: (10.4, 2.53, 1.39, 4.1),
             4096: (86.9, 14.2, 10.1, 6.1)}
ASSUMED_LINK_GBPS = 25.0  # napkin: a PCIe 4.0 x16 link's practical host-to-device rate


def gemm_intensity(n: int) -> float:
    """FLOP per byte of an N x N by N x N float32 GEMM moving A, B and C once: N / 6.

    Args:
        n: the matrix size.
    """
    return 2.0 * n ** 3 / (3 * n * n * 4)


def gelu_intensity(flops_per_element: float = 12.0, bytes_per_element: float = 8.0) -> float:
    """FLOP per byte of bias + GELU (read x, write y, float32).

    Args:
        flops_per_element: arithmetic per element (the tanh form: about 12).
        bytes_per_element: bytes moved per element (4 read + 4 written).
    """
    return flops_per_element / bytes_per_element


def gpu_matmul_timer():
    """(name, fn(a, b) -> (ms with copies, ms kernel alone or None), '') for the first usable
    GPU path, or (None, None, reason) when there is none.

    Args:
        (none)
    """
    from tinytorch.backends import status
    from tinytorch.extensions import cuda_matmul, has_cuda_support, has_mps_support, mps_matmul

    def host_timer(fn):
        def timed(a, b):
            return 1e3 * measure_rounds({"gpu": lambda: fn(a, b)}, 2, block_time=0.2)["gpu"], None
        return timed
    if has_cuda_support():
        return "tinytorch cuda_matmul", host_timer(cuda_matmul), ""
    if has_mps_support():
        return "tinytorch mps_matmul", host_timer(mps_matmul), ""
    reasons = []
    for probe, device in (("cuda", "cuda"), ("mps", "mps")):
        ok, why = status(probe)
        reasons.append(f"{probe}: {why}")
        if ok and importlib.util.find_spec("torch") is not None:
            import torch  # only with a GPU present: heavy, and optional
            usable = torch.cuda.is_available() if device == "cuda" else torch.backends.mps.is_available()
            if usable:
                return f"PyTorch on {device} (no tinytorch kernel for it)", _torch_timer(torch, device), ""
            reasons.append(f"PyTorch cannot use {device}")
    return None, None, "; ".join(reasons)


def _torch_timer(torch, device):
    sync = torch.cuda.synchronize if device == "cuda" else torch.mps.synchronize

    def timed(a, b):
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)

        def with_copies():
            out = (ta.to(device) @ tb.to(device)).cpu()
            return out
        da, db = ta.to(device), tb.to(device)

        def kernel():
            da @ db
            sync()
        ms = {k: 1e3 * v for k, v in measure_rounds({"copies": with_copies, "kernel": kernel}, 2,
                                                    block_time=0.2).items()}
        return ms["copies"], ms["kernel"]
    return timed


def _cpu_rate(ctx, n, cpu_ms):
    """'420 GFLOP/s, 78% of peak': the CPU GEMM on BLAS's default threads (every core)."""
    import os
    gflops = 2.0 * n ** 3 / (cpu_ms / 1e3) / 1e9
    return f"{gflops:.0f} GFLOP/s, {ctx.of_fma(gflops, os.cpu_count() or 1)}"


def run(ctx) -> SectionResult:
    """Recompute the napkin figures, measure the CPU (and a GPU where one exists).

    Args:
        ctx: the scorecard Context.
    """
    res = SectionResult("offload", "")
    for n, g in ((256, 43), (4096, 683)):
        ai = gemm_intensity(n)
        res.claim(f"Arithmetic intensity, GEMM N = {n} (napkin formula 2N^3 / (3N^2 x 4 B))", f"~{g} FLOP/byte",
                  f"{ai:.1f} FLOP/byte (recomputed)", within(ai, g, 0.02), "napkin arithmetic, not a measurement")
    res.claim("Arithmetic intensity, bias + GELU (napkin)", "~1.5 FLOP/byte", f"{gelu_intensity():.2f} FLOP/byte "
              "(12 FLOPs / 8 bytes, recomputed)", within(gelu_intensity(), 1.5, 0.02),
              "napkin arithmetic, not a measurement")
    sizes = [n for n in GUIDE_MPS if not (ctx.quick and n > 2048)]
    bar = ctx.progress(len(sizes) + 1, "offload")
    gpu_name, gpu, no_gpu = gpu_matmul_timer()
    bar.step("GPU probe")
    rng = np.random.default_rng(0)
    lines = ["| N | np.matmul here (CPU) | GPU with copies | GPU kernel alone | speedup (total) | "
             f"napkin: transfer of A, B, C at {ASSUMED_LINK_GBPS:g} GB/s |", "|---:|---:|---:|---:|---:|---:|"]
    numbers = {}
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty_like(a)
        cpu_ms = 1e3 * measure_rounds({"cpu": lambda: np.matmul(a, b, out=c)}, 2 if ctx.quick else 3,
                                      block_time=0.2)["cpu"]
        transfer_ms = 3 * n * n * 4 / (ASSUMED_LINK_GBPS * 1e9) * 1e3
        g_cpu, g_tot, g_kernel, g_speed = GUIDE_MPS[n]
        if gpu is not None:
            tot, kern = gpu(a, b)
            speed = cpu_ms / tot
            res.claim(f"GEMM N = {n}: offload speedup (with copies)", f"{g_speed}x (M5 Max: CPU {g_cpu} ms, "
                      f"GPU {g_tot} ms)", f"{speed:.2f}x ({gpu_name}: {tot:.2f} ms; CPU {cpu_ms:.2f} ms, "
                      f"{_cpu_rate(ctx, n, cpu_ms)})",
                      (speed >= 1) == (g_speed >= 1), "" if (speed >= 1) == (g_speed >= 1) else
                      "offload " + ("pays" if speed >= 1 else "does not pay") + " here, unlike the guide's row")
            gpu_cells = f"{tot:.2f} ms | " + (f"{kern:.2f} ms" if kern is not None else "n/a") + f" | {speed:.2f}x"
        else:
            res.claim(f"GEMM N = {n}: offload speedup (with copies)", f"{g_speed}x (CPU {g_cpu} ms, GPU {g_tot} ms)",
                      f"not measured: no usable GPU; CPU np.matmul {cpu_ms:.2f} ms ({_cpu_rate(ctx, n, cpu_ms)}), "
                      "napkin transfer floor "
                      f"{transfer_ms:.2f} ms", None, f"unavailable: {no_gpu}" if n == sizes[0] else
                      "unavailable: no usable GPU (the reason is on the first row)")
            gpu_cells = "unavailable | unavailable | n/a"
        lines.append(f"| {n} | {cpu_ms:.2f} ms | {gpu_cells} | {transfer_ms:.2f} ms (napkin) |")
        numbers[n] = {"cpu_ms": cpu_ms, "transfer_ms_napkin": transfer_ms}
        bar.step(f"N = {n}")
    bar.close()
    res.tables = [f"GPU path: {gpu_name if gpu is not None else 'none (' + no_gpu + ')'}. The CPU column uses "
                  "NumPy's BLAS on its default threads. The napkin column is arithmetic, not a measurement: "
                  f"3 N^2 float32 values over an assumed {ASSUMED_LINK_GBPS:g} GB/s link; an offload pays only "
                  "when the GPU kernel plus that transfer beats the CPU column.", ""] + lines
    res.numbers = {"sizes": numbers, "gpu": gpu_name, "no_gpu_reason": no_gpu}
    if ctx.plots_enabled:
        from .report import save_line_plot
        series = {"np.matmul here (CPU)": [numbers[n]["cpu_ms"] for n in sizes],
                  "guide: mps_matmul with copies (M5 Max)": [GUIDE_MPS[n][1] for n in sizes],
                  f"napkin: transfer at {ASSUMED_LINK_GBPS:g} GB/s": [numbers[n]["transfer_ms_napkin"] for n in sizes]}
        res.plots.append(save_line_plot(ctx.path("offload.png"), sizes, series, "GEMM: CPU here vs offload",
                                        "N", "ms"))
    return res
