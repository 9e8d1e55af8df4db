"""bench_gemm.py -- float32 GEMM: tinytorch's SIMD kernel against the anchors, same run.

    PYTHONPATH=python python benchmarks/bench_gemm.py            # full run (~10 min)
    PYTHONPATH=python python benchmarks/bench_gemm.py --quick    # a smoke run

Measures, on 1 and 2 threads, C = A @ B for square N = 256 .. 4096 (GFLOP/s = 2 N^3 / t):
  * tinytorch   tt_sgemm on the active ISA into a preallocated C (the kernel itself), and
                simd_matmul(a, b) with a fresh output (what a caller pays for allocation);
  * OpenBLAS    NumPy's matmul with out=, limited to the same thread count (threadpoolctl);
                the BLAS kernel NumPy runs is reported (OPENBLAS_CORETYPE and friends are
                taken as the environment sets them);
  * PyTorch     torch.matmul with out= on CPU, same threads (when installed);
and the ceilings: the FMA peak of a register-only loop (benchmarks/peak.c) per thread
count. The classic scorecard -- interpreted loop, scalar C, blocked scalar, SIMD, BLAS --
is measured at sizes each can finish in seconds. Each contender is timed in blocks, and
rounds cycle through the contenders (medians), so load from other processes on a shared
machine hits all alike while no library runs beside another's still-spinning thread
pool (OpenBLAS workers spin ~0.1 s after a call, which halved the 2-thread speed of
whoever ran next when calls were interleaved one by one). The whole measurement is
repeated (--runs) and the spread between runs is reported.

Writes benchmarks/results/bench_gemm.md and bench_gemm.png (GFLOP/s vs N), and
bench_gemm_scorecard.png.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import time

import numpy as np

import _common as C

from tinytorch import _native, native  # noqa: E402  (path set up by _common)
from tinytorch.core import acceleration as acc  # noqa: E402
from tinytorch.extensions.simd_ops import simd_matmul  # noqa: E402


def sgemm_into(kernels, a, b, c):
    n, k = a.shape
    m = b.shape[1]
    return lambda: kernels.sgemm(0, 0, n, m, k, 1.0, a.ctypes.data, k, b.ctypes.data, m, 0.0,
                                 c.ctypes.data, m)


def run_sizes(kernels, sizes, threads, rounds) -> dict:
    """{(threads, n): {contender: GFLOP/s}}"""
    results = {}
    rng = np.random.default_rng(0)
    for nt in threads:
        with C.Threads(nt):
            for n in sizes:
                a = rng.standard_normal((n, n), dtype=np.float32)
                b = rng.standard_normal((n, n), dtype=np.float32)
                c = np.empty((n, n), np.float32)
                contenders = {"tinytorch": sgemm_into(kernels, a, b, c),
                              "tinytorch_fresh": lambda: simd_matmul(a, b),
                              "openblas": lambda: np.matmul(a, b, out=c)}
                if C.torch is not None:
                    ta, tb, tc = C.torch.from_numpy(a), C.torch.from_numpy(b), C.torch.empty(n, n)
                    contenders["torch"] = lambda: C.torch.matmul(ta, tb, out=tc)
                secs = C.measure_rounds(contenders, rounds, block_time=0.3 if n <= 1024 else 0.6)
                flops = 2.0 * n ** 3
                results[(nt, n)] = {name: flops / s / 1e9 for name, s in secs.items()}
                row = results[(nt, n)]
                print(f"  threads={nt} N={n:5d}  tinytorch {row['tinytorch']:6.1f}  "
                      f"openblas {row['openblas']:6.1f}  ratio {row['tinytorch'] / row['openblas']:.3f}"
                      + (f"  torch {row['torch']:6.1f}" if "torch" in row else ""), flush=True)
    return results


def python_loop_gflops(n: int) -> float:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).tolist()
    b = rng.standard_normal((n, n)).tolist()
    t0 = time.perf_counter()
    c = [[0.0] * n for _ in range(n)]
    for i in range(n):
        ai, ci = a[i], c[i]
        for k in range(n):
            aik, bk = ai[k], b[k]
            for j in range(n):
                ci[j] += aik * bk[j]
    return 2.0 * n ** 3 / (time.perf_counter() - t0) / 1e9


def scorecard(kernels, quick: bool) -> list[tuple]:
    """(name, N, GFLOP/s) for the classic ladder, all on one thread."""
    rows = []
    n_py = 48 if quick else 96
    rows.append(("pure-Python loop (ikj, lists)", n_py, python_loop_gflops(n_py)))
    rng = np.random.default_rng(2)
    n_ref = 256 if quick else 512
    a = rng.standard_normal((n_ref, n_ref), dtype=np.float32)
    c = np.empty_like(a)
    f = _native.f32_ptr
    ref = lambda: _native.check(_native.lib.tt_sgemm_reference(  # noqa: E731
        0, 0, n_ref, n_ref, n_ref, 1.0, f(a), n_ref, f(a), n_ref, 0.0, f(c), n_ref))
    t = C.measure_rounds({"ref": ref}, 2)["ref"]
    rows.append(("scalar C triple loop (tt_sgemm_reference)", n_ref, 2.0 * n_ref ** 3 / t / 1e9))
    n = 512 if quick else 1024
    a = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty_like(a)
    active = native.isa()
    with C.Threads(1):
        try:
            native.set_isa("scalar")
            t = C.measure_rounds({"s": sgemm_into(kernels, a, a, c)}, 2)["s"]
            rows.append(("blocked + packed, scalar micro-kernel (ISA scalar)", n, 2.0 * n ** 3 / t / 1e9))
        finally:
            native.set_isa(active)
        secs = C.measure_rounds({"simd": sgemm_into(kernels, a, a, c),
                                 "blas": lambda: np.matmul(a, a, out=c)}, 3)
    rows.append((f"blocked + packed, SIMD micro-kernel (ISA {active})", n, 2.0 * n ** 3 / secs["simd"] / 1e9))
    rows.append(("OpenBLAS via NumPy", n, 2.0 * n ** 3 / secs["blas"] / 1e9))
    return rows


def plot(all_runs, sizes, threads, peaks, path_png, score, path_score):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5), squeeze=False)
    for ax, nt in zip(axes[0], threads):
        labels = {"tinytorch": "tinytorch (into C)", "openblas": "OpenBLAS via NumPy",
                  "torch": "PyTorch", "tinytorch_fresh": "tinytorch (fresh output)"}
        for name, style in [("tinytorch", "o-"), ("openblas", "s--"), ("torch", "^:"),
                            ("tinytorch_fresh", "x-")]:
            ys = [np.median([run[(nt, n)][name] for run in all_runs]) for n in sizes
                  if name in all_runs[0][(nt, n)]]
            if len(ys) == len(sizes):
                ax.plot(sizes, ys, style, label=labels[name])
        for isa, g in peaks.get(nt, {}).items():
            ax.axhline(g, color="gray", lw=1, ls="-.")
            ax.text(sizes[0], g * 1.01, f"FMA peak ({isa}, measured)", fontsize=8, color="gray")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes], rotation=45)
        ax.set_xlabel("N (square float32 GEMM)")
        ax.set_ylabel("GFLOP/s (median)")
        ax.set_title(f"{nt} thread{'s' if nt > 1 else ''}")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path_png, dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.8))
    names = [f"{r[0]}\n(N={r[1]})" for r in score]
    ax.barh(names[::-1], [r[2] for r in score][::-1], color="tab:blue")
    ax.set_xscale("log")
    ax.set_xlabel("GFLOP/s, 1 thread (log scale)")
    for i, r in enumerate(score[::-1]):
        ax.text(r[2] * 1.1, i, f"{r[2]:.3g}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(path_score, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*",
                    default=[256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=2, help="repeat the whole measurement")
    ap.add_argument("--quick", action="store_true", help="small sizes, one run")
    ap.add_argument("--out", default=C.RESULTS)
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.rounds, args.runs = [256, 512], 2, 1
    kernels, _ = C.require_native()
    os.makedirs(args.out, exist_ok=True)

    print("machine:\n" + "\n".join(C.machine_lines()))
    peaks = {nt: C.fma_peak(nt) for nt in args.threads}
    print("FMA peak:", peaks)
    all_runs = []
    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs}")
        all_runs.append(run_sizes(kernels, args.sizes, args.threads, args.rounds))
    score = scorecard(kernels, args.quick)

    lines = ["# GEMM benchmark (float32, square N x N)", "",
             "Command: `PYTHONPATH=python python benchmarks/bench_gemm.py"
             + (" --quick" if args.quick else "") + "`", "", "Machine:", ""]
    lines += C.machine_lines() + [""]
    lines += ["Measured ceilings (register-only FMA loop, benchmarks/peak.c):", ""]
    for nt in args.threads:
        lines.append(f"- {nt} thread(s): " + (", ".join(f"{isa} {g:.0f} GFLOP/s" for isa, g in peaks[nt].items())
                                              or "not measured (no C compiler)"))
    lines += ["", f"GFLOP/s = 2 N^3 / median time; each contender timed in blocks after a pause, rounds cycling through the contenders; {args.runs} full "
              "run(s), the table shows the median of the runs and the ratio's range across runs.", ""]
    for nt in args.threads:
        peak = max(peaks[nt].values()) if peaks[nt] else None
        rows = []
        for n in args.sizes:
            per_run = [r[(nt, n)] for r in all_runs]
            med = {k: float(np.median([p[k] for p in per_run])) for k in per_run[0]}
            ratios = [p["tinytorch"] / p["openblas"] for p in per_run]
            row = [n, med["tinytorch"], med["tinytorch_fresh"], med["openblas"],
                   med.get("torch", float("nan")), f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"]
            row.append(f"{med['tinytorch'] / med['torch']:.2f}" if "torch" in med else "n/a")
            row.append(f"{100 * med['tinytorch'] / peak:.0f}%" if peak else "n/a")
            rows.append(row)
        lines += [f"## {nt} thread{'s' if nt > 1 else ''}", ""]
        lines += C.table(["N", "tinytorch", "tinytorch (fresh out)", "OpenBLAS", "PyTorch",
                          "tinytorch / OpenBLAS (range)", "tinytorch / PyTorch", "% of FMA peak"], rows)
        lines.append("")
    lines += ["## Targets", ""]
    for nt in args.threads:
        ratios = {n: float(np.median([r[(nt, n)]["tinytorch"] / r[(nt, n)]["openblas"] for r in all_runs]))
                  for n in args.sizes if 256 <= n <= 4096}
        if ratios:
            worst = min(ratios, key=ratios.get)
            lines.append(f"- {nt} thread(s): tinytorch / OpenBLAS at N = 256..4096 is "
                         f"{min(ratios.values()):.2f}..{max(ratios.values()):.2f} (median of runs; "
                         f"lowest at N={worst}; target >= 0.95 everywhere, > 1 somewhere)")
    if 2048 in args.sizes and 1 in args.threads and peaks.get(1):
        g = float(np.median([r[(1, 2048)]["tinytorch"] for r in all_runs]))
        lines.append(f"- N=2048, 1 thread: {g:.1f} GFLOP/s = {100 * g / max(peaks[1].values()):.0f}% "
                     "of the measured FMA peak (target >= 75%)")
    lines += ["", "## Scorecard (1 thread)", ""]
    lines += C.table(["implementation", "N", "GFLOP/s"], [[r[0], r[1], r[2]] for r in score])
    lines += ["", "![GFLOP/s vs N](bench_gemm.png)", "", "![scorecard](bench_gemm_scorecard.png)", ""]
    md = os.path.join(args.out, "bench_gemm.md")
    with open(md, "w") as f:
        f.write("\n".join(lines))
    plot(all_runs, args.sizes, args.threads, peaks, os.path.join(args.out, "bench_gemm.png"),
         score, os.path.join(args.out, "bench_gemm_scorecard.png"))
    print("\n".join(lines))
    print(f"wrote {md}")


if __name__ == "__main__":
    main()
