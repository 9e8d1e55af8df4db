"""The runtime's training-step kernels (tt_adam_step, tt_embedding_forward / _backward)
through the door: Adam and AdamW over many tensors in one call against a float64 rule and
torch.optim (several steps, per-tensor step counts, sizes 0, 1, odd, prime), the embedding
gather and scatter-add against NumPy (repeated ids, 0 ids, D = 1, odd D) for every ISA this
CPU runs on 1 and 2 threads, the path that ran, what the back end declines, and the C
layer's refusals (ids out of range, bad hyper-parameters) as exceptions with nothing written.
"""
import ctypes

import numpy as np
import pytest
import torch

from tinytorch import _native
from tinytorch.core import acceleration as acc
from tinytorch.core.embeddings import Embedding
from tinytorch.core.optimizers import Adam, AdamW
from tinytorch.core.tensor import Tensor

RNG = np.random.default_rng(2026)
SIZES = [0, 1, 7, 16, 97, 4099]


def adam_reference(p, g, m, v, t, lr, b1, b2, eps, wd, decoupled):
    """One step in float64 (PyTorch's rule); returns new (p, m, v)."""
    p, g, m, v = (x.astype(np.float64) for x in (p, g, m, v))
    if decoupled:
        p = p * (1 - lr * wd)
    else:
        g = g + wd * p
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    denom = np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
    return p - lr / (1 - b1 ** t) * m / denom, m, v


