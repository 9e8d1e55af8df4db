"""The runtime's row kernels for layer norm, softmax and log-softmax over the last axis
(tt_layernorm_* / tt_softmax_* / tt_log_softmax_*) through the door: values and gradients
against float64 formulas and against torch.nn.functional for every ISA this CPU runs
(switched with tinytorch.native.set_isa) on 1 and 2 threads, awkward widths (1, 7, 17, 127,
1000), empty inputs, proof of the path that ran, what the back end declines, and the C layer's refusals surfacing as exceptions.
"""
import numpy as np
import pytest
import torch

from tinytorch import _native
from tinytorch.backends import cpu
from tinytorch.core import acceleration as acc

RNG = np.random.default_rng(11)
SHAPES = [(1, 1), (3, 7), (5, 17), (2, 3, 127), (67, 1000), (300, 300)]


def kernel_name(isa):
    return isa


def ln_reference(x, gamma, beta, eps, g):
    """(y, mean, rstd, gx, dgamma, dbeta) in float64, two passes."""
    x = x.astype(np.float64)
    gm = np.ones(x.shape[-1]) if gamma is None else gamma.astype(np.float64)
    bt = np.zeros(x.shape[-1]) if beta is None else beta.astype(np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    rstd = 1 / np.sqrt(var + eps)
    xh = (x - mean) * rstd
    y = xh * gm + bt
    g = g.astype(np.float64)
    dxh = g * gm
    gx = rstd * (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True))
    lead = tuple(range(x.ndim - 1))
    scale = rstd * (np.abs(dxh) + np.abs(dxh).mean(-1, keepdims=True)
                    + np.abs(xh) * np.abs(dxh * xh).mean(-1, keepdims=True))
    return (y, mean[..., 0], rstd[..., 0], gx, (g * xh).sum(lead), g.sum(lead), scale,
            (np.abs(g * xh) + np.abs(g)).sum(lead))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_layer_norm_matches_float64_and_torch(isa, threads, shape, affine):
    d = shape[-1]
    x = (RNG.standard_normal(shape) * 2 + RNG.uniform(-5, 5)).astype(np.float32)
    gamma = RNG.uniform(0.5, 1.5, d).astype(np.float32) if affine else None
    beta = RNG.uniform(-1, 1, d).astype(np.float32) if affine else None
    g = RNG.standard_normal(shape).astype(np.float32)
    y, mean, rstd = acc.layer_norm(x, gamma, beta, 1e-5, any_size=True)
    assert acc.last_path() == f"native:layernorm_forward:{kernel_name(isa)}"
    assert y.dtype == mean.dtype == rstd.dtype == np.float32
    assert mean.shape == rstd.shape == shape[:-1]
    ry, rm, rr, rgx, rdg, rdb, scale, colscale = ln_reference(x, gamma, beta, 1e-5, g)
    np.testing.assert_allclose(y, ry, rtol=0, atol=2e-5 * (1 + np.abs(rm).max() * rr.max()))
    np.testing.assert_allclose(mean, rm, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd, rr, rtol=4e-6)
    gx, dg, db = acc.layer_norm_backward(x, gamma, mean, rstd, g, any_size=True)
    assert acc.last_path() == f"native:layernorm_backward:{kernel_name(isa)}"
    assert np.all(np.abs(gx - rgx) <= 1e-5 * scale + 1e-30)
    if affine:
        assert np.all(np.abs(dg - rdg) <= 1e-5 * colscale)
        assert np.all(np.abs(db - rdb) <= 1e-5 * colscale)
    else:
        assert dg is None and np.all(np.abs(db - rdb) <= 1e-5 * colscale)
    # torch, gradients included
    tx = torch.tensor(x, requires_grad=True)
    tg = torch.tensor(gamma, requires_grad=True) if affine else None
    tb = torch.tensor(beta, requires_grad=True) if affine else None
    ty = torch.nn.functional.layer_norm(tx, (d,), tg, tb, 1e-5)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=3e-5)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    if affine:
        np.testing.assert_allclose(dg, tg.grad.numpy(), rtol=1e-4, atol=1e-3)
        np.testing.assert_allclose(db, tb.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("offset", [1.7e9, -3.0e7, 1e4], ids=str)
def test_layer_norm_keeps_the_spread_of_a_row_far_from_zero(isa, threads, offset):
    """A row whose |mean| is far above its spread (values a few ulps apart at 1.7e9): the
    output is formed from x - x[0] (exact), not x - float(mean), whose rounding alone is
    ~1% of the spread here (a fuzzer finding)."""
    spacing = np.spacing(np.float32(offset))
    steps = RNG.integers(0, 200, size=(4, 129))
    x = (np.float32(offset) + steps * spacing).astype(np.float32)
    y, _, _ = acc.layer_norm(x, None, None, 1e-5, any_size=True)
    assert acc.last_path() == f"native:layernorm_forward:{kernel_name(isa)}"
    ry = ln_reference(x, None, None, 1e-5, np.zeros_like(x))[0]
    np.testing.assert_allclose(y, ry, rtol=0, atol=1e-4 * (1 + np.abs(ry).max()))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_matches_float64_and_torch(isa, threads, shape, log):
    x = (RNG.standard_normal(shape) * 4).astype(np.float32)
    g = RNG.standard_normal(shape).astype(np.float32)
    fwd, bwd = (acc.log_softmax, acc.log_softmax_backward) if log else (acc.softmax, acc.softmax_backward)
    name = "log_softmax" if log else "softmax"
    y = fwd(x, any_size=True)
    assert acc.last_path() == f"native:{name}_forward:{kernel_name(isa)}"
    x64 = x.astype(np.float64)
    lse = np.log(np.exp(x64 - x64.max(-1, keepdims=True)).sum(-1, keepdims=True)) + x64.max(-1, keepdims=True)
    p = np.exp(x64 - lse)
    if log:
        np.testing.assert_allclose(y, x64 - lse, rtol=0, atol=2e-6 * (1 + np.abs(x64).max()))
    else:
        assert np.all(np.abs(y - p) <= 4e-6 * (1 + np.abs(x64).max()) * p + 1e-38)
    gx = bwd(y, g, any_size=True)
    assert acc.last_path() == f"native:{name}_backward:{kernel_name(isa)}"
    g64 = g.astype(np.float64)
    if log:
        want = g64 - p * g64.sum(-1, keepdims=True)
        bound = 1e-5 * (np.abs(g64) + p * np.abs(g64).sum(-1, keepdims=True))
    else:
        s = (g64 * p).sum(-1, keepdims=True)
        want = p * (g64 - s)
        bound = 1e-5 * p * (np.abs(g64) + np.abs(g64 * p).sum(-1, keepdims=True)) + 1e-38
    assert np.all(np.abs(gx - want) <= bound)
    tx = torch.tensor(x, requires_grad=True)
    ty = (torch.log_softmax if log else torch.softmax)(tx, -1)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_empty_and_zero_width(isa):
    for shape in [(0, 5), (4, 0), (0,)]:
        x = np.zeros(shape, np.float32)
        y, mean, rstd = acc.layer_norm(x, None, None, 0.25, any_size=True)
        assert y.shape == shape and mean.shape == shape[:-1]
        if shape == (4, 0):
            assert np.all(mean == 0) and np.all(rstd == 2)
        gx, _, gb = acc.layer_norm_backward(x, None, mean, rstd, x, any_size=True)
        assert gx.shape == shape and gb.shape == shape[-1:] and np.all(gb == 0)
        assert acc.softmax(x, any_size=True).shape == shape
        assert acc.log_softmax_backward(x, x, any_size=True).shape == shape


def test_softmax_edge_values(isa):
    x = np.array([[0, 1, np.nan, 2], [0, np.inf, 1, 2], [-np.inf] * 4, [-np.inf, 0, -np.inf, 0],
                  [1e30, 1e30, -1e30, 0]], np.float32)
    y = acc.softmax(x, any_size=True)
    assert np.isnan(y[:3]).all()
    np.testing.assert_array_equal(y[3], [0, 0.5, 0, 0.5])
    np.testing.assert_array_equal(y[4], [0.5, 0.5, 0, 0])
    ly = acc.log_softmax(x, any_size=True)
    assert np.isnan(ly[:3]).all() and ly[3, 0] == -np.inf
    np.testing.assert_allclose(ly[3, 1], -np.log(2), rtol=1e-6)


def test_what_the_back_end_declines():
    x64 = RNG.standard_normal((32, 32))
    x32 = x64.astype(np.float32)
    assert cpu.layer_norm(x64, None, None, 1e-5, True) is NotImplemented
    assert cpu.layer_norm(x32[:2, :2], None, None, 1e-5, False) is NotImplemented  # tiny
    assert cpu.layer_norm(x32, x64[0], None, 1e-5, True) is NotImplemented  # float64 gamma
    assert cpu.softmax(x32, 0, True) is NotImplemented  # not the last axis
    assert cpu.softmax(x64, 1, True) is NotImplemented
    assert cpu.log_softmax_backward(x32, x64, 1, True) is NotImplemented
    acc.layer_norm(x64, None, None)
    assert acc.last_path() == "numpy"
    acc.softmax(x32, axis=0)
    assert acc.last_path() == "numpy"
    acc.softmax(x32)
    assert acc.last_path().startswith("native:softmax_forward:")


def test_transposed_input_is_copied_not_misread():
    x = RNG.standard_normal((40, 30)).astype(np.float32).T  # (30, 40), column-major
    y, _, _ = acc.layer_norm(x, None, None, 1e-5)
    assert acc.last_path().startswith("native:layernorm_forward")
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, want, atol=2e-5)
    np.testing.assert_allclose(acc.softmax(x), np.exp(x) / np.exp(x).sum(-1, keepdims=True),
                               rtol=1e-5)


