"""End to end: an MLP and a small CNN learn the bundled 8x8 digits.

Stated targets (fixed seed, fixed epochs, class-stratified 80/20 split from
tinytorch.data.digits_split): the MLP 64-64-10 reaches >= 95% test accuracy after 5
epochs of Adam(lr=0.01, batch 32); the CNN conv(1->8, 3x3, pad 1)-ReLU-maxpool(2)-
linear(128->10) reaches >= 95% after 5 epochs. Both run in well under a few seconds.
"""
import numpy as np
import pytest

from tinytorch.core import random as tt_random
from tinytorch.core.activations import ReLU
from tinytorch.core.dataloader import DataLoader, TensorDataset
from tinytorch.core.layers import Flatten, Linear, Sequential
from tinytorch.core.losses import CrossEntropyLoss
from tinytorch.core.optimizers import Adam
from tinytorch.core.spatial import Conv2d, MaxPool2d
from tinytorch.core.training import Trainer
from tinytorch.data import digits_split, load_digits

EPOCHS = 5
TARGET_ACCURACY = 0.95


def test_bundled_digits_data():
    images, labels = load_digits()
    assert images.shape == (1797, 8, 8) and images.dtype == np.uint8 and images.max() == 16
    assert labels.shape == (1797,) and labels.dtype == np.int64
    assert np.array_equal(np.bincount(labels), [178, 182, 177, 183, 181, 182, 181, 179, 174, 180])
    xtr, ytr, xte, yte = digits_split()
    assert len(xtr) + len(xte) == 1797 and abs(len(xte) - 0.2 * 1797) < 10


def _train(model, conv):
    xtr, ytr, xte, yte = digits_split(seed=0)
    if conv:
        xtr, xte = xtr[:, None], xte[:, None]
    trainer = Trainer(model, Adam(model.parameters(), lr=0.01), CrossEntropyLoss(), progress=False)
    train = DataLoader(TensorDataset(xtr, ytr), batch_size=32, shuffle=True, seed=0)
    test = DataLoader(TensorDataset(xte, yte), batch_size=256)
    losses = [trainer.train_epoch(train) for _ in range(EPOCHS)]
    _, acc = trainer.evaluate(test)
    return losses, acc


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_learns_digits(kind):
    tt_random.manual_seed(0)
    if kind == "mlp":
        model = Sequential(Flatten(), Linear(64, 64), ReLU(), Linear(64, 10))
    else:
        model = Sequential(Conv2d(1, 8, 3, padding=1), ReLU(), MaxPool2d(2), Flatten(), Linear(8 * 4 * 4, 10))
    losses, acc = _train(model, conv=kind == "cnn")
    assert losses[-1] < 0.5 * losses[0], losses
    assert acc >= TARGET_ACCURACY, f"{kind}: test accuracy {acc:.3f} < {TARGET_ACCURACY}"
