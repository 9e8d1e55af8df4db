"""bench_tinyverse_gate.py -- compiler in the loop: AST validity of held-out completions vs training.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_tinyverse_gate.py     (~1.5 min)
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench_tinyverse_gate.py --quick --out /tmp

The whole TinyVerse pipeline, offline, on one thread: TinyPy (generated from a seed, under
100 KB) -> the package's character Tokenizer -> pack_tokens -> TokenShard (np.memmap) ->
ShardBatcher (zero-copy batches) -> the package's GPT trained by Trainer.train_epoch with AdamW
-> every --eval-every steps, ASTValidityHook greedily completes the 7 held-out prompts (function
names never seen in training), streaming each token into ast.parse and stopping at the first
complete function (tinytorch.extensions.tinyverse.run_ast_gate_training).

Budget: --seconds of training time (default 60), counted as the process's CPU seconds on one
thread (--budget-clock cpu: single-core time, which other work on a shared machine cannot take
away; --budget-clock wall counts elapsed time); evaluation time is counted apart. Milestone
floor: at least 1 of 7 held-out prompts valid; aim: at least 5 of 7. Writes
build/benchmarks/bench_tinyverse_gate.md and bench_tinyverse_gate.png (validity and loss vs step;
benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import os

import _common as C

from tinytorch.extensions.tinyverse import run_ast_gate_training  # noqa: E402  (path set up by _common)

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the report is still written, without the figure
    plt = None


def plot(curve, path):
    """Validity (count of 7) and training loss against the optimizer step."""
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = curve["step"]
    ax.plot(steps, curve["valid"], "o-", color="tab:green", label="AST-valid held-out completions")
    ax.axhline(1, color="tab:green", ls=":", lw=1, label="milestone floor (1 of 7)")
    ax.axhline(5, color="tab:green", ls="--", lw=1, label="aim (5 of 7)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(f"valid of {curve['total']}")
    ax.set_ylim(-0.3, curve["total"] + 0.3)
    ax2 = ax.twinx()
    ax2.plot(steps[1:], curve["loss"][1:], "s-", color="tab:blue", ms=3, label="training loss")
    ax2.set_ylabel("training loss (nats / token)")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="center right", fontsize=8)
    ax.set_title(f"TinyPy, {curve['train_seconds']:.0f} s of single-core training "
                 f"({curve['budget_clock']} time): compiler gate vs loss", fontsize=10)
    fig.tight_layout()
    C.save_figure(fig, path, dpi=110)  # atomic: a kill never leaves half a PNG
    plt.close(fig)


def main():
    ap = C.arguments(__doc__, "bench_tinyverse_gate.md", threads=1,
                     quick={"seconds": 5.0, "eval_every": 50})
    ap.add_argument("--seconds", type=float, default=60.0, help="training-time budget")
    ap.add_argument("--eval-every", dest="eval_every", type=int, default=100, help="steps between evaluations")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget-clock", dest="budget_clock", choices=["cpu", "wall"], default="cpu",
                    help="what the budget counts: the process's CPU seconds (default) or wall seconds")
    args = C.parse(ap)
    with C.Threads(args.threads):
        curve = run_ast_gate_training(seconds=args.seconds, seed=args.seed, eval_every=args.eval_every,
                                      budget_clock=args.budget_clock, say=lambda s: print(s, flush=True))
    folder = os.path.dirname(os.path.abspath(args.report))
    png = os.path.join(folder, "bench_tinyverse_gate.png")
    if plt is not None:
        plot(curve, png)
    total, final = curve["total"], curve["valid"][-1]
    best = max(curve["valid"])
    first_floor = next((s for s, v in zip(curve["step"], curve["valid"]) if v >= 1), None)
    first_aim = next((s for s, v in zip(curve["step"], curve["valid"]) if v >= 5), None)
    cfg, man = curve["config"], curve["corpus_manifest"]
    clock = "CPU seconds of the process" if curve["budget_clock"] == "cpu" else "wall seconds"
    body = [f"Training: {curve['train_seconds']:.1f} {clock} ({curve['train_wall_seconds']:.1f} s wall) on "
            f"{args.threads} thread(s), {curve['step'][-1]} optimizer steps; "
            f"{sum(curve['eval_seconds']):.1f} s more in {len(curve['step'])} gate evaluations (not counted).",
            f"Model: GPT(vocab {cfg['vocab_size']}, d {cfg['embed_dim']}, {cfg['num_layers']} layers, "
            f"{cfg['num_heads']} heads, context {cfg['context']}); batch {cfg['batch_size']}, AdamW lr {cfg['lr']}, "
            f"grad clip 1.0, seed {cfg['seed']}.",
            f"Corpus: TinyPy seed {man['seed']}, {man['train_bytes']:,} bytes, {man['train_samples']} functions, "
            f"sha256 `{man['train_sha256'][:16]}...`; {total} held-out prompts ({', '.join(man['heldout_names'])}).",
            "",
            f"**Result: {final} of {total} held-out completions AST-valid at the end** (floor 1, aim 5; best "
            f"{best} of {total}; first >= 1 at step {first_floor}, first >= 5 at step {first_aim}).",
            "",
            "## Curve", "", f"![validity and loss vs step]({os.path.basename(png)})", ""]
    body += C.table(["step", "training loss (mean of the window)", "AST-valid", "rate %", "eval s"],
                    [[s, "-" if s == 0 else f"{l:.3f}", f"{v}/{total}", f"{r:.0f}", f"{e:.2f}"]
                     for s, l, v, r, e in zip(curve["step"], curve["loss"], curve["valid"], curve["rate"],
                                              curve["eval_seconds"])])
    body += ["", "## Final completions (greedy, cut at the first complete function)", ""]
    for text, function in zip(curve["completions"], curve["functions"]):
        from_gate = function if function is not None else text
        body += ["```python", from_gate.rstrip("\n"), "```", ""]
    body += ["The machine is shared with other work (see the load average above): with the CPU-time budget",
             "the step count does not shrink with the load, only the wall time grows; the gate's verdicts",
             "do not depend on timing. AST validity checks syntax only: a valid completion may compute",
             "something other than its name suggests."]
    C.write_report(args.report, "TinyVerse: AST validity of held-out completions during training", body,
                   threads=args.threads)


if __name__ == "__main__":
    main()
