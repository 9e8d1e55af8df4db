"""Data-parallel training on MPI: 1 process x 2 threads vs 2 processes x 1 thread, DDP's bucketed
all-reduce vs mpi4py's raw Allreduce, overlap on vs off, and a scaling table on paper.

Workloads (random data, fixed seed, cross-entropy):
  * GPT: bench_gpt.py's workload (vocab 65, context 128, 4 layers, 4 heads, d=128), global batch
    32, AdamW (lr 3e-4, weight decay 0.1);
  * CNN: bench_training.py's (conv 1->8 3x3, pool, conv 8->16 3x3, pool, linear 784->10 on
    1x28x28), global batch 64, Adam (lr 1e-3).
The same global batch everywhere: one process takes all of it, each of 2 ranks takes its half
(DistributedSampler order) and DistributedDataParallel averages the gradients. A step is zero_grad
+ forward + loss + backward (+ sync_gradients) + optimizer step.

What one run measures:
  1. steps: 1 process x 1 and x 2 threads (this process), and under ``mpirun -n 2`` with one
     thread per rank: no gradient sync (each rank's compute alone), DDP after backward
     (overlap=False) and DDP with the gradient-ready hook (overlap=True). Medians over steps timed
     one at a time in alternating rounds; under MPI each step starts at a barrier and its time is
     the slower rank's. The DDP models' parameters are compared across ranks afterwards (hash).
  2. bandwidth: the model's gradient bytes all-reduced by DDP right after a backward (untimed: its
     hooks have packed each gradient x 1/N into its bucket's buffer, as in training), timed two
     ways: its communication (the blocking Allreduce per bucket) and the whole ``sync_gradients()``
     (also the check that every gradient was packed, the .grad views and releasing the backward's
     gradient arrays), against mpi4py's raw ``Allreduce(IN_PLACE)`` of the
     same bytes after the same untimed backward, as one buffer and as DDP's buckets, at bucket_mb
     25 (one bucket) and at the step runs' bucket size, the paths interleaved (one call of each
     per round, --bw-iters x --rounds rounds). Bandwidth = bytes / median time. The packing
     itself is part of the backward, so it shows in the step rows of 1 and 3, not here.
  3. overlap: the step rows of 1 (DDP off vs on, same buckets).
  4. scaling on paper: N = 2..64 hosts, ring all-reduce 2 (N-1)/N x bytes / bandwidth at 10 and
     100 Gbit/s (no latency term), against the measured per-rank compute of 1 (weak scaling:
     each host keeps half the batch) and the same compute split N ways (strong scaling: the global
     batch fixed; the measured optimizer step does not shrink).

Bucket size for the step runs: --bucket-mb, default about a quarter of each model's gradient bytes
(several buckets, so overlap has something to overlap); DDP's own default is 25 MB.

The MPI half runs this script again as ``mpirun -n 2 ... bench_distributed.py --worker-out F``
(found and configured like ``tinytorch launch``: venv mpirun first, one thread per rank, root
allowed), in its own session and killed after --timeout seconds, so it never hangs; rank 0 writes
its raw measurements to F (JSON, atomically). Beside the report goes bench_distributed.json: the
raw samples every table cell is computed from.

Usage: python benchmarks/bench_distributed.py [--steps 10] [--rounds 3] [--bw-iters 40] [--quick] [--save]
Writes build/benchmarks/bench_distributed.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

import _common as C

from tinytorch import _atomic  # noqa: E402  (path set up by _common)
from tinytorch import distributed as dist  # noqa: E402
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.layers import Flatten, Linear, Sequential  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import Adam, AdamW  # noqa: E402
from tinytorch.core.spatial import Conv2d, MaxPool2d  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402

GPT_CONFIG = dict(vocab_size=65, embed_dim=128, num_layers=4, num_heads=4, max_seq_len=128)  # bench_gpt.py's
BATCH = {"gpt": 32, "cnn": 64}
MODELS = ("gpt", "cnn")
BANDWIDTHS_GBIT = (10, 100)
HOSTS = (2, 4, 8, 16, 32, 64)
RANKS = 2


# ----------------------------------------------------------------------------- workloads

def build(kind):
    tt_random.manual_seed(0)
    if kind == "gpt":
        return GPT(**GPT_CONFIG)
    return Sequential(Conv2d(1, 8, 3, padding=1), ReLU(), MaxPool2d(2), Conv2d(8, 16, 3, padding=1), ReLU(),
                      MaxPool2d(2), Flatten(), Linear(16 * 7 * 7, 10))


def batch(kind):
    """The global batch (x, y), the same on every rank."""
    rng = np.random.default_rng(0)
    n = BATCH[kind]
    if kind == "gpt":
        t, v = GPT_CONFIG["max_seq_len"], GPT_CONFIG["vocab_size"]
        return rng.integers(0, v, (n, t)).astype(np.int64), rng.integers(0, v, (n, t)).astype(np.int64)
    return rng.standard_normal((n, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, n).astype(np.int64)


def gradient_bytes(model) -> int:
    return int(sum(p.data.nbytes for p in model.parameters() if p.requires_grad))


def default_bucket_mb(kind) -> float:
    """About a quarter of the model's gradient bytes, in MB (several buckets to overlap)."""
    return gradient_bytes(build(kind)) / 4 / 2 ** 20


