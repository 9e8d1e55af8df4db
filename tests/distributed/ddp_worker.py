"""Worker run by tests/test_distributed*.py, as ``mpirun -n 2 python ddp_worker.py OUT MODE MODEL``
or as one process. Trains a float64 model (float32 in mode "float32"; MODEL: "mlp", "cnn" or "gpt") with Adam for 20 steps
on a fixed global batch: each rank takes its DistributedSampler shard (mean loss over its rows),
DDP averages the gradients, so the result must equal one process on the whole batch.

MODE: "plain"; "overlap" (buckets all-reduced during backward); "nosync" (two micro-batches per
step, the first under no_sync, loss scaled by 1/2; "nosync-overlap" the same with overlap);
"twice" (two micro-batches, loss scaled by 1/2, both backward passes synchronised: the second
accumulates onto the first and its hooks pack the sum again); "halved" (every .grad replaced by
half of it between backward and sync_gradients: DDP must average the replaced arrays, as one
process steps on them); "float32" (plain, with float32 parameters and inputs);
"lora" (LoRA adapters on the MLP, frozen base: DDP must bucket only the adapters); "zero"
(ZeroRedundancyOptimizer(Adam) and no DDP averaging: identical to plain Adam); "zero-adamw" and
"adamw" (its reference); "skip" (no gradient averaging: must differ); "mismatch" (rank 1 has
another shape: must fail); "buckets" (rank 1 another bucket_mb: must fail); "crash" (rank 1
raises at step 5) and "kill" (rank 1 SIGKILLs itself at step 5): every rank must end, non-zero.
Rank 0 writes the parameters (and, for zero, the state bytes per rank) to OUT (.npz through
tinytorch._atomic)."""
import contextlib
import io
import os
import signal
import sys

import numpy as np

from tinytorch import _atomic, distributed as dist
from tinytorch.core import random as tt_random
from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Layer, Linear, Sequential
from tinytorch.core.losses import cross_entropy, mse_loss
from tinytorch.core.optimizers import Adam, AdamW
from tinytorch.core.spatial import Conv2d, MaxPool2d
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformers import GPT

STEPS = 20


class CNN(Layer):
    def __init__(self):
        self.conv = Conv2d(1, 4, kernel_size=3, padding=1)
        self.pool = MaxPool2d(2, stride=2)
        self.head = Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = self.pool(self.conv(x).relu())
        return self.head(x.reshape(x.shape[0], -1))


def dtype_of(mode):
    return np.float32 if mode == "float32" else np.float64


def build(model_name, mode, rank):
    tt_random.manual_seed(1234 + rank)  # different init per rank: DDP must broadcast rank 0's
    dtype = dtype_of(mode)
    data = np.random.default_rng(7)
    if model_name == "mlp":
        hidden = 17 if mode == "mismatch" and rank == 1 else 16  # "mismatch": DDP must refuse
        model = Sequential(Linear(5, hidden), ReLU(), Linear(hidden, 3))
        X, Y = data.standard_normal((16, 5)), data.standard_normal((16, 3))
        loss = lambda out, y: mse_loss(out, Tensor(y, dtype=dtype))  # noqa: E731
    elif model_name == "cnn":
        model = CNN()
        X, Y = data.standard_normal((8, 1, 8, 8)), data.integers(0, 3, 8)
        loss = cross_entropy
    elif model_name == "gpt":
        model = GPT(vocab_size=17, embed_dim=16, num_layers=2, num_heads=2, max_seq_len=8)
        X = data.integers(0, 17, (4, 8))
        Y = np.roll(X, -1, axis=1)
        loss = lambda out, y: cross_entropy(out.reshape(-1, 17), y.reshape(-1))  # noqa: E731
    else:
        raise ValueError(f"unknown model {model_name!r}")
    for p in model.parameters():
        p.data = p.data.astype(dtype)
    if mode == "lora":
        from tinytorch.extensions.lora import inject_lora
        inject_lora(model, ["0", "2"], rank=2)
        for _, p in model.named_parameters():
            p.data = p.data.astype(np.float64)
            if p.requires_grad:  # B starts at zero; make the adapters matter from step 1
                p.data = tt_random.get_generator().standard_normal(p.data.shape) * 0.1
    return model, X, Y, loss


