"""The GEMMs real models make: every matrix product of one training step, per shape and per model.

The shapes are not guessed: one training step of each benchmark model (the GPT of
bench_gpt.py, the CNN and the MLP of bench_training.py) runs inside
tinytorch.backends.cpu's ``observe_gemms`` hook (the runtime's two GEMM entry points report
each call), which records (transA, transB, M, N, K) of every plain call and (batch, M, N, K)
of every strided-batched one, with how often each occurs in the step. Each distinct shape is then
timed three ways on the same operands:

  TinyTorch   the runtime's tt_sgemm / tt_sgemm_strided_batched with the recorded transpose
              flags (operands laid out so that no copy is needed, as in the step);
  OpenBLAS    NumPy's matmul on the same layout (transposed views: BLAS reads them in place);
  PyTorch     torch.mm / torch.bmm on the same memory (when installed).

The table shows per-shape medians and the TinyTorch/OpenBLAS ratio, then per model the
time summed over the step's calls (calls x median): the figure that says whether the
runtime's GEMMs win on the model, not only on squares. Batched products are timed with
contiguous operands of the recorded shapes (the step may pass strided views).

Usage: python benchmarks/bench_model_gemms.py [--threads 1,2] [--rounds 5] [--quick] [--out PATH]
Writes build/benchmarks/bench_model_gemms.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import collections
import os

import numpy as np

import _common as C

import bench_gpt  # noqa: E402  (the models are the benchmarks' own)
import bench_training  # noqa: E402
from tinytorch.backends import cpu as cpu_backend  # noqa: E402
from tinytorch.core import random as tt_random  # noqa: E402

torch = C.optional_torch()


def record_step(step) -> collections.Counter:
    """Run step() once with the runtime's GEMM entry points wrapped; returns a Counter of
    ("gemm", ta, tb, M, N, K) and ("batched", batch, M, N, K) keys."""
    calls = collections.Counter()
    with cpu_backend.observe_gemms(
            lambda ta, tb, m, n, k: calls.update([("gemm", ta, tb, m, n, k)]),
            lambda batch, m, n, k: calls.update([("batched", batch, m, n, k)])):
        step()
    return calls


def model_steps() -> dict:
    """{model name: a zero-argument training step} for the three benchmark models."""
    rng = np.random.default_rng(0)
    steps = {}
    t = bench_gpt.CONFIG["max_seq_len"]
    x = rng.integers(0, bench_gpt.CONFIG["vocab_size"], size=(bench_gpt.BATCH, t)).astype(np.int64)
    y = rng.integers(0, bench_gpt.CONFIG["vocab_size"], size=(bench_gpt.BATCH, t)).astype(np.int64)
    tt_random.manual_seed(0)
    steps["GPT"] = bench_gpt.tinytorch_step_fn(bench_gpt.GPT(**bench_gpt.CONFIG), x, y)
    for kind in ("cnn", "mlp"):
        xs, ys = bench_training.data(kind, rng)
        steps[kind.upper()] = bench_training.tinytorch_step_fn(kind, xs, ys)[1]
    return steps


def contenders(key, lib, rng):
    """{name: zero-argument callable} timing one recorded shape three ways."""
    if key[0] == "gemm":
        _, ta, tb, m, n, k = key
        a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
        c = np.empty((m, n), np.float32)
        opa, opb = (a.T if ta else a), (b.T if tb else b)
        fns = {"TinyTorch": lambda: lib.tt_sgemm(int(ta), int(tb), m, n, k, 1.0, a.ctypes.data, a.shape[1],
                                                 b.ctypes.data, b.shape[1], 0.0, c.ctypes.data, max(n, 1)),
               "OpenBLAS": lambda: np.matmul(opa, opb, out=c)}
        if torch is not None:
            ta_, tb_, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            top_a, top_b = (ta_.t() if ta else ta_), (tb_.t() if tb else tb_)
            fns["PyTorch"] = lambda: torch.mm(top_a, top_b, out=tc)
        return fns
    _, batch, m, n, k = key
    a = rng.standard_normal((batch, m, k)).astype(np.float32)
    b = rng.standard_normal((batch, k, n)).astype(np.float32)
    c = np.empty((batch, m, n), np.float32)
    fns = {"TinyTorch": lambda: lib.tt_sgemm_strided_batched(0, 0, m, n, k, 1.0, a.ctypes.data, k, m * k,
                                                             b.ctypes.data, n, k * n, 0.0, c.ctypes.data, n,
                                                             m * n, batch),
           "OpenBLAS": lambda: np.matmul(a, b, out=c)}
    if torch is not None:
        ta_, tb_, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
        fns["PyTorch"] = lambda: torch.bmm(ta_, tb_, out=tc)
    return fns


def describe(key) -> str:
    if key[0] == "gemm":
        _, ta, tb, m, n, k = key
        flags = ("A^T " if ta else "") + ("B^T" if tb else "")
        return f"{m}x{n}x{k} {flags}".strip()
    _, batch, m, n, k = key
    return f"{batch} x ({m}x{n}x{k}) batched"


def main():
    ap = C.arguments(__doc__, "bench_model_gemms.md", threads=[1, os.cpu_count()], quick=dict(rounds=1, threads=[[1]]))
    ap.add_argument("--rounds", type=int, default=5)
    args = C.parse(ap)
    lib = C.require_native()
    with C.Threads(1):
        per_model = {name: record_step(step) for name, step in model_steps().items()}
    check = lib.tt_sgemm_strided_batched  # declared in tinytorch._native: the call above is checked
    del check

    body = ["Shapes recorded from one training step of each model (calls = how often the step makes "
            "that product); times are medians of rounds of timed blocks, ratios from the same run. "
            "M x N x K; A^T / B^T = the operand is used transposed (read in place).", ""]
    summary = []
    for threads in args.threads:
        with C.Threads(threads):
            rng = np.random.default_rng(1)
            times = {}
            for calls in per_model.values():
                for key in calls:
                    if key not in times:
                        times[key] = C.measure_rounds(contenders(key, lib, rng), args.rounds, block_time=0.1)
            names = ["TinyTorch", "OpenBLAS"] + (["PyTorch"] if torch is not None else [])
            for model, calls in per_model.items():
                rows = []
                totals = dict.fromkeys(names, 0.0)
                for key, count in sorted(calls.items(), key=lambda kv: -kv[1] * times[kv[0]]["TinyTorch"]):
                    t = times[key]
                    for name in names:
                        totals[name] += count * t[name]
                    rows.append([describe(key), count] + [t[name] * 1e6 for name in names] +
                                [f"{t['TinyTorch'] / t['OpenBLAS']:.2f}x"])
                rows.append(["**step total**", sum(calls.values())] + [totals[n] * 1e6 for n in names] +
                            [f"**{totals['TinyTorch'] / totals['OpenBLAS']:.2f}x**"])
                body += [f"### {model}, {threads} thread{'s' if threads > 1 else ''}", ""]
                body += C.table(["shape", "calls"] + [f"{n} us" for n in names] + ["TinyTorch / OpenBLAS"], rows)
                body.append("")
                line = f"{model} {threads}T: TinyTorch {totals['TinyTorch'] * 1e3:.2f} ms, " \
                       f"OpenBLAS {totals['OpenBLAS'] * 1e3:.2f} ms ({totals['TinyTorch'] / totals['OpenBLAS']:.2f}x)"
                if "PyTorch" in totals:
                    line += f", PyTorch {totals['PyTorch'] * 1e3:.2f} ms"
                summary.append(line)
                print(line, flush=True)
    body = ["## Summed per model (GEMM time of one step)", ""] + [f"- {s}" for s in summary] + [""] + body
    C.write_report(args.report, "GEMMs on the shapes the models make", body, threads=args.threads)


if __name__ == "__main__":
    main()
