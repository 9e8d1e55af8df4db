"""demo: the main job's short training run (`tinytorch demo`).

Trains a small MLP on the bundled 8x8 digits data with Adam for a few epochs and
prints, per epoch, the training loss, test accuracy, throughput and which kernel
path the matmuls took, so one command shows the whole stack working: the native
runtime (or the NumPy fallback), autograd, layers, optimizer, data loader.

Owns `tinytorch demo`'s run; assumes the bundled digits data and the core (layers, Adam, data
loader).
"""
from __future__ import annotations

import time

import numpy as np


def kernels_label() -> str:
    """What the demo's kernels run on, as its header says: the native ISA, or NumPy and why."""
    from . import native
    from .core import acceleration
    if acceleration.native_available():
        return f"native {native.info()['isa_active']}"
    if native.available():
        return "NumPy (native kernels turned off: TINYTORCH_DISABLE_NATIVE=1 or use_native(False))"
    return f"NumPy fallback (libtinytorch not loaded: {native.reason()})"


def run_demo(epochs: int = 3, quiet: bool = False, seed: int = 0) -> int:
    """Train the demo MLP for ``epochs`` epochs, printing one line per epoch; returns 0.

    Args:
        epochs: epochs to train (at least 1; ValueError otherwise).
        quiet: no progress bar inside an epoch.
        seed: the seed of the data split, the batches and the initialisation.
    """
    if int(epochs) < 1:
        raise ValueError(f"run_demo: epochs must be at least 1, got {epochs}")
    from . import manual_seed
    from .core import acceleration
    from .core.activations import GELU
    from .core.dataloader import DataLoader, TensorDataset
    from .core.layers import Linear, Sequential
    from .core.losses import CrossEntropyLoss
    from .core.optimizers import Adam
    from .core.tensor import Tensor
    from .core.training import Trainer
    from .data import load_digits

    manual_seed(seed)
    images, labels = load_digits()
    x = (images.reshape(len(images), -1) / 16.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], labels[order]
    split = int(0.8 * len(x))
    train = DataLoader(TensorDataset(x[:split], y[:split]), batch_size=64, shuffle=True, seed=seed)
    test_x, test_y = x[split:], y[split:]

    model = Sequential(Linear(64, 128), GELU(), Linear(128, 10))
    trainer = Trainer(model, Adam(model.parameters(), lr=3e-3), CrossEntropyLoss(),
                      progress=False if quiet else None)
    print(f"demo: MLP 64-128-10 on {split} digits images, {epochs} epochs, kernels: {kernels_label()}")
    for epoch in range(1, epochs + 1):
        start = time.perf_counter()
        loss = trainer.train_epoch(train)
        elapsed = time.perf_counter() - start
        model.eval()
        logits = model(Tensor(test_x)).data
        model.train()
        accuracy = float((logits.argmax(axis=1) == test_y).mean())
        print(f"  epoch {epoch}: loss {loss:.4f}  test accuracy {accuracy:.3f}  "
              f"{split / elapsed:,.0f} samples/s  (matmul path: {acceleration.last_path()})")
    return 0
