"""Kernels and training steps on a busy machine: p50 / p90 / p99 per call, TinyTorch and
PyTorch side by side, with no load and with busy-loop processes holding some of the cores.

Why: users train on laptops and shared boxes where a browser or a second job holds a core.
A thread team that waits for a descheduled thread makes the default thread count many times
slower than one thread; the runtime's pool (runtime/core/thread_pool.h) is built so that it
never does. This script shows whether that holds on this machine.

Calls (float32): bias + GELU 512x1024, GEMM N = 256 and 1024, attention 1x4x256x64 (not
causal), a GPT training step (vocab 65, context 128, 4 layers, 4 heads, d 128, batch 8,
AdamW) and the small CNN step of bench_training.py (batch 64, Adam). Each engine runs in a
fresh child process per load: TinyTorch, PyTorch and, with --baseline DIR, an earlier checkout
of TinyTorch (its python/ and built library), so before and after are measured in the same
run under the same load. Inside a child every call is timed at 1 thread and at the default in
alternating rounds (5 rounds, the order flipping each round), so drift in the machine's own
load hits both thread counts alike and the ratio between them is what the threads did. The
load: --load busy-loop processes (default: one, i.e. one busy core), started before and
stopped after each loaded measurement; each also stops by itself after --max-load-seconds,
so nothing outlives the script. The busy loops and the per-call timer are the scorecard's
(tinytorch/scorecard/contention.py), whose `tinytorch scorecard --only contention` times the
two kernel rows the same way.

Targets (the issue's): under one busy core of two, TinyTorch's default-thread p99 <= 1.25x
and p50 <= 1.1x its 1-thread figures. The report shows those ratios, a PNG of the p99s,
and the pool's counters (stalls, one-core calls, calls run alone during a back-off) of the
loaded runs. With --runs R the whole measurement (every engine, with and without load)
repeats R times in turn: the table pools the runs' samples, and a second table shows each
run's ratios, so the report gives the spread between runs on a host whose load is not ours.
With --gate-seconds S, the TinyPy AST gate milestone (a budget of S CPU seconds) also runs
under the same load at 1 thread and at the default: the target is the same step count within
20 % (a thread team that waits spends the budget waiting).

Usage: python benchmarks/bench_contention.py [--calls 200] [--load 1] [--runs 3] [--baseline DIR]
           [--gate-seconds 20] [--quick] [--out PATH] [--save]
Writes build/benchmarks/bench_contention.md (+ .png); benchmarks/results/ with --save.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CALLS = ["bias_gelu 512x1024", "gemm 256", "gemm 1024", "attention 1x4x256x64", "GPT step", "CNN step"]


# ----------------------------------------------------------------------------- the child

def worker(engine: str, thread_counts: list, calls: int) -> dict:
    """Per thread count, per call name: the sorted per-call times in ms (run in a child: engine
    'tinytorch' or 'torch'). The thread counts take turns in 5 rounds per call (the
    scorecard's time_calls)."""
    time_calls = scorecard_helpers().time_calls
    import numpy as np

    import _common as C
    rng = np.random.default_rng(0)
    x = rng.standard_normal((512, 1024), dtype=np.float32)
    b = rng.standard_normal(1024, dtype=np.float32)
    a256, b256 = (rng.standard_normal((256, 256), dtype=np.float32) for _ in range(2))
    a1k, b1k = (rng.standard_normal((1024, 1024), dtype=np.float32) for _ in range(2))
    q = rng.standard_normal((1, 4, 256, 64), dtype=np.float32)
    import bench_gpt as G
    import bench_training as T
    tokens = rng.integers(0, G.CONFIG["vocab_size"], (8, G.CONFIG["max_seq_len"] + 1))
    gx, gy = (np.ascontiguousarray(t, dtype=np.int64) for t in (tokens[:, :-1], tokens[:, 1:]))
    cx, cy = T.data("cnn", rng)

    if engine == "torch":
        torch = C.optional_torch()
        F = torch.nn.functional
        tx, tb, t256, u256, t1k, u1k, tq = (torch.from_numpy(v) for v in (x, b, a256, b256, a1k, b1k, q))
        from tinytorch.core import random as tt_random
        from tinytorch.core.transformers import GPT
        tt_random.manual_seed(0)
        gpt_step = G.torch_step_fn(G.build_torch_gpt(GPT(**G.CONFIG)), gx, gy)
        cnn_step = T.torch_step_fn("cnn", T.build_tinytorch("cnn"), cx, cy)
        fns = {"bias_gelu 512x1024": lambda: F.gelu(tx + tb, approximate="tanh"),
               "gemm 256": lambda: torch.mm(t256, u256), "gemm 1024": lambda: torch.mm(t1k, u1k),
               "attention 1x4x256x64": lambda: F.scaled_dot_product_attention(tq, tq, tq),
               "GPT step": gpt_step, "CNN step": cnn_step}
    else:
        from tinytorch.core import acceleration as acc
        from tinytorch.core import random as tt_random
        from tinytorch.core.transformers import GPT
        from tinytorch.extensions.flash_attn import flash_attention
        from tinytorch.extensions.simd_ops import simd_fused_bias_gelu
        tt_random.manual_seed(0)
        gpt_step = G.tinytorch_step_fn(GPT(**G.CONFIG), gx, gy)
        _, cnn_step = T.tinytorch_step_fn("cnn", cx, cy)
        fns = {"bias_gelu 512x1024": lambda: simd_fused_bias_gelu(x, b),
               "gemm 256": lambda: acc.matmul(a256, b256), "gemm 1024": lambda: acc.matmul(a1k, b1k),
               "attention 1x4x256x64": lambda: flash_attention(q, q, q),
               "GPT step": gpt_step, "CNN step": cnn_step}
    out = {str(n): {} for n in thread_counts}
    try:
        from tinytorch import native
        native.reset_thread_stats()
    except (AttributeError, RuntimeError):
        native = None
    for name in CALLS:
        reps = calls if "step" not in name else max(10, calls // 4)
        reps = reps if name != "gemm 1024" else max(10, calls // 2)
        got = time_calls({name: fns[name]}, thread_counts, reps)
        for n in thread_counts:
            out[str(n)][name] = got[str(n)][name]
    if native is not None and engine == "tinytorch":
        try:
            out["pool"] = native.thread_stats()  # only the multi-thread turns start jobs
        except AttributeError:
            pass
    return out


def scorecard_helpers():
    """tinytorch.scorecard.contention (the busy loops and the timer), from this tree even in
    an earlier checkout's child (--baseline), whose package may predate it."""
    try:
        from tinytorch.scorecard import contention
        return contention
    except ImportError:
        import importlib.util
        spec = importlib.util.spec_from_file_location("tinytorch.scorecard.contention",
                                                      os.environ["TT_BENCH_CONTENTION_PY"])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


# ----------------------------------------------------------------------------- the parent

def run_child(engine, thread_counts, calls, baseline=None):
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    script = os.path.abspath(__file__)
    if baseline:  # the earlier checkout runs this same script from its own benchmarks/ folder
        script = os.path.join(baseline, "benchmarks", os.path.basename(__file__))
        shutil.copyfile(os.path.abspath(__file__), script)
        lib = [os.path.join(baseline, d, "libtinytorch.so") for d in ("build", "build/release")]
        env["TINYTORCH_LIB"] = next((p for p in lib if os.path.exists(p)), lib[0])
        env["TT_BENCH_BASELINE"] = "1"
        from tinytorch.scorecard import contention
        env["TT_BENCH_CONTENTION_PY"] = os.path.abspath(contention.__file__)
    done = subprocess.run([sys.executable, script, "--worker", engine, ",".join(map(str, thread_counts)),
                           str(calls)],
                          capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} child failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


GATE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "milestones",
                           "05_2017_transformer", "03_tinypy_ast_gate.py")


def gate_steps(threads, seconds):
    """The TinyPy AST gate milestone (a CPU-second training budget) in a child with the runtime,
    BLAS and OpenMP on `threads` threads: (optimizer steps reached, gate passed)."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TINYTORCH_NUM_THREADS=str(threads),
               OPENBLAS_NUM_THREADS=str(threads))
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        subprocess.run([sys.executable, GATE_SCRIPT, "--seconds", str(seconds), "--eval-every", "30",
                        "--json", out], capture_output=True, text=True, env=env, timeout=1800)
        with open(out) as f:
            got = json.load(f)
    finally:
        os.unlink(out)
    return max(got["steps"]), bool(got["passed"])


def main():
    import _common as C
    from tinytorch.scorecard.contention import percentile, start_load, stop_load
    ap = C.arguments(__doc__, "bench_contention.md", quick={"calls": 30})
    ap.add_argument("--calls", type=int, default=200, help="timed calls per kernel (steps: a quarter)")
    ap.add_argument("--load", type=int, default=1, help="busy-loop processes during the loaded runs")
    ap.add_argument("--max-load-seconds", type=float, default=600, help="each busy loop stops by itself after this")
    ap.add_argument("--runs", type=int, default=1, help="repeat the whole measurement, pooling the samples")
    ap.add_argument("--baseline", default=None, help="an earlier checkout with its library built in build/")
    ap.add_argument("--gate-seconds", type=float, default=0,
                    help="also run the TinyPy AST gate milestone with this CPU-second budget under the load, "
                         "at 1 thread and the default (0: skip)")
    args = C.parse(ap)
    have_torch = C.optional_torch() is not None
    engines = [("tinytorch", None)] + ([("baseline", args.baseline)] if args.baseline else []) + \
              ([("torch", None)] if have_torch else [])
    default = os.cpu_count() or 1
    results, pools, each_run = {}, {}, {}
    total = 2 * len(engines) * args.runs
    done = 0
    started = time.time()
    for run in range(args.runs):
        for load in (0, args.load):
            procs = start_load(load, args.max_load_seconds) if load else []
            try:
                time.sleep(0.5 if load else 0)
                for name, base in engines:
                    engine = "torch" if name == "torch" else "tinytorch"
                    got = run_child(engine, [1, default], args.calls, base)
                    for threads in (1, default):
                        for call, ms in got[str(threads)].items():
                            results.setdefault((load, name, threads), {}).setdefault(call, []).extend(ms)
                            each_run[(run, load, name, threads, call)] = ms
                    if load and "pool" in got:
                        total_pool = pools.setdefault(name, {})
                        for key, value in got["pool"].items():
                            total_pool[key] = total_pool.get(key, 0) + value if key != "workers" else value
                    done += 1
                    eta = (time.time() - started) / done * (total - done)
                    print(f"[{done}/{total}] run {run + 1}, load {load}, {name}, 1 and {default} threads done; "
                          f"~{eta:.0f} s left", flush=True)
            finally:
                stop_load(procs)
    for per_call in results.values():
        for ms in per_call.values():
            ms.sort()

    body = [f"Load: {args.load} busy-loop process(es) on this {default}-CPU machine during the loaded runs "
            f"(none during the others); {args.calls} timed calls per kernel, a quarter as many steps"
            + (f", in each of {args.runs} runs; the table pools the runs' samples" if args.runs > 1 else "") + ".",
            ""]
    header = ["call", "engine", "load", "1 thread p50 / p90 / p99 (ms)",
              f"{default} threads p50 / p90 / p99 (ms)", "p50 ratio", "p99 ratio"]
    rows, verdicts = [], []
    for call in CALLS:
        for load in (0, args.load):
            for name, _ in engines:
                one, many = results[(load, name, 1)][call], results[(load, name, default)][call]
                p1 = [percentile(one, p) for p in (50, 90, 99)]
                pn = [percentile(many, p) for p in (50, 90, 99)]
                r50, r99 = pn[0] / p1[0], pn[2] / p1[2]
                rows.append([call, name, load, " / ".join(f"{v:.3f}" for v in p1),
                             " / ".join(f"{v:.3f}" for v in pn), f"{r50:.2f}x", f"{r99:.2f}x"])
                if load and name == "tinytorch":
                    ok = r99 <= 1.25 and r50 <= 1.1
                    verdicts.append(f"- {call}: default-thread p50 {r50:.2f}x, p99 {r99:.2f}x the 1-thread "
                                    f"figures under load: {'met' if ok else '**NOT met**'} (target <= 1.1x / 1.25x)")
    body += C.table(header, rows) + ["", "## Targets (TinyTorch, under load)", ""] + verdicts
    if args.runs > 1:
        body += ["", "## Each run: TinyTorch under load, default-thread p50 / p99 over the 1-thread figures", ""]
        run_rows = []
        for call in CALLS:
            cells = []
            for run in range(args.runs):
                one = sorted(each_run[(run, args.load, "tinytorch", 1, call)])
                many = sorted(each_run[(run, args.load, "tinytorch", default, call)])
                cells.append(f"{percentile(many, 50) / percentile(one, 50):.2f}x / "
                             f"{percentile(many, 99) / percentile(one, 99):.2f}x")
            run_rows.append([call] + cells)
        body += C.table(["call"] + [f"run {r + 1}" for r in range(args.runs)], run_rows)
    if pools:
        body += ["", f"## The pool's counters in the loaded runs (the {default}-thread turns, all runs)", ""]
        body += C.table(["engine", "parallel calls", "chunks by caller / workers", "stalls",
                         "one-core calls", "calls alone in back-off"],
                        [[name, s["jobs"], f"{s['chunks_caller']} / {s['chunks_workers']}", s["stalls"],
                          s.get("one_core_jobs", "-"), s["backed_off_jobs"]] for name, s in pools.items()])
    if args.gate_seconds > 0:
        procs = start_load(args.load, args.max_load_seconds)
        try:
            time.sleep(0.5)
            gate = {t: gate_steps(t, args.gate_seconds) for t in (1, default)}
        finally:
            stop_load(procs)
        ratio = gate[default][0] / max(gate[1][0], 1)
        body += ["", "## A budgeted milestone under the same load", "",
                 f"`milestones/05_2017_transformer/03_tinypy_ast_gate.py --seconds {args.gate_seconds:g} "
                 "--eval-every 30`: training stops when the process has spent that many CPU seconds on it "
                 "(all its threads together), so a default-thread run that stalls spends its budget waiting.", ""]
        body += C.table(["threads", "optimizer steps in the budget", "gate"],
                        [[t, gate[t][0], "passed" if gate[t][1] else "not passed"] for t in (1, default)])
        ok = 0.8 <= ratio <= 1.25
        body += ["", f"- default threads reached {ratio:.2f}x the 1-thread step count: "
                     f"{'met' if ok else '**NOT met**'} (target: within 20 %)"]
        print(f"gate under load: {gate[1][0]} steps on 1 thread, {gate[default][0]} on {default}", flush=True)
    png = plot(results, engines, args, default)
    if png:
        body += ["", f"![p99 per call]({os.path.basename(png)})"]
    C.write_report(args.report, "Kernels and training steps on a busy machine", body, threads=[1, default])


def plot(results, engines, args, default):
    import _common as C
    from tinytorch.scorecard.contention import percentile
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return None
    import numpy as np
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5), sharey=False)
    width = 0.8 / (2 * len(engines))
    for ax, load in zip(axes, (0, args.load)):
        for i, (name, _) in enumerate(engines):
            for j, threads in enumerate((1, default)):
                p99 = [percentile(results[(load, name, threads)][c], 99) /
                       percentile(results[(load, name, 1)][c], 99) for c in CALLS]
                ax.bar(np.arange(len(CALLS)) + (2 * i + j) * width, p99, width,
                       label=f"{name}, {threads} thread(s)")
        ax.axhline(1.25, color="k", lw=0.8, ls="--")
        ax.set_xticks(np.arange(len(CALLS)) + 0.4 - width / 2)
        ax.set_xticklabels(CALLS, rotation=20, fontsize=8)
        ax.set_ylabel("p99 / the engine's own 1-thread p99")
        ax.set_title(f"load: {load} busy core(s)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = os.path.splitext(args.report)[0] + ".png"
    C.save_figure(fig, path, dpi=110)  # atomic: a kill never leaves half a PNG
    plt.close(fig)
    return path


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        if os.environ.get("TT_BENCH_BASELINE"):
            # an editable install of the current tree redirects `import tinytorch` whatever
            # sys.path says: drop that finder so the baseline's own python/ is imported
            sys.meta_path = [f for f in sys.meta_path if "Redirect" not in type(f).__name__]
        sys.path.insert(0, HERE)
        data = worker(sys.argv[2], [int(n) for n in sys.argv[3].split(",")], int(sys.argv[4]))
        print(json.dumps(data))
    else:
        main()