def step_fn(kind, x, y, ddp_options=None):
    """One training step on (x, y): zero_grad, forward, loss, backward, [sync], optimizer step.
    Returns (step, model, ddp, optimizer); ddp is None without ddp_options. step.forward_backward
    is the step's zero_grad + forward + loss + backward alone."""
    model = build(kind)
    ddp = dist.DistributedDataParallel(model, **ddp_options) if ddp_options is not None else None
    opt = (AdamW(model.parameters(), lr=3e-4, weight_decay=0.1) if kind == "gpt"
           else Adam(model.parameters(), lr=1e-3))
    inp = x if kind == "gpt" else Tensor.from_numpy(x)
    v = GPT_CONFIG["vocab_size"]

    def forward_backward():
        opt.zero_grad()
        out = model(inp)
        loss = cross_entropy(out.reshape(-1, v), y.reshape(-1)) if kind == "gpt" else cross_entropy(out, y)
        loss.backward()

    def step():
        forward_backward()
        if ddp is not None:
            ddp.sync_gradients()
        opt.step()
    step.forward_backward = forward_backward
    return step, model, ddp, opt


# ----------------------------------------------------------------------------- the MPI worker

def _synced_times(fns, steps, rounds, warmup, comm, before=None):
    """Like C.time_steps, with a barrier before every call; each sample is the slower rank's (ms).
    before[name], when given, runs untimed before each call of fns[name]."""
    before = before or {}
    for name, fn in fns.items():
        for _ in range(warmup):
            if name in before:
                before[name]()
            comm.Barrier()
            fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(steps):
                if name in before:
                    before[name]()
                comm.Barrier()
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    out = {}
    from mpi4py import MPI
    for name, t in times.items():
        arr = np.array(t) * 1e3
        comm.Allreduce(MPI.IN_PLACE, arr, op=MPI.MAX)
        out[name] = arr.tolist()
    return out


def _params_hash(model) -> int:
    import hashlib
    h = hashlib.blake2b(digest_size=8)
    for p in model.parameters():
        h.update(np.ascontiguousarray(p.data).tobytes())
    return int.from_bytes(h.digest(), "little") >> 1