@pytest.mark.parametrize("decoupled", [True, False])
def test_adam_step_many_tensors_matches_float64(isa, threads, decoupled):
    shapes = [(s,) for s in SIZES] + [(3, 5), (64, 129)]
    ps = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    ms = [RNG.standard_normal(s).astype(np.float32) * 0.1 for s in shapes]
    vs = [np.abs(RNG.standard_normal(s)).astype(np.float32) * 0.01 for s in shapes]
    gs = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    steps = [1 + (i % 4) for i in range(len(shapes))]  # tensors at different step counts
    want = [adam_reference(p, g, m, v, t, 1e-2, 0.9, 0.999, 1e-8, 0.05, decoupled)
            for p, g, m, v, t in zip(ps, gs, ms, vs, steps)]
    acc.adam_step(ps, gs, ms, vs, steps, 1e-2, (0.9, 0.999), 1e-8, 0.05, decoupled)
    assert acc.last_path() == f"native:adam:{isa}"
    for (wp, wm, wv), p, m, v in zip(want, ps, ms, vs):
        np.testing.assert_allclose(m, wm, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(v, wv, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(p, wp, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,torch_cls", [(AdamW, torch.optim.AdamW), (Adam, torch.optim.Adam)])
def test_optimizer_steps_match_torch(cls, torch_cls, threads):
    """Five steps of the optimizer (one runtime call per step) against torch.optim."""
    shapes = [(17, 5), (5,), (1,), (31, 3)]
    ours = [Tensor(RNG.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes]
    theirs = [torch.tensor(p.data.copy(), requires_grad=True) for p in ours]
    opt = cls(ours, lr=3e-3, weight_decay=0.1)
    topt = torch_cls(theirs, lr=3e-3, weight_decay=0.1)
    for _ in range(5):
        grads = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
        for p, tp, g in zip(ours, theirs, grads):
            p.grad = g
            tp.grad = torch.from_numpy(g.copy())
        opt.step()
        assert acc.last_path().startswith("native:adam:")
        topt.step()
    for p, tp in zip(ours, theirs):
        np.testing.assert_allclose(p.data, tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_adam_float64_takes_the_numpy_rule():
    p = RNG.standard_normal(9)
    g, m, v = RNG.standard_normal(9), np.zeros(9), np.zeros(9)
    want = adam_reference(p, g, m, v, 1, 1e-3, 0.9, 0.99, 1e-8, 0.0, True)[0]
    acc.adam_step([p], [g], [m], [v], [1], 1e-3, (0.9, 0.99), 1e-8, 0.0, True)
    assert acc.last_path() == "numpy"
    np.testing.assert_allclose(p, want, rtol=1e-12)


def test_adam_step_refusals():
    p = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="step count"):
        acc.adam_step([p], [p.copy()], [p.copy()], [p.copy()], [0], 1e-3)
    with pytest.raises(ValueError, match="shapes"):
        acc.adam_step([p], [np.ones(3, np.float32)], [p.copy()], [p.copy()], [1], 1e-3)
    with pytest.raises(ValueError, match="betas"):
        acc.adam_step([p], [p.copy()], [p.copy()], [p.copy()], [1], 1e-3, betas=(1.0, 0.9))
    # from C: a NaN learning rate is refused and nothing is written
    arr = (ctypes.c_void_p * 1)(p.ctypes.data)
    one = (ctypes.c_int64 * 1)(4)
    status = _native.lib.tt_adam_step(1, arr, arr, arr, arr, one, one, float("nan"), 0.9, 0.99,
                                      1e-8, 0.0, 1)
    assert status != 0 and "lr" in _native.last_error()
    assert np.array_equal(p, np.ones(4, np.float32))
    status = _native.lib.tt_adam_step(1, arr, arr, arr, arr, one, (ctypes.c_int64 * 1)(0), 1e-3,
                                      0.9, 0.99, 1e-8, 0.0, 1)
    assert status != 0 and "steps[0]" in _native.last_error()


@pytest.mark.parametrize("vocab,dim,ids_shape", [(5, 1, (7,)), (65, 128, (32, 128)), (13, 7, (0,)),
                                                 (3, 33, (2, 3, 5)), (1, 1, (1,))])
def test_embedding_gather_and_scatter_add_match_numpy(isa, threads, vocab, dim, ids_shape):
    w = RNG.standard_normal((vocab, dim)).astype(np.float32)
    ids = RNG.integers(0, vocab, size=ids_shape)
    out = acc.embedding(w, ids)
    assert acc.last_path() == f"native:embedding:{isa}"
    np.testing.assert_array_equal(out, w[ids])
    g = RNG.standard_normal(ids_shape + (dim,)).astype(np.float32)
    gw = acc.embedding_backward(g, ids, vocab)
    assert acc.last_path() == f"native:embedding_backward:{isa}"
    want = np.zeros((vocab, dim), np.float32)
    np.add.at(want, ids.reshape(-1), g.reshape(-1, dim))
    np.testing.assert_array_equal(gw, want)  # same order of additions: bit-identical
    want64 = np.zeros((vocab, dim))
    np.add.at(want64, ids.reshape(-1), g.reshape(-1, dim).astype(np.float64))
    np.testing.assert_allclose(gw, want64, rtol=1e-5, atol=1e-5)


def test_embedding_layer_gradient_matches_torch():
    emb = Embedding(11, 6)
    ids = np.array([[1, 1, 3], [10, 1, 0]])
    out = emb(ids)
    g = RNG.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    temb = torch.nn.Embedding(11, 6)
    with torch.no_grad():
        temb.weight.copy_(torch.from_numpy(emb.weight.data))
    tout = temb(torch.from_numpy(ids))
    tout.backward(torch.from_numpy(g))
    np.testing.assert_allclose(out.data, tout.detach().numpy())
    np.testing.assert_allclose(emb.weight.grad, temb.weight.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_embedding_refusals():
    w = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match="id 4"):
        acc.embedding(w, np.array([0, 4]))
    with pytest.raises(ValueError, match="id -1"):
        acc.embedding_backward(np.ones((2, 3), np.float32), np.array([-1, 0]), 4)
    with pytest.raises(TypeError, match="integers"):
        acc.embedding(w, np.array([0.0, 1.0]))
    # from C: an id out of range names its position; the output is untouched
    ids = np.array([0, 2, 9], np.int64)
    out = np.full((3, 3), 7.0, np.float32)
    status = _native.lib.tt_embedding_forward(w.ctypes.data, 4, 3, ids.ctypes.data, 3, out.ctypes.data)
    assert status != 0 and "ids[2]=9" in _native.last_error()
    assert (out == 7.0).all()
    gw = np.full((4, 3), 5.0, np.float32)
    status = _native.lib.tt_embedding_backward(out.ctypes.data, ids.ctypes.data, 3, 3, gw.ctypes.data, 4, 0)
    assert status != 0 and (gw == 5.0).all()


@pytest.mark.parametrize("shape,perm", [((0,), None), ((1,), None), ((97,), None), ((4, 3, 5, 7), None),
                                        ((4, 3, 5, 7), (1, 0, 2, 3)), ((3, 129), (1, 0))])
def test_relu_forward_backward_match_numpy_in_any_dense_layout(isa, threads, shape, perm):
    x = RNG.standard_normal(shape).astype(np.float32)
    if x.size > 3:
        x.reshape(-1)[:3] = [np.nan, 0.0, -0.0]
    if perm is not None:
        x = x.transpose(perm)  # a transposed view: its memory is still dense
    y = acc.relu(x)
    assert acc.last_path() == f"native:relu:{isa}"
    assert y.strides == x.strides  # the result keeps the input's layout
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    g = RNG.standard_normal(x.shape).astype(np.float32)
    gx = acc.relu_backward(y, g)
    assert acc.last_path() == f"native:relu_backward:{isa}"
    np.testing.assert_array_equal(gx, np.where(np.maximum(x, 0) <= 0, 0, g))
    tx = torch.from_numpy(np.ascontiguousarray(x)).requires_grad_()
    torch.relu(tx).backward(torch.from_numpy(np.ascontiguousarray(g)))
    np.testing.assert_array_equal(gx, tx.grad.numpy())


def test_relu_gapped_views_and_other_dtypes_take_numpy():
    x = RNG.standard_normal((8, 8)).astype(np.float32)[:, ::2]
    np.testing.assert_array_equal(acc.relu(x), np.maximum(x, 0))
    assert acc.last_path() == "numpy"
    ints = np.array([-2, 0, 3])
    assert acc.relu(ints).dtype == ints.dtype and acc.last_path() == "numpy"
    with pytest.raises(ValueError, match="differ"):
        acc.relu_backward(np.ones(3, np.float32), np.ones(4, np.float32))
    assert _native.lib.tt_relu_forward(None, None, -1) != 0 and "negative" in _native.last_error()
