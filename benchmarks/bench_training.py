"""Milliseconds per training step: TinyTorch vs PyTorch CPU, same run, same threads.

Workloads (random data, fixed seed, cross-entropy loss, Adam lr=1e-3):
  * MLP 784-256-128-10 (ReLU), batch 64
  * small CNN on 1x28x28: conv(1->8, 3x3, pad 1)-ReLU-maxpool 2-conv(8->16, 3x3, pad 1)-
    ReLU-maxpool 2-linear(784->10), batch 64
A step is zero_grad + forward + loss + backward + optimizer step. Both frameworks start
from the same weights. Steps are timed one by one in alternating rounds (so drift in
machine load hits both), after a warm-up; the table shows medians, the 10th-90th
percentile range and the TinyTorch/PyTorch ratio. A third row per workload, "NumPy GEMMs
only", times just the matrix products of the MLP step in plain NumPy: the floor the
framework overhead sits on.

Threads: the TinyTorch runtime, BLAS (via threadpoolctl) and torch.set_num_threads get the
same count (_common.Threads); --threads takes a comma-separated list (default "1,<all cores>")
and each count is measured in turn.

Usage: python benchmarks/bench_training.py [--threads 1,2] [--steps 60] [--rounds 5] [--quick] [--out PATH]
Writes build/benchmarks/bench_training.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import os

import numpy as np

import _common as C

from tinytorch.core import acceleration  # noqa: E402  (path set up by _common)
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.layers import Flatten, Linear, Sequential  # noqa: E402
from tinytorch.core.losses import CrossEntropyLoss  # noqa: E402
from tinytorch.core.optimizers import Adam  # noqa: E402
from tinytorch.core.spatial import Conv2d, MaxPool2d  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402

torch = C.optional_torch()


def build_tinytorch(kind):
    tt_random.manual_seed(0)
    if kind == "mlp":
        return Sequential(Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10))
    return Sequential(Conv2d(1, 8, 3, padding=1), ReLU(), MaxPool2d(2), Conv2d(8, 16, 3, padding=1), ReLU(),
                      MaxPool2d(2), Flatten(), Linear(16 * 7 * 7, 10))


def build_torch(kind, ours):
    nn = torch.nn
    if kind == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    else:
        model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1),
                              nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 7 * 7, 10))
    theirs = dict(model.named_parameters())
    with torch.no_grad():
        for name, p in ours.named_parameters():
            value = p.data.T if (p.ndim == 2) else p.data  # Linear keeps (in, out), torch (out, in)
            theirs[name].copy_(torch.from_numpy(np.ascontiguousarray(value)))
    return model


def data(kind, rng, batch=64):
    x = rng.standard_normal((batch, 784) if kind == "mlp" else (batch, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, batch).astype(np.int64)
    return x, y


def tinytorch_step_fn(kind, x, y):
    model = build_tinytorch(kind)
    opt = Adam(model.parameters(), lr=1e-3)
    loss_fn = CrossEntropyLoss()

    def step():
        opt.zero_grad()
        loss = loss_fn(model(Tensor.from_numpy(x)), y)
        loss.backward()
        opt.step()
        return loss
    return model, step


def torch_step_fn(kind, ours, x, y):
    model = build_torch(kind, ours)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(tx), ty)
        loss.backward()
        opt.step()
        return loss
    return step


def numpy_gemm_step_fn(rng):
    """Only the 3 forward + 5 backward GEMMs of the MLP step (input grad not needed)."""
    x = rng.standard_normal((64, 784)).astype(np.float32)
    ws = [rng.standard_normal(s).astype(np.float32) * 0.05 for s in [(784, 256), (256, 128), (128, 10)]]

    def step():
        h1 = x @ ws[0]
        h2 = h1 @ ws[1]
        out = h2 @ ws[2]
        g3 = out
        h2.T @ g3
        g2 = g3 @ ws[2].T
        h1.T @ g2
        g1 = g2 @ ws[1].T
        x.T @ g1
    return step


def numpy_backend(step):
    """The same step with the native kernels switched off (acceleration's NumPy path)."""
    use_native = getattr(acceleration, "use_native", None)
    if use_native is None:
        return step

    def run():
        with use_native(False):
            return step()
    return run


def native_kernels_available():
    return bool(getattr(acceleration, "native_available", lambda: False)())


def run_workloads(threads, steps, rounds, warmup, paths):
    rows = []
    with C.Threads(threads):
        rng = np.random.default_rng(0)
        for kind in ("mlp", "cnn"):
            x, y = data(kind, rng)
            model, ours = tinytorch_step_fn(kind, x, y)
            fns = {"TinyTorch (NumPy backend)": numpy_backend(ours)}
            if native_kernels_available():
                _, native_step = tinytorch_step_fn(kind, x, y)
                native_step()
                paths[kind] = acceleration.last_path()
                fns["TinyTorch (native kernels)"] = native_step
            if torch is not None:
                fns["PyTorch"] = torch_step_fn(kind, model, x, y)
            if kind == "mlp":
                fns["NumPy GEMMs only"] = numpy_gemm_step_fn(rng)
            results = C.time_steps(fns, steps, rounds, warmup=warmup)
            ref = np.median(results["PyTorch"]) if "PyTorch" in results else None
            for name, t in results.items():
                med, p10, p90 = C.spread(t)
                ratio = f"{med / ref:.2f}x" if ref else "n/a"
                rows.append((kind.upper(), threads, name, med, p10, p90, ratio))
    return rows


def main():
    ap = C.arguments(__doc__, "bench_training.md", threads=sorted({1, os.cpu_count()}),
                     quick=dict(steps=2, rounds=1, warmup=1))
    ap.add_argument("--steps", type=int, default=60, help="timed steps per framework per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    args = C.parse(ap)

    rows, paths = [], {}
    for threads in args.threads:
        rows += run_workloads(threads, args.steps, args.rounds, args.warmup, paths)

    table = ["| workload | threads | implementation | median ms/step | p10-p90 ms | vs PyTorch |",
             "|---|---:|---|---:|---:|---:|"]
    for kind, threads, name, med, p10, p90, ratio in rows:
        table.append(f"| {kind} | {threads} | {name} | {med:.3f} | {p10:.3f}-{p90:.3f} | {ratio} |")
    print("\n".join(table))

    C.write_report(args.report, "Training step time: TinyTorch vs PyTorch CPU", [
        "MLP 784-256-128-10 (ReLU) and a small CNN (conv 1->8 3x3, pool, conv 8->16 3x3, pool, linear "
        "784->10) on 1x28x28, batch 64, Adam, cross-entropy. A step is zero_grad + forward + loss + "
        "backward + Adam step; ratios are TinyTorch / PyTorch medians from the same run and thread "
        f"count, {args.steps * args.rounds} timed steps each after {args.warmup} warm-up steps. \"NumPy backend\" "
        "runs every matmul through acceleration's NumPy path; \"native kernels\" lets acceleration route "
        "them to libtinytorch (last kernel path seen: "
        f"{', '.join(f'{k.upper()}: {v}' for k, v in paths.items()) or 'library not available'}). "
        "\"NumPy GEMMs only\" is the floor: just the MLP step's matrix products in plain NumPy.", "",
        *table], threads=args.threads)


if __name__ == "__main__":
    main()