def worker(args) -> None:
    """Run under mpirun: rank r trains on its half of each global batch; rank 0 writes JSON."""
    from mpi4py import MPI
    dist.init()
    comm, rank, n = MPI.COMM_WORLD, dist.rank(), dist.world_size()
    result = {"world_size": n, "models": {}}
    with C.Threads(1):
        for kind in MODELS:
            x, y = batch(kind)
            idx = np.array(list(dist.DistributedSampler(len(x), shuffle=False)))
            xs, ys = x[idx], y[idx]
            mb = args.bucket_mb if args.bucket_mb else default_bucket_mb(kind)
            compute, _, _, opt_c = step_fn(kind, xs, ys)
            off, m_off, d_off, _ = step_fn(kind, xs, ys, dict(bucket_mb=mb, overlap=False))
            on, m_on, d_on, _ = step_fn(kind, xs, ys, dict(bucket_mb=mb, overlap=True))
            steps = _synced_times({"compute": compute, "ddp_off": off, "ddp_on": on},
                                  args.steps, args.rounds, args.warmup, comm)
            same = []
            for m in (m_off, m_on):  # DDP keeps every rank's parameters identical
                hashes = dist.all_gather(np.array([_params_hash(m)], dtype=np.int64)).ravel()
                same.append(bool(np.all(hashes == hashes[0])))
            # the optimizer step alone (its grads are the last step's): the part of compute that
            # a smaller per-host batch does not shrink
            opt_ms = _synced_times({"opt": opt_c.step}, max(args.steps, 3), 1, 1, comm)["opt"]

            # bandwidth: DDP's sync_gradients right after a backward (untimed) vs raw Allreduce of
            # the same bytes. Each DDP gets a model of its own (one wrapper per model, as in use).
            comm_fns, layouts, before = {}, {}, {}
            bw_25, m_25, d_25, _ = step_fn(kind, xs, ys, dict(bucket_mb=25, overlap=False))
            for label, ddp, fb in (("25", d_25, bw_25.forward_backward), ("run", d_off, off.forward_backward)):
                sizes = [sum(p.data.size for p in b) for b in ddp.buckets]
                layouts[label] = sizes
                bufs = [np.ones(s, dtype=np.float32) for s in sizes]
                comm_fns[f"ddp_{label}"] = ddp.sync_gradients
                # DDP's communication alone: its bucket all-reduces, on the buffers the hooks packed
                comm_fns[f"bkt_{label}"] = ddp._sum_flats
                before[f"ddp_{label}"] = before[f"bkt_{label}"] = before[f"raw_{label}"] = fb  # all after a backward
                comm_fns[f"raw_{label}"] = (lambda bufs=bufs: [comm.Allreduce(MPI.IN_PLACE, b, op=MPI.SUM)
                                                               for b in bufs])
            one = np.ones(sum(layouts["25"]), dtype=np.float32)
            comm_fns["raw_one"] = lambda: comm.Allreduce(MPI.IN_PLACE, one, op=MPI.SUM)
            before["raw_one"] = bw_25.forward_backward
            # interleaved (one sample of each path per round): a shared host's drift over seconds
            # then falls on every path alike (blocks of 40 per path moved the DDP/raw ratio by 0.4)
            comm_ms = _synced_times(comm_fns, 1, args.bw_iters * args.rounds, 3, comm, before)
            result["models"][kind] = dict(
                per_rank_batch=len(xs), bucket_mb=mb, grad_bytes=gradient_bytes(m_off),
                buckets={k: v for k, v in layouts.items()}, step_ms=steps, opt_ms=opt_ms,
                comm_ms=comm_ms, params_identical=same)
    if rank == 0:
        _atomic.write_file(args.worker_out, json.dumps(result).encode())
    dist.barrier()


