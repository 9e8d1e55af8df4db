"""Trainer: loss bookkeeping, accumulation equals a big batch, clipping, schedules,
checkpoint round trip (including the RNG that drives dropout), progress modes."""
import numpy as np
import pytest

from parity import assert_close
from tinytorch.core import random as tt_random
from tinytorch.core.activations import ReLU
from tinytorch.core.dataloader import DataLoader, TensorDataset
from tinytorch.core.layers import Dropout, Linear, Sequential
from tinytorch.core.losses import CrossEntropyLoss, MSELoss
from tinytorch.core.optimizers import SGD, Adam, StepLR
from tinytorch.core import training
from tinytorch.core.training import Trainer


def _data(rng, n=24):
    x = rng.standard_normal((n, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0)
    return x, y


def _model(seed=0, dropout=0.0):
    tt_random.manual_seed(seed)
    return Sequential(Linear(5, 8), ReLU(), Dropout(dropout), Linear(8, 3))


def test_train_epoch_returns_sample_weighted_mean_loss(rng):
    x, y = _data(rng, 10)
    model = _model()
    before = [p.data.copy() for p in model.parameters()]
    loss_fn = CrossEntropyLoss()
    trainer = Trainer(model, SGD(model.parameters(), lr=0.0), loss_fn, progress=False)
    got = trainer.train_epoch(DataLoader(TensorDataset(x, y), batch_size=4))  # batches 4, 4, 2
    want = np.mean([loss_fn(model(x[i:i + 1]), y[i:i + 1]).item() for i in range(10)])
    assert np.isclose(got, want, rtol=1e-5)
    for p, b in zip(model.parameters(), before):  # lr 0: unchanged
        np.testing.assert_array_equal(p.data, b)


@pytest.mark.parametrize("n", [16, 12])  # 12: the last window holds a single micro-batch
def test_accumulation_matches_one_big_batch(rng, n):
    x, y = _data(rng, n)
    big, small = _model(), _model()
    Trainer(big, SGD(big.parameters(), lr=0.1), MSELoss(), progress=False).train_epoch(
        DataLoader(TensorDataset(x, x[:, :3].copy()), batch_size=4 * 2))
    Trainer(small, SGD(small.parameters(), lr=0.1), MSELoss(), progress=False).train_epoch(
        DataLoader(TensorDataset(x, x[:, :3].copy()), batch_size=4), accumulation_steps=2)
    for p, q in zip(big.parameters(), small.parameters()):
        assert_close(q.data, p.data, 1e-6, 1e-5, "accumulated step")


def test_clipping_and_step_schedule(rng, monkeypatch):
    x, y = _data(rng, 8)
    model = _model()
    opt = SGD(model.parameters(), lr=1.0)
    seen = []
    real = training.Trainer._optimizer_step

    def spy(self, k, steps):
        seen.append(np.sqrt(sum(float((p.grad.astype(np.float64) ** 2).sum()) for p in self.optimizer.params
                                if p.grad is not None)))
        return real(self, k, steps)

    monkeypatch.setattr(training.Trainer, "_optimizer_step", spy)
    sched = StepLR(opt, step_size=1, gamma=0.5)
    trainer = Trainer(model, opt, CrossEntropyLoss(), scheduler=sched, grad_clip_norm=1e-3,
                      progress=False, scheduler_interval="step")
    before = [p.data.copy() for p in model.parameters()]
    trainer.train_epoch(DataLoader(TensorDataset(x, y), batch_size=4))
    assert trainer.global_step == 2 and np.isclose(opt.lr, 0.25)
    moved = np.sqrt(sum(float(((p.data - b).astype(np.float64) ** 2).sum())
                        for p, b in zip(model.parameters(), before)))
    assert moved <= 1e-3 * (1.0 + 0.5) + 1e-6  # each step moved at most lr * max_norm
    assert all(s > 1e-3 for s in seen)  # clipping was actually needed


def test_evaluate_accuracy(rng):
    x, y = _data(rng, 20)
    model = _model()
    trainer = Trainer(model, SGD(model.parameters(), lr=0.1), CrossEntropyLoss(), progress=False)
    loss, acc = trainer.evaluate(DataLoader(TensorDataset(x, y), batch_size=6))
    pred = model(x).data.argmax(axis=1)
    assert np.isclose(acc, (pred == y).mean())
    assert not model.training and trainer.training_mode is False  # left in eval mode, as upstream
    _, none_acc = Trainer(model, SGD(model.parameters(), lr=0.1), MSELoss(), progress=False).evaluate(
        DataLoader(TensorDataset(x, np.zeros((20, 3), np.float32)), batch_size=6))
    assert none_acc is None


def test_checkpoint_round_trip_replays_training(rng, tmp_path):
    x, y = _data(rng, 16)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, seed=1)

    def make(seed):
        model = _model(seed, dropout=0.3)
        opt = Adam(model.parameters(), lr=0.01)
        return Trainer(model, opt, CrossEntropyLoss(), scheduler=StepLR(opt, 1, 0.9), progress=False)

    a = make(0)
    a.train_epoch(loader)
    path = tmp_path / "ckpt.npz"
    a.save_checkpoint(path)
    a.train_epoch(DataLoader(TensorDataset(x, y), batch_size=4))
    b = make(99)  # different init, overwritten by the checkpoint
    b.load_checkpoint(path)
    assert b.epoch == 1 and np.isclose(b.optimizer.lr, a.optimizer.lr / 0.9)
    b.train_epoch(DataLoader(TensorDataset(x, y), batch_size=4))  # same dropout masks: same result
    for p, q in zip(a.model.parameters(), b.model.parameters()):
        np.testing.assert_allclose(q.data, p.data, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="not a Trainer checkpoint"):
        a.model.save(tmp_path / "plain.npz")
        b.load_checkpoint(tmp_path / "plain.npz")


@pytest.mark.parametrize("use_tqdm", [True, False])
def test_progress_output(rng, capsys, monkeypatch, use_tqdm):
    if not use_tqdm:
        monkeypatch.setattr(training, "_tqdm", None)
    elif training._tqdm is None:
        pytest.skip("tqdm not installed")
    x, y = _data(rng, 8)
    model = _model()
    Trainer(model, SGD(model.parameters(), lr=0.1), CrossEntropyLoss(), progress=True).train_epoch(
        DataLoader(TensorDataset(x, y), batch_size=4))
    err = capsys.readouterr().err
    assert "samples/s" in err and "loss=" in err
    Trainer(model, SGD(model.parameters(), lr=0.1), CrossEntropyLoss(), progress=False).train_epoch(
        DataLoader(TensorDataset(x, y), batch_size=4))
    assert capsys.readouterr().err == ""


def test_bad_batches_and_arguments(rng):
    model = _model()
    trainer = Trainer(model, SGD(model.parameters(), lr=0.1), CrossEntropyLoss(), progress=False)
    with pytest.raises(ValueError, match="pair"):
        trainer.train_epoch([np.zeros((2, 5))])
    with pytest.raises(ValueError, match="accumulation_steps"):
        trainer.train_epoch([], accumulation_steps=0)
    with pytest.raises(ValueError, match="grad_clip_norm"):
        Trainer(model, SGD(model.parameters(), lr=0.1), CrossEntropyLoss(), grad_clip_norm=0)
