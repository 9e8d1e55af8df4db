"""bench_gemm.py -- float32 GEMM: tinytorch's SIMD kernel against the anchors, same run.

    python benchmarks/bench_gemm.py                        # full run (~10 min)
    python benchmarks/bench_gemm.py --quick --out /tmp     # a smoke run

Measures, on 1 and 2 threads, C = A @ B for square N = 256 .. 4096 (GFLOP/s = 2 N^3 / t):
  * tinytorch   tt_sgemm on the active ISA into a preallocated C (the kernel itself), and
                simd_matmul(a, b) with a fresh output (what a caller pays for allocation);
  * OpenBLAS    NumPy's matmul with out=, limited to the same thread count (threadpoolctl);
                the BLAS kernel NumPy runs is reported (OPENBLAS_CORETYPE and friends are
                taken as the environment sets them);
  * PyTorch     torch.matmul with out= on CPU, same threads (when installed);
and the ceiling: the FMA peak of a register-only loop (tinytorch/scorecard/peak.c) for every thread
count up to the largest asked for, every ISA the CPU enables, threads pinned and not, per
wall-clock and per CPU second (the latter is what load from other processes cannot lower); the
"% of FMA peak" of a thread count is taken against the best of those at that many threads or
fewer, for tinytorch and OpenBLAS alike. A figure above that ceiling means the ceiling was measured too low (load from other
processes, typically): the peak is then measured again after the runs, and a figure still
above it is printed as ">100% (peak under-measured)" with a warning, never as a fraction.

The classic scorecard -- interpreted loop, scalar C, blocked scalar, SIMD, BLAS -- is measured
at sizes each can finish in seconds. Each contender is timed in blocks, and rounds cycle
through the contenders (medians; _common.measure_rounds), so load from other processes on a
shared machine hits all alike while no library runs beside another's still-spinning thread
pool (OpenBLAS workers spin ~0.1 s after a call, which halved the 2-thread speed of whoever
ran next when calls were interleaved one by one). The whole measurement is repeated (--runs)
and the spread between runs is reported.

Writes build/benchmarks/bench_gemm.md (benchmarks/results/ with --save, or --out) and, next to
it, <report>.png (GFLOP/s vs N) and <report>_scorecard.png, named after the report.
"""
from __future__ import annotations

import os
import sys

import numpy as np

import _common as C

from tinytorch.extensions.simd_ops import simd_matmul  # noqa: E402  (path set up by _common)
from tinytorch.scorecard.gemm import ladder, sgemm_into  # noqa: E402  (one copy of the ladder)

torch = C.optional_torch()


def run_sizes(lib, sizes, threads, rounds) -> dict:
    """{(threads, n): {contender: GFLOP/s}}"""
    results = {}
    rng = np.random.default_rng(0)
    for nt in threads:
        with C.Threads(nt):
            for n in sizes:
                a = rng.standard_normal((n, n), dtype=np.float32)
                b = rng.standard_normal((n, n), dtype=np.float32)
                c = np.empty((n, n), np.float32)
                contenders = {"tinytorch": sgemm_into(lib, a, b, c),
                              "tinytorch_fresh": lambda: simd_matmul(a, b),
                              "openblas": lambda: np.matmul(a, b, out=c)}
                if torch is not None:
                    ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.empty(n, n)
                    contenders["torch"] = lambda: torch.matmul(ta, tb, out=tc)
                secs = C.measure_rounds(contenders, rounds, block_time=0.3 if n <= 1024 else 0.6)
                flops = 2.0 * n ** 3
                results[(nt, n)] = {name: flops / s / 1e9 for name, s in secs.items()}
                row = results[(nt, n)]
                print(f"  threads={nt} N={n:5d}  tinytorch {row['tinytorch']:6.1f}  "
                      f"openblas {row['openblas']:6.1f}  ratio {row['tinytorch'] / row['openblas']:.3f}"
                      + (f"  torch {row['torch']:6.1f}" if "torch" in row else ""), flush=True)
    return results


def scorecard(lib, quick: bool) -> list[tuple]:
    """(name, N, GFLOP/s) for the classic ladder, all on one thread (tinytorch.scorecard.gemm)."""
    n_py, n_ref, n = (48, 256, 512) if quick else (96, 512, 1024)
    return [row[:3] for row in ladder(lib, n_py, n_ref, n)]