def inputs(model_name, x, mode):
    return Tensor(x) if model_name == "gpt" else Tensor(x, dtype=dtype_of(mode))


def main(out, mode, model_name):
    dist.init()
    rank = dist.rank()
    model, X, Y, loss_fn = build(model_name, mode, rank)
    overlap = mode.endswith("overlap")
    bucket_mb = 0.001 if mode == "buckets" and rank == 1 else 0.0005  # tiny buckets: several all-reduces
    ddp = dist.DistributedDataParallel(model, bucket_mb=bucket_mb, overlap=overlap)
    frozen = [p.data.copy() for _, p in model.named_parameters() if not p.requires_grad]
    trainable = [p for p in model.parameters() if p.requires_grad]
    if mode.startswith("zero"):
        cls = AdamW if mode == "zero-adamw" else Adam
        opt = dist.ZeroRedundancyOptimizer(trainable, cls, lr=1e-2)
    else:
        opt = (AdamW if mode == "adamw" else Adam)(trainable, lr=1e-2)
    idx = np.array(list(dist.DistributedSampler(len(X), shuffle=False)))
    for step in range(STEPS):
        if step == 5 and rank == 1 and mode in ("crash", "kill"):
            if mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)  # rank 0 waits in a collective
            raise RuntimeError("injected failure on rank 1")
        opt.zero_grad()
        if mode.startswith("nosync") or mode == "twice":
            half = len(idx) // 2
            sync = contextlib.nullcontext() if mode == "twice" else ddp.no_sync()
            with sync:
                (loss_fn(ddp(inputs(model_name, X[idx[:half]], mode)), Y[idx[:half]]) * 0.5).backward()
            (loss_fn(ddp(inputs(model_name, X[idx[half:]], mode)), Y[idx[half:]]) * 0.5).backward()
        else:
            loss_fn(ddp(inputs(model_name, X[idx], mode)), Y[idx]).backward()
        if mode == "plain" and dist.world_size() > 1:
            # the hooks packed every gradient, times 1/N, into its bucket during backward
            flat = np.concatenate(ddp.bucket_buffers)
            want = np.concatenate([np.ravel(p.grad) * 0.5 for b in ddp.buckets for p in b])
            assert np.array_equal(flat, want), "backward did not pack the gradients into the buckets"
        if mode == "halved":
            for p in trainable:
                p.grad = p.grad * 0.5
        if mode != "skip" and not mode.startswith("zero"):  # ZeRO reduces the gradients itself
            ddp.sync_gradients()
            # the averaged grads live in the buckets' buffers, the same arrays every step
            buffers = ddp.bucket_buffers
            if step == 0:
                first_buffers = buffers
            assert all(a is b for a, b in zip(buffers, first_buffers)), "DDP reallocated a bucket buffer"
            assert dist.world_size() == 1 or all(any(np.shares_memory(p.grad, b) for b in buffers)
                                                 for p in trainable), \
                "a synchronised .grad is not a view of its bucket's buffer"
        opt.step()
    for before, (_, p) in zip(frozen, [(n, p) for n, p in model.named_parameters() if not p.requires_grad]):
        assert np.array_equal(before, p.data), "a frozen parameter changed"
    extra = {}
    if mode.startswith("zero"):
        extra["state_bytes"] = dist.all_gather(np.array([opt.state_bytes()], dtype=np.int64)).ravel()
        extra["unsharded_bytes"] = np.array([opt.unsharded_state_bytes()])
    if rank == 0:
        buf = io.BytesIO()
        np.savez(buf, *[p.data for p in trainable], **extra)
        _atomic.write_file(out, buf.getvalue())
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "plain", sys.argv[3] if len(sys.argv) > 3 else "mlp")
