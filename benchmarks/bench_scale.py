"""GPT at real scale: GPT-2 small training and KV-cache decoding, TinyTorch vs PyTorch CPU, same run.

What this file owns
  The scale benchmark of issue #28: our GPT (core/transformers.py) at GPT-2 small (12 layers,
  d 768, 12 heads, context 1024, vocab 50,257, tied head, random weights) and two smaller
  points (d 256 / 6 layers, d 512 / 8 layers, same vocabulary and context), against the same
  architecture in torch.nn (torch_gpt.py: pre-LN blocks, separate q/k/v/out projections, GELU
  tanh MLP, learned positions, head tied to the token table) holding the SAME initial weights:
  our weights are saved once per size and loaded into the torch module, and the first-step
  losses of the two must agree within float32 tolerance before a row is reported.

  * training step (zero_grad + forward + cross-entropy + backward + AdamW, lr 3e-4, weight
    decay 0.1): 1 warm-up step (its loss is the parity check), then `--steps` timed steps;
    median step time, tokens/s = batch * T / median, and peak memory: the process's RSS peak
    (getrusage ru_maxrss) and our runtime's storage peak (tinytorch.native.memory_stats()
    ['peak_bytes'], reset before the first step; the runtime's own buffers: GEMM packing and
    scratch; arrays are NumPy's and count in RSS). Optionally with activation checkpointing
    of every block (extensions/activation_checkpoint.py; torch.utils.checkpoint for PyTorch).
  * inference: a prompt of `--prompt` tokens, then `--new-tokens` greedy tokens through the
    KV cache (ours: kv_cache.generate_with_cache; PyTorch: the twin's past-key-values loop).
    Prefill time = start to the first sampled token; decode tokens/s =
    (new tokens - 1) / time from the first to the last sampled token.
  * cost growth: step time and memory against d, layers and T, plotted, with the FLOP count
    of a step and its share of the measured FMA peak.

FLOPs of one training step (PaLM's model-FLOPs convention, matrix products only):
    FLOPs = 6 * N * B * T  +  12 * L * d * T * B * T
  N = 12 * L * d^2 + V * d (the weight matrices of the blocks and the head; embeddings are
  gathers and biases, norms, GELU, softmax and AdamW are left out); the second term is the
  attention products (q k^T and p v, forward 2 * 2 * T * d per token per layer, backward twice
  that), counted over the full T x T square although a causal kernel may skip half of it.
  `step_flops` is the one implementation; tests/test_bench_scale.py checks it against a
  product-by-product hand count.

How it runs (memory is shared: GPT-2 small AdamW holds ~2 GB of parameters + moments per
framework): every configuration runs in its own `spawn` subprocess, one at a time, so RSS
peaks never mix and one framework's arrays never sit beside the other's. The PyTorch worker
runs with TINYTORCH_MALLOC=default (glibc's allocator as PyTorch normally sees it: importing
tinytorch, which the worker does for the shared timing helpers, would otherwise tune it).
Each configuration is printed as it starts and ends, with an ETA from the FLOP rate so far.

Usage: python benchmarks/bench_scale.py [--quick] [--save] [--out PATH] [--sizes d256-L6,...]
           [--shapes 4x256,1x1024] [--threads 1,2] [--steps 3] [--prompt 256] [--new-tokens 256]
           [--decode-rounds 3] [--budget-min 25] [--no-sweeps] [--no-checkpoint] [--no-training]
  --quick: the two small points, 4 x 128, 2 timed steps, 32 new tokens, 1 thread, no sweeps,
           one decode round.
Writes build/benchmarks/bench_scale.md (+ .png, + .json with every raw measurement;
benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import resource
import shutil
import tempfile
import time

import numpy as np

import _common as C
from torch_gpt import build_torch_gpt, copy_weights  # the one PyTorch twin of our GPT

from tinytorch.core import random as tt_random  # noqa: E402  (path set up by _common)
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import AdamW  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402

LR, WEIGHT_DECAY = 3e-4, 0.1
VOCAB, CONTEXT = 50257, 1024
# name -> GPT arguments (head size 64 throughout, GPT-2's); "tiny" is the test's point.
SIZES = {
    "tiny": dict(vocab_size=512, embed_dim=64, num_layers=2, num_heads=2, max_seq_len=128),
    "d256-L3": dict(vocab_size=VOCAB, embed_dim=256, num_layers=3, num_heads=4, max_seq_len=CONTEXT),
    "d256-L6": dict(vocab_size=VOCAB, embed_dim=256, num_layers=6, num_heads=4, max_seq_len=CONTEXT),
    "d256-L12": dict(vocab_size=VOCAB, embed_dim=256, num_layers=12, num_heads=4, max_seq_len=CONTEXT),
    "d512-L8": dict(vocab_size=VOCAB, embed_dim=512, num_layers=8, num_heads=8, max_seq_len=CONTEXT),
    "gpt2-small": dict(vocab_size=VOCAB, embed_dim=768, num_layers=12, num_heads=12, max_seq_len=CONTEXT),
}
LOSS_TOLERANCE = 1e-3  # float32 sums over 50k-way softmaxes: both sides round differently
FRAMEWORKS = ("TinyTorch", "PyTorch")


# ============================================================================ formulas

def matmul_params(embed_dim: int, num_layers: int, vocab_size: int) -> int:
    """N of the FLOP formula: weight matrices of the blocks (q, k, v, out: 4 d^2; MLP: 8 d^2)
    and of the head (V d)."""
    return 12 * num_layers * embed_dim ** 2 + vocab_size * embed_dim


def step_flops(embed_dim: int, num_layers: int, vocab_size: int, batch: int, seq: int) -> int:
    """Model FLOPs of one training step: 6 N B T + 12 L d T (B T) (module docstring)."""
    tokens = batch * seq
    return 6 * matmul_params(embed_dim, num_layers, vocab_size) * tokens + 12 * num_layers * embed_dim * seq * tokens


def decode_flops(embed_dim: int, num_layers: int, vocab_size: int, context: int) -> int:
    """Forward FLOPs of one decoded token attending over `context` cached positions: 2 N + 4 L d context."""
    return 2 * matmul_params(embed_dim, num_layers, vocab_size) + 4 * num_layers * embed_dim * context


def parameter_count(cfg: dict) -> int:
    """Every parameter of our GPT at `cfg` (tied head): embeddings, blocks (weights, biases, norms), ln_f."""
    d, L, V, P = cfg["embed_dim"], cfg["num_layers"], cfg["vocab_size"], cfg["max_seq_len"]
    per_block = 4 * (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d) + 2 * 2 * d
    return V * d + P * d + L * per_block + 2 * d


def train_row(r: dict) -> dict:
    """The derived columns of a training measurement, from its raw step times (seconds)."""
    med = float(np.median(r["step_s"]))
    flops = step_flops(r["embed_dim"], r["num_layers"], r["vocab_size"], r["batch"], r["seq"])
    return dict(median_s=med, p10_s=float(np.percentile(r["step_s"], 10)), p90_s=float(np.percentile(r["step_s"], 90)),
                tokens_per_s=r["batch"] * r["seq"] / med, flops=flops, gflops_per_s=flops / med / 1e9)


def decode_row(r: dict) -> dict:
    """The derived columns of an inference measurement, from its raw sample timestamps (seconds
    since the generate call started)."""
    stamps = r["sample_times_s"]
    decode_s = stamps[-1] - stamps[0]
    n = len(stamps) - 1
    mid_context = r["prompt"] + n / 2
    fl = decode_flops(r["embed_dim"], r["num_layers"], r["vocab_size"], int(mid_context))
    return dict(prefill_s=stamps[0], decode_s=decode_s, decode_tokens=n,
                tokens_per_s=n / decode_s if decode_s > 0 else float("nan"),
                gflops_per_s=fl * n / decode_s / 1e9 if decode_s > 0 else float("nan"))


# ============================================================================ the PyTorch twin
# The twin itself (build_torch_gpt, copy_weights) is torch_gpt.py's, the one shared with bench_gpt.py.

def load_torch_weights(torch, model, folder: str) -> None:
    """Copy our saved weights (one .npy per parameter, our names) into the torch twin; each file
    is memory-mapped and read only when its parameter is copied, so one parameter at a time is
    held twice."""
    with open(os.path.join(folder, "names.json")) as f:
        names = json.load(f)
    copy_weights(torch, model, names, (np.load(os.path.join(folder, f"{i}.npy"), mmap_mode="r")
                                       for i in range(len(names))))


def save_our_weights(model, folder: str) -> None:
    """Our initial weights, one .npy per parameter (names in names.json), for the torch twin."""
    os.makedirs(folder, exist_ok=True)
    names = []
    for i, (name, p) in enumerate(model.named_parameters()):
        np.save(os.path.join(folder, f"{i}.npy"), p.data)
        names.append(name)
    with open(os.path.join(folder, "names.json"), "w") as f:
        json.dump(names, f)


# ============================================================================ workers

def _rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes


def token_batch(cfg: dict, batch: int, seq: int, seed: int):
    """(inputs, targets): two int64 [batch, seq] arrays of random token ids below the
    configuration's vocab_size, from ``seed`` (profile_gpt.py times the same batches)."""
    rng = np.random.default_rng(seed)
    shape = (batch, seq)
    return (rng.integers(0, cfg["vocab_size"], size=shape).astype(np.int64),
            rng.integers(0, cfg["vocab_size"], size=shape).astype(np.int64))


