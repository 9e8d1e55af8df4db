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
Writes benchmarks/results/bench_checkpoint.md (or --out).
"""
from __future__ import annotations

import math
import tracemalloc

import numpy as np

import _common as C

from tinytorch import native  # noqa: E402  (path set up by _common)
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.layers import Sequential  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.core.transformers import TransformerBlock  # noqa: E402
from tinytorch.extensions import checkpoint_sequential  # noqa: E402

HEADS = 4


def build(L, D, seed=0):
    tt_random.manual_seed(seed)
    return Sequential([TransformerBlock(D, HEADS) for _ in range(L)])


def run(model, x, segments, checkpoint_last=True):
    out = model(x) if segments is None else checkpoint_sequential(model, segments, x,
                                                                  checkpoint_last=checkpoint_last)
    out.backward(np.ones(out.shape, np.float32) / out.size)


def runtime_stats():
    if not native.available():
        return None
    try:
        return native.memory_stats()
    except Exception:  # noqa: BLE001 - counters are optional
        return None


def peak_memory(model, x, segments, checkpoint_last=True):
    """(tracemalloc peak bytes above the start, runtime peak bytes above the start or None)."""
    if native.available():
        try:
            native.reset_peak_memory()
        except Exception:  # noqa: BLE001
            pass
    rt0 = runtime_stats()
    tracemalloc.start()
    tracemalloc.reset_peak()
    start, _ = tracemalloc.get_traced_memory()
    run(model, x, segments, checkpoint_last)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rt1 = runtime_stats()
    rt = None if rt0 is None or rt1 is None else max(0, rt1["peak_bytes"] - rt0["bytes_in_use"])
    return peak - start, rt


def set_trainable(model, flag):
    for _, p in model.named_parameters():
        p.requires_grad = flag
        p.grad = None


def grads(model, x, segments):
    set_trainable(model, True)
    x.grad = None
    run(model, x, segments)
    return [x.grad.copy()] + [p.grad.copy() for _, p in model.named_parameters()]


def measure(L, T, D, repeats):
    model = build(L, D)
    x = Tensor(np.random.default_rng(1).standard_normal((1, T, D)).astype(np.float32), requires_grad=True)
    seg = max(1, round(math.sqrt(L)))
    row = {"L": L, "segments": seg}
    for label, segments in (("plain", None), ("ckpt", seg)):
        set_trainable(model, False)
        row[f"act_{label}"], row[f"rt_{label}"] = peak_memory(model, x, segments)
        set_trainable(model, True)
        row[f"train_{label}"], _ = peak_memory(model, x, segments)
    set_trainable(model, False)
    row["act_ckpt_pt"], _ = peak_memory(model, x, seg, checkpoint_last=False)
    set_trainable(model, True)
    times = C.time_steps({"plain": lambda: run(model, x, None), "ckpt": lambda: run(model, x, seg)},
                         steps=1, rounds=repeats, warmup=0)  # alternating, so load drift hits both
    row["t_plain"], row["t_ckpt"] = (float(np.median(times[k])) / 1e3 for k in ("plain", "ckpt"))
    g_plain, g_ckpt = grads(model, x, None), grads(model, x, seg)
    row["grad_diff"] = max(float(np.max(np.abs(a - b))) for a, b in zip(g_plain, g_ckpt))
    row["grad_scale"] = max(float(np.max(np.abs(a))) for a in g_plain)
    return row


def per_block_fit(points=((64, 64), (128, 64), (64, 128), (128, 128))):
    """Fit stored bytes per block = a*T*D + b*H*T^2 from 1- and 3-block stacks (frozen weights)."""
    rows, ys = [], []
    for T, D in points:
        peaks = []
        for L in (1, 3):
            model = build(L, D)
            set_trainable(model, False)
            x = Tensor(np.random.default_rng(2).standard_normal((1, T, D)).astype(np.float32), requires_grad=True)
            peaks.append(peak_memory(model, x, None)[0])
        rows.append([T * D, HEADS * T * T])
        ys.append((peaks[1] - peaks[0]) / 2)
    coef, *_ = np.linalg.lstsq(np.array(rows, float), np.array(ys, float), rcond=None)
    return coef  # bytes per (T*D) and per (H*T^2)


def model_numbers(coef, L, T, D, H):
    """(standard bytes, checkpointed bytes, compute overhead) predicted by the fitted model."""
    a, b = coef
    block = a * T * D + b * H * T * T
    s = max(1, round(math.sqrt(L)))
    per_seg = math.ceil(L / s)
    standard = L * block
    # boundaries + the activations of the one segment being recomputed (every segment is
    # checkpointed, the last one included: checkpoint_sequential's default here)
    ckpt = s * T * D * 4 + per_seg * block
    overhead = 1.0 / 3.0  # every block runs forward once more; backward costs about two forwards
    return standard, ckpt, overhead


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