def test_c_layer_refusals_surface_as_exceptions():
    lib = _native.lib
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match="eps"):
        _native.check(lib.tt_layernorm_forward(x.ctypes.data, None, None, x.ctypes.data, None,
                                               None, 2, 4, float("nan")), "layer_norm")
    with pytest.raises(ValueError, match="y overlaps x"):
        _native.check(lib.tt_softmax_forward(x.ctypes.data, x.ctypes.data + 4, None, 1, 4))
    with pytest.raises(ValueError, match="mean is NULL"):
        _native.check(lib.tt_layernorm_backward(x.ctypes.data, None, None, x.ctypes.data,
                                                x.ctypes.data, None, None, None, 2, 4))
    with pytest.raises(ValueError, match="eps must be finite"):
        acc.layer_norm(x, None, None, eps=-1.0)
    with pytest.raises(ValueError, match="gamma must have shape"):
        acc.layer_norm(x, np.ones(3, np.float32), None)


@pytest.mark.parametrize("m,c", [(1, 1), (5, 7), (67, 1000), (300, 65)], ids=str)
def test_cross_entropy_matches_float64_and_torch(isa, threads, m, c):
    logits = (RNG.standard_normal((m, c)) * 4).astype(np.float32)
    target = RNG.integers(0, c, m)
    target[::3] = -100  # ignored rows
    grad_rows = RNG.uniform(0.1, 2, m).astype(np.float32)
    loss, lse = acc.cross_entropy(logits, target, -100, any_size=True)
    assert acc.last_path() == f"native:cross_entropy_forward:{kernel_name(isa)}"
    x64 = logits.astype(np.float64)
    peak = x64.max(1, keepdims=True)
    want_lse = (peak + np.log(np.exp(x64 - peak).sum(1, keepdims=True)))[:, 0]
    valid = target != -100
    want = np.where(valid, want_lse - x64[np.arange(m), np.where(valid, target, 0)], 0)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=2e-5)
    assert np.all(loss[~valid] == 0)
    grad = acc.cross_entropy_backward(logits, target, lse, grad_rows, -100, any_size=True)
    assert acc.last_path() == f"native:cross_entropy_backward:{kernel_name(isa)}"
    tx = torch.tensor(logits, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(target), ignore_index=-100,
                                           reduction="none")
    (tl * torch.tensor(grad_rows)).sum().backward()
    np.testing.assert_allclose(loss, tl.detach().numpy(), rtol=1e-5, atol=2e-5)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert np.all(grad[~valid] == 0)


def test_cross_entropy_declines_and_refuses():
    logits = RNG.standard_normal((64, 10)).astype(np.float32)
    target = RNG.integers(0, 10, 64)
    assert cpu.cross_entropy(logits, target, -100, 0.1, True) is NotImplemented  # smoothing
    assert cpu.cross_entropy(logits.astype(np.float64), target, -100, 0.0, True) is NotImplemented
    assert cpu.cross_entropy(logits, target.astype(np.float32), -100, 0.0, True) is NotImplemented
    acc.cross_entropy(logits, target, label_smoothing=0.1)
    assert acc.last_path() == "numpy"
    bad = target.copy()
    bad[5] = 10
    with pytest.raises(ValueError, match=r"target\[5\]=10 is out of range for 10 classes"):
        acc.cross_entropy(logits, bad, any_size=True)
    with pytest.raises(ValueError, match="logits must be"):
        acc.cross_entropy(logits[0], target)
