"""Rank-aware Trainer: under ``mpirun -n 2`` (DDP with overlap, 2 accumulated micro-batches, the
first under no_sync) training equals one process on the global batches, the loss history is the
global mean, progress shows on rank 0 only, and a checkpoint saved under 2 ranks resumes under 1
and under 2 ranks to the same parameters as the uninterrupted run (float64, 1e-12)."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "distributed"))
from mpi_helpers import needs_mpi, run  # noqa: E402


def _load(path):
    z = np.load(path)
    params = [z[k] for k in sorted((k for k in z.files if k.startswith("arr_")), key=lambda s: int(s.split("_")[1]))]
    return params, z["history"]


def _same(a, b):
    for x, y in zip(a, b):
        np.testing.assert_allclose(y, x, rtol=0, atol=1e-12)


@needs_mpi
def test_checkpoint_saved_under_two_ranks_resumes_under_one_and_two(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    r = run("trainer_worker.py", [one, "save"], 1)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("trainer_worker.py", [tmp_path, "save"], 2)
    assert r.returncode == 0, r.stdout + r.stderr
    ref_params, ref_hist = _load(one / "final-1.npz")
    params, hist = _load(tmp_path / "final-2.npz")
    _same(ref_params, params)
    np.testing.assert_allclose(hist, ref_hist, rtol=1e-12)  # global mean loss, not rank 0's shard
    assert len(hist) == 2
    for n, tag in ((1, "1"), (2, "2")):
        r = run("trainer_worker.py", [tmp_path, "resume", tag], n)
        assert r.returncode == 0, r.stdout + r.stderr
        resumed, rhist = _load(tmp_path / f"resumed-{tag}.npz")
        _same(params, resumed)
        np.testing.assert_allclose(rhist, hist, rtol=1e-12)
    # the checkpoint is the model's own names (no DDP wrapper prefix): a plain model loads it
    names = set(np.load(tmp_path / "ckpt.npz").files)
    assert {"model/0.weight", "model/2.bias", "meta"} <= names
