"""Scorecard section "lora": optimizer memory of the guide's 4096 x 16384 projection layer.

Design: one AdamW step on a bias-free Linear(d, k), once with every weight trained and once
per rank with the weight frozen inside a LoRALinear. Nothing is taken from a formula: the
trainable count comes from ``requires_grad``, the bytes from the arrays that exist after the
step (``p.grad``, every array in ``optimizer.state``). The formula, r (d + k) trainable
values and 8 bytes of Adam state each, is computed beside it, and the guide's rows are
compared with the measurement. --quick measures the same layer (the claim is about that
size; a step takes a few seconds), as the full run does. benchmarks/bench_lora.py calls
``measure_projection`` for its part 1.

Owns the lora section; assumes ``LoRALinear`` and the core's AdamW (bytes are those of
the arrays that exist after the step).
"""
from __future__ import annotations

import numpy as np

from ..measure import optimizer_state_bytes, precise_timer
from .results import SectionResult, within

__all__ = ["measure_projection", "lora_formula", "run", "GUIDE_ROWS"]

# The guide's table: config -> (trainable params, weight MB, Adam state MB, reduction %).
GUIDE_ROWS = {None: (67_108_864, 268.4, 536.9, 0.0), 16: (327_680, 1.3, 2.6, 99.5),
              8: (163_840, 0.66, 1.31, 99.8), 4: (81_920, 0.33, 0.66, 99.9)}


def measure_projection(d=4096, k=16384, ranks=(16, 8, 4), batch=8, progress=None) -> list:
    """One AdamW step per configuration (full, then LoRA per rank); a dict per configuration:
    config, rank, trainable, weights, grads, adam (bytes, measured), ms, frozen_grad.

    Args:
        d: input features of the projection.
        k: output features.
        ranks: LoRA ranks to measure after full fine-tuning.
        batch: rows of the input batch.
        progress: optional callable(text) called after each configuration.
    """
    from tinytorch.core import random as tt_random
    from tinytorch.core.layers import Linear
    from tinytorch.core.optimizers import AdamW
    from tinytorch.core.tensor import Tensor
    from tinytorch.extensions import LoRALinear

    tt_random.manual_seed(0)
    base = Linear(d, k, bias=False)
    x = Tensor(np.random.default_rng(0).standard_normal((batch, d)).astype(np.float32))
    rows = []
    for rank in (None,) + tuple(ranks):
        if rank is None:
            base.weight.requires_grad = True
            layer = base
        else:
            layer = LoRALinear.from_linear(base, rank=rank, alpha=2 * rank)  # freezes base.weight
        params = [p for _, p in layer.named_parameters() if p.requires_grad]
        opt = AdamW(params, lr=1e-4)
        with precise_timer() as t:
            opt.zero_grad()
            out = layer(x)
            (out * out).mean().backward()
            opt.step()
        trainable = sum(p.data.size for p in params)
        rows.append({"config": "Full fine-tuning" if rank is None else f"LoRA (r = {rank})", "rank": rank,
                     "trainable": trainable, "weights": sum(p.data.nbytes for p in params),
                     "grads": sum(p.grad.nbytes for p in params if p.grad is not None),
                     "adam": optimizer_state_bytes(opt), "ms": t.elapsed * 1e3,
                     "frozen_grad": base.weight.grad is not None and rank is not None})
        del opt, out
        base.weight.grad = None
        if progress:
            progress(rows[-1]["config"])
    return rows


def lora_formula(d: int, k: int, rank) -> dict:
    """Trainable values and float32 Adam-state bytes from the shapes alone.

    Args:
        d: input features.
        k: output features.
        rank: the LoRA rank (None: full fine-tuning).
    """
    trainable = d * k if rank is None else rank * (d + k)
    return {"trainable": trainable, "weights": 4 * trainable, "adam": 8 * trainable}


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.2f} MB"


def run(ctx) -> SectionResult:
    """Measure the layer and compare with the guide's table.

    Args:
        ctx: the scorecard Context.
    """
    d, k = 4096, 16384
    ranks = (16, 8, 4)  # the full-size step dominates; the ranks cost little
    res = SectionResult("lora", "")
    bar = ctx.progress(1 + len(ranks), "lora")
    rows = measure_projection(d, k, ranks, progress=bar.step)
    bar.close()
    full = rows[0]["adam"]
    for r in rows:
        g_params, g_w, g_adam, g_red = GUIDE_ROWS[r["rank"]]
        f = lora_formula(d, k, r["rank"])
        reduction = 100 * (1 - r["adam"] / full)
        ok_count = r["trainable"] == g_params == f["trainable"]
        ok_bytes = r["adam"] == f["adam"] and within(r["adam"] / 1e6, g_adam, 0.06) and \
            within(r["weights"] / 1e6, g_w, 0.06)
        ok_red = abs(reduction - g_red) < 0.05 + 0.05
        why = "" if (ok_count and ok_bytes and ok_red) else (
            "frozen weight got a gradient" if r["frozen_grad"] else
            f"measured bytes differ from the formula r(d+k) x 8 = {f['adam']:,}")
        res.claim(f"{r['config']}: trainable / weights / Adam state / reduction",
                  f"{g_params:,} / {g_w} MB / {g_adam} MB / "
                  + ("reference" if r["rank"] is None else f"{g_red} %"),
                  f"{r['trainable']:,} / {_mb(r['weights'])} / {_mb(r['adam'])} / "
                  + ("reference" if r["rank"] is None else f"{reduction:.2f} %"),
                  ok_count and ok_bytes and ok_red and not r["frozen_grad"], why)
        res.numbers[r["config"]] = dict(r, formula=f, reduction=reduction)
    lines = ["Measured from the live arrays after one AdamW step (batch 8):", "",
             "| Configuration | Trainable | Formula | Weights | Gradients | Adam state | Step time |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['config']} | {r['trainable']:,} | {lora_formula(d, k, r['rank'])['trainable']:,} | "
                     f"{_mb(r['weights'])} | {_mb(r['grads'])} | {_mb(r['adam'])} | {r['ms']:.0f} ms |")
    res.tables = lines
    res.numbers["shape"] = (d, k)
    if ctx.plots_enabled:
        from .report import save_bar_plot
        res.plots.append(save_bar_plot(ctx.path("lora_memory.png"), [r["config"] for r in rows],
                                       [r["adam"] / 1e6 for r in rows],
                                       f"AdamW state of a {d} x {k} projection (measured)", "MB (log scale)"))
    return res
