"""Where one GPT training step spends its time: a cProfile table of bench_gpt.py's step, or of
GPT-2 small's (``--size gpt2-small``).

Runs the step of bench_gpt.py (same model, batch and AdamW) a few times under cProfile and
groups the internal time ("tottime": time in the function itself, not its callees) by
function. ``--size gpt2-small`` profiles bench_scale.py's GPT-2-small step instead (12 layers,
d 768, 12 heads, vocab 50,257, tied head, batch 4 x T 256, AdamW) and adds a phase table:
forward + loss, backward and the optimizer step timed apart, for ours and for bench_scale's
PyTorch twin holding the same weights (same process, ours freed first), so the phase that
loses is named; the report goes to profile_gpt_gpt2_small.md. The table lists the top functions in milliseconds per step and their share of the
step. ``--json PATH`` also saves the figures; ``--before PATH`` reads figures saved the same
way by an older tree (run this script from that checkout) and shows both side by side, so a
change's effect on each op is one table.

Usage: python benchmarks/profile_gpt.py [--size bench-gpt|gpt2-small] [--threads 1] [--steps 3]
                                         [--top 15] [--json PATH] [--before PATH] [--label NAME]
                                         [--no-torch] [--quick] [--out PATH]
Writes build/benchmarks/profile_gpt.md or profile_gpt_gpt2_small.md (benchmarks/results/ with
--save, or --out).
"""
from __future__ import annotations

import cProfile
import json
import os
import pstats
import time

import numpy as np

import _common as C

import bench_gpt  # noqa: E402  (the model and step are bench_gpt's own)
from tinytorch.core import random as tt_random  # noqa: E402


def bench_gpt_step():
    """bench_gpt.py's model, batch and step: (step, warm-up steps)."""
    rng = np.random.default_rng(0)
    t = bench_gpt.CONFIG["max_seq_len"]
    x = rng.integers(0, bench_gpt.CONFIG["vocab_size"], size=(bench_gpt.BATCH, t)).astype(np.int64)
    y = rng.integers(0, bench_gpt.CONFIG["vocab_size"], size=(bench_gpt.BATCH, t)).astype(np.int64)
    tt_random.manual_seed(0)
    return bench_gpt.tinytorch_step_fn(bench_gpt.GPT(**bench_gpt.CONFIG), x, y), 2


GPT2_BATCH, GPT2_SEQ = 4, 256


def gpt2_small_parts():
    """GPT-2 small as bench_scale.py builds it: (our model, x, y)."""
    import bench_scale
    cfg = bench_scale.SIZES["gpt2-small"]
    x, y = bench_scale.token_batch(cfg, GPT2_BATCH, GPT2_SEQ, seed=1)
    tt_random.manual_seed(0)
    return bench_gpt.GPT(**cfg, tie_weights=True), x, y


def profile_step(step, warmup: int, steps: int) -> dict:
    """{"ms_per_step": wall ms, "rows": {function label: tottime ms per step}}."""
    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    wall = (time.perf_counter() - start) / steps * 1e3
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    rows = {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(C.tinytorch.__file__)))
    for (path, line, name), stat in pstats.Stats(prof).stats.items():
        where = os.path.relpath(path, root) if path.startswith(root) else os.path.basename(path)
        label = f"{name} ({where})" if line else name  # no line numbers: trees differ
        rows[label] = rows.get(label, 0.0) + stat[2] * 1e3 / steps
    return {"ms_per_step": wall, "rows": rows}


def phase_times(forward_loss, backward, optimizer, zero_grad, steps: int) -> dict:
    """Median ms of each phase of a step over `steps` steps (after one warm-up step)."""
    names = ("forward + loss", "backward", "optimizer step")
    times = {n: [] for n in names}
    for i in range(steps + 1):
        zero_grad()
        t0 = time.perf_counter()
        loss = forward_loss()
        t1 = time.perf_counter()
        backward(loss)
        t2 = time.perf_counter()
        optimizer()
        t3 = time.perf_counter()
        if i:
            for n, dt in zip(names, (t1 - t0, t2 - t1, t3 - t2)):
                times[n].append(dt * 1e3)
    return {n: float(np.median(v)) for n, v in times.items()}