def run_workers(args) -> dict:
    """Start this script under mpirun -n 2 (one thread per rank), bounded by args.timeout."""
    from tinytorch.distributed.launcher import launch_command
    fd, out = tempfile.mkstemp(prefix="bench_distributed_", suffix=".json")
    os.close(fd)
    os.unlink(out)  # the worker's rank 0 creates it: no file means no result
    extra = ["--worker-out", out, "--steps", str(args.steps), "--rounds", str(args.rounds),
             "--warmup", str(args.warmup), "--bw-iters", str(args.bw_iters)]
    if args.bucket_mb:
        extra += ["--bucket-mb", str(args.bucket_mb)]
    argv, env = launch_command(RANKS, os.path.abspath(__file__), extra, threads=1, oversubscribe=True)
    print("running: " + " ".join(argv), flush=True)
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        text, _ = proc.communicate(timeout=args.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        text, _ = proc.communicate()
        sys.exit(f"bench_distributed: the mpirun -n {RANKS} workers did not finish within {args.timeout} s "
                 f"(killed); their output:\n{text[-3000:]}")
    if proc.returncode != 0 or not os.path.exists(out):
        sys.exit(f"bench_distributed: mpirun -n {RANKS} failed (exit {proc.returncode}):\n{text[-3000:]}")
    try:
        with open(out) as f:
            return json.load(f)
    finally:
        os.unlink(out)


# ----------------------------------------------------------------------------- derived numbers

def ring_ms(nbytes, hosts, gbit) -> float:
    """Ring all-reduce time on paper: 2 (N-1)/N x bytes / bandwidth, no latency term."""
    return 2 * (hosts - 1) / hosts * nbytes / (gbit * 1e9 / 8) * 1e3


def scaling(m) -> dict:
    """The paper table for one model from its measured compute (ms) and gradient bytes."""
    compute = float(np.median(m["step_ms"]["compute"]))
    opt = min(float(np.median(m["opt_ms"])), compute)
    rows = []
    for n in HOSTS:
        strong = (compute - opt) * RANKS / n + opt
        comm = {g: ring_ms(m["grad_bytes"], n, g) for g in BANDWIDTHS_GBIT}
        rows.append(dict(hosts=n, weak_ms=compute, strong_ms=strong, comm_ms=comm))
    first = {}
    for mode in ("weak", "strong"):
        for g in BANDWIDTHS_GBIT:
            hit = [r["hosts"] for r in rows if r["comm_ms"][g] > r[f"{mode}_ms"]]
            first[f"{mode}_{g}"] = hit[0] if hit else None
    return dict(compute_ms=compute, opt_ms=opt, rows=rows, dominates_from=first)


def summarize(local, mpi) -> dict:
    """Every number the report prints, from the raw samples."""
    s = {}
    for kind in MODELS:
        m = mpi["models"][kind]
        b = BATCH[kind]
        steps = {f"1x{t}": local[kind][f"1x{t}"] for t in (1, 2)}
        steps.update({f"2x1 {k}": v for k, v in m["step_ms"].items()})
        med = {k: float(np.median(v)) for k, v in steps.items()}
        comm = {k: float(np.median(v)) for k, v in m["comm_ms"].items()}
        nbytes = m["grad_bytes"]
        s[kind] = dict(
            step_median_ms=med, samples_per_s={k: b / (v / 1e3) for k, v in med.items()},
            comm_median_ms=comm, gb_per_s={k: nbytes / (v / 1e3) / 1e9 for k, v in comm.items()},
            ddp_vs_raw={"25": comm["raw_one"] / comm["ddp_25"], "run": comm["raw_run"] / comm["ddp_run"]},
            buckets_vs_raw={"25": comm["raw_one"] / comm["bkt_25"], "run": comm["raw_run"] / comm["bkt_run"]},
            overlap_saving_ms=med["2x1 ddp_off"] - med["2x1 ddp_on"],
            scaling=scaling(m))
    return s


# ----------------------------------------------------------------------------- report

def _fmt_n(n):
    return f"from N = {n}" if n else "at no N up to 64"


def report_body(args, local, mpi, s) -> list[str]:
    names = {"1x1": "1 process x 1 thread", "1x2": "1 process x 2 threads",
             "2x1 compute": "2 processes x 1 thread, no gradient sync (compute only)",
             "2x1 ddp_off": "2 processes x 1 thread, DDP after backward (overlap off)",
             "2x1 ddp_on": "2 processes x 1 thread, DDP gradient-ready hook (overlap on)"}
    body = [f"Global batch: GPT {BATCH['gpt']} x {GPT_CONFIG['max_seq_len']} tokens (bench_gpt.py's model), "
            f"CNN {BATCH['cnn']} images (bench_training.py's); 2 ranks take half each. "
            f"{args.steps * args.rounds} timed steps per row after {args.warmup} warm-up steps, alternating "
            "rounds; under MPI every step starts at a barrier and counts the slower rank. "
            "The MPI rows ran as `mpirun -n 2` with one runtime/BLAS thread per rank "
            "(tinytorch.distributed.launcher).", ""]
    body += ["## 1. Training step: 1 process x 2 threads vs 2 processes x 1 thread", "",
             "| model | run | median ms/step | p10-p90 ms | samples/s | vs 1 x 2 threads |",
             "|---|---|---:|---:|---:|---:|"]
    for kind in MODELS:
        m = mpi["models"][kind]
        raw = {"1x1": local[kind]["1x1"], "1x2": local[kind]["1x2"]}
        raw.update({f"2x1 {k}": v for k, v in m["step_ms"].items()})
        ref = s[kind]["step_median_ms"]["1x2"]
        for key, label in names.items():
            med, p10, p90 = C.spread(raw[key])
            body.append(f"| {kind.upper()} | {label} | {med:.2f} | {p10:.2f}-{p90:.2f} | "
                        f"{s[kind]['samples_per_s'][key]:,.1f} | {ref / med:.2f}x |")
    body += ["", "DDP's parameters identical on both ranks after the timed steps (hash): " + ", ".join(
        f"{k.upper()} {'yes' if all(mpi['models'][k]['params_identical']) else 'NO'}" for k in MODELS) + ".", ""]

    body += ["## 2. All-reduce: DDP's buckets vs mpi4py's raw Allreduce, same bytes", "",
             "Each row all-reduces the model's float32 gradient bytes across the 2 ranks (shared memory on one "
             "host), after a backward (untimed; DDP's hooks packed each gradient, times 1/N, into its bucket's "
             "persistent flat buffer as it became final). `ddp bucket all-reduces` is DDP's communication: "
             "its blocking Allreduce per bucket on those buffers (what sync_gradients ends with); `ddp "
             "sync_gradients` is the whole call: before the all-reduces, the check that every gradient was "
             "packed, each .grad made its bucket's view and the backward's own gradient arrays released (a plain "
             "step releases them in zero_grad instead: moved, not added); `raw Allreduce` is mpi4py's "
             "`Allreduce(IN_PLACE)` on preallocated float32 buffers of the same sizes. The paths are "
             "interleaved (one call of each per round; right after a backward an all-reduce runs on cold "
             "caches: on one host the CNN's 36 KB took 3x as long as back to back). Bandwidth = bytes / "
             "median time (algorithm bandwidth; for N = 2 the ring's bus factor 2 (N-1)/N is 1).", "",
             "| model | bytes | buckets | path | median ms | p10-p90 ms | GB/s | DDP time / raw |",
             "|---|---:|---|---|---:|---:|---:|---:|"]
    for kind in MODELS:
        m, sm = mpi["models"][kind], s[kind]
        for label, layout_key, raw_key, desc in (
                ("25", "25", "raw_one", "one buffer"), ("run", "run", "raw_run", "DDP's buckets as buffers")):
            nb = len(m["buckets"][layout_key])
            bucket_text = f"{nb} (bucket_mb {25 if label == '25' else round(m['bucket_mb'], 4)})"
            for path, key, ratios in ((f"raw Allreduce, {desc}", raw_key, None),
                                      ("ddp bucket all-reduces", f"bkt_{label}", "buckets_vs_raw"),
                                      ("ddp sync_gradients", f"ddp_{label}", "ddp_vs_raw")):
                med, p10, p90 = C.spread(m["comm_ms"][key])
                ratio = f"{1 / sm[ratios][label]:.2f}" if ratios else ""
                body.append(f"| {kind.upper()} | {m['grad_bytes']:,} | {bucket_text} | {path} | {med:.3f} | "
                            f"{p10:.3f}-{p90:.3f} | {sm['gb_per_s'][key]:.2f} | {ratio} |")
    body += [""]
    for kind in MODELS:
        r, w = s[kind]["buckets_vs_raw"], s[kind]["ddp_vs_raw"]
        comm = s[kind]["comm_median_ms"]
        verdict = "within" if min(r.values()) >= 1 / 1.1 else "outside"
        nb = len(mpi['models'][kind]['buckets']['run'])
        body.append(f"- {kind.upper()}: DDP's communication / raw = {1 / r['25']:.2f} (one bucket), {1 / r['run']:.2f} "
                    f"({nb} buckets): {verdict} the 10 % target. The whole sync_gradients / raw = "
                    f"{1 / w['25']:.2f} / {1 / w['run']:.2f}; its work around the all-reduces "
                    f"{1e3 * (comm['ddp_25'] - comm['bkt_25']):.0f} / {1e3 * (comm['ddp_run'] - comm['bkt_run']):.0f} us.")
    body += [""]

    body += ["## 3. Overlap on vs off", "",
             "| model | bucket_mb | buckets | after backward ms | gradient-ready hook ms | saved ms | "
             "compute only ms | communication exposed (off - compute) ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in MODELS:
        m, med = mpi["models"][kind], s[kind]["step_median_ms"]
        body.append(f"| {kind.upper()} | {m['bucket_mb']:.4g} | {len(m['buckets']['run'])} | "
                    f"{med['2x1 ddp_off']:.2f} | {med['2x1 ddp_on']:.2f} | {s[kind]['overlap_saving_ms']:+.2f} | "
                    f"{med['2x1 compute']:.2f} | {med['2x1 ddp_off'] - med['2x1 compute']:+.2f} |")
    body += [""]

    body += ["## 4. Scaling on paper: N hosts, ring all-reduce", "",
             "Ring all-reduce moves 2 (N-1)/N x bytes per rank; time = that / link bandwidth (10 and 100 "
             "Gbit/s, no latency term, no overlap). Compute per step is the measured rank's step without "
             "gradient sync (row \"compute only\" above, 1 thread, half the global batch). Weak scaling: "
             "every host keeps that batch, so compute stays. Strong scaling: the global batch stays, so "
             "the forward/backward part shrinks as 2/N (the measured optimizer step does not). "
             "\"comm / compute\" above 1 means communication dominates the step.", ""]
    for kind in MODELS:
        sc = s[kind]["scaling"]
        nb = mpi["models"][kind]["grad_bytes"]
        body += [f"**{kind.upper()}**: {nb:,} gradient bytes, compute {sc['compute_ms']:.2f} ms/step "
                 f"(of it the optimizer step {sc['opt_ms']:.2f} ms).", "",
                 "| N hosts | 2(N-1)/N | comm ms @10 Gbit/s | comm ms @100 Gbit/s | weak: comm / compute @10 | "
                 "@100 | strong: compute ms | strong: comm / compute @10 | @100 |",
                 "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in sc["rows"]:
            c10, c100 = r["comm_ms"][10], r["comm_ms"][100]
            body.append(f"| {r['hosts']} | {2 * (r['hosts'] - 1) / r['hosts']:.3f} | {c10:.3f} | {c100:.4f} | "
                        f"{c10 / r['weak_ms']:.3f} | {c100 / r['weak_ms']:.4f} | {r['strong_ms']:.2f} | "
                        f"{c10 / r['strong_ms']:.3f} | {c100 / r['strong_ms']:.4f} |")
        d = sc["dominates_from"]
        body += ["", f"Communication dominates the step (comm / compute > 1): weak scaling {_fmt_n(d['weak_10'])} at 10 Gbit/s, "
                 f"{_fmt_n(d['weak_100'])} at 100 Gbit/s (the ring's time tends to 2 x bytes / bandwidth = "
                 f"{ring_ms(nb, 10 ** 9, 10):.2f} / {ring_ms(nb, 10 ** 9, 100):.3f} ms); strong scaling "
                 f"{_fmt_n(d['strong_10'])} at 10 Gbit/s, {_fmt_n(d['strong_100'])} at 100 Gbit/s.", ""]
    return body


def measure_local(args) -> dict:
    """1 process x 1 and x 2 threads on the whole global batch, alternating rounds."""
    out = {}
    for kind in MODELS:
        x, y = batch(kind)
        out[kind] = {}
        for t in (1, 2):
            with C.Threads(t):
                step = step_fn(kind, x, y)[0]
                out[kind][f"1x{t}"] = C.time_steps({"s": step}, args.steps, args.rounds, args.warmup)["s"].tolist()
    return out


def main():
    ap = C.arguments(__doc__, "bench_distributed.md", threads=2,
                     quick=dict(steps=1, rounds=1, warmup=1, bw_iters=2))
    ap.add_argument("--steps", type=int, default=10, help="timed steps per row per round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps per row first")
    ap.add_argument("--bw-iters", type=int, default=40, help="timed all-reduces per path per --rounds (interleaved: one of each path in turn)")
    ap.add_argument("--bucket-mb", type=float, default=None,
                    help="DDP bucket size for the step runs (default: a quarter of each model's gradients)")
    ap.add_argument("--timeout", type=float, default=420, help="seconds before the mpirun workers are killed")
    ap.add_argument("--worker-out", default=None, help=argparse_suppress())
    args = C.parse(ap)
    for name in ("steps", "rounds", "bw_iters"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.warmup < 0:
        ap.error(f"--warmup must be >= 0, got {args.warmup}")
    if args.bucket_mb is not None and not args.bucket_mb > 0:
        ap.error(f"--bucket-mb must be > 0, got {args.bucket_mb}")
    if args.worker_out:
        return worker(args)
    ok, why = dist.available()
    if not ok:
        sys.exit(f"bench_distributed needs MPI: {why}")

    mpi = run_workers(args)
    if mpi.get("world_size") != RANKS:
        sys.exit(f"bench_distributed: the workers saw world size {mpi.get('world_size')}, expected {RANKS}")
    local = measure_local(args)
    s = summarize(local, mpi)
    body = report_body(args, local, mpi, s)
    print("\n".join(body))
    raw_path = os.path.splitext(args.report)[0] + ".json"
    _atomic.write_file(raw_path, json.dumps(dict(local=local, mpi=mpi, summary=s), indent=1).encode())
    mpi_line = f"- MPI: {why}, {RANKS} ranks on this host (shared memory)"
    C.write_report(args.report, "Data-parallel training on MPI: processes vs threads, DDP all-reduce, scaling",
                   [mpi_line, ""] + body, threads=[1, 2])


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
