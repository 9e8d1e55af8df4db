"""Second opinion from PyTorch (skipped cleanly when torch is absent): the same ops,
losses, layers and 10-step optimizer trajectories computed by both frameworks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from parity import assert_close  # noqa: E402
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.activations import gelu, log_softmax, relu, sigmoid, silu, softmax, tanh  # noqa: E402
from tinytorch.core.layers import Linear, Sequential  # noqa: E402
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.losses import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss  # noqa: E402
from tinytorch.core.optimizers import SGD, Adam, AdamW  # noqa: E402
from tinytorch.core.spatial import avg_pool2d, conv2d, max_pool2d  # noqa: E402
from tinytorch.core.tensor import Tensor, concat, where  # noqa: E402

F = torch.nn.functional
torch.set_num_threads(1)


def both(ours, theirs, arrays, rng, atol=1e-10, rtol=1e-9):
    """Forward and input gradients in float64 from both frameworks."""
    ts = [Tensor(a, requires_grad=True, dtype=np.float64) for a in arrays]
    ps = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out, ref = ours(*ts), theirs(*ps)
    assert_close(out.data, ref.detach().numpy(), atol, rtol, "forward vs torch")
    w = rng.standard_normal(ref.shape)
    out.backward(w)
    ref.backward(torch.tensor(w))
    for i, (t, p) in enumerate(zip(ts, ps)):
        want = np.zeros(t.shape) if p.grad is None else p.grad.numpy()
        got = np.zeros(t.shape) if t.grad is None else t.grad
        assert_close(got, want, atol, rtol, f"grad {i} vs torch")


OPS = {
    "arith": (lambda a, b: (a * b - a / (b.abs() + 1)) ** 2, lambda a, b: (a * b - a / (b.abs() + 1)) ** 2, [(3, 4), (4,)]),
    "matmul_batched": (lambda a, b: a @ b, torch.matmul, [(2, 1, 3, 5), (4, 5, 2)]),
    "reductions": (lambda a: a.sum(1) + a.mean(0).sum() + a.max(1) + a.var(1),
                   lambda a: a.sum(1) + a.mean(0).sum() + a.amax(1) + a.var(1, unbiased=False), [(4, 6)]),
    "exp_log_sqrt": (lambda a: (a * a + 1).log() + (a * a + 1).sqrt() + (-a * a).exp(),
                     lambda a: (a * a + 1).log() + (a * a + 1).sqrt() + (-a * a).exp(), [(5, 3)]),
    "clip": (lambda a: a.clip(-0.5, 0.7), lambda a: a.clamp(-0.5, 0.7), [(4, 5)]),
    "index": (lambda a: a[np.array([0, 2, 2])][:, 1:4].transpose(0, 1).reshape(-1),
              lambda a: a[torch.tensor([0, 2, 2])][:, 1:4].transpose(0, 1).reshape(-1), [(3, 5)]),
    "concat_where": (lambda a, b: where(np.arange(4) % 2 == 0, concat([a, b], 0)[1:5], 0.5),
                     lambda a, b: torch.where(torch.tensor(np.arange(4) % 2 == 0), torch.cat([a, b], 0)[1:5],
                                              torch.tensor(0.5, dtype=torch.float64)), [(2, 4), (3, 4)]),
    "activations": (lambda a: relu(a) + sigmoid(a) + tanh(a) + silu(a) + gelu(a) + gelu(a, "none"),
                    lambda a: F.relu(a) + torch.sigmoid(a) + torch.tanh(a) + F.silu(a)
                    + F.gelu(a, approximate="tanh") + F.gelu(a), [(4, 7)]),
    "softmaxes": (lambda a: softmax(a, 1) * log_softmax(a, 0), lambda a: F.softmax(a, 1) * F.log_softmax(a, 0),
                  [(3, 5)]),
    "pool_after_relu_ties": (lambda x: max_pool2d(relu(x - 1.0), 2, 1, 1),
                             lambda x: F.max_pool2d(F.relu(x - 1.0), 2, 1, 1), [(2, 3, 5, 4)]),
    "conv_pool": (lambda x, w: max_pool2d(conv2d(x, w, stride=1, padding=1), 2)[..., :2, :2]
                  + avg_pool2d(conv2d(x, w, stride=2), 3, 1, 1),
                  lambda x, w: F.max_pool2d(F.conv2d(x, w, padding=1), 2)[..., :2, :2]
                  + F.avg_pool2d(F.conv2d(x, w, stride=2), 3, 1, 1),
                  [(2, 3, 5, 5), (4, 3, 2, 2)]),
}


@pytest.mark.parametrize("name", list(OPS))
def test_ops_match_torch(rng, name):
    ours, theirs, shapes = OPS[name]
    # the exact GELU uses a 1.2e-7 erf fit, so that sum gets a float32-level tolerance
    atol, rtol = (2e-7, 1e-6) if name == "activations" else (1e-10, 1e-9)
    both(ours, theirs, [rng.standard_normal(s) for s in shapes], rng, atol=atol, rtol=rtol)


@pytest.mark.parametrize("smoothing,ignore", [(0.0, -100), (0.2, 1)])
def test_cross_entropy_matches_torch(rng, smoothing, ignore):
    target = rng.integers(0, 4, (6, 3))
    ours = CrossEntropyLoss(ignore_index=ignore, label_smoothing=smoothing)
    both(lambda x: ours(x, target),
         lambda x: F.cross_entropy(x, torch.tensor(target), ignore_index=ignore, label_smoothing=smoothing),
         [rng.standard_normal((6, 4, 3)) * 3], rng)


def test_bce_and_mse_match_torch(rng):
    y = (rng.random((5, 3)) > 0.5).astype(np.float64)
    pw = np.array([1.0, 2.0, 0.5])
    both(lambda x: BCEWithLogitsLoss(pos_weight=pw)(x, y) + MSELoss("sum")(x, y),
         lambda x: F.binary_cross_entropy_with_logits(x, torch.tensor(y), pos_weight=torch.tensor(pw))
         + F.mse_loss(x, torch.tensor(y), reduction="sum"),
         [rng.standard_normal((5, 3)) * 4], rng)


def _models(rng):
    tt_random.manual_seed(int(rng.integers(1 << 30)))
    ours = Sequential(Linear(6, 16), ReLU(), Linear(16, 4))
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        for (name, p) in ours.named_parameters():
            t = dict(theirs.named_parameters())[name]
            t.copy_(torch.tensor(p.data.T if p.ndim == 2 else p.data))  # torch keeps (out, in)
    return ours, theirs


@pytest.mark.parametrize("opt", ["sgd", "sgd_nesterov", "adam", "adamw"])
def test_optimizer_trajectories_match_torch(rng, opt):
    ours, theirs = _models(rng)
    make = {
        "sgd": (lambda ps: SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
                lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01)),
        "sgd_nesterov": (lambda ps: SGD(ps, lr=0.05, momentum=0.8, nesterov=True),
                         lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True)),
        "adam": (lambda ps: Adam(ps, lr=0.01, weight_decay=0.01),
                 lambda ps: torch.optim.Adam(ps, lr=0.01, weight_decay=0.01)),
        "adamw": (lambda ps: AdamW(ps, lr=0.01), lambda ps: torch.optim.AdamW(ps, lr=0.01)),
    }[opt]
    o1, o2 = make[0](ours.parameters()), make[1](theirs.parameters())
    loss1, loss2 = CrossEntropyLoss(), torch.nn.CrossEntropyLoss()
    for step in range(10):
        x = rng.standard_normal((8, 6)).astype(np.float32)
        y = rng.integers(0, 4, 8)
        l1 = loss1(ours(x), y)
        l2 = loss2(theirs(torch.tensor(x)), torch.tensor(y))
        assert abs(l1.item() - l2.item()) < 1e-5 * (1 + abs(l2.item())), f"step {step}: loss {l1.item()} vs {l2.item()}"
        o1.zero_grad()
        o2.zero_grad()
        l1.backward()
        l2.backward()
        o1.step()
        o2.step()
    t_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        want = t_params[name].detach().numpy()
        assert_close(p.data, want.T if p.ndim == 2 else want, 1e-5, 1e-4, f"{opt} {name} after 10 steps")
