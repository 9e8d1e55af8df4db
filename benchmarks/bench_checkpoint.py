"""Activation checkpointing scorecard: peak memory and time of forward + backward through a
stack of L pre-LN transformer blocks, with and without ``checkpoint_sequential``.

Measured here (batch 1, T tokens, width D, 4 heads, L = 16, 32, 64; default T = D = 256):
  * peak memory during forward + backward, from ``tracemalloc`` (NumPy arrays are traced) and
    from the runtime's own allocation counters (``tinytorch.native.memory_stats()``) when the
    library is loaded, in two settings:
      - activations: block weights frozen, the input requires grad, so the peak is the
        stored activations plus the transient backward buffers (what checkpointing targets);
      - training: weights trainable, so parameter gradients (the same in both runs) add in;
  * time of forward + backward (median of --repeats runs, weights trainable);
  * for comparison at the same L, PyTorch's schedule (the last segment not checkpointed);
  * gradient equality: largest difference of the input and parameter gradients.
  Checkpointing uses round(sqrt(L)) segments.

Model (not a measurement): per-block activation bytes are fitted as ``a*T*D + b*H*T^2`` from
small measured stacks, and the guide's configuration (T = 2048, D = 4096, H = 32) is
evaluated with that fit: standard = L * block; checkpointed = segments boundary tensors + the
last segment's and one recomputed segment's activations; time overhead = one extra forward of
the checkpointed blocks, taking backward as twice a forward.

Single-threaded by default (--threads): on a shared 2-core machine, spinning BLAS/OpenMP
threads distort the timings.

Usage: python benchmarks/bench_checkpoint.py [--T 256] [--D 256] [--layers 16 32 64] [--repeats 3]
       [--threads 1] [--quick] [--out PATH]
Writes build/benchmarks/bench_checkpoint.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import _common as C

from tinytorch.scorecard import checkpoint as checkpoint_measure  # noqa: E402  (path set up by _common)

# The measurement lives in the package (the scorecard's "checkpoint" section runs it too).
HEADS = checkpoint_measure.HEADS
build = checkpoint_measure.build
run = checkpoint_measure.run_stack
peak_memory = checkpoint_measure.peak_memory
measure = checkpoint_measure.measure
per_block_fit = checkpoint_measure.per_block_fit
model_numbers = checkpoint_measure.model_numbers


def model_table(coef, T=2048, D=4096, H=32, layers=(16, 32, 64)):
    a, b = coef
    block = a * T * D + b * H * T * T
    lines = ["| Layers | Standard (model) | Checkpointed, sqrt(L) segments (model) | Saved | Compute overhead (model) |",
             "|---:|---:|---:|---:|---:|"]
    for L in layers:
        standard, ckpt, overhead = model_numbers(coef, L, T, D, H)
        lines.append(f"| {L} | {standard / 1e9:.1f} GB | {ckpt / 1e9:.1f} GB | {100 * (1 - ckpt / standard):.1f} % | "
                     f"+{100 * overhead:.0f} % |")
    return block, "\n".join(lines)


def main():
    ap = C.arguments(__doc__, "bench_checkpoint.md", threads=1,
                     quick=dict(T=64, D=64, layers=[4, 9], repeats=1))
    ap.add_argument("--T", type=int, default=256)
    ap.add_argument("--D", type=int, default=256)
    ap.add_argument("--layers", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--repeats", type=int, default=3)
    args = C.parse(ap)
    with C.Threads(args.threads):
        run_and_report(args)


def run_and_report(args):
    rows = []
    for L in args.layers:
        print(f"L = {L} ...", flush=True)
        rows.append(measure(L, args.T, args.D, args.repeats))
        print(rows[-1], flush=True)

    def fmt_rt(v):
        return "n/a (runtime not loaded)" if v is None else f"{v / 1e6:.2f} MB"

    lines = [f"Stack of L pre-LN TransformerBlocks, batch 1, T = {args.T}, D = {args.D}, {HEADS} heads, "
             "float32; checkpoint_sequential with round(sqrt(L)) segments.", "",
             "| L | segments | Peak, activations: plain | checkpointed | reduction | (PyTorch's schedule) | "
             "Peak, training (with weight grads): plain | "
             "checkpointed | reduction | Time fwd+bwd: plain | checkpointed | overhead | max abs grad difference |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['L']} | {r['segments']} | {r['act_plain'] / 1e6:.1f} MB | {r['act_ckpt'] / 1e6:.1f} MB | "
            f"{100 * (1 - r['act_ckpt'] / r['act_plain']):.1f} % | "
            f"{r['act_ckpt_pt'] / 1e6:.1f} MB ({100 * (1 - r['act_ckpt_pt'] / r['act_plain']):.0f} %) | "
            f"{r['train_plain'] / 1e6:.1f} MB | "
            f"{r['train_ckpt'] / 1e6:.1f} MB | {100 * (1 - r['train_ckpt'] / r['train_plain']):.1f} % | "
            f"{r['t_plain'] * 1e3:.0f} ms | {r['t_ckpt'] * 1e3:.0f} ms | "
            f"{100 * (r['t_ckpt'] / r['t_plain'] - 1):+.0f} % | {r['grad_diff']:.1e} (of max {r['grad_scale']:.1e}) |")
    rt_lines = ["| L | runtime peak: plain | checkpointed |", "|---:|---:|---:|"]
    for r in rows:
        rt_lines.append(f"| {r['L']} | {fmt_rt(r['rt_plain'])} | {fmt_rt(r['rt_ckpt'])} |")
    table = "\n".join(lines)
    print(table)
    print("fitting the per-block model ...", flush=True)
    coef = per_block_fit()
    block, mtable = model_table(coef)
    check = ["| L | measured plain | model plain | measured checkpointed | model checkpointed |",
             "|---:|---:|---:|---:|---:|"]
    for r in rows:
        st, ck, _ = model_numbers(coef, r["L"], args.T, args.D, HEADS)
        check.append(f"| {r['L']} | {r['act_plain'] / 1e6:.1f} MB | {st / 1e6:.1f} MB | {r['act_ckpt'] / 1e6:.1f} MB | "
                     f"{ck / 1e6:.1f} MB |")
    check = "\n".join(check)
    print(check)
    print(mtable)
    C.write_report(args.report, "Activation checkpointing scorecard", [
        "## Measured on this machine", "", table, "",
        "\"Activations\" runs freeze the block weights (the input requires grad), so the peak is what "
        "checkpointing targets: stored activations plus transient backward buffers. \"Training\" runs include "
        "the parameter gradients, which are identical with and without checkpointing. Peaks are tracemalloc "
        "peaks above the level at the start of forward. \"PyTorch's schedule\" leaves the last segment "
        "un-checkpointed (`checkpoint_last=False`); the default checkpoints it too (see the model section). "
        f"Times are on {args.threads} thread(s) on a shared machine: expect +-20 % noise between runs.", "",
        "Runtime allocation counters (`tinytorch.native.memory_stats()`, peak above the bytes in use at the "
        "start; activations are NumPy arrays, so the runtime only sees its own scratch buffers):", "",
        "\n".join(rt_lines), "",
        "## Model (not a measurement): the guide's T = 2048, D = 4096, H = 32", "",
        f"Per-block activation bytes fitted on this code from small stacks: {coef[0]:.1f} bytes x T*D + "
        f"{coef[1]:.1f} bytes x H*T^2, i.e. {block / 1e9:.2f} GB per block at T = 2048, D = 4096, H = 32, "
        "batch 1 (attention scores dominate: no fused attention here).", "",
        mtable, "",
        "Checkpointed = sqrt(L) boundary tensors (T*D float32 each) + the activations of the one segment being "
        "recomputed (`checkpoint_sequential` checkpoints every segment by default, the last one included: the "
        "core engine keeps every op output reachable from the loss until the loss is dropped, so an "
        "un-checkpointed last segment would stay alive through the whole backward). Transient backward "
        "buffers are left out, so the model is a lower bound on the peak. Overhead = one extra forward of "
        "every block over a forward + backward costing three forwards.", "",
        "The same model evaluated at the measured size, against the measurement (activation runs):", "",
        check,
    ], threads=args.threads)


if __name__ == "__main__":
    main()
