"""INT8 inference end to end: quantize_model on a GPT (TinyTalks) and on milestone 04's CNN.

  GPT, trained     a small character GPT trained here on the TinyTalks corpus
                   (tinytorch.extensions.tinyverse.generate_tinytalks, seed 0) for --steps AdamW
                   steps on the first 90% of its text; then copied, and the copy quantized with
                   core.quantization.quantize_model (every Linear: attention projections, MLP and
                   lm_head -> QuantizedLinear on the runtime's INT8 GEMM), once with the default
                   reduce_range (7-bit) and once with 8-bit activations. Reported: the loss on
                   the held-out last 10% of the text, float32 vs int8, and greedy decoding with
                   the KV cache (GPT.generate(use_cache=True)), tokens/s float32 vs int8; beside
                   them the ceiling of any faster Linear: a copy whose Linear layers cost
                   nothing (each returns a cached output), so what is left is everything else.
  GPT, GPT-2 width the same comparison of decoding speed at GPT-2 small's width (768, 12 heads,
                   4 of its 12 blocks, untrained: speed does not depend on the weights), where the
                   Linear layers are GPT-2's own shapes and their weights no longer fit in cache.
  CNN              milestone 04's LeNet-style network (milestones/04_1998_cnn/lenet.py) trained
                   with Adam on the bundled digits; validation accuracy before and after
                   quantize_model (its two Linear layers; the convolutions stay float32).

Times are medians of --repeats decodes, wall-clock on a shared machine (the report records the
load); the float32 model and its int8 copies decode in turn, one each per round, so drift over
the run does not tilt their ratio. Usage: python benchmarks/bench_int8_e2e.py [--steps 400] [--quick] [--out PATH] [--save]
Writes build/benchmarks/bench_int8_e2e.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import copy
import os
import statistics
import sys
import time

import numpy as np

import _common as C

from tinytorch.core import acceleration  # noqa: E402
from tinytorch.core.autograd import no_grad  # noqa: E402
from tinytorch.core.layers import Layer, Linear  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import AdamW  # noqa: E402
from tinytorch.core.quantization import model_size_bytes, quantize_model  # noqa: E402
from tinytorch.core.random import manual_seed  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402
from tinytorch.extensions.tinyverse import generate_tinytalks  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(C.HERE), "milestones", "04_1998_cnn"))
from lenet import lenet  # noqa: E402


def windows(ids, context, count, rng):
    """(x, y) int64 [count, context] next-token windows at random offsets of ``ids``."""
    starts = rng.integers(0, len(ids) - context - 1, count)
    x = np.stack([ids[s:s + context] for s in starts])
    y = np.stack([ids[s + 1:s + context + 1] for s in starts])
    return x, y


def heldout_loss(model, ids, context, vocab):
    """Mean next-token loss over consecutive windows covering the held-out ids."""
    losses = []
    with no_grad():
        for s in range(0, len(ids) - context - 1, context):
            x, y = ids[None, s:s + context], ids[None, s + 1:s + context + 1]
            losses.append(cross_entropy(model(Tensor(x)).reshape(-1, vocab), Tensor(y.reshape(-1))).item())
    return float(np.mean(losses))


def train_gpt(steps, say):
    corpus = generate_tinytalks(seed=0)
    tok = corpus.tokenizer()
    ids = np.array(tok.encode(corpus.train), dtype=np.int64)
    cut = int(0.9 * len(ids))
    train_ids, held_ids = ids[:cut], ids[cut:]
    manual_seed(0)
    context = 64
    model = GPT(tok.vocab_size, embed_dim=128, num_layers=2, num_heads=4, max_seq_len=256)
    opt = AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        x, y = windows(train_ids, context, 16, rng)
        loss = cross_entropy(model(Tensor(x)).reshape(-1, tok.vocab_size), Tensor(y.reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 or step == steps:
            say(f"  step {step}/{steps}: train loss {loss.item():.3f}")
    say(f"  trained in {time.perf_counter() - t0:.0f} s")
    model.eval()
    return model, tok, held_ids, context, len(corpus.train)


def decode_rates(models, prompt, new_tokens, repeats):
    """Per model: (tokens/s median over repeats, the generated ids) of greedy decoding with
    the KV cache. The models take turns, one decode each per round, so a shared machine's
    drift over the run falls on all of them alike (their ratios are what the tables report)."""
    times = [[] for _ in models]
    outs = [None] * len(models)
    for model in models:
        model.generate(prompt, 4, temperature=0.0, use_cache=True)  # warm-up
    for _ in range(repeats):
        for i, model in enumerate(models):
            t0 = time.perf_counter()
            outs[i] = model.generate(prompt, new_tokens, temperature=0.0, use_cache=True)
            times[i].append(time.perf_counter() - t0)
    return [(new_tokens / statistics.median(t), out) for t, out in zip(times, outs)]


RR = {True: "", False: " 8-bit"}
RR_ARG = {True: "", False: ", reduce_range=False"}


def quantized_copy(model, reduce_range):
    q = copy.deepcopy(model)
    return q, quantize_model(q, reduce_range=reduce_range)


class FreeLinear(Layer):
    """A Linear that costs one Python call: it returns a cached zero output of its shape (the
    bound for how fast any Linear layer, int8 or not, could make the model)."""

    def __init__(self, out_features):
        self.out_features, self._cache = out_features, {}

    def forward(self, x):
        lead = x.shape[:-1]
        out = self._cache.get(lead)
        if out is None:
            out = self._cache[lead] = Tensor(np.zeros(lead + (self.out_features,), np.float32))
        return out


def free_linear_copy(model):
    """A copy of ``model`` whose plain Linear layers (quantize_model's targets) are FreeLinear."""
    q = copy.deepcopy(model)
    for name, m in [(n, m) for n, m in q.named_modules() if type(m) is Linear and n]:
        q.set_submodule(name, FreeLinear(m.weight.data.shape[1]))
    return q


def gpt_rows(model, prompt, new_tokens, repeats):
    """Decoding of the float32 model, of its int8 copies (reduce_range, the default, and 8-bit
    activations) and of its free-Linear copy: (copies, replaced names, float32 tokens/s, per
    copy: tokens/s, share of greedy tokens equal to float32's, the path its int8 calls ran;
    tokens/s of the free-Linear copy)."""
    copies = {rr: quantized_copy(model, rr) for rr in (True, False)}
    rates = decode_rates([model] + [q for q, _ in copies.values()] + [free_linear_copy(model)],
                         prompt, new_tokens, repeats)
    r32, out32 = rates[0]
    rfree = rates[-1][0]
    rows = {}
    for (rr, (q, _)), (r8, out8) in zip(copies.items(), rates[1:-1]):
        q.generate(prompt, 1, temperature=0.0, use_cache=True)
        same = float(np.mean(out32[0, prompt.shape[1]:] == out8[0, prompt.shape[1]:]))
        rows[rr] = (r8, same, acceleration.last_path())
    return {rr: q for rr, (q, _) in copies.items()}, copies[True][1], r32, rows, rfree


def cnn_rows(epochs, say):
    from tinytorch.core.activations import ReLU
    from tinytorch.core.dataloader import DataLoader, TensorDataset
    from tinytorch.core.losses import CrossEntropyLoss
    from tinytorch.core.optimizers import Adam
    from tinytorch.core.training import Trainer
    from tinytorch.data import digits_split
    x_train, y_train, x_val, y_val = digits_split(test_fraction=0.2, seed=0)
    x_train, x_val = x_train[:, None], x_val[:, None]  # (N, 1, 8, 8), as milestone 04
    manual_seed(0)
    model = lenet(ReLU)
    trainer = Trainer(model, Adam(model.parameters(), lr=3e-3), CrossEntropyLoss(), progress=False)
    train = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True, seed=0)
    for _ in range(epochs):
        trainer.train_epoch(train)
    model.eval()

    def accuracy(m):
        with no_grad():
            logits = m(Tensor(x_val)).data
        return float(np.mean(logits.argmax(1) == np.asarray(y_val)))
    acc32, rows = accuracy(model), {}
    for rr in (True, False):
        q, replaced = quantized_copy(model, rr)
        rows[rr] = (accuracy(q), acceleration.last_path(), model_size_bytes(q))
        say(f"  CNN: accuracy float32 {acc32:.4f}, int8{RR[rr]} {rows[rr][0]:.4f} "
            f"({replaced}, {rows[rr][1]})")
    return acc32, rows, replaced, model_size_bytes(model)


