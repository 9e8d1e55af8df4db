"""GPT training step: milliseconds per step and tokens/s, TinyTorch vs PyTorch CPU, same run.

Workload (the issue's): GPT with vocab 65, context 128, 4 layers, 4 heads, d=128, batch 32,
AdamW (lr 3e-4, weight decay 0.1), cross-entropy over every position, dropout 0. A step is
zero_grad + forward + loss + backward + AdamW step. PyTorch runs the same architecture (pre-LN
blocks, separate q/k/v/out projections, GELU tanh MLP, learned positions, untied head) written
with torch.nn and F.scaled_dot_product_attention (torch_gpt.py, the twin bench_scale.py uses
too), starting from TinyTorch's weights, so the first-step losses printed side by side must
agree.

Steps are timed one at a time in alternating rounds (machine-load drift hits both), after a
warm-up; the table shows medians, the p10-p90 range, tokens/s (batch * context / step time) and
the TinyTorch / PyTorch ratio. Threads: BLAS (threadpoolctl) and torch.set_num_threads get the
same count, and so does the TinyTorch runtime through tinytorch.set_num_threads (--threads,
default all cores; all set by _common.Threads). A "NumPy GEMMs only" row times just the float32
matrix products of one step (forward and backward of every projection and attention product):
the floor any NumPy-backed framework sits on. bench_kv_cache.py reuses this file's model
definitions (CONFIG, build_torch_gpt).

Usage: python benchmarks/bench_gpt.py [--threads N] [--steps 3] [--rounds 2] [--quick] [--out PATH]
Writes build/benchmarks/bench_gpt.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import os

import numpy as np

import _common as C
import torch_gpt

from tinytorch.core import random as tt_random  # noqa: E402  (path set up by _common)
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import AdamW  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402

torch = C.optional_torch()

CONFIG = dict(vocab_size=65, embed_dim=128, num_layers=4, num_heads=4, max_seq_len=128)
BATCH = 32
LR, WEIGHT_DECAY = 3e-4, 0.1


def build_torch_gpt(ours):
    """The same GPT in torch.nn (torch_gpt.py, the one twin; head tied or not as ``ours``),
    starting from ``ours``'s weights."""
    cfg = dict(vocab_size=ours.vocab_size, embed_dim=ours.embed_dim, num_layers=ours.num_layers,
               num_heads=ours.num_heads, max_seq_len=ours.max_seq_len)
    model = torch_gpt.build_torch_gpt(torch, cfg, tie_weights=ours.tie_weights)
    named = list(ours.named_parameters())
    torch_gpt.copy_weights(torch, model, [name for name, _ in named], (p.data for _, p in named))
    return model


def tinytorch_step_fn(model, x, y):
    opt = AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    v = model.vocab_size

    def step():
        opt.zero_grad()
        loss = cross_entropy(model(x).reshape(-1, v), y.reshape(-1))
        loss.backward()
        opt.step()
        return float(loss.item())
    return step


def torch_step_fn(model, x, y):
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    v = CONFIG["vocab_size"]

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(tx).reshape(-1, v), ty.reshape(-1))
        loss.backward()
        opt.step()
        return float(loss.item())
    return step


def numpy_gemm_step_fn(rng):
    """Only the float32 matrix products of one training step (forward + backward)."""
    b, t, e, v, h, n = BATCH, CONFIG["max_seq_len"], CONFIG["embed_dim"], CONFIG["vocab_size"], \
        CONFIG["num_heads"], CONFIG["num_layers"]
    d = e // h
    x = rng.standard_normal((b * t, e)).astype(np.float32)
    w_e = rng.standard_normal((e, e)).astype(np.float32)
    w_up = rng.standard_normal((e, 4 * e)).astype(np.float32)
    w_down = rng.standard_normal((4 * e, e)).astype(np.float32)
    w_head = rng.standard_normal((e, v)).astype(np.float32)
    q = rng.standard_normal((b, h, t, d)).astype(np.float32)
    hidden = rng.standard_normal((b * t, 4 * e)).astype(np.float32)
    logits = rng.standard_normal((b * t, v)).astype(np.float32)

    def linear(inp, w, g):  # forward, grad input, grad weight
        inp @ w
        g @ w.T
        inp.T @ g

    def step():
        for _ in range(n):
            for _ in range(4):
                linear(x, w_e, x)
            s = q @ q.swapaxes(-1, -2)          # scores
            s @ q                               # weighted sum
            s.swapaxes(-1, -2) @ q              # dV
            q @ q.swapaxes(-1, -2)              # dP
            s @ q                               # dQ
            s.swapaxes(-1, -2) @ q              # dK
            linear(x, w_up, hidden)
            linear(hidden, w_down, x)
        linear(x, w_head, logits)
    return step


def main():
    ap = C.arguments(__doc__, "bench_gpt.md", threads=os.cpu_count(), quick=dict(steps=1, rounds=1))
    ap.add_argument("--steps", type=int, default=3, help="timed steps per framework per round")
    ap.add_argument("--rounds", type=int, default=2)
    args = C.parse(ap)

    with C.Threads(args.threads):
        rng = np.random.default_rng(0)
        t = CONFIG["max_seq_len"]
        x = rng.integers(0, CONFIG["vocab_size"], size=(BATCH, t)).astype(np.int64)
        y = rng.integers(0, CONFIG["vocab_size"], size=(BATCH, t)).astype(np.int64)

        tt_random.manual_seed(0)
        model = GPT(**CONFIG)
        fns = {"TinyTorch": tinytorch_step_fn(model, x, y)}
        if torch is not None:
            fns["PyTorch"] = torch_step_fn(build_torch_gpt(model), x, y)
            # same weights, same batch: the first losses must agree before anything is timed
            first = {name: fn() for name, fn in fns.items()}
            print("first-step loss: " + ", ".join(f"{n} {v:.6f}" for n, v in first.items()))
            if abs(first["TinyTorch"] - first["PyTorch"]) > 1e-3:
                raise SystemExit("the two models disagree: the comparison would be meaningless")
        fns["NumPy GEMMs only"] = numpy_gemm_step_fn(rng)
        results = C.time_steps(fns, args.steps, args.rounds)

    tokens = BATCH * t
    ref = np.median(results["PyTorch"]) if "PyTorch" in results else None
    table = ["| implementation | median ms/step | p10-p90 ms | tokens/s | vs PyTorch |", "|---|---:|---:|---:|---:|"]
    for name, ms in results.items():
        med, p10, p90 = C.spread(ms)
        ratio = f"{med / ref:.2f}x" if ref else "n/a"
        table.append(f"| {name} | {med:.1f} | {p10:.1f}-{p90:.1f} | {tokens / (med / 1e3):,.0f} | {ratio} |")
    print("\n".join(table))

    C.write_report(args.report, "GPT training step: TinyTorch vs PyTorch CPU", [
        f"{args.steps * args.rounds} timed steps per implementation after 1 warm-up step.", "",
        "GPT: vocab 65, context 128, 4 layers, 4 heads, d=128, batch 32 (4,096 tokens/step), AdamW, "
        "cross-entropy over every position. A step is zero_grad + forward + loss + backward + AdamW; "
        "both start from the same weights (first-step losses agree). Ratios are TinyTorch / PyTorch "
        "medians from the same run. Goal once the fast kernels land: within 1.5x of PyTorch.", "",
        *table], threads=args.threads)


if __name__ == "__main__":
    main()
