"""Upstream's module-level constants at their upstream paths (values, one definition, and that the
code here really uses them), and the training loop's gradient-accumulation contract: a window of
k micro-batches makes the same update as one batch of the same samples."""
import ast
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

import tinytorch
from tinytorch.core.tensor import Tensor

PACKAGE = Path(tinytorch.__file__).resolve().parent

# upstream path -> {name: upstream value} (harvard-edge/cs249r_book, tinytorch/tinytorch/...)
UPSTREAM_CONSTANTS = {
    "tinytorch.core.tensor": {"BYTES_PER_FLOAT32": 4, "KB_TO_BYTES": 1024, "MB_TO_BYTES": 1024 * 1024},
    "tinytorch.core.layers": {"XAVIER_SCALE_FACTOR": 1.0, "DROPOUT_MIN_PROB": 0.0, "DROPOUT_MAX_PROB": 1.0},
    "tinytorch.core.losses": {"EPSILON": 1e-7},
    "tinytorch.core.optimizers": {"DEFAULT_LEARNING_RATE_SGD": 0.01, "DEFAULT_LEARNING_RATE_ADAM": 0.001,
                                  "DEFAULT_BETA1": 0.9, "DEFAULT_BETA2": 0.999, "DEFAULT_EPS": 1e-8,
                                  "DEFAULT_WEIGHT_DECAY_ADAMW": 0.01},
    "tinytorch.core.embeddings": {"BYTES_PER_FLOAT32": 4, "MB_TO_BYTES": 1024 * 1024},
    "tinytorch.core.training": {"DEFAULT_MAX_LR": 0.1, "DEFAULT_MIN_LR": 0.01, "DEFAULT_TOTAL_EPOCHS": 100},
    "tinytorch.core.spatial": {"DEFAULT_KERNEL_SIZE": 3, "DEFAULT_STRIDE": 1, "DEFAULT_PADDING": 0},
    "tinytorch.core.tokenization": {"KB_TO_BYTES": 1024},
    "tinytorch.core.transformer": {"BYTES_PER_FLOAT32": 4, "MB_TO_BYTES": 1024 * 1024},
    "tinytorch.perf.profiling": {"BYTES_PER_FLOAT32": 4, "KB_TO_BYTES": 1024, "MB_TO_BYTES": 1024 * 1024},
    "tinytorch.perf.benchmarking": {"DEFAULT_WARMUP_RUNS": 5, "DEFAULT_MEASUREMENT_RUNS": 10},
    "tinytorch.perf.quantization": {"INT8_MIN_VALUE": -128, "INT8_MAX_VALUE": 127, "INT8_RANGE": 256,
                                    "EPSILON": 1e-8, "BYTES_PER_FLOAT32": 4, "BYTES_PER_INT8": 1,
                                    "MB_TO_BYTES": 1024 * 1024},
    "tinytorch.perf.compression": {"BYTES_PER_FLOAT32": 4, "MB_TO_BYTES": 1024 * 1024},
    "tinytorch.perf.acceleration": {"DEFAULT_WARMUP_ITERATIONS": 2, "DEFAULT_TIMING_ITERATIONS": 5,
                                    "BYTES_PER_FLOAT32": 4},
}


@pytest.mark.parametrize("module", sorted(UPSTREAM_CONSTANTS))
def test_upstream_constants_import_with_upstreams_values(module):
    import importlib
    mod = importlib.import_module(module)
    for name, value in UPSTREAM_CONSTANTS[module].items():
        assert name in mod.__all__, f"{module}.{name} is not exported"
        assert getattr(mod, name) == value and type(getattr(mod, name)) is type(value), (module, name)


def _module_level_assignments(name):
    """(file, line) of every module-level ``name = ...`` in the package source."""
    hits = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AnnAssign) else []
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                hits.append((path.relative_to(PACKAGE).as_posix(), node.lineno))
    return hits


