"""bench_gelu.py -- fused bias + GELU (tanh): tinytorch's kernel against the anchors, same run.

    python benchmarks/bench_gelu.py                        # full run (~5 min)
    python benchmarks/bench_gelu.py --quick --out /tmp     # a smoke run

Measures y = gelu_tanh(x + bias) for x of shape rows x cols (float32), in milliseconds:
  * tinytorch fused   the native kernel of the active ISA into a preallocated y (the kernel),
                      and simd_fused_bias_gelu(x, b) with a fresh output (what a caller pays);
  * tinytorch scalar  the same fused loop on the portable scalar ISA;
  * PyTorch           torch.nn.functional.gelu(x + b, approximate="tanh") (eager; when installed);
  * NumPy unfused     the textbook expression 0.5 u (1 + tanh(sqrt(2/pi)(u + 0.044715 u^3)));
  * copy              np.copyto of the same bytes (read x, write y): the memory floor;
and the backward (grad_x and grad_bias) of tinytorch against PyTorch's gelu_backward kernel
plus its bias sum, and NumPy. A pure-Python loop is timed on a small input (per element).
Each contender is timed in blocks after a pause, rounds cycling through the contenders
(medians; see benchmarks/_common.py); the whole measurement repeats (--runs).

Targets checked in the report (not asserted): fused >= 3x faster than PyTorch and >= 6x
faster than unfused NumPy at 4096 x 768 on one thread; within 1.5x of the copy time at
16384 x 4096. Writes build/benchmarks/bench_gelu.md (benchmarks/results/ with --save, or --out) and bench_gelu.png next to it.
"""
from __future__ import annotations

import os

import numpy as np

import _common as C

from tinytorch import native  # noqa: E402  (path set up by _common)
from tinytorch._native import check, f32_ptr  # noqa: E402
from tinytorch.extensions.simd_ops import simd_fused_bias_gelu  # noqa: E402
from tinytorch.scorecard.gelu import (  # noqa: E402  (one copy of each contender)
    numpy_unfused, numpy_unfused_backward, python_loop_ns_per_element)

torch = C.optional_torch()

