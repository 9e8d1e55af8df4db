"""KV cache: decoding speed with and without the cache (TinyTorch), with PyTorch as an anchor.

Workload: the bench_gpt GPT (vocab 65, context 128, 4 layers, 4 heads, d=128), batch 1, a
16-token prompt, greedy decoding of --new tokens (default 96, so the context grows to 112).
  * without cache: every new token re-runs the model over the whole context (what
    ``GPT.generate(use_cache=False)`` does);
  * with cache: one prefill, then one token per step through the KV cache
    (``GPT.generate(use_cache=True)``);
  * PyTorch anchor: the same model in torch.nn (weights copied), decoding without a cache under
    ``torch.no_grad()``, i.e. the uncached algorithm on an optimised runtime.
Both TinyTorch paths must produce the same tokens (checked). Each configuration is run
--repeats times in alternating order; the table shows the median ms per generated token and the
speed-up of the cache.

Usage: python benchmarks/bench_kv_cache.py [--threads N] [--new 96] [--repeats 3] [--quick] [--out PATH]
Writes build/benchmarks/bench_kv_cache.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import os

import numpy as np

import _common as C
from bench_gpt import CONFIG, build_torch_gpt, torch  # the same model as bench_gpt

from tinytorch.core import random as tt_random  # noqa: E402  (path set up by _common)
from tinytorch.core.transformers import GPT  # noqa: E402

PROMPT = 16


def torch_greedy(model, prompt, new):
    idx = torch.from_numpy(prompt)
    with torch.no_grad():
        for _ in range(new):
            logits = model(idx[:, -CONFIG["max_seq_len"]:])[:, -1]
            idx = torch.cat([idx, logits.argmax(-1, keepdim=True)], dim=1)
    return idx.numpy()


def main():
    ap = C.arguments(__doc__, "bench_kv_cache.md", threads=os.cpu_count(), quick=dict(new=8, repeats=1))
    ap.add_argument("--new", type=int, default=96, help="tokens to generate")
    ap.add_argument("--repeats", type=int, default=3)
    args = C.parse(ap)
    if PROMPT + args.new > CONFIG["max_seq_len"]:
        raise SystemExit(f"--new must be at most {CONFIG['max_seq_len'] - PROMPT} so the window never slides")

    with C.Threads(args.threads):
        tt_random.manual_seed(0)
        model = GPT(**CONFIG)
        model.eval()
        prompt = np.random.default_rng(0).integers(0, CONFIG["vocab_size"], size=(1, PROMPT)).astype(np.int64)

        runs = {
            "TinyTorch, no cache": lambda: model.generate(prompt, args.new, temperature=0, use_cache=False),
            "TinyTorch, KV cache": lambda: model.generate(prompt, args.new, temperature=0, use_cache=True),
        }
        if torch is not None:
            tmodel = build_torch_gpt(model).eval()
            runs["PyTorch, no cache"] = lambda: torch_greedy(tmodel, prompt, args.new)

        outputs = {name: fn() for name, fn in runs.items()}  # warm-up, and the equality check
        if not np.array_equal(outputs["TinyTorch, no cache"], outputs["TinyTorch, KV cache"]):
            raise SystemExit("cached and uncached decoding produced different tokens")
        times = C.time_steps(runs, steps=1, rounds=args.repeats, warmup=0)  # ms per whole decode

    secs = {name: float(np.median(ms)) / 1e3 for name, ms in times.items()}
    base = secs["TinyTorch, no cache"]
    table = ["| decoding | median total s | ms/token | tokens/s | speed-up vs TinyTorch no cache |",
             "|---|---:|---:|---:|---:|"]
    for name, med in secs.items():
        table.append(f"| {name} | {med:.3f} | {med / args.new * 1e3:.2f} | {args.new / med:.1f} | {base / med:.2f}x |")
    print("\n".join(table))

    C.write_report(args.report, "KV-cache decoding speed", [
        f"GPT vocab 65, context 128, 4 layers, 4 heads, d=128; batch 1, {PROMPT}-token prompt, "
        f"{args.new} greedy tokens (context grows to {PROMPT + args.new}). Cached and uncached TinyTorch "
        "decoding produce identical tokens (checked). PyTorch decodes without a cache (same algorithm as "
        "the first row, optimised runtime). Medians of the repeats.", "", *table], threads=args.threads)


if __name__ == "__main__":
    main()
