"""tinytorch.distributed: data-parallel training under ``mpirun -n 2`` equals one process on the
combined batch (float64, 20 Adam steps, within 1e-12; float32: MLP and CNN within 1e-6 relative,
the GPT as close to the float64 result as one float32 process) for an MLP, a CNN and a GPT, plain,
with buckets all-reduced during backward (overlap), with no_sync accumulation, with two
synchronised backward passes before one sync, with .grad arrays replaced between backward and sync,
with LoRA (frozen base) and with ZeRO-1; and the fault cases end every rank. The MPI cases run
tests/distributed/ddp_worker.py in a subprocess with a timeout and skip, naming the reason, when
mpi4py or mpirun is missing; the sampler and world-size-1 cases need no MPI."""
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch import distributed as dist

sys.path.insert(0, str(Path(__file__).parent / "distributed"))
from mpi_helpers import load_params, needs_mpi, run  # noqa: E402

WORKER = "ddp_worker.py"


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One process on the whole batch, per (model, mode), computed once."""
    cache = {}

    def get(model, mode="plain"):
        if (model, mode) not in cache:
            out = tmp_path_factory.mktemp("ref") / f"{model}-{mode}.npz"
            r = run(WORKER, [out, mode, model], 1)
            assert r.returncode == 0, r.stdout + r.stderr
            cache[model, mode] = load_params(out)
        return cache[model, mode]
    return get


def _two_ranks(tmp_path, mode, model):
    out = tmp_path / "two.npz"
    r = run(WORKER, [out, mode, model], 2)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _same(ref, got):
    assert len(ref) == len(got) and ref
    for a, b in zip(ref, got):
        assert a.dtype == np.float64 and a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-12)


CASES = [("mlp", "plain", "plain"), ("mlp", "overlap", "plain"), ("mlp", "nosync", "plain"),
         ("mlp", "nosync-overlap", "plain"), ("mlp", "lora", "lora"), ("mlp", "zero", "plain"),
         ("mlp", "zero-adamw", "adamw"), ("mlp", "twice", "plain"), ("mlp", "halved", "halved"),
         ("cnn", "plain", "plain"), ("cnn", "overlap", "plain"), ("cnn", "nosync", "plain"),
         ("cnn", "zero", "plain"),
         ("gpt", "plain", "plain"), ("gpt", "overlap", "plain"), ("gpt", "nosync-overlap", "plain"),
         ("gpt", "twice", "plain"), ("gpt", "halved", "halved"),
         ("gpt", "zero", "plain")]


@needs_mpi
@pytest.mark.parametrize("model,mode,ref_mode", CASES, ids=[f"{m}-{d}" for m, d, _ in CASES])
def test_two_ranks_match_one_process(tmp_path, reference, model, mode, ref_mode):
    _same(reference(model, ref_mode), load_params(_two_ranks(tmp_path, mode, model)))


@needs_mpi
@pytest.mark.parametrize("model", ["mlp", "cnn", "gpt"])
def test_two_ranks_match_one_process_in_float32(tmp_path, reference, model):
    """The same 20 Adam steps with float32 parameters. The MLP and the CNN stay within 1e-6
    relative of one process. The GPT does not, and need not: float32 itself moves it that far
    (Adam turns the rounding of near-zero gradients into whole steps; the two ranks' half-batch
    means round differently from one mean). Measured: one process's float32 result is 3.7e-4
    from the float64 one, two ranks' 2.0e-4, the two 5.1e-4 apart (parameters up to 1.2). So
    every model must be as close to the float64 result as one float32 process is (twice its
    distance, for the rounding's luck), and the small ones within 1e-6 of it."""
    ref32, ref64 = reference(model, "float32"), reference(model, "plain")
    got = load_params(_two_ranks(tmp_path, "float32", model))
    assert len(ref32) == len(got) == len(ref64) and ref32
    for a, b in zip(ref32, got):
        assert a.dtype == np.float32 and b.dtype == np.float32 and a.shape == b.shape
    scale = max(float(np.abs(a).max()) for a in ref64)
    own = max(float(np.abs(a.astype(np.float64) - z).max()) for a, z in zip(ref32, ref64))
    ddp = max(float(np.abs(b.astype(np.float64) - z).max()) for b, z in zip(got, ref64))
    assert ddp <= 2 * own + 1e-7 * scale, (ddp, own)
    if model != "gpt":
        for a, b in zip(ref32, got):
            np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6 * scale)


@needs_mpi
def test_zero_keeps_half_the_adam_state_per_rank(tmp_path):
    z = np.load(_two_ranks(tmp_path, "zero", "mlp"))
    full = int(z["unsharded_bytes"][0])
    per_rank = z["state_bytes"]
    # MLP 5-16-3: 80+16+48+3 = 147 float64 parameters, two moments: 2352 bytes unsharded;
    # 2 ranks own ceil(147/2) = 74 elements each: 1184 bytes
    assert full == 2 * 147 * 8
    assert per_rank.tolist() == [2 * 74 * 8, 2 * 74 * 8]


@needs_mpi
def test_without_gradient_averaging_ranks_differ(tmp_path, reference):
    skip = load_params(_two_ranks(tmp_path, "skip", "mlp"))
    diff = max(np.abs(a - b).max() for a, b in zip(reference("mlp"), skip))
    assert diff > 1e-4  # the comparison above would catch a missing all-reduce


