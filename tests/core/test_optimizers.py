"""Optimizers against float64 references of the published update rules, frozen parameters,
state dicts, schedules and clipping."""
import math

import numpy as np
import pytest

from parity import assert_close
from tinytorch.core.layers import Linear, Parameter
from tinytorch.core.optimizers import (SGD, Adam, AdamW, CosineAnnealingLR, LambdaLR, LinearLR, SequentialLR,
                                       StepLR, clip_grad_norm_)
from tinytorch.core.tensor import Tensor


def reference_sgd(p, grads, lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0):
    p, buf = p.copy(), None
    for g in grads:
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p


def reference_adam(p, grads, lr, b1, b2, eps, weight_decay, decoupled):
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def _run(opt_cls, kwargs, p0, grads):
    p = Tensor(p0, requires_grad=True, dtype=np.float64)
    opt = opt_cls([p], **kwargs)
    for g in grads:
        p.grad = g.copy()
        opt.step()
        opt.zero_grad()
    return p.data


@pytest.mark.parametrize("kwargs", [
    dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.9, nesterov=True),
    dict(lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01), dict(lr=0.1, weight_decay=0.1),
])
def test_sgd_matches_reference(rng, kwargs):
    p0 = rng.standard_normal((3, 5))
    grads = [rng.standard_normal((3, 5)) for _ in range(10)]
    assert_close(_run(SGD, kwargs, p0, grads), reference_sgd(p0, grads, **kwargs), 1e-12, 1e-12, f"SGD {kwargs}")


@pytest.mark.parametrize("cls,decoupled", [(Adam, False), (AdamW, True)])
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_adam_family_matches_reference(rng, cls, decoupled, wd):
    p0 = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) * 0.1 for _ in range(10)]
    got = _run(cls, dict(lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=wd), p0, grads)
    want = reference_adam(p0, grads, 0.01, 0.8, 0.95, 1e-6, wd, decoupled)
    assert_close(got, want, 1e-12, 1e-10, cls.__name__)


def test_adamw_default_weight_decay_is_pytorchs():
    assert AdamW([Tensor(np.ones(1), requires_grad=True)]).weight_decay == 0.01


@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps), lambda ps: AdamW(ps)])
def test_frozen_parameters_are_skipped_and_stay_frozen(make):
    """A frozen Parameter is skipped even with a stale grad; a plain Tensor with a ``.grad``
    set by hand is updated whatever ``requires_grad`` says (upstream TinyTorch's code sets
    grads on plain Tensors); requires_grad is never changed."""
    trainable = Tensor(np.ones(3), requires_grad=True)
    frozen = Parameter(np.ones(3))
    frozen.requires_grad = False
    frozen.grad = np.ones(3, np.float32)  # even a stale grad must not be applied
    by_hand = Tensor(np.ones(3))
    no_grad_yet = Tensor(np.ones(2), requires_grad=True)
    opt = make([trainable, frozen, by_hand, no_grad_yet])
    trainable.grad = np.ones(3, np.float32)
    by_hand.grad = np.ones(3, np.float32)
    opt.step()
    assert not frozen.requires_grad and not by_hand.requires_grad
    np.testing.assert_array_equal(frozen.data, np.ones(3))
    np.testing.assert_array_equal(no_grad_yet.data, np.ones(2))
    np.testing.assert_allclose(by_hand.data, trainable.data)
    assert not np.array_equal(trainable.data, np.ones(3))
    assert frozen not in opt.state and no_grad_yet not in opt.state and trainable in opt.state
    assert opt.update_counts == [1, 0, 1, 0]


def test_adam_state_names_and_in_place_updates():
    layer = Linear(4, 3)
    weight_array = layer.weight.data
    opt = Adam(layer.parameters())
    assert opt.params == layer.parameters()
    for p in layer.parameters():
        p.grad = np.ones_like(p.data)
    opt.step()
    state = opt.state[layer.weight]
    assert state["exp_avg"].shape == (4, 3) and state["exp_avg_sq"].dtype == np.float32
    assert layer.weight.data is weight_array


