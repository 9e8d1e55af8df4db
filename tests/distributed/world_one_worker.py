"""Worker of tests/test_distributed_group.py: one process with mpi4py hidden. DDP (overlap on,
no_sync) and ZeroRedundancyOptimizer(Adam) must train exactly as plain Adam, and ZeRO's state
must load into plain Adam and back (Adam's state_dict format)."""
import sys

sys.modules["mpi4py"] = None

import numpy as np  # noqa: E402

from tinytorch import distributed as dist  # noqa: E402
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.layers import Linear, Sequential  # noqa: E402
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.losses import mse_loss  # noqa: E402
from tinytorch.core.optimizers import Adam  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402


def train(kind):
    tt_random.manual_seed(3)
    model = Sequential(Linear(4, 8), ReLU(), Linear(8, 2))
    data = np.random.default_rng(0)
    X, Y = Tensor(data.standard_normal((6, 4))), Tensor(data.standard_normal((6, 2)))
    ddp = dist.DistributedDataParallel(model, overlap=True) if kind == "ddp" else model
    opt = dist.ZeroRedundancyOptimizer(model.parameters(), Adam, lr=0.05) if kind == "zero" else \
        Adam(model.parameters(), lr=0.05)
    for _ in range(5):
        opt.zero_grad()
        mse_loss(ddp(X), Y).backward()
        if kind == "ddp":
            ddp.sync_gradients()
        opt.step()
    return model, opt


ref, ref_opt = train("plain")
for kind in ("ddp", "zero"):
    model, opt = train(kind)
    for a, b in zip(ref.parameters(), model.parameters()):
        assert np.array_equal(a.data, b.data), kind
zero = opt
assert dist.world_size() == 1 and zero.state_bytes() == zero.unsharded_state_bytes() == 2 * 58 * 4
sd = zero.state_dict()
plain = ref_opt.state_dict()
assert sorted(sd["state"]) == sorted(plain["state"]) and sd["step_count"] == plain["step_count"] == 5
for i in sd["state"]:
    for k in ("exp_avg", "exp_avg_sq"):
        assert np.array_equal(sd["state"][i][k], plain["state"][i][k]), (i, k)
    assert sd["state"][i]["step"] == plain["state"][i]["step"]
zero.load_state_dict(plain)  # and back: the same moments
assert all(np.array_equal(zero.state_dict()["state"][i]["exp_avg"], plain["state"][i]["exp_avg"]) for i in plain["state"])
print("ok")