@needs_mpi
def test_mismatched_parameters_fail_naming_the_difference(tmp_path):
    r = run(WORKER, [tmp_path / "bad.npz", "mismatch", "mlp"], 2)
    assert r.returncode != 0
    assert "rank 0 has ('0.weight', (5, 16)" in r.stdout + r.stderr
    assert "parameters differ across ranks" in r.stdout + r.stderr


@needs_mpi
def test_mismatched_bucket_layouts_fail_before_any_reduction(tmp_path):
    r = run(WORKER, [tmp_path / "bad.npz", "buckets", "mlp"], 2)
    assert r.returncode != 0
    assert "gradient bucket layout differs across ranks" in r.stdout + r.stderr
    assert not (tmp_path / "bad.npz").exists()


@needs_mpi
def test_exception_on_one_rank_ends_every_rank(tmp_path):
    r = run(WORKER, [tmp_path / "crash.npz", "crash", "mlp"], 2, timeout=60)  # TimeoutExpired without the abort
    assert r.returncode != 0
    assert "injected failure on rank 1" in r.stdout + r.stderr
    assert "rank 1 raised RuntimeError; aborting every rank" in r.stderr
    assert not (tmp_path / "crash.npz").exists()


@needs_mpi
def test_rank_killed_mid_step_ends_the_others(tmp_path):
    r = run(WORKER, [tmp_path / "kill.npz", "kill", "mlp"], 2, timeout=60)  # TimeoutExpired if rank 0 hung
    assert r.returncode != 0
    assert "signal 9" in (r.stdout + r.stderr).lower() or "killed" in (r.stdout + r.stderr).lower()
    assert not (tmp_path / "kill.npz").exists()


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


def test_sync_that_fails_to_pack_leaves_every_grad_as_it_was():
    """sync_gradients packs what no hook packed before any .grad becomes a bucket view; a
    .grad replaced by one of the wrong shape raises and every .grad keeps its array. White
    box: one process, with the wrapper's scale and all-reduce set as two ranks would have
    them (the all-reduce a no-op), so the packing path runs."""
    from tinytorch.core.layers import Linear, Sequential
    from tinytorch.core.tensor import Tensor

    model = Sequential(Linear(3, 4), Linear(4, 2))
    ddp = dist.DistributedDataParallel(model)
    ddp._scale, ddp._sum_flats = 0.5, lambda: None
    (model(Tensor(np.ones((5, 3), np.float32))) ** 2).sum().backward()
    params = list(model.parameters())
    params[2].grad = np.zeros((7, 7), np.float32)  # replaced after backward, wrong shape
    before = [p.grad for p in params]
    with pytest.raises(ValueError):
        ddp.sync_gradients()
    assert all(p.grad is g for p, g in zip(params, before))
    params[2].grad = np.ones(params[2].data.shape, np.float32)
    want = [np.asarray(p.grad) * 0.5 for p in params]
    ddp.sync_gradients()
    for p, w, flat in zip(params, want, [ddp.bucket_buffers[0]] * len(params)):
        np.testing.assert_array_equal(p.grad, w)
        assert np.shares_memory(p.grad, flat)


def _thp_eligible(address: int):
    """THPeligible of the mapping holding ``address`` (/proc/self/smaps), or None where unknown."""
    try:
        lines = open("/proc/self/smaps").read().splitlines()
    except OSError:
        return None
    inside = False
    for line in lines:
        head = line.split()[0]
        if "-" in head and all(c in "0123456789abcdef-" for c in head):
            lo, hi = (int(v, 16) for v in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "THPeligible:":
            return line.split()[1] == "1"
    return None


def test_bucket_buffers_share_one_allocation_on_huge_pages_from_2_mib():
    """Every bucket is a cache-line-aligned slice of one zeroed allocation; from 2 MiB of
    gradients on it is a 2 MiB-aligned mapping asked for transparent huge pages (on 4 KiB
    pages MPI's shared-memory all-reduce of the GPT's buckets took up to 1.28x raw)."""
    from tinytorch.core.layers import Linear, Sequential

    big = dist.DistributedDataParallel(Sequential(Linear(512, 1024), Linear(1024, 8)), bucket_mb=1)
    flats = big.bucket_buffers
    assert len(flats) >= 2 and sum(f.nbytes for f in flats) > 2 << 20
    assert flats[0].ctypes.data % (2 << 20) == 0
    for a, b in zip(flats, flats[1:]):
        assert b.ctypes.data >= a.ctypes.data + a.nbytes and b.ctypes.data % 64 == 0
        assert b.ctypes.data - flats[0].ctypes.data < sum(f.nbytes for f in flats) + 64 * len(flats)
    assert all(f.flags.writeable and not f.any() for f in flats)
    try:
        thp = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        thp = ""
    if "[never]" not in thp and thp:
        assert _thp_eligible(flats[0].ctypes.data) in (True, None)
    small = dist.DistributedDataParallel(Sequential(Linear(3, 4)))
    assert [f.dtype for f in small.bucket_buffers] == [np.float32] and not small.bucket_buffers[0].any()
