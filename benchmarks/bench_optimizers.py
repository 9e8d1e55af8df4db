"""Lion and Muon against AdamW on two small training runs.

1. Digits (8x8, MLP 64-256-256-10, batch 128, 300 steps): each optimizer at three learning
   rates around its usual setting; final training loss (mean of the last 20 steps), test
   accuracy, optimizer-state bytes, time of the optimizer step alone.
2. Character-level GPT (d = 64, 2 layers, 4 heads, context 64, batch 16, 150 steps) on Python
   source text: each optimizer at its usual setting. Muon is used the standard way: on the 2-D
   weights inside the blocks (attention and MLP projections), with AdamW for the embeddings,
   the output head, norms and biases.

Same initial weights and the same batches for every run. Single-threaded by default
(--threads): on a shared 2-core machine, spinning BLAS/OpenMP threads distort the timings. Usage:
python benchmarks/bench_optimizers.py [--steps 300] [--gpt-steps 150] [--threads 1] [--quick] [--out PATH]
Writes build/benchmarks/bench_optimizers.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import inspect

import numpy as np

import _common as C

from tinytorch.core import random as tt_random  # noqa: E402  (path set up by _common)
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.autograd import no_grad  # noqa: E402
from tinytorch.core.layers import Linear, Sequential  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import AdamW  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.core.tokenization import CharTokenizer  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402
from tinytorch.data import digits_split  # noqa: E402
from tinytorch.extensions import Lion, Muon  # noqa: E402
from tinytorch.perf.benchmarking import precise_timer  # noqa: E402


class Combined:
    """Several optimizers stepped together (Muon for matrices, AdamW for the rest)."""

    def __init__(self, *opts):
        self.opts = [o for o in opts if o is not None]

    def zero_grad(self):
        for o in self.opts:
            o.zero_grad()

    def step(self):
        for o in self.opts:
            o.step()

    @property
    def state(self):
        merged = {}
        for o in self.opts:
            merged.update(o.state)
        return merged


def make_optimizer(kind, lr, named_params, matrix_filter):
    params = [p for _, p in named_params]
    if kind == "AdamW":
        return AdamW(params, lr=lr, weight_decay=0.01)
    if kind == "Lion":
        return Lion(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.1)
    matrices = [p for n, p in named_params if p.data.ndim == 2 and matrix_filter(n)]
    rest = [p for n, p in named_params if not (p.data.ndim == 2 and matrix_filter(n))]
    return Combined(Muon(matrices, lr=lr, momentum=0.95, nesterov=True, weight_decay=0.0),
                    AdamW(rest, lr=3e-3, weight_decay=0.01) if rest else None)


def run(model_fn, batch_fn, loss_fn, kind, lr, steps, matrix_filter):
    model = model_fn()
    named = list(model.named_parameters())
    opt = make_optimizer(kind, lr, named, matrix_filter)
    rng = np.random.default_rng(123)
    losses, step_times = [], []
    for _ in range(steps):
        x, y = batch_fn(rng)
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        with precise_timer() as t:
            opt.step()
        step_times.append(t.elapsed)
        losses.append(loss.item())
    return model, np.array(losses), float(np.median(step_times)) * 1e3, C.optimizer_state_bytes(opt)


def digits_benchmark(steps):
    x_tr, y_tr, x_te, y_te = digits_split(0.2, seed=0)
    x_tr, x_te = x_tr.reshape(len(x_tr), -1), x_te.reshape(len(x_te), -1)

    def model_fn():
        tt_random.manual_seed(0)
        return Sequential(Linear(64, 256), ReLU(), Linear(256, 256), ReLU(), Linear(256, 10))

    def batch_fn(rng):
        idx = rng.integers(0, len(x_tr), 128)
        return Tensor(x_tr[idx]), y_tr[idx]

    grid = {"AdamW": (1e-3, 3e-3, 1e-2), "Lion": (1e-4, 3e-4, 1e-3), "Muon": (0.005, 0.02, 0.05)}
    lines = ["| Optimizer | lr | Final train loss (last 20 steps) | Test accuracy | State | Optimizer step |",
             "|---|---:|---:|---:|---:|---:|"]
    best = {}
    for kind, lrs in grid.items():
        for lr in lrs:
            # hidden matrices get Muon; the input and output layers get AdamW
            model, losses, ms, nbytes = run(model_fn, batch_fn, cross_entropy, kind, lr, steps,
                                            matrix_filter=lambda n: n.startswith("2."))
            with no_grad():
                acc = float((model(Tensor(x_te)).data.argmax(-1) == y_te).mean())
            final = float(losses[-20:].mean())
            lines.append(f"| {kind} | {lr:g} | {final:.4f} | {100 * acc:.1f} % | {nbytes / 1e3:.0f} kB | {ms:.2f} ms |")
            if kind not in best or final < best[kind][1]:
                best[kind] = (lr, final, acc)
            print(lines[-1], flush=True)
    return "\n".join(lines), best


def gpt_benchmark(steps):
    import argparse as _argparse
    import textwrap as _textwrap
    text = inspect.getsource(_textwrap) + inspect.getsource(_argparse)[:30000]
    tok = CharTokenizer(text)
    ids = np.array(tok.encode(text), dtype=np.int64)
    split = int(0.9 * len(ids))
    train_ids, test_ids = ids[:split], ids[split:]
    context, batch = 64, 16

    def model_fn():
        tt_random.manual_seed(0)
        return GPT(tok.vocab_size, 64, 2, 4, context)

    def batch_fn(rng):
        s = rng.integers(0, len(train_ids) - context - 1, batch)
        x = np.stack([train_ids[i:i + context] for i in s])
        y = np.stack([train_ids[i + 1:i + 1 + context] for i in s])
        return x, y

    def loss_fn(logits, y):
        return cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    settings = {"AdamW": 3e-3, "Lion": 3e-4, "Muon": 0.02}
    lines = ["| Optimizer | lr | Train loss (last 20 steps) | Held-out loss | State | Optimizer step |",
             "|---|---:|---:|---:|---:|---:|"]
    for kind, lr in settings.items():
        model, losses, ms, nbytes = run(model_fn, batch_fn, loss_fn, kind, lr, steps,
                                        matrix_filter=lambda n: n.startswith("blocks."))
        model.eval()
        with no_grad():
            s = np.linspace(0, len(test_ids) - context - 1, 16).astype(int)
            x = np.stack([test_ids[i:i + context] for i in s])
            y = np.stack([test_ids[i + 1:i + 1 + context] for i in s])
            held = loss_fn(model(x), y).item()
        lines.append(f"| {kind} | {lr:g} | {losses[-20:].mean():.4f} | {held:.4f} | {nbytes / 1e3:.0f} kB | {ms:.1f} ms |")
        print(lines[-1], flush=True)
    return "\n".join(lines), tok.vocab_size, len(ids)


def main():
    ap = C.arguments(__doc__, "bench_optimizers.md", threads=1, quick=dict(steps=25, gpt_steps=5))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--gpt-steps", type=int, default=150)
    args = C.parse(ap)
    with C.Threads(args.threads):
        print("1. digits", flush=True)
        table1, best = digits_benchmark(args.steps)
        print("2. GPT", flush=True)
        table2, vocab, n_chars = gpt_benchmark(args.gpt_steps)
    best_line = "; ".join(f"{k}: lr {v[0]:g}, loss {v[1]:.4f}, accuracy {100 * v[2]:.1f} %" for k, v in best.items())
    C.write_report(args.report, "Optimizers: Lion and Muon vs AdamW", [
        f"## 1. Digits MLP 64-256-256-10, batch 128, {args.steps} steps", "",
        "AdamW weight decay 0.01; Lion betas (0.9, 0.99), weight decay 0.1; Muon momentum 0.95 (Nesterov), "
        "5 Newton-Schulz steps, on the hidden 256x256 matrix, with AdamW (lr 3e-3) on the input and output "
        "layers and the biases. State is the bytes of all optimizer state arrays; the step time is the "
        "optimizer step alone (median).", "",
        table1, "", f"Best learning rate per optimizer: {best_line}.", "",
        f"## 2. Character GPT (vocab {vocab}, d 64, 2 layers, 4 heads, context 64, batch 16), "
        f"{args.gpt_steps} steps on {n_chars:,} chars of Python source", "",
        "Muon on the 2-D weights inside the blocks, AdamW (lr 3e-3) on embeddings, head, norms, biases.", "",
        table2, "",
        "Small runs on a shared CPU: they show that the update rules train and what they cost (state, step "
        "time), not which optimizer is best at scale.",
    ], threads=args.threads)


if __name__ == "__main__":
    main()