@pytest.mark.parametrize("name", ["BYTES_PER_FLOAT32", "KB_TO_BYTES", "MB_TO_BYTES"])
def test_memory_units_have_one_definition(name):
    hits = _module_level_assignments(name)
    assert [f for f, _ in hits] == ["core/tensor.py"], hits
    assert tinytorch.core.tensor.BYTES_PER_FLOAT32 == np.dtype(np.float32).itemsize


def test_the_code_uses_the_named_defaults():
    from tinytorch.core import layers, losses, spatial, training
    sched = training.CosineSchedule()
    assert (sched.max_lr, sched.min_lr, sched.total_epochs) == (
        training.DEFAULT_MAX_LR, training.DEFAULT_MIN_LR, training.DEFAULT_TOTAL_EPOCHS)
    assert sched.get_lr(training.DEFAULT_TOTAL_EPOCHS) == pytest.approx(training.DEFAULT_MIN_LR)
    assert losses.BinaryCrossEntropyLoss().eps == losses.EPSILON
    conv = spatial.Conv2d(2, 3, kernel_size=spatial.DEFAULT_KERNEL_SIZE)
    assert conv.stride == (spatial.DEFAULT_STRIDE,) * 2 and conv.padding == (spatial.DEFAULT_PADDING,) * 2
    assert spatial.SimpleCNN().conv1.kernel_size == (spatial.DEFAULT_KERNEL_SIZE,) * 2
    pool_sig = inspect.signature(spatial.MaxPool2d).parameters["padding"].default
    assert pool_sig == spatial.DEFAULT_PADDING
    for p in (layers.DROPOUT_MIN_PROB, 0.3, layers.DROPOUT_MAX_PROB):
        layers.Dropout(p)
    for bad in (layers.DROPOUT_MIN_PROB - 1e-9, layers.DROPOUT_MAX_PROB + 1e-9):
        with pytest.raises(ValueError, match="Dropout"):
            layers.Dropout(bad)
    tinytorch.manual_seed(0)
    fan_in = 37
    w = layers.Linear(fan_in, 400).weight.data
    bound = math.sqrt(layers.XAVIER_SCALE_FACTOR / fan_in)
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound  # uniform on +-bound


# (class, argument) -> the constant its default is written as in core/optimizers.py
OPTIMIZER_DEFAULTS = {
    ("SGD", "lr"): "DEFAULT_LEARNING_RATE_SGD",
    ("Adam", "lr"): "DEFAULT_LEARNING_RATE_ADAM", ("Adam", "eps"): "DEFAULT_EPS",
    ("AdamW", "lr"): "DEFAULT_LEARNING_RATE_ADAM", ("AdamW", "eps"): "DEFAULT_EPS",
    ("AdamW", "weight_decay"): "DEFAULT_WEIGHT_DECAY_ADAMW",
}


