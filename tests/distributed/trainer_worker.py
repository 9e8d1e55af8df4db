"""Worker of tests/test_distributed_trainer.py: a rank-aware Trainer on a float64 MLP.

``trainer_worker.py DIR save``: under any world size, train epoch 1 (the global batch of 16 rows
split by DistributedSampler into batches of 4 global rows), save DIR/ckpt.npz, train epoch 2 and
write DIR/final-<world>.npz (parameters, train-loss history). ``trainer_worker.py DIR resume
TAG``: a fresh model and optimizer load DIR/ckpt.npz, train epoch 2 and write DIR/resumed-TAG.npz.
Gradient accumulation over 2 micro-batches runs the first under DDP's no_sync. Rank 0 alone
shows progress (checked here) and writes files."""
import io
import sys
from pathlib import Path

import numpy as np

from tinytorch import _atomic, distributed as dist
from tinytorch.core import random as tt_random
from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.losses import mse_loss
from tinytorch.core.optimizers import Adam
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import Trainer


def make():
    tt_random.manual_seed(11 + dist.rank())  # DDP broadcasts rank 0's
    model = Sequential(Linear(5, 8), ReLU(), Linear(8, 3))
    for p in model.parameters():
        p.data = p.data.astype(np.float64)
    ddp = dist.DistributedDataParallel(model, bucket_mb=0.0002, overlap=True)
    trainer = Trainer(ddp, Adam(model.parameters(), lr=1e-2), lambda out, y: mse_loss(out, Tensor(y, dtype=np.float64)),
                      progress=True)
    return model, trainer


def loader(epoch):
    data = np.random.default_rng(5)
    X, Y = data.standard_normal((16, 5)), data.standard_normal((16, 3))
    sampler = dist.DistributedSampler(16, seed=2)
    sampler.set_epoch(epoch)
    idx = np.array(list(sampler))
    per = 4 // dist.world_size()  # 4 global rows per micro-batch
    return [(Tensor(X[idx[i:i + per]], dtype=np.float64), Y[idx[i:i + per]]) for i in range(0, len(idx), per)]


def write(path, model, trainer):
    if dist.rank() == 0:
        buf = io.BytesIO()
        np.savez(buf, *[p.data for p in model.parameters()], history=np.array(trainer.history["train_loss"]))
        _atomic.write_file(path, buf.getvalue())


def main(folder, mode, tag=""):
    dist.init()
    folder = Path(folder)
    model, trainer = make()
    shown = type(trainer._progress(1, "check")).__name__ != "_NoProgress"
    assert shown == (dist.rank() == 0), f"rank {dist.rank()} progress bar shown: {shown}"
    if mode == "save":
        trainer.train_epoch(loader(0), accumulation_steps=2)
        trainer.save_checkpoint(folder / "ckpt.npz")
        assert (folder / "ckpt.npz").exists()  # after the barrier every rank sees it
        trainer.train_epoch(loader(1), accumulation_steps=2)
        write(folder / f"final-{dist.world_size()}.npz", model, trainer)
    else:
        trainer.load_checkpoint(folder / "ckpt.npz")
        trainer.train_epoch(loader(1), accumulation_steps=2)
        write(folder / f"resumed-{tag}.npz", model, trainer)
    dist.barrier()


if __name__ == "__main__":
    main(*sys.argv[1:])
