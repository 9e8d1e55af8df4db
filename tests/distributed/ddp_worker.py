"""Worker run by tests/test_distributed.py, as ``mpirun -n 2 python ddp_worker.py OUT MODE`` or
as one process. Trains a float64 MLP with Adam for 20 steps on a fixed global batch of 16:
each rank takes its DistributedSampler shard (mean loss over its 8 rows), DDP averages the
gradients, so the result must equal one process on all 16 rows. MODE "nosync" splits every
step into two micro-batches under no_sync (loss scaled by 1/2); "skip" leaves out the
gradient averaging (must differ); "mismatch" gives rank 1 another shape (must fail); "crash" raises on rank 1 at step 5
(every rank must end, non-zero). Rank 0 writes the parameters
to OUT (.npz through tinytorch._atomic)."""
import io
import sys

import numpy as np

from tinytorch import _atomic, distributed as dist
from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.losses import mse_loss
from tinytorch.core.optimizers import Adam
from tinytorch.core.tensor import Tensor


def T(a):
    return Tensor(a, dtype=np.float64)


def main(out, mode):
    dist.init()
    rng = np.random.default_rng(1234 + dist.rank())  # different init per rank: DDP must broadcast rank 0's
    hidden = 17 if mode == "mismatch" and dist.rank() == 1 else 16  # "mismatch": DDP must refuse
    model = Sequential(Linear(5, hidden, dtype=np.float64), ReLU(), Linear(hidden, 3, dtype=np.float64))
    for p in model.parameters():
        p.data = rng.standard_normal(p.data.shape) * 0.3  # float64 (Linear's dtype= is cast away by Parameter)
    ddp = dist.DistributedDataParallel(model, bucket_mb=0.0005)  # tiny buckets: several all-reduces
    opt = Adam(model.parameters(), lr=1e-2)
    data = np.random.default_rng(7)
    X, Y = data.standard_normal((16, 5)), data.standard_normal((16, 3))
    idx = np.array(list(dist.DistributedSampler(16, shuffle=False)))
    for step in range(20):
        if mode == "crash" and step == 5 and dist.rank() == 1:
            raise RuntimeError("injected failure on rank 1")  # rank 0 waits in a collective
        opt.zero_grad()
        if mode == "nosync":
            half = len(idx) // 2
            with ddp.no_sync():
                (mse_loss(ddp(T(X[idx[:half]])), T(Y[idx[:half]])) * 0.5).backward()
            (mse_loss(ddp(T(X[idx[half:]])), T(Y[idx[half:]])) * 0.5).backward()
        else:
            mse_loss(ddp(T(X[idx])), T(Y[idx])).backward()
        if mode != "skip":  # "skip": no gradient averaging, the test expects a different result
            ddp.sync_gradients()
        opt.step()
    if dist.rank() == 0:
        buf = io.BytesIO()
        np.savez(buf, *[p.data for p in model.parameters()])
        _atomic.write_file(out, buf.getvalue())
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "plain")