def main():
    ap = C.arguments(__doc__, "bench_int8_e2e.md", threads=1,
                     quick=dict(steps=60, repeats=1, new_tokens=32, epochs=3, wide_layers=1))
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--new-tokens", dest="new_tokens", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--wide-layers", dest="wide_layers", type=int, default=4)
    args = C.parse(ap)
    paths = {rr: acceleration.quantized_path(reduce_range=rr) for rr in (True, False)}
    say = lambda s: print(s, flush=True)  # noqa: E731
    shown = ", ".join(f"{'`' + why + '`' if ok else 'NumPy (' + why + ')'} ({'reduce_range' if rr else '8-bit'})"
                      for rr, (ok, why) in paths.items())
    body = [f"INT8 path: {shown}; {args.threads} thread(s).", ""]
    with C.Threads(args.threads):
        say("GPT on TinyTalks:")
        model, tok, held, context, corpus_bytes = train_gpt(args.steps, say)
        prompt = np.array([tok.encode("Q: What is a cache?\nA:")], dtype=np.int64)
        qs, replaced, r32, rows, rfree = gpt_rows(model, prompt, args.new_tokens, args.repeats)
        l32 = heldout_loss(model, held, context, tok.vocab_size)
        losses = {rr: heldout_loss(q, held, context, tok.vocab_size) for rr, q in qs.items()}
        for rr, (r8, same, path) in rows.items():
            say(f"  held-out loss float32 {l32:.4f}, int8{RR[rr]} {losses[rr]:.4f}; decode {r32:.0f} vs "
                f"{r8:.0f} tokens/s ({path})")
        say(f"  every Linear free: {rfree:.0f} tokens/s ({rfree / r32:.2f}x float32)")
        body += ["## GPT on TinyTalks (trained here)", "",
                 f"Character GPT, width 128, 2 blocks, 4 heads, trained {args.steps} AdamW steps "
                 f"(batch 16 x {context}) on the first 90% of TinyTalks ({corpus_bytes:,} bytes, seed 0); "
                 f"quantize_model replaced {len(replaced)} Linear layers (its default reduce_range: "
                 "7-bit activations, as PyTorch's dynamic Linear; and reduce_range=False: 8-bit); "
                 f"greedy decoding of {args.new_tokens} tokens with the KV cache, median of "
                 f"{args.repeats} (float32, its int8 copies and the free-Linear copy decode in turn, "
                 "one each per round). The last row is the ceiling of any faster Linear layer: the "
                 "same model with every Linear replaced by one that returns a cached output and "
                 "costs one Python call, so its speed is everything but the Linear layers.", ""]
        body += C.table(["model", "held-out loss", "decode tokens/s", "greedy tokens as float32's",
                         "int8 path", "bytes (model_size_bytes)"],
                        [["float32", f"{l32:.4f}", f"{r32:.0f}", "", "", model_size_bytes(model)]] +
                        [[f"int8 (quantize_model{RR_ARG[rr]})",
                          f"{losses[rr]:.4f} ({100 * (losses[rr] - l32) / l32:+.2f}%)",
                          f"{r8:.0f} ({r8 / r32:.2f}x)", f"{100 * same:.0f}%", f"`{path}`",
                          model_size_bytes(qs[rr])] for rr, (r8, same, path) in rows.items()] +
                        [["every Linear free (ceiling of any faster Linear)", "",
                          f"{rfree:.0f} ({rfree / r32:.2f}x)", "", "", ""]])
        body.append("")

        say("GPT at GPT-2 small width:")
        manual_seed(0)
        wide = GPT(tok.vocab_size, embed_dim=768, num_layers=args.wide_layers, num_heads=12, max_seq_len=256)
        wide.eval()
        _, wreplaced, w32, wrows, wfree = gpt_rows(wide, prompt, args.new_tokens, args.repeats)
        with acceleration.use_native(False):  # float32 on NumPy / OpenBLAS throughout
            (wblas, _), = decode_rates([wide], prompt, args.new_tokens, args.repeats)
        for rr, (w8, _, wpath) in wrows.items():
            say(f"  decode {w32:.1f} (NumPy/OpenBLAS {wblas:.1f}) vs int8{RR[rr]} {w8:.1f} tokens/s ({wpath})")
        body += ["## GPT at GPT-2 small width (untrained)", "",
                 f"Width 768, 12 heads, {args.wide_layers} blocks (GPT-2 small has 12), character "
                 f"vocabulary; {len(wreplaced)} Linear layers quantized; greedy decoding of {args.new_tokens} "
                 "tokens with the KV cache (M = 1 per Linear call). Our float32 M = 1 Linear runs "
                 "tt_sgemm's row-vector path (the weight read in place); the second row runs every "
                 "op of the float32 model on NumPy / OpenBLAS (its GEMV) as a second float32 baseline.", ""]
        body += C.table(["model", "decode tokens/s", "int8 path"],
                        [["float32 (runtime kernels)", f"{w32:.1f}", ""],
                         ["float32 (NumPy / OpenBLAS, use_native(False))", f"{wblas:.1f}", ""]] +
                        [[f"int8 (quantize_model{RR_ARG[rr]})",
                          f"{w8:.1f} ({w8 / w32:.2f}x runtime float32, {w8 / wblas:.2f}x NumPy float32)",
                          f"`{wpath}`"] for rr, (w8, _, wpath) in wrows.items()] +
                        [["every Linear free (ceiling of any faster Linear)",
                          f"{wfree:.1f} ({wfree / w32:.2f}x runtime float32)", ""]])
        body.append("")

        say("CNN (milestone 04):")
        acc32, crows, creplaced, b32 = cnn_rows(args.epochs, say)
        body += ["## Milestone 04 CNN on the digits", "",
                 f"LeNet-style network (milestones/04_1998_cnn/lenet.py), Adam, {args.epochs} epochs; "
                 f"quantize_model replaced {creplaced} (the convolutions stay float32).", ""]
        body += C.table(["model", "validation accuracy", "int8 path", "bytes"],
                        [["float32", f"{acc32:.4f}", "", b32]] +
                        [[f"int8{RR[rr]}", f"{a8:.4f} ({a8 - acc32:+.4f})", f"`{p8}`", b8]
                         for rr, (a8, p8, b8) in crows.items()])
    C.write_report(args.report, "INT8 inference end to end", body, threads=args.threads)


if __name__ == "__main__":
    main()