def _our_model(cfg: dict, weights: str):
    tt_random.manual_seed(0)
    model = GPT(**cfg, tie_weights=True)
    if not os.path.exists(os.path.join(weights, "names.json")):
        save_our_weights(model, weights)
    return model


def our_train_step(model, x, y, checkpointed: bool):
    """A zero-argument training step of ``model`` on (x, y) with AdamW (activation
    checkpointing per block when ``checkpointed``), as bench_scale and profile_gpt.py time it."""
    if checkpointed:  # imported only when asked: the extensions package is not needed otherwise
        from tinytorch.extensions.activation_checkpoint import checkpoint
    opt = AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    v = model.vocab_size

    def forward():
        if not checkpointed:
            return model(x)
        h = model.position_embedding(model.token_embedding(x))
        for block in model.blocks:
            h = checkpoint(block, h)
        return model.lm_head(model.ln_f(h))

    def step():
        opt.zero_grad()
        loss = cross_entropy(forward().reshape(-1, v), y.reshape(-1))
        loss.backward()
        opt.step()
        return float(loss.item())
    return step


def _torch_train_step(torch, model, x, y, checkpointed: bool):
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        logits = model(tx, checkpointed=checkpointed)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ty.reshape(-1))
        loss.backward()
        opt.step()
        return float(loss.item())
    return step


