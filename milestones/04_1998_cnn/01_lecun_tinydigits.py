"""Milestone 04 (1998, LeCun's convolutional networks): a LeNet-style CNN on the bundled digits.

What it shows
  The vision stack of the core, end to end: the bundled 8x8 digits (tinytorch.data, 1,437
  training / 360 validation images, class-stratified) -> Conv2d -> ReLU -> MaxPool2d -> Conv2d ->
  ReLU -> MaxPool2d -> Flatten -> Linear -> ReLU -> Linear -> cross-entropy, trained by the
  core's Trainer. Then the extension guide's workflow for the optimizer and activation
  boundaries: the same network, the same seed and the same batches, trained with

    SGD (momentum 0.9)       the core's baseline
    Adam                     the core's adaptive baseline
    Lion                     tinytorch.extensions.Lion (sign of an interpolated momentum)
    Muon                     tinytorch.extensions.Muon (orthogonalised momentum; AdamW for biases)
    Adam + QuickGELU         a custom activation, x * sigmoid(1.702 x), defined below from core ops

  and a final table of median epoch time, final training loss and final validation accuracy.
  Learning rates are each optimizer's usual starting point for a net this size, not tuned here.

The network (LeNet-5 shrunk to 8x8 inputs)
  conv 1->6 (3x3, pad 1) 8x8 -> pool 4x4 -> conv 6->16 (3x3, pad 1) -> pool 2x2 -> 64 -> 32 -> 10:
  3,350 parameters. The convolutions run as im2col + GEMM through the kernel door, so the
  kernel paths at the end name the native GEMM that ran.

Run:    python milestones/04_1998_cnn/01_lecun_tinydigits.py [--epochs 30] [--quick] [--json PATH]
        --quick: 10 epochs per configuration (a few seconds on a quiet 2-core CPU)
Timing numbers are wall-clock on this machine and move with its load.
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

from tinytorch.core.activations import ReLU, sigmoid  # noqa: E402
from tinytorch.core.dataloader import DataLoader, TensorDataset  # noqa: E402
from tinytorch.core.layers import Layer  # noqa: E402
from tinytorch.core.losses import CrossEntropyLoss  # noqa: E402
from tinytorch.core.optimizers import SGD, Adam  # noqa: E402
from tinytorch.core.random import manual_seed  # noqa: E402
from tinytorch.core.training import Trainer  # noqa: E402
from tinytorch.data import digits_split  # noqa: E402
from tinytorch.extensions import Lion, Muon  # noqa: E402
from tinytorch.perf.profiling import Profiler  # noqa: E402

from lenet import lenet  # noqa: E402  (this folder's lenet.py, shared with milestone 06)


class QuickGELU(Layer):
    """A custom activation built from core ops (autograd comes for free): x * sigmoid(1.702 x),
    the sigmoid approximation of GELU. Plug any Layer in here to try your own."""

    def forward(self, x):
        """x * sigmoid(1.702 x)."""
        return x * sigmoid(x * 1.702)


# name -> (optimizer factory, activation): the comparison's rows
CONFIGS = {
    "SGD": (lambda p: SGD(p, lr=0.05, momentum=0.9), ReLU),
    "Adam": (lambda p: Adam(p, lr=3e-3), ReLU),
    "Lion": (lambda p: Lion(p, lr=1e-3), ReLU),
    "Muon": (lambda p: Muon(p, lr=0.02, weight_decay=0.0, fallback_lr=3e-3), ReLU),
    "Adam + QuickGELU": (lambda p: Adam(p, lr=3e-3), QuickGELU),
}


def train_one(name, epochs, data, seed, say):
    """Train one configuration; returns its row of numbers."""
    make_optimizer, activation = CONFIGS[name]
    x_train, y_train, x_val, y_val = data
    manual_seed(seed)  # same initial weights for every configuration
    model = lenet(activation)
    trainer = Trainer(model, make_optimizer(model.parameters()), CrossEntropyLoss(), progress=False)
    train = DataLoader(TensorDataset(x_train, y_train), batch_size=32, shuffle=True, seed=seed)
    val = DataLoader(TensorDataset(x_val, y_val), batch_size=360)
    _, initial_acc = trainer.evaluate(val)
    times, losses = [], []
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        losses.append(trainer.train_epoch(train))
        times.append(time.perf_counter() - start)
        val_loss, val_acc = trainer.evaluate(val)
        say(f"  {name:<17} epoch {epoch}/{epochs}: train loss {losses[-1]:.4f}  val loss {val_loss:.4f}  "
            f"val accuracy {val_acc:.3f}  {times[-1] * 1e3:.1f} ms ({len(x_train) / times[-1]:,.0f} images/s)")
    return {"optimizer": name, "parameters": Profiler.count_parameters(model),
            "median_epoch_s": float(np.median(times)), "first_loss": losses[0], "final_loss": losses[-1],
            "initial_val_accuracy": initial_acc, "final_val_accuracy": val_acc, "final_val_loss": val_loss}


def main(argv=None):
    parser = argparse.ArgumentParser(description="LeNet-style CNN on the bundled digits: optimizers "
                                                 "and a custom activation compared.")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="10 epochs per configuration")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", choices=sorted(CONFIGS), action="append",
                        help="run only this configuration (repeatable)")
    parser.add_argument("--quiet", action="store_true", help="no per-epoch lines")
    _runtime.add_json_option(parser)
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be >= 1")
    epochs = 10 if args.quick else args.epochs
    say = (lambda *a: None) if args.quiet else print

    x_train, y_train, x_val, y_val = digits_split(test_fraction=0.2, seed=args.seed)
    data = (x_train[:, None], y_train, x_val[:, None], y_val)  # (N, 1, 8, 8)
    print(f"digits: {len(x_train)} training / {len(x_val)} validation images of 8x8, 10 classes; "
          f"{epochs} epochs per configuration, batch 32")
    rows = []
    with _runtime.track_kernel_paths() as paths:
        for name in args.only or CONFIGS:
            rows.append(train_one(name, epochs, data, args.seed, say))
    print(f"\nLeNet-style CNN, {rows[0]['parameters']:,} parameters, after {epochs} epochs "
          f"(epoch times on this machine, wall clock):")
    _runtime.print_table(
        ["configuration", "median epoch (ms)", "train loss (first -> last epoch)", "val accuracy"],
        [[r["optimizer"], f"{r['median_epoch_s'] * 1e3:.1f}", f"{r['first_loss']:.4f} -> {r['final_loss']:.4f}",
          f"{r['final_val_accuracy'] * 100:.1f}%"] for r in rows])
    _runtime.report(paths)
    _runtime.save_results(args.json, {"milestone": "04_1998_cnn", "epochs": epochs, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
