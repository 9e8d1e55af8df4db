"""tinytorch.distributed: data-parallel training under ``mpirun -n 2`` equals one process on
the combined batch. The MPI cases launch tests/distributed/ddp_worker.py in a subprocess with
a timeout and skip, naming the reason, when mpi4py or mpirun is missing; the sampler and
world-size-1 cases need no MPI."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch import distributed as dist

WORKER = Path(__file__).parent / "distributed" / "ddp_worker.py"
OK, WHY = dist.available()
MPIRUN = shutil.which("mpirun") or shutil.which("mpiexec")
needs_mpi = pytest.mark.skipif(not (OK and MPIRUN), reason=WHY if not OK else "no mpirun/mpiexec on PATH")


def _env():
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               TINYTORCH_NUM_THREADS="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def _run(out, mode, n):
    cmd = [sys.executable, str(WORKER), str(out), mode]
    if n > 1:
        cmd = [MPIRUN, "-n", str(n)] + cmd
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=30)


def _load(path):
    z = np.load(path)
    return [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "one.npz"
    r = _run(out, "plain", 1)
    assert r.returncode == 0, r.stderr
    return _load(out)


@needs_mpi
@pytest.mark.parametrize("mode", ["plain", "nosync"])
def test_two_ranks_match_one_process(tmp_path, single, mode):
    r = _run(tmp_path / "two.npz", mode, 2)
    assert r.returncode == 0, r.stdout + r.stderr
    two = _load(tmp_path / "two.npz")
    for a, b in zip(single, two):
        assert a.dtype == np.float64
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12)


@needs_mpi
def test_without_gradient_averaging_ranks_differ(tmp_path, single):
    r = _run(tmp_path / "skip.npz", "skip", 2)
    assert r.returncode == 0, r.stdout + r.stderr
    diff = max(np.abs(a - b).max() for a, b in zip(single, _load(tmp_path / "skip.npz")))
    assert diff > 1e-4  # the comparison above would catch a missing all-reduce


@needs_mpi
def test_mismatched_parameters_fail_naming_the_difference(tmp_path):
    r = _run(tmp_path / "bad.npz", "mismatch", 2)
    assert r.returncode != 0
    assert "rank 0 has ('0.weight', (5, 16)" in r.stdout + r.stderr
    assert "parameters differ across ranks" in r.stdout + r.stderr


@needs_mpi
def test_exception_on_one_rank_ends_every_rank(tmp_path):
    r = _run(tmp_path / "crash.npz", "crash", 2)  # would hang (TimeoutExpired) without the abort
    assert r.returncode != 0
    assert "injected failure on rank 1" in r.stdout + r.stderr
    assert not (tmp_path / "crash.npz").exists()


def test_world_size_one_without_launcher():
    assert dist.world_size() >= 1 and 0 <= dist.rank() < dist.world_size()
    x = np.arange(4.0)
    assert dist.all_reduce(x) is x and np.array_equal(x, np.arange(4.0)) or dist.world_size() > 1
    assert dist.all_gather(np.ones(3)).shape == (dist.world_size(), 3)
    with pytest.raises(ValueError, match="op must be"):
        dist.all_reduce(x, op="prod")
    with pytest.raises(TypeError, match="NumPy array or Tensor"):
        dist.broadcast([1, 2])


@pytest.mark.parametrize("n,drop_last", [(10, False), (10, True), (3, False)])
def test_sampler_shards_disjoint_and_cover(n, drop_last):
    shards = [list(dist.DistributedSampler(n, num_replicas=4, rank=r, seed=3, drop_last=drop_last))
              for r in range(4)]
    assert len({len(s) for s in shards}) == 1
    flat = sum(shards, [])
    if drop_last:
        assert len(set(flat)) == len(flat) == (n // 4) * 4
    else:
        assert set(flat) == set(range(n)) and len(flat) == -(-n // 4) * 4


def test_sampler_set_epoch_reshuffles_identically():
    a = dist.DistributedSampler(20, num_replicas=2, rank=0, seed=1)
    b = dist.DistributedSampler(20, num_replicas=2, rank=0, seed=1)
    e0 = list(a)
    a.set_epoch(1)
    b.set_epoch(1)
    assert list(a) == list(b) and list(a) != e0
    with pytest.raises(ValueError, match="rank 2 not in"):
        dist.DistributedSampler(5, num_replicas=2, rank=2)
