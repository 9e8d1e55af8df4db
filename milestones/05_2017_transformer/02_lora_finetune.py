"""Milestone 05, part 2a: LoRA fine-tuning of the pre-trained tiny GPT on a second text.

What it shows
  The extension guide's LoRA workflow at the architecture boundary, with one call:
  ``inject_lora(model, ["blocks.*.attn.q_proj", "blocks.*.attn.v_proj"], rank=4)``.
    1. Pre-train the milestone's GPT (2 blocks, width 64) on Shakespeare's sonnets
       (data/tiny_shakespeare.txt), as part 1 does.
    2. Fine-tune two copies of it on a second text, Blake's "The Tyger" and "The Lamb" and
       Wordsworth's "I Wandered Lonely as a Cloud" (data/blake_wordsworth.txt, public domain):
         full fine-tuning   every parameter trained by AdamW
         LoRA               only the rank-4 adapters on the query and value projections
                            (under 2% of the parameters); everything else frozen
       with the same steps, batches and seed.
    3. A table of cross-entropy on the second text (training part, and two held-out tenths cut
       from its middle, one in Blake, one in Wordsworth) before
       and after, the best held-out value during fine-tuning (measured every tenth of the run:
       the early-stopping figure, fair to full fine-tuning, which memorises a 2 KB text and then
       gets worse on held-out text), trainable parameters, their share, the optimizer-state bytes
       (AdamW keeps two moments per trained number) and the time per step. The adapters are then merged into the
       base weights (``merge()``) and the merged model's loss must equal the adapted one.

Why the two cross-entropies come out close
  A small text in a known alphabet is mostly a change of style: attention re-weighted, not a new
  language. A low-rank change to W_q and W_v can express that; so the adapters reach a loss near
  full fine-tuning's while the optimizer holds state for ~2% of the numbers. LoRA's learning rate
  is higher (its B starts at zero and its updates are few and low-rank), as is usual.

Run:    python milestones/05_2017_transformer/02_lora_finetune.py [--quick] [--json PATH]
        --quick: 100 pre-training + 60 fine-tuning steps on 32-token windows (about 10 s on a
        quiet 2-core CPU); the default 500 + 300 steps on 64-token windows.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # milestones/: the shared _runtime helper
import _runtime  # noqa: E402

_runtime.load()  # the installed tinytorch (else the checkout's); says which runtime and ISA

from tinytorch.core.autograd import no_grad  # noqa: E402
from tinytorch.core.dataloader import DataLoader  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import AdamW, clip_grad_norm_  # noqa: E402
from tinytorch.core.random import manual_seed  # noqa: E402
from tinytorch.core.tokenization import NextTokenDataset, Tokenizer, make_windows  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402
from tinytorch.extensions import LoRALinear, inject_lora  # noqa: E402
from tinytorch.perf.profiling import Profiler  # noqa: E402

DATA = os.path.join(HERE, "data")
PRETRAIN_TEXT = os.path.join(DATA, "tiny_shakespeare.txt")
FINETUNE_TEXT = os.path.join(DATA, "blake_wordsworth.txt")
LORA_TARGETS = ["blocks.*.attn.q_proj", "blocks.*.attn.v_proj"]


class Windows:
    """Next-token windows cut from separate runs of ids: no window crosses from one run into the
    next (the held-out parts are cut out of the middle of the text)."""

    def __init__(self, runs, context, stride):
        parts = [make_windows(r, context, stride) for r in runs if len(r) > context]
        self.inputs = np.concatenate([p[0] for p in parts])
        self.targets = np.concatenate([p[1] for p in parts])

    def __len__(self):
        return len(self.inputs)

    def __getitem__(self, i):
        return self.inputs[i], self.targets[i]

    def get_batch(self, indices):
        """The windows at ``indices``, as one batch."""
        return self.inputs[indices], self.targets[indices]


HELDOUT_PARTS = (3, 8)  # of ten equal parts of the second text: one in Blake, one in Wordsworth


def split_text(ids, context):
    """(training windows for the loader, training windows for evaluation, held-out windows):
    the text in ten equal parts, parts 3 and 8 held out, the rest for training."""
    bounds = np.linspace(0, len(ids), 11).astype(int)
    parts = [ids[bounds[i]:bounds[i + 1]] for i in range(10)]
    runs, run = [], []
    for i, part in enumerate(parts):
        if i in HELDOUT_PARTS:
            runs.append(np.concatenate(run))
            run = []
        else:
            run.append(part)
    runs.append(np.concatenate(run))
    held = [parts[i] for i in HELDOUT_PARTS]
    return (Windows(runs, context, 1), Windows(runs, context, context // 2),
            Windows(held, context, max(1, context // 4)))


def mean_loss(model, ds, vocab, batch=64):
    """Cross-entropy per token over all windows of ``ds`` (eval mode, no recording)."""
    model.eval()
    total, count = 0.0, 0
    with no_grad():
        for s in range(0, len(ds.inputs), batch):
            x, y = ds.inputs[s:s + batch], ds.targets[s:s + batch]
            total += cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1)).item() * y.size
            count += y.size
    model.train()
    return total / count


def train_steps(model, params, lr, loader, steps, vocab, heldout=None, every=0):
    """``steps`` AdamW steps on ``params``; returns (seconds per step, optimizer-state bytes,
    [(step, held-out loss)] measured every ``every`` steps when ``heldout`` is given; the
    evaluation time is not counted in the step time)."""
    optimizer = AdamW(params, lr=lr, weight_decay=0.0)
    step, trained, curve = 0, 0.0, []
    while step < steps:
        for x, y in loader:
            start = time.perf_counter()
            loss = cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            clip_grad_norm_(params, 1.0)
            optimizer.step()
            trained += time.perf_counter() - start
            step += 1
            if heldout is not None and every and (step % every == 0 or step == steps):
                curve.append((step, mean_loss(model, heldout, vocab)))
            if step >= steps:
                break
    state_bytes = sum(v.nbytes for st in optimizer.state.values() for v in st.values()
                      if isinstance(v, np.ndarray)) if hasattr(optimizer, "state") else None
    return trained / steps, state_bytes, curve


def main(argv=None):
    parser = argparse.ArgumentParser(description="LoRA vs full fine-tuning of the tiny GPT on a second text.")
    parser.add_argument("--quick", action="store_true", help="short run (about 10 s on a quiet machine)")
    parser.add_argument("--pretrain-steps", type=int, default=None)
    parser.add_argument("--finetune-steps", type=int, default=None)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--lora-lr", type=float, default=1e-2)
    parser.add_argument("--targets", default=",".join(LORA_TARGETS), help="comma-separated Linear names/globs")
    parser.add_argument("--seed", type=int, default=0)
    _runtime.add_json_option(parser)
    args = parser.parse_args(argv)
    context = 32 if args.quick else 64
    pre_steps = args.pretrain_steps or (100 if args.quick else 500)
    ft_steps = args.finetune_steps or (60 if args.quick else 300)
    if min(pre_steps, ft_steps, args.rank) < 1:
        parser.error("steps and --rank must be >= 1")

    text1 = open(PRETRAIN_TEXT, encoding="utf-8").read()
    text2 = open(FINETUNE_TEXT, encoding="utf-8").read()
    tok = Tokenizer(text1 + text2)  # one alphabet for both texts
    ids1 = np.array(tok.encode(text1), dtype=np.int64)
    ids2 = np.array(tok.encode(text2), dtype=np.int64)
    ft_train, ft_train_eval, ft_val = split_text(ids2, context)
    vocab = tok.vocab_size

    manual_seed(args.seed)
    model = GPT(vocab_size=vocab, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=context)
    total_params = Profiler.count_parameters(model)
    print(f"pre-training text: {len(text1):,} chars; fine-tuning text: {len(text2):,} chars "
          f"({len(ft_train):,} windows of {context}); vocab {vocab}; GPT {total_params:,} parameters")
    with _runtime.track_kernel_paths() as paths:
        pre_loader = DataLoader(NextTokenDataset(ids1, context, stride=1), batch_size=16, shuffle=True,
                                drop_last=True, seed=args.seed)
        print(f"1. pre-training on the sonnets: {pre_steps} steps ...", flush=True)
        sec, _, _ = train_steps(model, model.parameters(), 3e-3, pre_loader, pre_steps, vocab)
        print(f"   {sec * 1e3:.1f} ms/step; loss on the sonnets {mean_loss(model, NextTokenDataset(ids1, context, stride=context), vocab):.3f}")
        pretrained = {k: v.copy() for k, v in model.state_dict().items()}
        before = (mean_loss(model, ft_train_eval, vocab), mean_loss(model, ft_val, vocab))
        print(f"   on the second text before fine-tuning: train {before[0]:.3f}, held-out {before[1]:.3f} "
              f"(uniform guess {math.log(vocab):.3f})")

        rows = {}
        for method in ("full fine-tuning", "LoRA"):
            manual_seed(args.seed)
            ft = GPT(vocab_size=vocab, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=context)
            ft.load_state_dict(pretrained)
            if method == "LoRA":
                targets = args.targets.split(",")
                replaced = inject_lora(ft, targets, rank=args.rank)
                params, lr = [p for p in ft.parameters() if p.requires_grad], args.lora_lr
                print(f"2. LoRA: inject_lora({targets}, rank={args.rank}) replaced {len(replaced)} layers: "
                      f"{', '.join(replaced)}")
            else:
                params, lr = ft.parameters(), 1e-3
                print("2. full fine-tuning: every parameter trained")
            loader = DataLoader(ft_train, batch_size=16, shuffle=True, drop_last=True, seed=args.seed + 1)
            sec, state_bytes, curve = train_steps(ft, params, lr, loader, ft_steps, vocab, heldout=ft_val,
                                                  every=max(ft_steps // 10, 1))
            best_step, best_heldout = min(curve, key=lambda c: c[1])
            trainable = int(sum(p.data.size for p in params))
            row = {"method": method, "trainable_parameters": trainable, "total_parameters": total_params,
                   "trainable_fraction": trainable / total_params, "optimizer_state_bytes": state_bytes,
                   "lr": lr, "ms_per_step": sec * 1e3, "train_loss": mean_loss(ft, ft_train_eval, vocab),
                   "heldout_loss": mean_loss(ft, ft_val, vocab), "best_heldout_loss": best_heldout,
                   "best_step": best_step, "heldout_curve": curve}
            if method == "LoRA":
                for m in ft.modules():
                    if isinstance(m, LoRALinear):
                        m.merge()
                row["merged_heldout_loss"] = mean_loss(ft, ft_val, vocab)
                print(f"   merged adapters into the base weights: held-out loss {row['merged_heldout_loss']:.4f} "
                      f"(adapted {row['heldout_loss']:.4f})")
            print(f"   {ft_steps} steps, {sec * 1e3:.1f} ms/step: train loss {row['train_loss']:.3f}, "
                  f"held-out {row['heldout_loss']:.3f} (best {best_heldout:.3f} at step {best_step}; curve "
                  f"{' '.join(f'{v:.2f}' for _, v in curve)})")
            rows[method] = row

    full, lora = rows["full fine-tuning"], rows["LoRA"]
    print(f"\nFine-tuning on the second text ({ft_steps} steps, batch 16, context {context}); "
          f"cross-entropy in nats per character:")
    table = [["pre-trained, not fine-tuned", "0", "0%", "-", f"{before[0]:.3f}", f"{before[1]:.3f}", "-", "-"]]
    for r in (full, lora):
        state = "n/a" if r["optimizer_state_bytes"] is None else f"{r['optimizer_state_bytes'] / 1024:.1f} KiB"
        table.append([r["method"], f"{r['trainable_parameters']:,}", f"{r['trainable_fraction'] * 100:.2f}%",
                      state, f"{r['train_loss']:.3f}", f"{r['heldout_loss']:.3f}",
                      f"{r['best_heldout_loss']:.3f} (step {r['best_step']})", f"{r['ms_per_step']:.1f}"])
    _runtime.print_table(["model", "trained params", "share", "AdamW state", "train CE", "held-out CE (end)",
                          "best held-out CE", "ms/step"], table)
    gain_full, gain_lora = before[0] - full["train_loss"], before[0] - lora["train_loss"]
    held_full, held_lora = before[1] - full["best_heldout_loss"], before[1] - lora["best_heldout_loss"]
    print(f"LoRA trains {lora['trainable_fraction'] * 100:.2f}% of the parameters; its best held-out "
          f"cross-entropy is {lora['best_heldout_loss']:.3f} against full fine-tuning's best "
          f"{full['best_heldout_loss']:.3f} ({(lora['best_heldout_loss'] / full['best_heldout_loss'] - 1) * 100:+.1f}%; "
          f"at the end {lora['heldout_loss']:.3f} vs {full['heldout_loss']:.3f}): "
          f"{held_lora / held_full * 100 if held_full > 0 else float('nan'):.0f}% of full fine-tuning's held-out "
          f"gain. On the training text it recovers "
          f"{gain_lora / gain_full * 100:.0f}% of full fine-tuning's drop in training cross-entropy "
          f"({gain_lora:.3f} vs {gain_full:.3f} nats: full fine-tuning also memorises more).")
    _runtime.report(paths)
    _runtime.save_results(args.json, {"milestone": "05_lora", "pretrain_steps": pre_steps,
                                      "finetune_steps": ft_steps, "context": context,
                                      "before": {"train_loss": before[0], "heldout_loss": before[1]},
                                      "full": full, "lora": lora})
    return rows


if __name__ == "__main__":
    main()
