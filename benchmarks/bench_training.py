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

Threads: BLAS (via threadpoolctl) and torch.set_num_threads get the same count;
--threads takes a comma-separated list (default "1,<all cores>") and each count is
measured in turn.

Usage: python benchmarks/bench_training.py [--threads 1,2] [--steps 60] [--rounds 5]
Writes benchmarks/results/bench_training.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import tinytorch  # noqa: E402
from tinytorch.core import acceleration  # noqa: E402
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.layers import Flatten, Linear, Sequential  # noqa: E402
from tinytorch.core.losses import CrossEntropyLoss  # noqa: E402
from tinytorch.core.optimizers import Adam  # noqa: E402
from tinytorch.core.spatial import Conv2d, MaxPool2d  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

try:
    from threadpoolctl import threadpool_limits
except ImportError:
    threadpool_limits = None


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


def time_steps(fns, steps, rounds, warmup=10):
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(steps):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    return {name: np.array(v) * 1e3 for name, v in times.items()}


def machine_description(threads):
    lines = [f"- Python {platform.python_version()} on {platform.system()} {platform.release()} ({platform.machine()})",
             f"- NumPy {np.__version__}" + (f", PyTorch {torch.__version__}" if torch else ", PyTorch not installed"),
             f"- thread counts: {', '.join(map(str, threads))} (BLAS via threadpoolctl" + (" and torch.set_num_threads)" if torch else ")")]
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for key in ("Model name", "CPU(s)", "Thread(s) per core", "L2 cache", "L3 cache", "Flags"):
            for line in out.splitlines():
                if line.startswith(key + ":"):
                    value = line.split(":", 1)[1].strip()
                    if key == "Flags":
                        value = " ".join(f for f in value.split() if f in ("avx2", "fma", "f16c", "avx512f"))
                    lines.append(f"- {key}: {value}")
    except (OSError, subprocess.SubprocessError):
        lines.append(f"- CPU: {platform.processor() or 'unknown'} (lscpu unavailable)")
    return lines


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


def run_workloads(threads, steps, rounds, paths):
    rows = []
    with (threadpool_limits(limits=threads) if threadpool_limits else _nullcontext()):
        if torch is not None:
            torch.set_num_threads(threads)
        if hasattr(tinytorch, "set_num_threads"):
            tinytorch.set_num_threads(threads)  # the native runtime's OpenMP threads
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
            results = time_steps(fns, steps, rounds)
            ref = np.median(results["PyTorch"]) if "PyTorch" in results else None
            for name, t in results.items():
                med = np.median(t)
                ratio = f"{med / ref:.2f}x" if ref else "n/a"
                rows.append((kind.upper(), threads, name, med, np.percentile(t, 10), np.percentile(t, 90), ratio))
    return rows


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", default=f"1,{os.cpu_count()}",
                        help="comma-separated thread counts (BLAS and torch alike)")
    parser.add_argument("--steps", type=int, default=60, help="timed steps per framework per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "bench_training.md"))
    args = parser.parse_args()
    thread_counts = sorted({int(t) for t in str(args.threads).split(",") if t.strip()})
    if not thread_counts or min(thread_counts) < 1:
        parser.error(f"--threads needs positive integers, got {args.threads!r}")

    rows, paths = [], {}
    for threads in thread_counts:
        rows += run_workloads(threads, args.steps, args.rounds, paths)

    header = "| workload | threads | implementation | median ms/step | p10-p90 ms | vs PyTorch |"
    table = [header, "|---|---:|---|---:|---:|---:|"]
    for kind, threads, name, med, p10, p90, ratio in rows:
        table.append(f"| {kind} | {threads} | {name} | {med:.3f} | {p10:.3f}-{p90:.3f} | {ratio} |")
    print("\n".join(table))

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with open(args.out, "w") as f:
        f.write("# Training step time: TinyTorch vs PyTorch CPU\n\n")
        f.write(f"Command: `python benchmarks/bench_training.py --threads {','.join(map(str, thread_counts))} "
                f"--steps {args.steps} --rounds {args.rounds}` ({time.strftime('%Y-%m-%d')}; 1-minute load "
                f"average at the end: {load:.2f})\n\n")
        f.write("MLP 784-256-128-10 (ReLU) and a small CNN (conv 1->8 3x3, pool, conv 8->16 3x3, pool, linear "
                "784->10) on 1x28x28, batch 64, Adam, cross-entropy. A step is zero_grad + forward + loss + "
                "backward + Adam step; ratios are TinyTorch / PyTorch medians from the same run and thread "
                "count. \"NumPy backend\" runs every matmul through acceleration's NumPy path; \"native kernels\" lets "
                "acceleration route them to libtinytorch (last kernel path seen: "
                f"{', '.join(f'{k.upper()}: {v}' for k, v in paths.items()) or 'library not available'}). \"NumPy GEMMs only\" is the floor: just the MLP step's "
                "matrix products in plain NumPy.\n\n")
        f.write("\n".join(table) + "\n\nMachine:\n\n" + "\n".join(machine_description(thread_counts)) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