def _default_expressions(cls_name):
    """{argument: default expression's AST} of ``cls_name.__init__`` in core/optimizers.py."""
    tree = ast.parse((PACKAGE / "core" / "optimizers.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    args = init.args.args[len(init.args.args) - len(init.args.defaults):]
    return {a.arg: d for a, d in zip(args, init.args.defaults)}


def test_the_optimizers_defaults_are_the_named_constants():
    from tinytorch.core import optimizers as opt
    for (cls_name, arg), const in OPTIMIZER_DEFAULTS.items():
        expr = _default_expressions(cls_name)[arg]
        assert isinstance(expr, ast.Name) and expr.id == const, (cls_name, arg, ast.dump(expr))
    for cls_name in ("Adam", "AdamW"):
        betas = _default_expressions(cls_name)["betas"]
        assert [e.id for e in betas.elts] == ["DEFAULT_BETA1", "DEFAULT_BETA2"], cls_name
    p = Tensor(np.zeros(3, np.float32), requires_grad=True)
    sgd = opt.SGD([p])
    assert sgd.lr == opt.DEFAULT_LEARNING_RATE_SGD and sgd.momentum == 0.0  # this project's momentum
    assert not hasattr(opt, "DEFAULT_MOMENTUM")  # upstream's 0.9 is no default here (docs/compat.md)
    for cls, decay in ((opt.Adam, 0.0), (opt.AdamW, opt.DEFAULT_WEIGHT_DECAY_ADAMW)):
        a = cls([p])
        assert (a.lr, a.betas, a.eps, a.weight_decay) == (
            opt.DEFAULT_LEARNING_RATE_ADAM, (opt.DEFAULT_BETA1, opt.DEFAULT_BETA2), opt.DEFAULT_EPS, decay)


def test_a_default_adamw_step_uses_the_constants():
    """One default AdamW step equals PyTorch's AdamW given the constants' values explicitly, on an
    odd-sized parameter: a wrong default (or constant) changes the numbers."""
    import torch
    from tinytorch.core import optimizers as opt
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal(13).astype(np.float32)
    grads = [rng.standard_normal(13).astype(np.float32) for _ in range(3)]
    p = Tensor(w0.copy(), requires_grad=True)
    mine = opt.AdamW([p])
    ref = torch.tensor(w0.astype(np.float64), requires_grad=True)
    theirs = torch.optim.AdamW([ref], lr=0.001, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    for g in grads:
        p.grad = g.copy()
        mine.step()
        ref.grad = torch.tensor(g.astype(np.float64))
        theirs.step()
    np.testing.assert_allclose(p.data, ref.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_memory_units_drive_the_size_reports():
    from tinytorch.core.layers import Linear
    from tinytorch.perf.compression import magnitude_prune, verify_pruning_works
    from tinytorch.perf.quantization import MB_TO_BYTES, Quantizer
    model = Linear(64, 32)
    nbytes = sum(p.data.nbytes for p in model.parameters())
    assert nbytes == (64 * 32 + 32) * tinytorch.core.tensor.BYTES_PER_FLOAT32
    stats = Quantizer.quantize_model(Linear(64, 32))
    assert stats["original_size_mb"] == pytest.approx(nbytes / MB_TO_BYTES)
    magnitude_prune(model, 0.8)
    assert verify_pruning_works(model, 0.8)["memory_mb"] == pytest.approx(nbytes / MB_TO_BYTES)


# ------------------------------------------------------------------ gradient accumulation

def _train(x, y, loss_fn, make_opt, batch_size, accumulation_steps, epochs=1, seed=5):
    from tinytorch.core.dataloader import DataLoader, TensorDataset
    from tinytorch.core.layers import Linear
    from tinytorch.core.training import Trainer
    tinytorch.manual_seed(seed)
    model = Linear(x.shape[1], 3)
    trainer = Trainer(model, make_opt(model.parameters()), loss_fn, progress=False)
    loader = DataLoader(TensorDataset(Tensor(x), Tensor(y)), batch_size=batch_size, shuffle=False)
    losses = [trainer.train_epoch(loader, accumulation_steps=accumulation_steps) for _ in range(epochs)]
    return model, losses, trainer


@pytest.mark.parametrize("k, micro", [(3, 4), (2, 5), (4, 1)])
def test_k_micro_batches_update_like_one_batch_sgd_momentum_mse(k, micro):
    from tinytorch.core.losses import MSELoss
    from tinytorch.core.optimizers import SGD
    rng = np.random.default_rng(k)
    n = 2 * k * micro  # two optimizer steps per epoch
    x = rng.standard_normal((n, 7)).astype(np.float32)
    y = rng.standard_normal((n, 3)).astype(np.float32)
    opt = lambda ps: SGD(ps, lr=0.05, momentum=0.9)
    one, loss_one, t1 = _train(x, y, MSELoss(), opt, batch_size=k * micro, accumulation_steps=1, epochs=2)
    acc, loss_acc, t2 = _train(x, y, MSELoss(), opt, batch_size=micro, accumulation_steps=k, epochs=2)
    assert t1.global_step == t2.global_step == 4
    for p, q in zip(one.parameters(), acc.parameters()):
        np.testing.assert_allclose(p.data, q.data, rtol=1e-5, atol=1e-6)
    assert loss_acc == pytest.approx(loss_one, rel=1e-5)  # mean loss per sample, both ways


def test_accumulated_window_matches_a_float64_reference_step():
    """Plain SGD on MSE: after one window the weights equal w - lr * dL/dw of the whole window,
    computed in float64 by hand."""
    from tinytorch.core.losses import MSELoss
    from tinytorch.core.optimizers import SGD
    rng = np.random.default_rng(11)
    x = rng.standard_normal((12, 5)).astype(np.float32)
    y = rng.standard_normal((12, 3)).astype(np.float32)
    from tinytorch.core.layers import Linear
    tinytorch.manual_seed(5)
    init = Linear(5, 3)
    W0, b0 = init.weight.data.astype(np.float64), init.bias.data.astype(np.float64)
    model, _, _ = _train(x, y, MSELoss(), lambda ps: SGD(ps, lr=0.1), batch_size=4, accumulation_steps=3)
    r = x.astype(np.float64) @ W0 + b0 - y
    gW = 2 * x.T.astype(np.float64) @ r / r.size
    gb = 2 * r.sum(axis=0) / r.size
    np.testing.assert_allclose(model.weight.data, W0 - 0.1 * gW, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.bias.data, b0 - 0.1 * gb, rtol=1e-5, atol=1e-6)


def test_accumulation_with_adam_and_cross_entropy_and_a_short_last_window():
    """12 samples, micro-batches of 2, k = 4: windows of 4 and 2 micro-batches; each equals one
    batch of its own samples (the short window is averaged over the micro-batches it has)."""
    from tinytorch.core.dataloader import DataLoader, TensorDataset
    from tinytorch.core.losses import CrossEntropyLoss
    from tinytorch.core.optimizers import Adam
    from tinytorch.core.training import Trainer
    rng = np.random.default_rng(2)
    x = rng.standard_normal((12, 6)).astype(np.float32)
    y = rng.integers(0, 3, 12)
    opt = lambda ps: Adam(ps, lr=0.01)
    acc, _, t = _train(x, y, CrossEntropyLoss(), opt, batch_size=2, accumulation_steps=4)
    assert t.global_step == 2
    # the same two updates as two full batches: samples 0-7, then 8-11
    from tinytorch.core.layers import Linear
    tinytorch.manual_seed(5)
    model = Linear(6, 3)
    trainer = Trainer(model, opt(model.parameters()), CrossEntropyLoss(), progress=False)
    for lo, hi in ((0, 8), (8, 12)):
        loader = DataLoader(TensorDataset(Tensor(x[lo:hi]), Tensor(y[lo:hi])), batch_size=hi - lo)
        trainer.train_epoch(loader)
    for p, q in zip(acc.parameters(), model.parameters()):
        np.testing.assert_allclose(p.data, q.data, rtol=1e-5, atol=1e-6)


def test_accumulation_steps_must_be_positive():
    from tinytorch.core.losses import MSELoss
    from tinytorch.core.optimizers import SGD
    x = np.zeros((4, 2), np.float32)
    with pytest.raises(ValueError, match="accumulation_steps"):
        _train(x, np.zeros((4, 3), np.float32), MSELoss(), lambda ps: SGD(ps, lr=0.1),
               batch_size=2, accumulation_steps=0)


def test_transpose_upstream_two_axis_form_and_the_argument_free_default():
    import torch
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    t = Tensor(x, requires_grad=True)
    y = t.transpose(-2, -1)  # what upstream code writes (and what upstream's no-arg form means)
    np.testing.assert_array_equal(y.data, np.swapaxes(x, -2, -1))
    g = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    (y * Tensor(g)).sum().backward()
    xs = torch.tensor(x, requires_grad=True)
    (xs.transpose(-2, -1) * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(t.grad, xs.grad.numpy())
    assert Tensor(x).transpose().shape == (2, 5, 3)  # no arguments: the last two (upstream's)
    assert Tensor(x).T.shape == (5, 3, 2)  # .T reverses all axes (NumPy's)
    assert Tensor(x[0]).transpose().shape == Tensor(x[0]).T.shape == (5, 3)  # 2-D: the same
