"""The thread pool's two placement rules, measured: when waking a worker pays, and what the
scheduler does with a worker beside a busy core.

Why: the runtime's pool (runtime/core/thread_pool.h) runs a call on its caller alone when
every worker sleeps and the call's one-thread estimate is under 150 us (waking a sleeping
worker costs tens of microseconds), with the estimates in runtime/core/parallel.h
(``solo_cost``); and it backs off when a job's worker ran only on the caller's own core.
This script is where the figures quoted there come from:

  1. rates       one-thread nanoseconds per element of the row and elementwise kernels: the
                 slope between 512 and 2048 rows of 1024 floats (median of timed calls);
  2. wake-up     2 / 1-thread time per call with --gap-us of busy Python between calls (the
                 worker falls asleep 20 us after a job, as between the kernels of a training
                 step), per kernel family and size, the two counts taking turns in rounds;
                 "jobs / call" says whether the call woke the pool (0: the rule kept it alone);
  3. placement   under one busy-loop process, bias + GELU 512 x 1024 on two threads with the
                 back-off off (TINYTORCH_THREAD_BACKOFF=0, in a child), each call classified
                 by the pool's counters: its worker ran on the caller's own core
                 (one_core_jobs), on another core (worker chunks, no one-core job), or never
                 started; one thread beside it.

Usage: python benchmarks/bench_wakeup.py [--gap-us 200] [--calls 40] [--quick] [--out PATH] [--save]
Writes build/benchmarks/bench_wakeup.md; benchmarks/results/ with --save.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

import _common as C

from tinytorch import native  # noqa: E402
from tinytorch.core import acceleration as acc  # noqa: E402
from tinytorch.extensions.compile import compile_graph  # noqa: E402
from tinytorch.scorecard.contention import percentile, start_load, stop_load  # noqa: E402

ROUNDS = 6


def spin(seconds: float) -> None:
    """Busy Python for `seconds` (time.sleep would idle the core the scheduler then reuses)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def row_kernels(rng, rows: int) -> dict:
    x = rng.standard_normal((rows, 1024), dtype=np.float32)
    y = rng.standard_normal((rows, 1024), dtype=np.float32)
    b, g = rng.standard_normal(1024, dtype=np.float32), np.ones(1024, np.float32)
    fused = compile_graph(lambda p, q: (p * q + 1.0) * 0.5 - p, x, y)

    def fused_with(executor):
        def call():
            os.environ["TINYTORCH_FUSION"] = executor  # read per call
            try:
                return fused(x, y)
            finally:
                os.environ.pop("TINYTORCH_FUSION", None)
        return call
    return {"bias + GELU": lambda: acc.bias_gelu(x, b),
            "softmax": lambda: acc.softmax(x),
            "softmax backward": lambda: acc.softmax_backward(y, x),
            "layer norm": lambda: acc.layer_norm(x, g, b, 1e-5),
            "ReLU": lambda: acc.relu(x),
            "fused a*b+1 chain, compiled": fused_with("compiled"),
            "fused a*b+1 chain, interpreted": fused_with("interp")}


def median_ns(fn, calls: int) -> float:
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times))


def rates(calls: int) -> list:
    rng = np.random.default_rng(0)
    with C.Threads(1):
        small, big = row_kernels(rng, 512), row_kernels(rng, 2048)
        return [[name, f"{(median_ns(big[name], calls) - median_ns(small[name], calls)) / (1536 * 1024):.2f}"]
                for name in small]


def wake_cases(rng) -> list:
    cases = []
    for rows in (64, 128, 256, 512):
        for name, fn in row_kernels(rng, rows).items():
            if name in ("bias + GELU", "softmax", "layer norm", "fused a*b+1 chain, compiled"):
                cases.append((f"{name} {rows} x 1024", fn))
    for s in (64, 128, 256):
        q = rng.standard_normal((1, 4, s, 64), dtype=np.float32)
        cases.append((f"attention 1 x 4 x {s} x 64", lambda q=q: acc.attention(q, q, q)))
    w = rng.integers(-127, 128, (768, 768)).astype(np.int8)
    for m in (8, 16, 32, 64):
        uq, _, zp = acc.quantize_rows(rng.standard_normal((m, 768), dtype=np.float32), True)
        packs = {}
        cases.append((f"int8 GEMM {m} x 768 x 768",
                      lambda uq=uq, zp=zp, packs=packs: acc.quantized_matmul(uq, zp, w, packs, True)))
    for n in (64, 128, 256):
        a = rng.standard_normal((n, n), dtype=np.float32)
        cases.append((f"GEMM {n}^3", lambda a=a: acc.matmul(a, a)))
    return cases


