"""State archives: atomic saves that keep the file's mode, clear errors for files that are
not .npz archives, refused value-changing casts on load, an all-or-nothing
Trainer.load_checkpoint, and cross-entropy's gradient at large tied logits (vs PyTorch)."""
import os
import stat

import numpy as np
import pytest

from tinytorch import _atomic
from tinytorch.core import random as tt_random
from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import Trainer
from tinytorch.core.losses import CrossEntropyLoss


def _model(seed=0):
    tt_random.manual_seed(seed)
    return Sequential(Linear(3, 4), ReLU(), Linear(4, 2))


def test_save_replaces_atomically_and_keeps_the_mode(tmp_path, monkeypatch):
    path = tmp_path / "m.npz"
    model = _model()
    model.save(path)
    os.chmod(path, 0o640)
    before = path.read_bytes()

    def broken(f, **arrays):  # dies half-way through writing the archive
        f.write(b"PK\x03\x04 half an archive")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", broken)
    with pytest.raises(KeyboardInterrupt):
        _model(1).save(path)
    monkeypatch.undo()
    assert path.read_bytes() == before  # the previous archive is intact
    assert sorted(os.listdir(tmp_path)) == ["m.npz"]  # no temporary file left behind
    _model(2).save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    _model(3).save(tmp_path / "plain")  # ".npz" appended, as np.savez does
    assert (tmp_path / "plain.npz").exists()


def test_a_new_file_gets_the_umask_mode_not_the_temp_files(tmp_path):
    old = os.umask(0o027)
    try:
        _atomic.write_file(tmp_path / "new.txt", "text")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


def test_a_plain_npy_file_is_not_a_state_dict(tmp_path):
    np.save(tmp_path / "w.npy", np.ones(3))
    with pytest.raises(ValueError, match=r"single array \(a \.npy file\)"):
        _model().load(tmp_path / "w.npy")
    (tmp_path / "t.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="not a readable .npz"):
        _model().load(tmp_path / "t.npz")


@pytest.mark.parametrize("bad, why", [
    (lambda w: w.astype(np.complex64) + 1j, "not a real number"),
    (lambda w: w > 0, "bool"),
    (lambda w: np.full(w.shape, 2 ** 40 + 1, dtype=np.int64), "do not fit"),
    (lambda w: np.full(w.shape, 1e300), "overflow"),
])
def test_casts_that_change_values_are_refused_before_anything_is_copied(bad, why):
    model = _model()
    state = model.state_dict()
    state["0.weight"] = bad(state["0.weight"])
    before = {k: v.copy() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=why):
        model.load_state_dict(state)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def test_exact_conversions_still_load():
    model = _model()
    state = {k: v.astype(np.float64) for k, v in model.state_dict().items()}
    state["0.bias"] = np.arange(4, dtype=np.int64)
    model.load_state_dict(state)
    np.testing.assert_array_equal(model.state_dict()["0.bias"], np.arange(4, dtype=np.float32))


def _trainer(seed):
    model = _model(seed)
    return Trainer(model, Adam(model.parameters(), lr=0.01), CrossEntropyLoss(), progress=False)


def _step(trainer):
    x = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    y = np.array([0, 1, 0, 1, 1, 0])
    trainer.train_epoch([(Tensor(x), Tensor(y))])


def test_load_checkpoint_is_all_or_nothing(tmp_path):
    good = _trainer(0)
    _step(good)
    good.save_checkpoint(tmp_path / "c.npz")
    # a checkpoint whose optimizer part does not fit: the model part loads fine on its own
    with np.load(tmp_path / "c.npz") as f:
        data = {k: f[k] for k in f.files}
    key = next(k for k in data if k.startswith("optim/") and data[k].ndim)
    data[key] = np.zeros(data[key].shape + (2,), np.float32)
    np.savez(tmp_path / "bad.npz", **data)
    other = _trainer(1)
    _step(other)
    model_before = other.model.state_dict()
    optim_before = other.optimizer.state_dict()
    rng_before = tt_random.get_rng_state()
    with pytest.raises(ValueError):
        other.load_checkpoint(tmp_path / "bad.npz")
    for k, v in other.model.state_dict().items():
        np.testing.assert_array_equal(v, model_before[k])
    after = other.optimizer.state_dict()
    assert after["step_count"] == optim_before["step_count"]
    for i, s in optim_before["state"].items():
        for name, v in s.items():
            np.testing.assert_array_equal(after["state"][i][name], v)
    assert str(tt_random.get_rng_state()) == str(rng_before)
    # and a good checkpoint still loads completely
    other.load_checkpoint(tmp_path / "c.npz")
    for k, v in other.model.state_dict().items():
        np.testing.assert_array_equal(v, good.model.state_dict()[k])
    with pytest.raises(ValueError, match="single array"):
        np.save(tmp_path / "x.npy", np.ones(2))
        other.load_checkpoint(tmp_path / "x.npy")


@pytest.mark.parametrize("dtype, m", [(np.float32, 1e5), (np.float32, 1e7), (np.float32, 3e7),
                                      (np.float64, 1e30)])
def test_cross_entropy_gradient_at_large_tied_logits_matches_torch(dtype, m):
    torch = pytest.importorskip("torch")
    logits = np.array([[0.0, 0.0, m, m]], dtype=dtype)
    x = Tensor(logits, requires_grad=True, dtype=dtype)
    cross_entropy(x, np.array([0])).backward()
    ref = torch.tensor(logits.astype(np.float64), requires_grad=True)
    torch.nn.functional.cross_entropy(ref, torch.tensor([0])).backward()
    np.testing.assert_allclose(x.grad, ref.grad.numpy(), atol=1e-6)  # [-1, 0, 0.5, 0.5]
