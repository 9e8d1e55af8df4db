"""Milestone 05, part 2b: activation checkpointing of every GPT block, measured.

What it shows
  The extension guide's workflow at the autograd boundary: wrap each TransformerBlock in
  ``checkpoint()`` (tinytorch.extensions), measure the peak memory of a training step's forward
  and backward with tracemalloc (``Profiler.measure_memory``: NumPy buffers are counted there),
  and find the largest batch that fits a fixed memory budget with and without checkpointing:
  the guide's "double the batch size without running out of memory" claim, re-measured.

    1. A deeper GPT than part 1's (4 blocks in --quick, 8 by default; width 64, 4 heads,
       64-token windows of the sonnets), so activations dominate the step's memory.
    2. One batch both ways: the loss and every gradient must match (checkpointing recomputes,
       it does not approximate), with the peak memory and time of each.
    3. The budget: the peak of the plain step at batch --budget-batch (16; 8 in --quick). The
       largest batch whose step peaks within it is searched (a linear prediction from two
       measurements, then one batch at a time) with and without
       checkpointing; the ratio of the two is the batch-size gain.

What is counted
  Peak bytes above the resting model (parameters, data) during forward + backward, gradients
  included (the same for both), as tracemalloc sees them. Without checkpointing every block's
  intermediates (attention probabilities B*H*T*T, the 4x-wide MLP activations, ...) stay alive
  until backward reaches them; with it only each block's input is kept, and one block's
  intermediates are rebuilt at a time during backward, for about one extra forward pass.

Run:    python milestones/05_2017_transformer/02_activation_checkpointing.py [--quick] [--json PATH]
        --quick: 4 blocks, budget at batch 8 (about 15 s on a quiet 2-core CPU); the default 8 blocks.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # milestones/: the shared _runtime helper
import _runtime  # noqa: E402

_runtime.load()  # the installed tinytorch (else the checkout's); says which runtime and ISA

from tinytorch.core.layers import Layer  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.random import manual_seed  # noqa: E402
from tinytorch.core.tokenization import NextTokenDataset, Tokenizer  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402
from tinytorch.extensions import checkpoint  # noqa: E402
from tinytorch.perf.profiling import Profiler  # noqa: E402

DATA = os.path.join(HERE, "data", "tiny_shakespeare.txt")


class CheckpointedBlock(Layer):
    """A TransformerBlock whose training forward is ``checkpoint(block, x)``: its intermediates
    are dropped after the forward and rebuilt in backward. Decoding with a KV cache calls the
    block directly (nothing is recorded there anyway)."""

    def __init__(self, block):
        self.block = block

    def forward(self, x, kv_cache=None):
        """``checkpoint(self.block, x)``; with a ``kv_cache`` the plain block call."""
        if kv_cache is not None:
            return self.block(x, kv_cache=kv_cache)
        return checkpoint(self.block, x)


class Stepper:
    """One model whose blocks can be switched between plain and checkpointed."""

    def __init__(self, model, windows):
        self.model, self.windows = model, windows
        self.plain = list(model.blocks)
        self.wrapped = [CheckpointedBlock(b) for b in self.plain]

    def step(self, batch, checkpointed):
        """Forward + backward of one batch; returns the loss (gradients left in ``.grad``)."""
        self.model.blocks = self.wrapped if checkpointed else self.plain
        self.model.zero_grad()
        idx = np.arange(batch) % len(self.windows.inputs)
        x, y = self.windows.inputs[idx], self.windows.targets[idx]
        loss = cross_entropy(self.model(x).reshape(-1, self.model.vocab_size), y.reshape(-1))
        loss.backward()
        return loss.item()

    def peak(self, batch, checkpointed):
        """Peak tracemalloc bytes of one step (the loss and its graph are gone at the end)."""
        return Profiler.measure_memory(self.step, batch, checkpointed)["tracemalloc_peak_bytes"]

    def timed(self, batch, checkpointed, repeats=3):
        """Best-of-``repeats`` seconds per step (untraced)."""
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            self.step(batch, checkpointed)
            best = min(best, time.perf_counter() - start)
        return best


def largest_batch(peak_of, budget, start, limit):
    """Largest batch b in [1, limit] whose step peaks within ``budget`` bytes, given a measured
    ``peak_of(start)``. Peaks grow almost linearly with the batch, so two measurements predict
    the boundary; walking one batch at a time from the prediction then finds it exactly."""
    fits = lambda b: peak_of(b) <= budget  # noqa: E731
    p1, p2 = peak_of(start), peak_of(2 * start)
    slope = max((p2 - p1) / start, 1.0)
    b = int(min(max(start + (budget - p1) // slope, 1), limit))
    if fits(b):
        while b < limit and fits(b + 1):
            b += 1
        return b
    while b > 1 and not fits(b - 1):
        b -= 1
    return max(b - 1, 1) if b > 1 else (1 if fits(1) else 0)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Activation checkpointing of every GPT block: peak "
                                                 "memory and the largest batch in a fixed budget.")
    parser.add_argument("--quick", action="store_true", help="4 blocks and a batch-8 budget")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--budget-batch", type=int, default=None,
                        help="the budget is the plain step's peak at this batch size (16; 8 with --quick)")
    parser.add_argument("--seed", type=int, default=0)
    _runtime.add_json_option(parser)
    args = parser.parse_args(argv)
    layers = args.layers or (4 if args.quick else 8)
    args.budget_batch = args.budget_batch or (8 if args.quick else 16)
    if layers < 1 or args.budget_batch < 1:
        parser.error("--layers and --budget-batch must be >= 1")
    context = 64

    text = open(DATA, encoding="utf-8").read()
    tok = Tokenizer(text)
    windows = NextTokenDataset(np.array(tok.encode(text), dtype=np.int64), context, stride=7)
    manual_seed(args.seed)
    model = GPT(vocab_size=tok.vocab_size, embed_dim=64, num_layers=layers, num_heads=4, max_seq_len=context)
    stepper = Stepper(model, windows)
    print(f"GPT: {layers} blocks, width 64, 4 heads, context {context}, "
          f"{Profiler.count_parameters(model):,} parameters; every block wrapped in checkpoint()")

    with _runtime.track_kernel_paths() as paths:
        b0 = args.budget_batch
        loss_plain = stepper.step(b0, False)
        grads_plain = [p.grad.copy() for p in model.parameters()]
        loss_ckpt = stepper.step(b0, True)
        grad_diff = max(float(np.max(np.abs(p.grad - g))) for p, g in zip(model.parameters(), grads_plain))
        print(f"batch {b0}: loss {loss_plain:.6f} plain, {loss_ckpt:.6f} checkpointed; "
              f"largest gradient difference {grad_diff:.2e}")
        peak_plain, peak_ckpt = stepper.peak(b0, False), stepper.peak(b0, True)
        t_plain, t_ckpt = stepper.timed(b0, False), stepper.timed(b0, True)
        print(f"peak step memory at batch {b0}: {peak_plain / 2**20:.2f} MiB plain, "
              f"{peak_ckpt / 2**20:.2f} MiB checkpointed ({peak_plain / peak_ckpt:.2f}x less); "
              f"step time {t_plain * 1e3:.0f} ms vs {t_ckpt * 1e3:.0f} ms "
              f"({(t_ckpt / t_plain - 1) * 100:+.0f}%)")

        budget = peak_plain
        limit = 64 * b0
        print(f"memory budget: {budget / 2**20:.2f} MiB (the plain step's peak at batch {b0}); "
              f"searching the largest batch that fits ...", flush=True)
        measured = {}

        def peak_of(checkpointed):
            def measure(batch):
                if (checkpointed, batch) not in measured:
                    measured[(checkpointed, batch)] = stepper.peak(batch, checkpointed)
                    peak = measured[(checkpointed, batch)]
                    print(f"  batch {batch:4d} {'checkpointed' if checkpointed else 'plain':12s} "
                          f"{peak / 2**20:8.2f} MiB  {'fits' if peak <= budget else 'over'}")
                return measured[(checkpointed, batch)]
            return measure

        measured[(False, b0)], measured[(True, b0)] = peak_plain, peak_ckpt
        best_plain = largest_batch(peak_of(False), budget, b0, limit)
        best_ckpt = largest_batch(peak_of(True), budget, b0, limit)

    ratio = best_ckpt / best_plain
    print(f"\nActivation checkpointing of all {layers} blocks (tracemalloc peak of one forward + backward):")
    _runtime.print_table(
        ["", "peak at batch %d (MiB)" % b0, "step time (ms)", "largest batch in %.2f MiB" % (budget / 2**20)],
        [["plain", f"{peak_plain / 2**20:.2f}", f"{t_plain * 1e3:.0f}", str(best_plain)],
         ["checkpoint every block", f"{peak_ckpt / 2**20:.2f}", f"{t_ckpt * 1e3:.0f}", str(best_ckpt)]])
    verdict = "the guide's 2x reproduced" if ratio >= 2 else "less than the guide's 2x"
    print(f"checkpointing fits a {ratio:.2f}x larger batch in the same budget ({verdict}); "
          f"it costs {(t_ckpt / t_plain - 1) * 100:+.0f}% step time (step times move with the machine's load)")
    _runtime.report(paths)
    _runtime.save_results(args.json, {
        "milestone": "05_checkpointing", "layers": layers, "budget_batch": b0, "budget_bytes": budget,
        "loss_plain": loss_plain, "loss_checkpointed": loss_ckpt, "max_grad_diff": grad_diff,
        "peak_plain_bytes": peak_plain, "peak_checkpointed_bytes": peak_ckpt,
        "step_s_plain": t_plain, "step_s_checkpointed": t_ckpt,
        "largest_batch_plain": best_plain, "largest_batch_checkpointed": best_ckpt, "batch_ratio": ratio})


if __name__ == "__main__":
    main()
