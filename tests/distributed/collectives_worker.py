"""Worker of tests/test_distributed_group.py (``mpirun -n 2``, or one process with mpi4py hidden:
world size 1). Checks the collectives with values that depend on the rank, so a wrong slice, a
missing reduction or a wrong root fails, and prints one "ok rank R of N local L" line per rank."""
import sys

import numpy as np

if "--no-mpi" in sys.argv:  # one process without mpi4py: every collective must still work
    sys.modules["mpi4py"] = None

from tinytorch import distributed as dist  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402

assert not dist.is_initialized()
dist.init()
assert dist.is_initialized()
r, n = dist.rank(), dist.world_size()

x = np.arange(6.0) + 10 * r
dist.all_reduce(x)
assert np.array_equal(x, n * np.arange(6.0) + 10 * sum(range(n))), x
t = Tensor(np.full(3, float(r + 1)))
dist.all_reduce(t, "max")
assert np.array_equal(t.data, np.full(3, float(n)))
b = np.full(4, float(r))
dist.broadcast(b, root=n - 1)
assert np.array_equal(b, np.full(4, float(n - 1)))
g = dist.all_gather(np.array([r, 100 + r]))
assert g.tolist() == [[k, 100 + k] for k in range(n)], g
# reduce_scatter: element j of the sum is n * j + 1000 * sum(ranks); rank r gets slice r
full = np.arange(4.0 * n) + 1000 * r
part = dist.reduce_scatter(full)
expect = (n * np.arange(4.0 * n) + 1000 * sum(range(n)))[4 * r:4 * r + 4]
assert np.array_equal(part, expect), (part, expect)
out = np.empty(4)
assert dist.reduce_scatter(full, out=out, op="mean") is out and np.allclose(out, expect / n)
cases = [(lambda: dist.reduce_scatter(np.ones(4 * n), out=np.empty(3)), "out must hold"),
         (lambda: dist.reduce_scatter(np.ones(4 * n), op="max"), "op must be")]
if n > 1:
    cases.append((lambda: dist.reduce_scatter(np.ones(4 * n + 1)), "split evenly"))
for bad, msg in cases:
    try:
        bad()
        raise AssertionError(f"no error: {msg}")
    except ValueError as e:
        assert msg in str(e), e
lr = dist.local_rank()
assert lr == r  # one host: local rank = rank
lrs = dist.all_gather(np.array([lr]))
assert sorted(lrs.ravel().tolist()) == list(range(n))
dist.barrier()
dist.finalize()
assert not dist.is_initialized()
print(f"ok rank {r} of {n} local {lr}", flush=True)