def wakeup(gap_s: float, calls: int) -> list:
    rows = []
    for name, fn in wake_cases(np.random.default_rng(1)):
        fn()
        times, jobs = {1: [], 2: []}, 0
        for r in range(ROUNDS):
            for n in ((1, 2) if r % 2 == 0 else (2, 1)):
                with C.Threads(n):
                    fn()
                    spin(gap_s)
                    native.reset_thread_stats()
                    for _ in range(calls):
                        t0 = time.perf_counter()
                        fn()
                        times[n].append(time.perf_counter() - t0)
                        spin(gap_s)
                    if n == 2:
                        jobs += native.thread_stats()["jobs"]
        one, two = np.median(times[1]) * 1e6, np.median(times[2]) * 1e6
        rows.append([name, f"{one:.1f}", f"{two:.1f}", f"{two / one:.2f}x", f"{jobs / (ROUNDS * calls):.2f}"])
    return rows


def placement_child(calls: int) -> dict:
    """In a child with TINYTORCH_THREAD_BACKOFF=0: per-call times by where the worker ran."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 1024), dtype=np.float32)
    b = rng.standard_normal(1024, dtype=np.float32)
    by = {"1 thread": [], "worker on the caller's core": [], "worker on another core": [],
          "worker never started": [], "ran alone": []}
    for r in range(ROUNDS * 2):
        for n in ((1, 2) if r % 2 == 0 else (2, 1)):
            with C.Threads(n):
                for _ in range(calls):
                    s0 = native.thread_stats()
                    t0 = time.perf_counter()
                    acc.bias_gelu(x, b)
                    ms = (time.perf_counter() - t0) * 1e3
                    s1 = native.thread_stats()
                    d = {k: s1[k] - s0[k] for k in s0}
                    key = ("1 thread" if n == 1 else "worker on the caller's core" if d["one_core_jobs"]
                           else "worker on another core" if d["chunks_workers"]
                           else "worker never started" if d["jobs"] else "ran alone")
                    by[key].append(ms)
    return by


def placement(calls: int) -> list:
    env = dict(os.environ, TINYTORCH_THREAD_BACKOFF="0")
    procs = start_load(1, 600)
    try:
        time.sleep(0.5)
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--placement-worker", str(calls)],
                              capture_output=True, text=True, env=env, timeout=1200)
    finally:
        stop_load(procs)
    if done.returncode != 0:
        raise RuntimeError(f"placement child failed: {done.stderr[-2000:]}")
    by = json.loads(done.stdout.strip().splitlines()[-1])
    return [[k, len(v)] + [f"{percentile(v, p):.3f}" for p in (50, 90, 99)] for k, v in by.items() if v]


def main():
    ap = C.arguments(__doc__, "bench_wakeup.md", quick={"calls": 10})
    ap.add_argument("--gap-us", type=float, default=200, help="busy Python between calls in the wake-up part")
    ap.add_argument("--calls", type=int, default=40, help="timed calls per round")
    args = C.parse(ap)
    print("1/3 rates", flush=True)
    rate_rows = rates(max(10, args.calls))
    print("2/3 wake-up", flush=True)
    wake_rows = wakeup(args.gap_us * 1e-6, args.calls)
    print("3/3 placement under one busy core", flush=True)
    place_rows = placement(max(20, args.calls * 2))
    body = ["## 1. One-thread cost per element (the estimates of parallel.h's solo_cost)", "",
            "Slope between 512 and 2048 rows of 1024 float32, medians of timed calls, 1 thread.", ""]
    body += C.table(["kernel", "ns per element"], rate_rows)
    body += ["", f"## 2. The wake-up rule: {args.gap_us:g} us of busy Python between calls", "",
             f"Medians of {ROUNDS} x {args.calls} calls per thread count, the counts taking turns; "
             "'jobs / call' on 2 threads: 0 means the call ran on its caller (estimated under 150 us "
             "with every worker asleep), 1 or more that it woke the pool (a GEMM is two jobs: packing, "
             "then the product).", ""]
    body += C.table(["call", "1 thread (us)", "2 threads (us)", "2 / 1", "jobs / call"], wake_rows)
    body += ["", "## 3. Where the scheduler puts the worker beside one busy core", "",
             "bias + GELU 512 x 1024, one busy-loop process, the back-off off (TINYTORCH_THREAD_BACKOFF=0) "
             "so every 2-thread call tries the worker; each call classified by the pool's counters.", ""]
    body += C.table(["calls", "count", "p50 ms", "p90 ms", "p99 ms"], place_rows)
    C.write_report(args.report, "The thread pool's wake-up and placement rules", body, threads=[1, 2])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--placement-worker":
        print(json.dumps(placement_child(int(sys.argv[2]))))
    else:
        main()