def gpt2_phases(model, x, y, steps: int, with_torch: bool) -> dict:
    """{"TinyTorch": {phase: ms}, "PyTorch": ...}: the step's phases timed apart; the PyTorch
    twin gets our initial weights (bench_scale's loader), after our model is freed."""
    import gc
    import shutil
    import tempfile

    import bench_scale
    from tinytorch.core.losses import cross_entropy
    from tinytorch.core.optimizers import AdamW
    out = {}
    v = model.vocab_size
    folder = tempfile.mkdtemp(prefix="profile_gpt_weights_")
    try:
        if with_torch:
            bench_scale.save_our_weights(model, folder)  # before any step changes them
        opt = AdamW(model.parameters(), lr=bench_scale.LR, weight_decay=bench_scale.WEIGHT_DECAY)
        out["TinyTorch"] = phase_times(lambda: cross_entropy(model(x).reshape(-1, v), y.reshape(-1)),
                                       lambda loss: loss.backward(), opt.step, opt.zero_grad, steps)
        del model, opt
        gc.collect()
        torch = C.optional_torch() if with_torch else None
        if torch is not None:
            torch.set_num_threads(C.tinytorch.get_num_threads())
            tm = bench_scale.build_torch_gpt(torch, bench_scale.SIZES["gpt2-small"])
            bench_scale.load_torch_weights(torch, tm, folder)
            topt = torch.optim.AdamW(tm.parameters(), lr=bench_scale.LR, weight_decay=bench_scale.WEIGHT_DECAY)
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            out["PyTorch"] = phase_times(
                lambda: torch.nn.functional.cross_entropy(tm(tx).reshape(-1, v), ty.reshape(-1)),
                lambda loss: loss.backward(), topt.step, topt.zero_grad, steps)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def main():
    ap = C.arguments(__doc__, "profile_gpt.md", threads=1, quick=dict(steps=1))
    ap.add_argument("--size", choices=("bench-gpt", "gpt2-small"), default="bench-gpt",
                    help="bench_gpt.py's step (default) or GPT-2 small at 4 x 256")
    ap.add_argument("--steps", type=int, default=None, help="profiled steps (default 3; gpt2-small 2)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", help="also save the figures here")
    ap.add_argument("--before", help="figures saved by --json from an older tree")
    ap.add_argument("--label", default="this tree")
    ap.add_argument("--no-torch", dest="torch", action="store_false",
                    help="gpt2-small: skip the PyTorch phase timings")
    args = C.parse(ap)
    gpt2 = args.size == "gpt2-small"
    if gpt2 and not args.out.endswith(".md"):
        args.report = C.report_path(args.out, "profile_gpt_gpt2_small.md")
    steps = args.steps or (2 if gpt2 else 3)
    if steps < 1:
        raise SystemExit(f"--steps must be >= 1, got {steps}")
    phases = None
    with C.Threads(args.threads):
        if gpt2:
            import bench_scale
            model, x, y = gpt2_small_parts()
            step = bench_scale.our_train_step(model, x, y, checkpointed=False)
            now = profile_step(step, 1, steps)
            del step
            phases = gpt2_phases(model, x, y, steps, args.torch)
            del model
        else:
            step, warmup = bench_gpt_step()
            now = profile_step(step, warmup, steps)
    now["label"] = args.label
    if args.json:
        from tinytorch._atomic import write_file
        write_file(args.json, json.dumps(now, indent=1))
    before = None
    if args.before:
        with open(args.before) as f:
            before = json.load(f)
    top = sorted(now["rows"], key=lambda r: -now["rows"][r])[:args.top]
    if before:
        top += [r for r in sorted(before["rows"], key=lambda r: -before["rows"][r])[:args.top] if r not in top]
        header = ["function (tottime)", f"{before['label']} ms/step", "share", f"{now['label']} ms/step", "share"]
    else:
        header = ["function (tottime)", "ms/step", "share"]
    rows = []
    for r in top:
        row = [r]
        for fig in ([before] if before else []) + [now]:
            ms = fig["rows"].get(r, 0.0)
            row += [ms, f"{100 * ms / fig['ms_per_step']:.1f}%"]
        rows.append(row)
    total = ["**wall time of the step**"]
    for fig in ([before] if before else []) + [now]:
        total += [fig["ms_per_step"], ""]
    rows.append(total)
    table = C.table(header, rows)
    print("\n".join(table))
    if gpt2:
        import bench_scale
        flops = bench_scale.step_flops(768, 12, 50257, GPT2_BATCH, GPT2_SEQ)
        title = "GPT-2-small training step: where the time goes (cProfile)"
        intro = [
            f"bench_scale.py's GPT-2-small step (12 layers, d 768, 12 heads, vocab 50,257, context 1024, tied head; "
            f"batch {GPT2_BATCH} x T {GPT2_SEQ}, AdamW), {steps} profiled steps after 1 warm-up step; internal time "
            "per function (not its callees), in ms per step. The native kernels are called through ctypes, so "
            "their time is the tottime of the Python function that calls them (`_gemm_native` is every GEMM). "
            f"The wall time is measured without the profiler: {now['ms_per_step']:.0f} ms = "
            f"{flops / now['ms_per_step'] / 1e6:.1f} GFLOP/s of model FLOPs ({flops / 1e9:.0f} GFLOP per step, "
            "bench_scale.py's formula).", "",
            (f"Two columns: **{before['label']}**, figures another tree saved with `--json` on this machine, "
             f"and **{now['label']}**, this tree, run one after the other (the commit that adds this file names "
             "the older tree)." if before else
             "One column: this tree. A before / after comparison: `--json PATH` on the older tree, then "
             "`--before PATH` here."), ""]
        if phases:
            names = list(next(iter(phases.values())))
            prow = []
            for n in names + ["whole step"]:
                cells = [n]
                for fw in phases:
                    ms = phases[fw][n] if n in phases[fw] else sum(phases[fw].values())
                    cells.append(f"{ms:.0f}")
                if len(phases) == 2:
                    a = phases["TinyTorch"].get(n, sum(phases["TinyTorch"].values()))
                    b = phases["PyTorch"].get(n, sum(phases["PyTorch"].values()))
                    cells.append(f"{a / b:.2f}x")
                prow.append(cells)
            ptable = C.table(["phase (median ms)"] + [f"{fw}" for fw in phases]
                             + (["TinyTorch / PyTorch"] if len(phases) == 2 else []), prow)
            print("\n".join(ptable))
            intro += [f"Phases, timed apart (median of {steps} steps after 1 warm-up; same weights and batch; PyTorch "
                      "in the same process after ours was freed):", "", *ptable, "",
                      "Functions (ours):", ""]
    else:
        title = "GPT training step: where the time goes (cProfile)"
        intro = [f"bench_gpt.py's step (GPT vocab 65, context 128, 4 layers, 4 heads, d=128, batch 32, AdamW), "
                 f"{steps} profiled steps after 2 warm-up steps; internal time per function (not its callees), "
                 "in ms per step. The wall time is measured without the profiler (which adds overhead to "
                 "Python calls, not to the kernels).", ""]
    C.write_report(args.report, title, intro + table, threads=args.threads)


if __name__ == "__main__":
    main()