def run_shapes(lib, shapes, threads, rounds, with_scalar) -> dict:
    results = {}
    rng = np.random.default_rng(0)
    for nt in threads:
        with C.Threads(nt):
            for rows, cols in shapes:
                x = rng.standard_normal((rows, cols), dtype=np.float32)
                b = rng.standard_normal(cols, dtype=np.float32)
                g = rng.standard_normal((rows, cols), dtype=np.float32)
                y = np.empty_like(x)
                gx = np.empty_like(x)
                gb = np.empty(cols, np.float32)
                px, pb, pg, py, pgx, pgb = (f32_ptr(v) for v in (x, b, g, y, gx, gb))  # made once
                fwd = lambda: check(lib.tt_bias_gelu_forward(px, pb, py, rows, cols))  # noqa: E731
                bwd = lambda: check(lib.tt_bias_gelu_backward(px, pb, pg, pgx, pgb, rows, cols))  # noqa: E731
                big = rows * cols >= 2 ** 24
                contenders = {"fused": fwd, "fused_fresh": lambda: simd_fused_bias_gelu(x, b),
                              "copy": lambda: np.copyto(y, x),
                              "numpy": lambda: numpy_unfused(x, b),
                              "backward": bwd,
                              "numpy_backward": lambda: numpy_unfused_backward(x, b, g)}
                if torch is not None:
                    tx, tb, tg = torch.from_numpy(x), torch.from_numpy(b), torch.from_numpy(g)
                    F = torch.nn.functional
                    contenders["torch"] = lambda: F.gelu(tx + tb, approximate="tanh")
                    contenders["torch_backward"] = lambda: (
                        torch.ops.aten.gelu_backward(tg, tx + tb, approximate="tanh").sum(0))
                secs = C.measure_rounds(contenders, rounds, block_time=0.6 if big else 0.25)
                if with_scalar and nt == 1:
                    active = native.isa()
                    try:
                        native.set_isa("scalar")
                        secs["fused_scalar"] = C.measure_rounds({"s": fwd}, max(2, rounds // 2))["s"]
                    finally:
                        native.set_isa(active)
                results[(nt, rows, cols)] = {k: v * 1e3 for k, v in secs.items()}
                row = results[(nt, rows, cols)]
                print(f"  threads={nt} {rows}x{cols}: fused {row['fused']:.2f} ms  copy {row['copy']:.2f}"
                      f"  numpy {row['numpy']:.1f}" + (f"  torch {row['torch']:.2f}" if "torch" in row else ""),
                      flush=True)
    return results


def plot(all_runs, shapes, threads, path_png):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(threads), figsize=(6 * len(threads), 4.5), squeeze=False)
    sizes = [r * c for r, c in shapes]
    labels = {"fused": "tinytorch fused (into y)", "fused_fresh": "tinytorch fused (fresh y)",
              "fused_scalar": "tinytorch fused, scalar ISA", "torch": "PyTorch gelu(x + b)",
              "numpy": "NumPy unfused", "copy": "copy of the same bytes"}
    for ax, nt in zip(axes[0], threads):
        for name, style in [("fused", "o-"), ("fused_fresh", "x-"), ("fused_scalar", "d-."),
                            ("torch", "^:"), ("numpy", "s--"), ("copy", "k-")]:
            if name not in all_runs[0][(nt,) + shapes[0]]:
                continue
            ys = [np.median([run[(nt,) + s][name] for run in all_runs if name in run[(nt,) + s]])
                  for s in shapes]
            ax.plot(sizes, ys, style, label=labels[name])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes)
        ax.set_xticklabels([f"{r}x{c}" for r, c in shapes], rotation=30, fontsize=8)
        ax.set_xlabel("x shape (float32)")
        ax.set_ylabel("ms (median)")
        ax.set_title(f"bias + GELU forward, {nt} thread{'s' if nt > 1 else ''}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    C.save_figure(fig, path_png, dpi=110)  # atomic: a kill never leaves half a PNG
    plt.close(fig)


def main():
    ap = C.arguments(__doc__, "bench_gelu.md", threads=[1, 2],
                     quick=dict(shapes=[(256, 768), (4096, 768)], rounds=2, runs=1, copy_mib=64, py_elements=2000))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2)
    ap.set_defaults(shapes=[(1024, 768), (4096, 768), (4096, 3072), (16384, 4096)], copy_mib=381,
                    py_elements=20000)
    args = C.parse(ap)
    shapes = args.shapes
    lib = C.require_native()
    print("machine:\n" + "\n".join(C.machine_lines(args.threads)))
    bandwidth = C.copy_bandwidth(args.copy_mib * 2 ** 20)
    print(f"copy bandwidth: {bandwidth:.1f} GB/s")
    py_ns = python_loop_ns_per_element(args.py_elements)
    all_runs = [run_shapes(lib, shapes, args.threads, args.rounds, with_scalar=(run == 0))
                for run in range(args.runs)]

    def med(nt, shape, key):
        vals = [run[(nt,) + shape][key] for run in all_runs if key in run[(nt,) + shape]]
        return float(np.median(vals)) if vals else float("nan")

    def spread(nt, shape, a, b):
        rs = [run[(nt,) + shape][b] / run[(nt,) + shape][a] for run in all_runs if b in run[(nt,) + shape]]
        return f"{np.median(rs):.1f}x ({min(rs):.1f}-{max(rs):.1f})" if rs else "n/a"

    lines = ["Reference points measured in this run:", "",
             f"- copy bandwidth (np.copyto, {args.copy_mib} MiB, read + write bytes, 1 thread): {bandwidth:.1f} GB/s",
             f"- pure-Python loop (math.tanh per element): {py_ns:.0f} ns per element", "",
             f"Milliseconds, medians of per-contender blocks over rounds; {args.runs} full run(s), the "
             "table shows the median of the runs; speedups give the range across runs.", ""]
    for nt in args.threads:
        rows = []
        for shape in shapes:
            n = shape[0] * shape[1]
            fused = med(nt, shape, "fused")
            rows.append([f"{shape[0]}x{shape[1]}", fused, med(nt, shape, "fused_fresh"),
                         med(nt, shape, "fused_scalar") if nt == 1 else "", med(nt, shape, "torch"),
                         med(nt, shape, "numpy"), med(nt, shape, "copy"),
                         f"{8 * n / fused / 1e6:.1f}",
                         spread(nt, shape, "fused", "torch"), spread(nt, shape, "fused", "numpy"),
                         f"{fused / med(nt, shape, 'copy'):.2f}x"])
        lines += [f"## Forward, {nt} thread{'s' if nt > 1 else ''}", ""]
        lines += C.table(["shape", "fused", "fused (fresh y)", "fused, scalar ISA", "PyTorch",
                          "NumPy unfused", "copy", "fused GB/s", "speedup vs PyTorch",
                          "speedup vs NumPy", "fused / copy"], rows)
        lines.append("")
        rows = []
        for shape in shapes:
            rows.append([f"{shape[0]}x{shape[1]}", med(nt, shape, "backward"),
                         med(nt, shape, "torch_backward"), med(nt, shape, "numpy_backward"),
                         spread(nt, shape, "backward", "torch_backward"),
                         spread(nt, shape, "backward", "numpy_backward")])
        lines += [f"## Backward (grad_x and grad_bias), {nt} thread{'s' if nt > 1 else ''}", ""]
        lines += C.table(["shape", "tinytorch fused", "PyTorch gelu_backward + sum",
                          "NumPy unfused", "speedup vs PyTorch", "speedup vs NumPy"], rows)
        lines.append("")
    if (1,) + (4096, 768) in all_runs[0]:
        s = (4096, 768)
        lines += ["## Targets (1 thread)", "",
                  f"- 4096x768: fused {med(1, s, 'fused'):.2f} ms; vs PyTorch {spread(1, s, 'fused', 'torch')} "
                  f"(target >= 3x); vs NumPy unfused {spread(1, s, 'fused', 'numpy')} (target >= 6x)"]
        if (1, 16384, 4096) in all_runs[0]:
            big = (16384, 4096)
            lines.append(f"- 16384x4096: fused / copy = {med(1, big, 'fused') / med(1, big, 'copy'):.2f} "
                         "(target <= 1.5)")
        lines.append("")
    lines += ["![ms vs size](bench_gelu.png)", ""]
    text = C.write_report(args.report, "Fused bias + GELU (tanh) benchmark (float32)", lines, threads=args.threads)
    plot(all_runs, shapes, args.threads, os.path.join(os.path.dirname(os.path.abspath(args.report)), "bench_gelu.png"))
    print(text)


if __name__ == "__main__":
    main()
