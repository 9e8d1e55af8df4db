"""Where one GPT training step spends its time: a cProfile table of bench_gpt.py's step.

Runs the step of bench_gpt.py (same model, batch and AdamW) a few times under cProfile and
groups the internal time ("tottime": time in the function itself, not its callees) by
function. The table lists the top functions in milliseconds per step and their share of the
step. ``--json PATH`` also saves the figures; ``--before PATH`` reads figures saved the same
way by an older tree (run this script from that checkout) and shows both side by side, so a
change's effect on each op is one table.

Usage: python benchmarks/profile_gpt.py [--threads 1] [--steps 3] [--top 15] [--json PATH]
                                         [--before PATH] [--label NAME] [--quick] [--out PATH]
Writes build/benchmarks/profile_gpt.md (benchmarks/results/ with --save, or --out).
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


def profile_step(steps: int) -> dict:
    """{"ms_per_step": wall ms, "rows": {function label: tottime ms per step}}."""
    rng = np.random.default_rng(0)
    t = bench_gpt.CONFIG["max_seq_len"]
    x = rng.integers(0, bench_gpt.CONFIG["vocab_size"], size=(bench_gpt.BATCH, t)).astype(np.int64)
    y = rng.integers(0, bench_gpt.CONFIG["vocab_size"], size=(bench_gpt.BATCH, t)).astype(np.int64)
    tt_random.manual_seed(0)
    step = bench_gpt.tinytorch_step_fn(bench_gpt.GPT(**bench_gpt.CONFIG), x, y)
    step()
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


def main():
    ap = C.arguments(__doc__, "profile_gpt.md", threads=1, quick=dict(steps=1))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--json", help="also save the figures here")
    ap.add_argument("--before", help="figures saved by --json from an older tree")
    ap.add_argument("--label", default="this tree")
    args = C.parse(ap)
    with C.Threads(args.threads):
        now = profile_step(args.steps)
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
    C.write_report(args.report, "GPT training step: where the time goes (cProfile)", [
        f"bench_gpt.py's step (GPT vocab 65, context 128, 4 layers, 4 heads, d=128, batch 32, AdamW), "
        f"{args.steps} profiled steps after 2 warm-up steps; internal time per function (not its callees), "
        "in ms per step. The wall time is measured without the profiler (which adds overhead to "
        "Python calls, not to the kernels).", "", *table], threads=args.threads)


if __name__ == "__main__":
    main()