def _our_generate(model, prompt, new_tokens: int):
    from tinytorch.core.kv_cache import generate_with_cache
    stamps = []
    start = time.perf_counter()

    def sample(logits):
        stamps.append(time.perf_counter() - start)
        return np.asarray(logits).argmax(axis=-1)
    model.eval()
    out = generate_with_cache(model, prompt, new_tokens, sample)
    return out[0, prompt.shape[1]:].tolist(), stamps


def _torch_generate(torch, model, prompt, new_tokens: int):
    stamps, out = [], []
    start = time.perf_counter()
    with torch.inference_mode():
        logits, past = model(torch.from_numpy(prompt), use_past=True)
        for i in range(new_tokens):
            stamps.append(time.perf_counter() - start)
            nxt = logits[:, -1, :].argmax(dim=-1)
            out.append(int(nxt[0]))
            if i == new_tokens - 1:
                break
            logits, past = model(nxt[:, None], past=past, use_past=True)
    return out, stamps


def worker(spec: dict, conn) -> None:
    """One configuration in a fresh spawn process; sends a dict of raw measurements (or
    {"error": ...}) through `conn`."""
    try:
        conn.send(_work(spec))
    except BaseException as exc:  # report, never hang the parent
        import traceback
        conn.send({"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()})
    finally:
        conn.close()


def _work(spec: dict) -> dict:
    cfg = SIZES[spec["size"]]
    torch = None
    if spec["framework"] == "PyTorch":
        import torch
    rss_imports = _rss_peak_bytes()
    result = dict(spec, **{k: cfg[k] for k in ("embed_dim", "num_layers", "vocab_size", "num_heads")})
    with C.Threads(spec["threads"]):
        if torch is not None:
            model = build_torch_gpt(torch, cfg)
            load_torch_weights(torch, model, spec["weights"])
        else:
            model = _our_model(cfg, spec["weights"])
        if spec["kind"] == "train":
            x, y = token_batch(cfg, spec["batch"], spec["seq"], seed=1)
            step = (_torch_train_step(torch, model, x, y, spec["checkpoint"]) if torch is not None
                    else our_train_step(model, x, y, spec["checkpoint"]))
            if C.native.available():
                C.native.reset_peak_memory()
            result["first_loss"] = step()  # the warm-up step: its loss is the parity check
            times = []
            for _ in range(spec["steps"]):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
            result["step_s"] = times
        else:
            prompt, _ = token_batch(cfg, 1, spec["prompt"], seed=2)
            gen = ((lambda p, n: _torch_generate(torch, model, p, n)) if torch is not None
                   else (lambda p, n: _our_generate(model, p, n)))
            gen(prompt[:, :8], 4)  # warm-up: first-call costs are not decoding
            if C.native.available():
                C.native.reset_peak_memory()
            result["tokens"], result["sample_times_s"] = gen(prompt, spec["new_tokens"])
        result["runtime_peak_bytes"] = (C.native.memory_stats()["peak_bytes"]
                                        if torch is None and C.native.available() else None)
    result["rss_imports_bytes"] = rss_imports
    result["rss_peak_bytes"] = _rss_peak_bytes()
    return result


def run_in_subprocess(spec: dict, timeout_s: float) -> dict:
    """`worker(spec)` in a fresh spawn process, with a timeout; the PyTorch worker gets glibc's
    default allocator settings."""
    ctx = mp.get_context("spawn")
    recv, send = ctx.Pipe(duplex=False)
    saved = os.environ.get("TINYTORCH_MALLOC")
    if spec["framework"] == "PyTorch":
        os.environ["TINYTORCH_MALLOC"] = "default"
    try:
        proc = ctx.Process(target=worker, args=(spec, send))
        proc.start()
    finally:
        if saved is None:
            os.environ.pop("TINYTORCH_MALLOC", None)
        else:
            os.environ["TINYTORCH_MALLOC"] = saved
    send.close()
    result = None
    if recv.poll(timeout_s):
        try:
            result = recv.recv()
        except EOFError:
            result = None
    proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return {"error": f"timed out after {timeout_s:.0f} s"}
    if result is None:
        return {"error": f"the worker died (exit code {proc.exitcode}; out of memory?)"}
    return result


# ============================================================================ the plan

def plan(args) -> list[dict]:
    """Every configuration to run, most wanted first, so a --budget-min cut drops the optional
    ones (ours before PyTorch's for each: ours writes the weights both load):
      1. every size: the first shape on the first thread count, and decoding;
      2. the sweeps at d 256 (depth 3 / 12 layers at 4 x 256; T 256 / 512 / 1024 at batch 1);
      3. by size, smallest first: the other thread counts (first shape and decoding), the
         other shapes, then the activation-checkpointed step of the largest size."""
    specs, seen = [], set()

    def add(kind, size, threads, **kw):
        key = (kind, size, threads, kw.get("batch"), kw.get("seq"), kw.get("checkpoint"), kw.get("round"))
        if key in seen or ("seq" in kw and kw["seq"] > SIZES[size]["max_seq_len"]):
            return
        seen.add(key)
        for fw in args.frameworks:
            specs.append(dict(kind=kind, size=size, threads=threads, framework=fw, **kw))

    def train(size, nt, b, t, ckpt=False):
        if getattr(args, "training", True):
            add("train", size, nt, batch=b, seq=t, steps=args.steps, checkpoint=ckpt)

    def infer(size, nt):
        for r in range(args.decode_rounds):  # add() puts every framework in each round
            add("infer", size, nt, prompt=min(args.prompt, SIZES[size]["max_seq_len"] - args.new_tokens),
                new_tokens=args.new_tokens, round=r)

    first, nt0 = args.shape_list[0], args.threads[0]
    for size in args.size_list:
        train(size, nt0, *first)
        infer(size, nt0)
    if args.sweeps:
        for size in ("d256-L3", "d256-L12"):
            train(size, nt0, 4, 256)
        for t in (256, 512, 1024):
            train("d256-L6", nt0, 1, t)
    for size in args.size_list:
        for nt in args.threads[1:]:
            train(size, nt, *first)
            infer(size, nt)
        for shape in args.shape_list[1:]:
            train(size, nt0, *shape)
        if args.checkpoint and size == args.size_list[-1]:
            train(size, nt0, *first, ckpt=True)
    return specs


def cost_units(spec: dict) -> float:
    """FLOPs a configuration will spend (for the ETA): steps + 1 training steps, or the decode."""
    cfg = SIZES[spec["size"]]
    d, L, V = cfg["embed_dim"], cfg["num_layers"], cfg["vocab_size"]
    if spec["kind"] == "train":
        f = step_flops(d, L, V, spec["batch"], spec["seq"]) * (spec["steps"] + 1) * (1.35 if spec["checkpoint"] else 1)
    else:
        # decoding is bandwidth bound: weigh its FLOPs up so the ETA is not optimistic
        f = 20 * decode_flops(d, L, V, spec["prompt"]) * spec["new_tokens"] + step_flops(d, L, V, 1, spec["prompt"]) / 3
    return f


OVERHEAD_S = 6.0  # a configuration's fixed cost (spawn, imports, building the model), for the ETA


def predicted_s(spec: dict, rate: float) -> float:
    """Seconds a configuration should take at `rate` seconds per cost unit."""
    return OVERHEAD_S + cost_units(spec) * rate


def median_rounds(results: list[dict]) -> tuple[list[dict], list[str]]:
    """Decode configurations run --decode-rounds times, the frameworks taking turns (each in its
    own process), so the host's drift over minutes falls on both; keep, per configuration and
    framework, the round with the median decode tokens/s (the lower middle for an even count)
    and say what every round measured."""
    groups: dict = {}
    for r in results:
        if r.get("kind") == "infer" and "error" not in r and "round" in r:
            key = (r["size"], r["threads"], r["framework"])
            groups.setdefault(key, []).append(r)
    keep, notes = set(), []
    for (size, threads, fw), rs in groups.items():
        ranked = sorted(rs, key=lambda r: decode_row(r)["tokens_per_s"])
        keep.add(id(ranked[(len(ranked) - 1) // 2]))
        if len(rs) > 1:
            rates = ", ".join(f"{decode_row(r)['tokens_per_s']:.1f}" for r in sorted(rs, key=lambda r: r["round"]))
            notes.append(f"{size}, {threads} thr, {fw}: decode tokens/s by round {rates} (median kept)")
    merged = [r for r in results if not (r.get("kind") == "infer" and "error" not in r and "round" in r)
              or id(r) in keep]
    return merged, notes


def describe(spec: dict) -> str:
    if spec["kind"] == "train":
        what = f"train {spec['batch']}x{spec['seq']}" + (" checkpointed" if spec["checkpoint"] else "")
    else:
        what = f"decode prompt {spec['prompt']} + {spec['new_tokens']}" + (f" round {spec['round'] + 1}" if spec.get("round") else "")
    return f"{spec['size']} {what}, {spec['threads']} thr, {spec['framework']}"


# ============================================================================ report

def size_text(name: str) -> str:
    c = SIZES[name]
    return (f"{name} (d {c['embed_dim']}, {c['num_layers']} layers, {c['num_heads']} heads, "
            f"vocab {c['vocab_size']:,}, context {c['max_seq_len']}; {parameter_count(c) / 1e6:.1f}M parameters)")


def _gib(b):
    return "n/a" if b is None else f"{b / 2 ** 30:.2f}"


def _mib(b):
    return "n/a" if b is None else f"{b / 2 ** 20:.1f}"


def build_tables(results: list[dict], peaks: dict) -> tuple[list[str], list[str], list[dict]]:
    """(training table, inference table, comparison rows) from the raw results."""
    train = [r for r in results if r.get("kind") == "train" and "error" not in r]
    infer = [r for r in results if r.get("kind") == "infer" and "error" not in r]
    trows, crow = [], []
    for r in train:
        d = train_row(r)
        r.update(d)
        ceiling, _ = C.fma_ceiling(peaks, r["threads"])
        trows.append([r["size"], f"{parameter_count(SIZES[r['size']]) / 1e6:.1f}M", f"{r['batch']}x{r['seq']}",
                      "yes" if r["checkpoint"] else "no", r["threads"], r["framework"],
                      f"{d['median_s']:.3f}", f"{d['p10_s']:.3f}-{d['p90_s']:.3f}", f"{d['tokens_per_s']:,.0f}",
                      f"{d['flops'] / 1e9:,.1f}", f"{d['gflops_per_s']:.1f}",
                      C.percent_of_peak(d["gflops_per_s"], ceiling), _gib(r["rss_peak_bytes"]),
                      _gib(r["rss_peak_bytes"] - r["rss_imports_bytes"]), _mib(r["runtime_peak_bytes"]),
                      f"{r['first_loss']:.6f}"])
    train_table = C.table(["model", "params", "B x T", "ckpt", "threads", "framework", "median step s",
                           "p10-p90 s", "tokens/s", "GFLOP/step", "GFLOP/s", "% of FMA peak",
                           "peak RSS GiB", "RSS above imports GiB", "runtime storage peak MiB",
                           "first-step loss"], trows)
    irows = []
    for r in infer:
        d = decode_row(r)
        r.update(d)
        ceiling, _ = C.fma_ceiling(peaks, r["threads"])
        irows.append([r["size"], r["threads"], r["framework"], r["prompt"], f"{d['prefill_s'] * 1e3:.1f}",
                      d["decode_tokens"], f"{d['decode_s']:.2f}", f"{d['tokens_per_s']:.1f}",
                      f"{d['gflops_per_s']:.1f}", C.percent_of_peak(d["gflops_per_s"], ceiling),
                      _gib(r["rss_peak_bytes"]), _mib(r["runtime_peak_bytes"])])
    infer_table = C.table(["model", "threads", "framework", "prompt", "prefill ms", "decoded tokens",
                           "decode s", "decode tokens/s", "GFLOP/s", "% of FMA peak", "peak RSS GiB",
                           "runtime storage peak MiB"], irows)
    # ours vs PyTorch, matched configurations
    key = lambda r: (r["kind"], r["size"], r.get("batch"), r.get("seq"), r.get("checkpoint"), r["threads"])  # noqa: E731
    by = {}
    for r in train + infer:
        by.setdefault(key(r), {})[r["framework"]] = r
    for k, pair in by.items():
        if len(pair) < 2:
            continue
        ours, theirs = pair["TinyTorch"], pair["PyTorch"]
        row = dict(kind=k[0], size=k[1], threads=k[5], batch=k[2], seq=k[3], checkpoint=k[4])
        if k[0] == "train":
            row.update(time_ratio=ours["median_s"] / theirs["median_s"],
                       rss_ratio=ours["rss_peak_bytes"] / theirs["rss_peak_bytes"],
                       loss_diff=abs(ours["first_loss"] - theirs["first_loss"]),
                       ours_s=ours["median_s"], torch_s=theirs["median_s"],
                       ours_rss=ours["rss_peak_bytes"], torch_rss=theirs["rss_peak_bytes"],
                       rss_above_ratio=(ours["rss_peak_bytes"] - ours["rss_imports_bytes"])
                       / max(1, theirs["rss_peak_bytes"] - theirs["rss_imports_bytes"]))
        else:
            same = sum(a == b for a, b in zip(ours["tokens"], theirs["tokens"]))
            first_diff = next((i for i, (a, b) in enumerate(zip(ours["tokens"], theirs["tokens"])) if a != b), None)
            row.update(decode_ratio=ours["tokens_per_s"] / theirs["tokens_per_s"],
                       prefill_ratio=ours["prefill_s"] / theirs["prefill_s"],
                       ours_tps=ours["tokens_per_s"], torch_tps=theirs["tokens_per_s"],
                       ours_prefill=ours["prefill_s"], torch_prefill=theirs["prefill_s"],
                       same_tokens=same, n_tokens=len(ours["tokens"]), first_diff=first_diff)
        crow.append(row)
    return train_table, infer_table, crow


def comparison_table(crows: list[dict]) -> list[str]:
    rows = []
    for c in crows:
        if c["kind"] == "train":
            rows.append([c["size"], f"train {c['batch']}x{c['seq']}" + (" ckpt" if c["checkpoint"] else ""),
                         c["threads"], f"{c['ours_s']:.3f} / {c['torch_s']:.3f} s = **{c['time_ratio']:.2f}x**",
                         "yes" if c["time_ratio"] <= 0.7 else "no",
                         f"{_gib(c['ours_rss'])} / {_gib(c['torch_rss'])} GiB = **{c['rss_ratio']:.2f}x** "
                         f"(above imports {c['rss_above_ratio']:.2f}x)",
                         "yes" if c["rss_ratio"] <= 0.8 else "no", f"loss diff {c['loss_diff']:.1e}"])
        else:
            agree = (f"greedy tokens agree {c['same_tokens']}/{c['n_tokens']}"
                     + ("" if c["first_diff"] is None else f" (first difference at {c['first_diff']})"))
            rows.append([c["size"], "decode", c["threads"],
                         f"{c['ours_tps']:.1f} / {c['torch_tps']:.1f} tokens/s = **{c['decode_ratio']:.2f}x**",
                         "yes" if c["decode_ratio"] >= 1.2 else "no",
                         f"prefill {c['ours_prefill'] * 1e3:.0f} / {c['torch_prefill'] * 1e3:.0f} ms = "
                         f"{c['prefill_ratio']:.2f}x", "", agree])
    return C.table(["model", "work", "threads", "TinyTorch / PyTorch", "meets target",
                    "memory (peak RSS) or prefill", "memory target", "parity"], rows)


def plot(results: list[dict], path: str) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install tinytorch[scorecard]): no plot")
        return None
    train = [r for r in results if r.get("kind") == "train" and "error" not in r and not r["checkpoint"]]
    if not train:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    nt = min(r["threads"] for r in train)
    bt = (train[0]["batch"], train[0]["seq"])  # the first shape: every size has it
    panels = [
        (f"size (d, layers) at {bt[0]}x{bt[1]}", lambda r: (r["batch"], r["seq"]) == bt,
         lambda r: r["flops"] / 1e12, "model TFLOP per step (6 N B T + 12 L d T B T)"),
        ("T at d 256 / 6 layers, batch 1", lambda r: r["size"] == "d256-L6" and r["batch"] == 1,
         lambda r: r["seq"], "T (tokens per sequence)"),
    ]
    markers = {"TinyTorch": "o-", "PyTorch": "s--"}
    for ax, (title, keep, xf, xlabel) in zip(axes[:2], panels):
        for fw in FRAMEWORKS:
            pts = sorted((xf(r), r["median_s"], r) for r in train if r["framework"] == fw and r["threads"] == nt and keep(r))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], markers[fw], label=f"{fw} step time")
                for x, y, r in pts:
                    ax.annotate(f"{r['size']}\n{r['gflops_per_s']:.0f} GF/s", (x, y), fontsize=7,
                                textcoords="offset points", xytext=(4, -10 if fw == "PyTorch" else 4))
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"median step time, s ({nt} thread{'s' if nt > 1 else ''})")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if ax.get_lines():
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured in this run", ha="center", transform=ax.transAxes)
    ax = axes[2]
    for fw in FRAMEWORKS:
        pts = sorted((r["flops"] / 1e12, r["rss_peak_bytes"] / 2 ** 30, r) for r in train
                     if r["framework"] == fw and r["threads"] == nt)
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], markers[fw][0], label=f"{fw} peak RSS")
    ax.set_xlabel("model TFLOP per step")
    ax.set_ylabel("peak RSS, GiB (own subprocess)")
    ax.set_title("peak memory of a training configuration")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    C.save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