def plot(all_runs, sizes, threads, ceilings, path_png, score, path_score):
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
        g, isa = ceilings[nt]
        if g:
            ax.axhline(g, color="gray", lw=1, ls="-.")
            ax.text(sizes[0], g * 1.01, f"FMA peak ({isa}, measured)", fontsize=8, color="gray")
            ax.set_ylim(top=max(ax.get_ylim()[1], g * 1.08))  # keep the label inside
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes)
        ax.set_xticklabels([str(s) for s in sizes], rotation=45)
        ax.set_xlabel("N (square float32 GEMM)")
        ax.set_ylabel("GFLOP/s (median)")
        ax.set_title(f"{nt} thread{'s' if nt > 1 else ''}")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    C.save_figure(fig, path_png, dpi=110)  # atomic: a kill never leaves half a PNG
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(8, 3.8))
    names = [f"{r[0]}\n(N={r[1]})" for r in score]
    ax.barh(names[::-1], [r[2] for r in score][::-1], color="tab:blue")
    ax.set_xscale("log")
    ax.set_xlabel("GFLOP/s, 1 thread (log scale)")
    for i, r in enumerate(score[::-1]):
        ax.text(r[2] * 1.1, i, f"{r[2]:.3g}", va="center", fontsize=8)
    fig.tight_layout()
    C.save_figure(fig, path_score, dpi=110)  # atomic: a kill never leaves half a PNG
    plt.close(fig)


def peak_lines(peaks, threads) -> list[str]:
    lines = []
    for nt in range(1, max(threads) + 1):
        per_isa = peaks.get(nt, {})
        lines.append(f"- {nt} thread(s): " + ("; ".join(
            f"{isa} {max(d.values()):.0f} GFLOP/s (" + ", ".join(f"{p} {g:.0f}" for p, g in d.items()) + ")"
            for isa, d in per_isa.items()) or "not measured (no C compiler, or not x86-64)"))
    return lines


def size_range(sizes) -> str:
    """The sizes a line speaks for, as measured: '256, 512' for a few, '256..4096' for many."""
    sizes = sorted(sizes)
    return ", ".join(map(str, sizes)) if len(sizes) <= 3 else f"{sizes[0]}..{sizes[-1]}"


def over_ceiling(all_runs, ceilings) -> list[str]:
    """'threads=2 N=512 openblas 311 > 174' for every median figure above its thread count's ceiling."""
    found = []
    for (nt, n), row in all_runs[0].items():
        ceiling = ceilings[nt][0]
        for name in row:
            g = float(np.median([r[(nt, n)][name] for r in all_runs]))
            if ceiling and g > ceiling:
                found.append(f"threads={nt} N={n} {name} {g:.0f} > {ceiling:.0f} GFLOP/s")
    return found


