"""Optimizers against torch.optim (float64): several steps of SGD (momentum, dampening,
nesterov, weight decay), Adam and AdamW on parameters of any shape (0-d and size 0
included), with gradients that are sometimes missing for a step; and clip_grad_norm_
against torch.nn.utils.clip_grad_norm_ for several norm types."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("hypothesis")

from hypothesis import given, strategies as st  # noqa: E402

from torchdiff import SHAPES, arrays, assert_same, leaf  # noqa: E402
from tinytorch.core.optimizers import SGD, Adam, AdamW, clip_grad_norm_  # noqa: E402

LR = st.floats(1e-4, 0.5)
DECAY = st.one_of(st.just(0.0), st.floats(1e-4, 0.2))


@st.composite
def optimizer_config(draw):
    kind = draw(st.sampled_from(["sgd", "adam", "adamw"]))
    if kind == "sgd":
        momentum = draw(st.one_of(st.just(0.0), st.floats(0.1, 0.99)))
        nesterov = momentum > 0 and draw(st.booleans())
        dampening = 0.0 if nesterov or momentum == 0 else draw(st.one_of(st.just(0.0), st.floats(0.0, 0.9)))
        kw = dict(lr=draw(LR), momentum=momentum, dampening=dampening, nesterov=nesterov,
                  weight_decay=draw(DECAY))
        return kind, kw
    b1, b2 = draw(st.floats(0.0, 0.99)), draw(st.floats(0.0, 0.999))
    kw = dict(lr=draw(LR), betas=(b1, b2), eps=draw(st.sampled_from([1e-8, 1e-6, 1e-3])),
              weight_decay=draw(DECAY))
    return kind, kw


OURS = {"sgd": SGD, "adam": Adam, "adamw": AdamW}
THEIRS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}


@given(shapes=st.lists(SHAPES, min_size=1, max_size=3), config=optimizer_config(),
       steps=st.integers(1, 6), data=st.data())
def test_optimizer_trajectories_match_torch(shapes, config, steps, data):
    kind, kw = config
    pairs = [leaf(data.draw(arrays(s), label=f"param {i}")) for i, s in enumerate(shapes)]
    # the leaves' arrays are read-only views; an optimizer writes into its parameters
    ps = [type(t).from_numpy(t.data.copy(), requires_grad=True) for t, _ in pairs]
    refs = [p for _, p in pairs]
    opt, ref_opt = OURS[kind](ps, **kw), THEIRS[kind](refs, **kw)
    for step in range(steps):
        for i, (p, r) in enumerate(zip(ps, refs)):
            g = data.draw(st.one_of(st.none(), arrays(p.shape)), label=f"grad {i} at step {step}")
            p.grad = None if g is None else g.copy()
            r.grad = None if g is None else torch.tensor(g)
        opt.step()
        ref_opt.step()
        for i, (p, r) in enumerate(zip(ps, refs)):
            assert type(p.data) is np.ndarray and p.data.shape == tuple(r.shape)
            assert_same(p.data, r, f"{kind} parameter {i} after step {step + 1}", rtol=1e-9, atol=1e-11)


@given(shapes=st.lists(SHAPES, min_size=1, max_size=3), max_norm=st.floats(0.0, 5.0),
       norm_type=st.sampled_from([1.0, 2.0, 3.0, float("inf")]), data=st.data())
def test_clip_grad_norm_matches_torch(shapes, max_norm, norm_type, data):
    grads = [data.draw(arrays(s), label=f"grad {i}") for i, s in enumerate(shapes)]
    ps = [leaf(np.zeros(s))[0] for s in shapes]
    refs = [torch.zeros(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    for p, r, g in zip(ps, refs, grads):
        p.grad = g.copy()
        r.grad = torch.tensor(g)
    total = clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    # empty grads add nothing to any norm; PyTorch refuses them for the inf-norm (no
    # identity for max), tinytorch skips them, so the reference sees only the others
    ref_total = torch.nn.utils.clip_grad_norm_([r for r in refs if r.numel()], max_norm, norm_type=norm_type)
    assert_same(total, ref_total, f"norm (type {norm_type})")
    for i, (p, r) in enumerate(zip(ps, refs)):
        assert type(p.grad) is np.ndarray
        assert_same(p.grad, r.grad, f"clipped grad {i} (max_norm={max_norm}, type {norm_type})")