# ============================================================================ main

def _parse_shapes(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        try:
            b, t = (int(v) for v in part.lower().split("x"))
        except ValueError:
            raise SystemExit(f"--shapes: expected BxT[,BxT...], e.g. 4x256, got {part!r}")
        if b < 1 or t < 1:
            raise SystemExit(f"--shapes: batch and T must be positive, got {part!r}")
        out.append((b, t))
    return out


def main():
    ap = C.arguments(__doc__, "bench_scale.md", threads=[1, 2], quick=dict(steps=2))
    ap.add_argument("--sizes", default=None, help=f"comma-separated, of {', '.join(SIZES)} "
                    "(default d256-L6,d512-L8,gpt2-small; --quick: d256-L6,d512-L8)")
    ap.add_argument("--shapes", default=None, help="training batch x T list (default 4x256,1x1024; --quick 4x128)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps after 1 warm-up (default 3)")
    ap.add_argument("--prompt", type=int, default=256, help="prompt tokens before decoding (default 256)")
    ap.add_argument("--decode-rounds", type=int, default=None,
                    help="decode runs per configuration and framework, taking turns; the median is kept "
                         "(default 3; --quick 1)")
    ap.add_argument("--new-tokens", type=int, default=None, help="decoded tokens (default 256; --quick 32)")
    ap.add_argument("--no-sweeps", dest="sweeps", action="store_false", help="skip the depth and T sweeps at d 256")
    ap.add_argument("--no-checkpoint", dest="checkpoint", action="store_false",
                    help="skip the activation-checkpointed row of the largest size")
    ap.add_argument("--no-training", dest="training", action="store_false",
                    help="decoding only: skip every training step (and so the sweeps)")
    ap.add_argument("--frameworks", default="TinyTorch,PyTorch", help="comma-separated (default both)")
    ap.add_argument("--budget-min", type=float, default=25.0,
                    help="skip configurations the ETA says would end past this many minutes (default 25)")
    args = C.parse(ap)
    if args.quick:
        args.sweeps, args.checkpoint = False, False
        if args.threads == [1, 2]:
            args.threads = [1]
    args.size_list = (args.sizes or ("d256-L6,d512-L8" if args.quick else "d256-L6,d512-L8,gpt2-small")).split(",")
    for s in args.size_list:
        if s not in SIZES:
            raise SystemExit(f"--sizes: unknown size {s!r}; choose from {', '.join(SIZES)}")
    args.shape_list = _parse_shapes(args.shapes or ("4x128" if args.quick else "4x256,1x1024"))
    args.new_tokens = args.new_tokens or (32 if args.quick else 256)
    args.frameworks = [f for f in args.frameworks.split(",") if f]
    if any(f not in FRAMEWORKS for f in args.frameworks):
        raise SystemExit(f"--frameworks: choose from {', '.join(FRAMEWORKS)}")
    if "PyTorch" in args.frameworks and C.optional_torch() is None:
        print("PyTorch is not installed (pip install torch==2.13.0): TinyTorch rows only")
        args.frameworks = ["TinyTorch"]
    if args.decode_rounds is None:
        args.decode_rounds = 1 if args.quick else 3
    if args.steps < 1 or args.new_tokens < 2 or args.decode_rounds < 1:
        raise SystemExit("--steps and --decode-rounds must be >= 1 and --new-tokens >= 2")

    peaks = C.fma_peaks(max(args.threads), seconds=0.1, trials=2)
    specs = plan(args)
    weights_root = tempfile.mkdtemp(prefix="bench_scale_weights_")
    results, skipped = [], []
    t_start = time.perf_counter()
    done_units = done_seconds = 0.0
    try:
        for i, spec in enumerate(specs):
            spec["weights"] = os.path.join(weights_root, spec["size"])
            rate = done_seconds / done_units if done_units else None
            remaining = sum(predicted_s(s, rate) for s in specs[i:] if not s.get("skip")) if rate else 0.0
            elapsed = time.perf_counter() - t_start
            eta = f"ETA {remaining / 60:.1f} min" if rate else "ETA after the first configuration"
            if rate and spec["framework"] == args.frameworks[0] and \
                    elapsed + len(args.frameworks) * predicted_s(spec, rate) > args.budget_min * 60:
                same = describe(spec).rsplit(",", 1)[0]  # this configuration, every framework
                for s in specs[i:]:
                    if describe(s).rsplit(",", 1)[0] == same:
                        s["skip"] = True
            if spec.get("skip"):
                skipped.append(describe(spec))
                print(f"[{i + 1}/{len(specs)}] skip {describe(spec)} (the {args.budget_min:.0f}-minute budget)", flush=True)
                continue
            print(f"[{i + 1}/{len(specs)}] start {describe(spec)}; elapsed {elapsed / 60:.1f} min, {eta}", flush=True)
            t0 = time.perf_counter()
            timeout = 300 if args.quick else 1500
            r = run_in_subprocess(spec, timeout)
            took = time.perf_counter() - t0
            done_units += cost_units(spec)
            done_seconds += max(took - OVERHEAD_S, 0.05 * took)
            r.update({k: v for k, v in spec.items() if k not in r})
            r.pop("weights", None)
            results.append(r)
            if "error" in r:
                print(f"    FAILED after {took:.0f} s: {r['error']}\n{r.get('traceback', '')}", flush=True)
            elif r["kind"] == "train":
                d = train_row(r)
                print(f"    done in {took:.0f} s: median step {d['median_s']:.3f} s, {d['tokens_per_s']:,.0f} tokens/s, "
                      f"peak RSS {_gib(r['rss_peak_bytes'])} GiB, first loss {r['first_loss']:.6f}", flush=True)
            else:
                d = decode_row(r)
                print(f"    done in {took:.0f} s: prefill {d['prefill_s'] * 1e3:.0f} ms, decode {d['tokens_per_s']:.1f} tokens/s",
                      flush=True)
    finally:
        shutil.rmtree(weights_root, ignore_errors=True)

    results, round_notes = median_rounds(results)
    train_table, infer_table, crows = build_tables(results, peaks)
    for c in crows:
        if c["kind"] == "train" and c["loss_diff"] > LOSS_TOLERANCE:
            raise SystemExit(f"first-step losses disagree on {c['size']} {c['batch']}x{c['seq']} by {c['loss_diff']:.2e}: "
                             "the two models do not compute the same function")
    compare = comparison_table(crows)
    trained = any(r.get("kind") == "train" and "error" not in r for r in results)
    if not trained:  # --no-training: no empty training table
        train_table = ["No training step was run (--no-training)."]
    print("\n".join(train_table + [""] + infer_table + [""] + compare))
    losses = [f"{r['size']} {r['batch']}x{r['seq']}{' ckpt' if r['checkpoint'] else ''} {r['threads']} thr "
              f"{r['framework']} {r['first_loss']:.6f}" for r in results if r.get("kind") == "train" and "error" not in r]
    if losses:
        print("first-step losses: " + "; ".join(losses))

    base = os.path.splitext(args.report)[0]
    png = plot(results, base + ".png")
    from tinytorch._atomic import write_file
    write_file(base + ".json", json.dumps(dict(peaks=peaks, results=results, skipped=skipped), indent=1, default=str))
    failed = [f"{describe(r)}: {r['error']}" for r in results if "error" in r]
    total = time.perf_counter() - t_start
    body = [
        "GPT (ours: core/transformers.py, tied head, random GPT-2 initialisation, seed 0) against the same "
        "architecture in torch.nn loaded with the same weights (see the script's docstring). Every "
        "configuration ran in its own spawn subprocess, one at a time; ratios are same-run (the machine "
        "is shared: see the load average above and at the end).", "",
        "Sizes: " + ", ".join(size_text(s) for s in dict.fromkeys(r["size"] for r in results)) + ".",
        "",
        "FLOPs per training step: 6 N B T + 12 L d T (B T), N = 12 L d^2 + V d (matrix-product weights; PaLM's "
        "model-FLOPs convention, the attention square counted in full). GFLOP/s = that / median step time; "
        "% of FMA peak is against this machine's peak.c figure for the thread count. Decode GFLOP/s counts "
        "2 N + 4 L d (context) per token at the mid-point context.", "",
        f"Training: AdamW (lr {LR}, weight decay {WEIGHT_DECAY}), cross-entropy over every position; 1 warm-up "
        f"step (its loss is the parity check: both first-step losses are in the table and must agree within "
        f"{LOSS_TOLERANCE}) then {args.steps} timed steps, median and p10-p90. tokens/s = B T / median step. "
        "Peak RSS: getrusage ru_maxrss of the configuration's own process (imports, model, optimizer state, "
        "activations); 'above imports' subtracts the peak right after importing. Runtime storage peak: "
        "tinytorch.native.memory_stats()['peak_bytes'] after reset_peak_memory() (the runtime's own buffers; "
        "tensors are NumPy arrays and count in RSS only).", "",
        f"Inference: batch 1, prompt {args.prompt} tokens (fewer where the context would overflow), "
        f"{args.new_tokens} greedy tokens through the KV cache, after a 4-token warm-up; prefill = time to the "
        "first sampled token, decode tokens/s = (tokens - 1) / time from the first to the last sample; each "
        f"decode configuration ran {args.decode_rounds} time(s), TinyTorch and PyTorch in turn, and the round with "
        "the median tokens/s is the one in the tables (every round's figure below).", "",
        *([f"- {n}" for n in round_notes] + [""] if round_notes else []),
        "## Against the targets (GPT-2 small: step <= 0.7x PyTorch's time, <= 0.8x its peak memory; decode >= 1.2x)", "",
        *compare, "",
        "## Training", "", *train_table, "",
        "## Inference (KV cache)", "", *infer_table, "",
    ]
    if png:
        body += [f"![step time and memory vs size and T]({os.path.basename(png)})", ""]
    body += [f"Skipped for time: {', '.join(skipped) if skipped else 'none'}.",
             f"Failed: {'; '.join(failed) if failed else 'none'}.",
             f"Total wall time {total / 60:.1f} min; raw measurements in {os.path.basename(base)}.json."]
    C.write_report(args.report, "GPT at scale: GPT-2 small training and decoding, TinyTorch vs PyTorch CPU",
                   body, threads=args.threads)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