def test_optimizer_state_dict_round_trip(rng):
    p0 = rng.standard_normal(5)
    grads = [rng.standard_normal(5) for _ in range(6)]
    full = _run(Adam, dict(lr=0.01), p0, grads)
    p = Tensor(p0, requires_grad=True, dtype=np.float64)
    opt = Adam([p], lr=0.01)
    for g in grads[:3]:
        p.grad = g.copy()
        opt.step()
    saved, saved_p = opt.state_dict(), p.data.copy()
    q = Tensor(saved_p, requires_grad=True, dtype=np.float64)
    opt2 = Adam([q], lr=0.5)
    opt2.load_state_dict(saved)
    assert opt2.lr == 0.01
    for g in grads[3:]:
        q.grad = g.copy()
        opt2.step()
    assert_close(q.data, full, 0, 1e-14, "resumed Adam")
    bad = {"state": {0: {"exp_avg": np.zeros(4), "exp_avg_sq": np.zeros(5), "step": 1}}}
    with pytest.raises(ValueError, match=r"exp_avg.*\(4,\).*\(5,\)"):
        Adam([Tensor(np.ones(5), requires_grad=True)]).load_state_dict(bad)


def test_bad_optimizer_arguments():
    p = Tensor(np.ones(2), requires_grad=True)
    with pytest.raises(ValueError, match="learning rate"):
        SGD([p], lr=-1)
    with pytest.raises(ValueError, match="betas"):
        Adam([p], betas=(1.0, 0.9))
    with pytest.raises(TypeError, match="not a Tensor"):
        SGD([np.ones(2)], lr=0.1)
    with pytest.raises(ValueError, match="nesterov"):
        SGD([p], lr=0.1, nesterov=True)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lr"):
            SGD([p], lr=bad)
        with pytest.raises(ValueError, match="momentum"):
            SGD([p], lr=0.1, momentum=bad)
        with pytest.raises(ValueError, match="eps"):
            Adam([p], eps=bad)
    assert SGD([], lr=0.1).step() is None  # a model without parameters (upstream allows it)


def test_clip_grad_norm(rng):
    a, b = Tensor(np.zeros(3), requires_grad=True), Tensor(np.zeros((2, 2)), requires_grad=True)
    ga, gb = rng.standard_normal(3).astype(np.float32), rng.standard_normal((2, 2)).astype(np.float32)
    a.grad, b.grad = ga.copy(), gb.copy()
    norm = math.sqrt(float((ga.astype(np.float64) ** 2).sum() + (gb.astype(np.float64) ** 2).sum()))
    got = clip_grad_norm_([a, b], max_norm=0.5)
    assert math.isclose(got, norm, rel_tol=1e-6)
    scale = 0.5 / (norm + 1e-6)
    assert_close(a.grad, ga * scale, 1e-7, 1e-6, "clipped a")
    assert_close(b.grad, gb * scale, 1e-7, 1e-6, "clipped b")
    a.grad = ga.copy()
    clip_grad_norm_([a], max_norm=1e6)  # below the limit: untouched
    np.testing.assert_array_equal(a.grad, ga)
    a.grad = np.array([3.0, -4.0, 1.0], np.float32)
    assert clip_grad_norm_([a], 10.0, norm_type=float("inf")) == 4.0


def _lrs(sched, n):
    out = [sched.optimizer.lr]
    for _ in range(n):
        sched.step()
        out.append(sched.optimizer.lr)
    return np.array(out)


def _opt(lr=1.0):
    return SGD([Tensor(np.ones(1), requires_grad=True)], lr=lr)


def test_schedules_follow_their_formulas():
    e = np.arange(13)
    assert_close(_lrs(StepLR(_opt(0.5), step_size=4, gamma=0.1), 12), 0.5 * 0.1 ** (e // 4), 0, 1e-12, "StepLR")
    cos = 0.01 + (0.5 - 0.01) * (1 + np.cos(np.pi * np.minimum(e, 10) / 10)) / 2
    assert_close(_lrs(CosineAnnealingLR(_opt(0.5), T_max=10, eta_min=0.01), 12), cos, 0, 1e-12, "cosine")
    lin = 0.5 * (0.1 + 0.9 * np.minimum(e, 5) / 5)
    assert_close(_lrs(LinearLR(_opt(0.5), start_factor=0.1, total_iters=5), 12), lin, 0, 1e-12, "LinearLR")
    assert_close(_lrs(LambdaLR(_opt(2.0), lambda k: 1 / (k + 1)), 12), 2.0 / (e + 1), 0, 1e-12, "LambdaLR")


def test_warmup_then_cosine():
    opt = _opt(1.0)
    sched = SequentialLR(opt, [LinearLR(opt, start_factor=0.25, total_iters=4), CosineAnnealingLR(opt, T_max=8)],
                         milestones=[4])
    got = _lrs(sched, 12)
    want = [0.25 + 0.75 * k / 4 for k in range(4)] + [(1 + math.cos(math.pi * min(k, 8) / 8)) / 2 for k in range(9)]
    assert_close(got, want, 0, 1e-12, "warm-up + cosine")
