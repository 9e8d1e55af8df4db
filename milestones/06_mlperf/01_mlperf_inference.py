"""Milestone 06: the MLPerf inference benchmark on the milestone models.

What it shows
  The extension guide's tier-2 workflow: ``MLPerf().run_standard_benchmark(model, name,
  test_inputs=..., labels=...)`` on three models trained here, each in MLPerf inference's
  SingleStream (latency percentiles), Offline (throughput) and Server (Poisson arrivals, p99
  latency) scenarios, with accuracy on held-out data:

    digits_cnn    milestone 04's LeNet-style CNN on the 359 validation digits (8x8 images)
    digits_mlp    the `tinytorch demo` MLP (64-128-10) on the same digits, flattened
    sonnets_gpt   milestone 05's tiny GPT as a next-character classifier on held-out windows of
                  the sonnets (the logits of the last position; the label is the next character)

Which engine measures
  MLCommons LoadGen (``pip install tinytorch[mlperf]``) when it is installed: a real SUT and QSL,
  LoadGen's own percentiles and samples/s, its VALID/INVALID verdict, and its log files kept in
  --log-dir (one folder per model and scenario). Without it the package's built-in runner
  measures, and the table says so (engine column) and why. --engine forces one.

  Settings are short on purpose (--min-duration-ms 1000, 250 with --quick; MLPerf's rules ask
  600 s for a submission): LoadGen's verdict is about these settings. Latency numbers are
  wall-clock on this machine and move with its load.

Run:    python milestones/06_mlperf/01_mlperf_inference.py [--quick] [--engine auto|loadgen|builtin]
                 [--log-dir DIR] [--json PATH]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MILESTONES = os.path.dirname(HERE)
sys.path.insert(0, MILESTONES)  # milestones/: the shared _runtime helper
import _runtime  # noqa: E402

_runtime.load()  # the installed tinytorch (else the checkout's); says which runtime and ISA

sys.path.insert(0, os.path.join(MILESTONES, "04_1998_cnn"))  # milestone 04's network
from lenet import lenet  # noqa: E402

from tinytorch.core.activations import GELU  # noqa: E402
from tinytorch.core.dataloader import DataLoader, TensorDataset  # noqa: E402
from tinytorch.core.layers import Layer, Linear, Sequential  # noqa: E402
from tinytorch.core.losses import CrossEntropyLoss, cross_entropy  # noqa: E402
from tinytorch.core.optimizers import Adam, AdamW, clip_grad_norm_  # noqa: E402
from tinytorch.core.random import manual_seed  # noqa: E402
from tinytorch.core.tokenization import NextTokenDataset, Tokenizer  # noqa: E402
from tinytorch.core.training import Trainer  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402
from tinytorch.data import digits_split  # noqa: E402
from tinytorch.perf.benchmarking import MLPerf  # noqa: E402

SONNETS = os.path.join(MILESTONES, "05_2017_transformer", "data", "tiny_shakespeare.txt")


class Flat(Layer):
    """(N, 8, 8) images -> (N, 64) rows, then the wrapped model."""

    def __init__(self, model):
        self.model = model

    def forward(self, x):
        """The wrapped model on ``x`` flattened to rows."""
        return self.model(x.reshape(x.shape[0], -1))


class NextCharacter(Layer):
    """A GPT as a classifier: the logits of the last position of each window."""

    def __init__(self, gpt):
        self.gpt = gpt

    def forward(self, x):
        """Logits (N, vocab) of the character after each window of ``x`` (N, T)."""
        return self.gpt(x).data[:, -1, :]


def train_digits(model, x, y, epochs, seed):
    """Train ``model`` on digits with Adam; returns it."""
    trainer = Trainer(model, Adam(model.parameters(), lr=3e-3), CrossEntropyLoss(), progress=False)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, seed=seed)
    for _ in range(epochs):
        trainer.train_epoch(loader)
    return model


def train_gpt(steps, context, seed):
    """The milestone-05 GPT trained ``steps`` AdamW steps on the first 90% of the sonnets;
    returns (classifier, held-out windows, next-character labels)."""
    text = open(SONNETS, encoding="utf-8").read()
    tok = Tokenizer(text)
    ids = np.array(tok.encode(text), dtype=np.int64)
    split = int(len(ids) * 0.9)
    gpt = GPT(vocab_size=tok.vocab_size, embed_dim=64, num_layers=2, num_heads=4, max_seq_len=context)
    optimizer = AdamW(gpt.parameters(), lr=3e-3, weight_decay=0.01)
    loader = DataLoader(NextTokenDataset(ids[:split], context, stride=1), batch_size=16, shuffle=True,
                        drop_last=True, seed=seed)
    step = 0
    while step < steps:
        for x, y in loader:
            loss = cross_entropy(gpt(x).reshape(-1, tok.vocab_size), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            clip_grad_norm_(gpt.parameters(), 1.0)
            optimizer.step()
            step += 1
            if step >= steps:
                break
    held = ids[split - context:]
    starts = np.arange(0, len(held) - context)
    windows = np.stack([held[s:s + context] for s in starts])
    return NextCharacter(gpt), windows, held[starts + context]


def main(argv=None):
    parser = argparse.ArgumentParser(description="MLPerf inference (LoadGen when installed) on the milestone models.")
    parser.add_argument("--quick", action="store_true", help="short training and 250 ms scenarios")
    parser.add_argument("--engine", choices=("auto", "loadgen", "builtin"), default="auto")
    parser.add_argument("--log-dir", default=None, help="where LoadGen's logs are kept (default: a new temp folder)")
    parser.add_argument("--min-duration-ms", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    _runtime.add_json_option(parser)
    args = parser.parse_args(argv)
    min_ms = args.min_duration_ms if args.min_duration_ms is not None else (250 if args.quick else 1000)
    epochs, gpt_steps = (5, 60) if args.quick else (15, 400)
    log_root = os.path.abspath(args.log_dir or tempfile.mkdtemp(prefix="tinytorch-milestone06-"))

    manual_seed(args.seed)
    x_train, y_train, x_val, y_val = digits_split(test_fraction=0.2, seed=args.seed)
    rows, results = [], {}
    with _runtime.track_kernel_paths() as paths:
        print(f"training the models: CNN and MLP {epochs} epochs on digits, GPT {gpt_steps} steps on the sonnets ...",
              flush=True)
        cnn = train_digits(lenet(), x_train[:, None], y_train, epochs, args.seed)
        mlp = train_digits(Sequential(Linear(64, 128), GELU(), Linear(128, 10)),
                           x_train.reshape(len(x_train), -1), y_train, epochs, args.seed)
        gpt, windows, next_chars = train_gpt(gpt_steps, 32, args.seed)
        suite = [("digits_cnn", cnn, x_val[:, None], y_val), ("digits_mlp", Flat(mlp), x_val, y_val),
                 ("sonnets_gpt", gpt, windows, next_chars)]
        for name, model, inputs, labels in suite:
            print(f"\n{name}: {len(inputs)} samples, scenarios SingleStream, Offline, Server "
                  f"(min duration {min_ms} ms each) ...", flush=True)
            res = MLPerf(warmup=3, offline_batch_size=32).run_standard_benchmark(
                model, name, test_inputs=inputs, labels=labels, scenarios=("single_stream", "offline", "server"),
                engine=args.engine, log_dir=os.path.join(log_root, name), min_duration_ms=min_ms)
            print(res["report"])
            results[name] = {k: v for k, v in res.items() if k not in ("latency", "report")}
            ss, off, srv = res["single_stream"], res["offline"], res["server"]
            verdicts = "/".join(d.get("verdict", "-") for d in (ss, off, srv))
            rows.append([name, res["engine"], f"{ss['p50_latency_ms']:.3f}", f"{ss['p90_latency_ms']:.3f}",
                         f"{ss['p99_latency_ms']:.3f}", f"{off['throughput_samples_per_s']:,.0f}",
                         f"{srv['p99_latency_ms']:.3f} @ {srv['target_qps']:.0f}/s", verdicts,
                         f"{res['accuracy'] * 100:.1f}%"])
    engine_detail = next(iter(results.values()))["engine_detail"]
    print(f"\nMLPerf inference on this machine, measured by {engine_detail}:")
    _runtime.print_table(["model", "engine", "SS p50 (ms)", "SS p90 (ms)", "SS p99 (ms)", "Offline samples/s",
                          "Server p99 (ms) @ QPS", "verdict SS/Off/Srv", "accuracy"], rows)
    if any(r[1] == "loadgen" for r in rows):
        print(f"LoadGen logs (summary, detail, accuracy per scenario): {log_root}")
    _runtime.report(paths)
    _runtime.save_results(args.json, {"milestone": "06_mlperf", "min_duration_ms": min_ms,
                                      "log_dir": log_root, "results": results})
    return results


if __name__ == "__main__":
    main()