def main():
    ap = C.arguments(__doc__, "bench_gemm.md", threads=[1, 2],
                     quick=dict(sizes=[256, 512], rounds=2, runs=1, peak_seconds=0.1, peak_trials=2))
    ap.add_argument("--sizes", type=int, nargs="*",
                    default=[256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=2, help="repeat the whole measurement")
    ap.add_argument("--peak-seconds", type=float, default=0.25, help="peak.c's window per trial")
    ap.add_argument("--peak-trials", type=int, default=3, help="peak.c's trials (the best is kept)")
    args = C.parse(ap)
    peak_args = dict(seconds=args.peak_seconds, trials=args.peak_trials)
    lib = C.require_native()

    print("machine:\n" + "\n".join(C.machine_lines(args.threads)))
    peaks = C.fma_peaks(max(args.threads), **peak_args)
    print("FMA peak (GFLOP/s by threads and ISA):", peaks)
    all_runs = []
    for run in range(args.runs):
        print(f"run {run + 1}/{args.runs}")
        all_runs.append(run_sizes(lib, args.sizes, args.threads, args.rounds))
    score = scorecard(lib, args.quick)

    ceilings = {nt: C.fma_ceiling(peaks, nt) for nt in args.threads}
    remeasured = over_ceiling(all_runs, ceilings)
    if remeasured:  # most likely load during the first measurement: give the peak a second chance
        print("above the FMA peak, measuring it again: " + "; ".join(remeasured))
        peaks = C.merge_peaks(peaks, C.fma_peaks(max(args.threads), **peak_args))
        ceilings = {nt: C.fma_ceiling(peaks, nt) for nt in args.threads}
    still_over = over_ceiling(all_runs, ceilings)

    lines = ["Measured ceilings (register-only FMA loop, tinytorch/scorecard/peak.c: all threads at once over one "
             "time window; per wall-clock second with the threads free and pinned, and per CPU second pinned, "
             "which load from other processes cannot lower; the best of each over the trials):", ""]
    lines += peak_lines(peaks, args.threads)
    lines += ["", "\"% of FMA peak\" is against the best ISA at that many threads or fewer."]
    if remeasured:
        lines += ["", "The peak was measured again after the runs, because figures exceeded the first "
                  "measurement (" + "; ".join(remeasured) + "); the larger figure of the two is shown."]
    if still_over:
        lines += ["", "**Warning: figures above the measured FMA peak** (the peak is under-measured on this "
                  "run, e.g. the machine was loaded while it ran; those cells read \">100%\"): "
                  + "; ".join(still_over) + "."]
    lines += ["", f"GFLOP/s = 2 N^3 / median time; each contender timed in blocks after a pause, rounds cycling "
              f"through the contenders; {args.runs} full run(s), the table shows the median of the runs and the "
              "ratio's range across runs.", ""]
    for nt in args.threads:
        ceiling = ceilings[nt][0]
        rows = []
        for n in args.sizes:
            per_run = [r[(nt, n)] for r in all_runs]
            med = {k: float(np.median([p[k] for p in per_run])) for k in per_run[0]}
            ratios = [p["tinytorch"] / p["openblas"] for p in per_run]
            row = [n, med["tinytorch"], med["tinytorch_fresh"], med["openblas"],
                   med.get("torch", float("nan")), f"{np.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"]
            row.append(f"{med['tinytorch'] / med['torch']:.2f}" if "torch" in med else "n/a")
            row.append(C.percent_of_peak(med["tinytorch"], ceiling))
            row.append(C.percent_of_peak(med["openblas"], ceiling))
            rows.append(row)
        lines += [f"## {nt} thread{'s' if nt > 1 else ''}", ""]
        lines += C.table(["N", "tinytorch", "tinytorch (fresh out)", "OpenBLAS", "PyTorch",
                          "tinytorch / OpenBLAS (range)", "tinytorch / PyTorch",
                          f"tinytorch, % of FMA peak ({ceilings[nt][1]})",
                          f"OpenBLAS, % of FMA peak ({ceilings[nt][1]})"], rows)
        lines.append("")
    lines += ["## Targets", ""]
    for nt in args.threads:
        ratios = {n: float(np.median([r[(nt, n)]["tinytorch"] / r[(nt, n)]["openblas"] for r in all_runs]))
                  for n in args.sizes if 256 <= n <= 4096}
        if ratios:
            worst = min(ratios, key=ratios.get)
            lines.append(f"- {nt} thread(s): tinytorch / OpenBLAS at N = {size_range(ratios)} is "
                         f"{min(ratios.values()):.2f}..{max(ratios.values()):.2f} (median of runs; "
                         f"lowest at N={worst}; target >= 0.95 everywhere, > 1 somewhere)")
    if 2048 in args.sizes and 1 in args.threads and ceilings[1][0]:
        g = float(np.median([r[(1, 2048)]["tinytorch"] for r in all_runs]))
        lines.append(f"- N=2048, 1 thread: {g:.1f} GFLOP/s = {C.percent_of_peak(g, ceilings[1][0])} "
                     f"of the measured FMA peak ({ceilings[1][1]}; target >= 75%)")
    lines += ["", "## Scorecard (1 thread)", ""]
    lines += C.table(["implementation", "N", "GFLOP/s"], [[r[0], r[1], r[2]] for r in score])
    # the plots are named after the report, so a report under another name (--out) never
    # overwrites the committed bench_gemm.md's plots
    stem = os.path.splitext(os.path.basename(args.report))[0]
    png, score_png = f"{stem}.png", f"{stem}_scorecard.png"
    lines += ["", f"![GFLOP/s vs N]({png})", "", f"![scorecard]({score_png})", ""]
    text = C.write_report(args.report, "GEMM benchmark (float32, square N x N)", lines, threads=args.threads)
    folder = os.path.dirname(os.path.abspath(args.report))
    plot(all_runs, args.sizes, args.threads, ceilings, os.path.join(folder, png),
         score, os.path.join(folder, score_png))
    print(text)
    if still_over:
        print("WARNING: figures above the measured FMA peak (peak under-measured): " + "; ".join(still_over),
              file=sys.stderr)


if __name__ == "__main__":
    main()
