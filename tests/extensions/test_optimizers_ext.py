"""Lion and Muon against float64 NumPy transcriptions of their published update rules.

The optimizer boundary takes parameters and gradients rather than an op's inputs, so the
ndarray/Tensor and gradcheck parts of contract.py do not apply here; what applies is
parity with a float64 reference, checked below over several steps on awkward shapes.
"""
import math

import numpy as np
import pytest

from tinytorch.core.layers import Linear
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import Lion, Muon
from tinytorch.extensions.optimizers import newton_schulz_orthogonalize

RNG = np.random.default_rng(2026)


# ----------------------------------------------------------------------------- references

def lion_reference(p, grads, lr, betas, wd):
    """Chen et al. 2023, Algorithm (Lion), float64."""
    p = p.astype(np.float64).copy()
    m = np.zeros_like(p)
    b1, b2 = betas
    for g in grads:
        c = b1 * m + (1 - b1) * g
        p = p - lr * (np.sign(c) + wd * p)
        m = b2 * m + (1 - b2) * g
    return p, m


def ns_reference(g, steps, coeffs=(3.4445, -4.775, 2.0315), eps=1e-7):
    a, b, c = coeffs
    x = g.T if g.shape[0] > g.shape[1] else g
    x = x / max(np.sqrt(np.sum(x * x)), eps)
    for _ in range(steps):
        A = x @ x.T
        B = b * A + c * A @ A
        x = a * x + B @ x
    return x.T if g.shape[0] > g.shape[1] else x


def muon_reference(p, grads, lr, mu, nesterov, wd, steps, adjust=None):
    """Muon as in torch.optim.Muon, written for (in, out) weights (fan_out = shape[1])."""
    p = p.astype(np.float64).copy()
    buf = np.zeros_like(p)
    fan_in, fan_out = p.shape[0], int(np.prod(p.shape[1:]))
    ratio = 0.2 * math.sqrt(max(fan_in, fan_out)) if adjust == "match_rms_adamw" \
        else math.sqrt(max(1.0, fan_out / fan_in))
    for g in grads:
        buf = mu * buf + (1 - mu) * g
        u = (1 - mu) * g + mu * buf if nesterov else buf
        o = ns_reference(u.reshape(u.shape[0], -1), steps).reshape(p.shape)
        p = p * (1 - lr * wd) - lr * ratio * o
    return p, buf


def adamw_reference(p, grads, lr, betas, eps, wd):
    p = p.astype(np.float64).copy()
    m, v = np.zeros_like(p), np.zeros_like(p)
    b1, b2 = betas
    for t, g in enumerate(grads, 1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


def _run(opt_cls, p0, grads, dtype=np.float64, **kw):
    p = Tensor(p0.astype(dtype), requires_grad=True, dtype=dtype)
    opt = opt_cls([p], **kw)
    for g in grads:
        p.grad = g.astype(dtype)
        opt.step()
    return p, opt


# ----------------------------------------------------------------------------- Lion

@pytest.mark.parametrize("shape", [(7, 3), (1,), (4, 1, 5), (0, 3), ()])
@pytest.mark.parametrize("wd", [0.0, 0.3])
def test_lion_matches_float64_reference(shape, wd):
    p0 = RNG.standard_normal(shape)
    grads = [RNG.standard_normal(shape) for _ in range(12)]
    p, opt = _run(Lion, p0, grads, lr=0.01, betas=(0.9, 0.99), weight_decay=wd)
    ref_p, ref_m = lion_reference(p0, grads, 0.01, (0.9, 0.99), wd)
    np.testing.assert_allclose(p.data, ref_p, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(opt.state[p]["exp_avg"], ref_m, rtol=1e-12, atol=1e-14)


def test_lion_float32_tracks_reference():
    p0, grads = RNG.standard_normal((6, 5)), [RNG.standard_normal((6, 5)) for _ in range(10)]
    p, _ = _run(Lion, p0, grads, dtype=np.float32, lr=3e-3, betas=(0.95, 0.98), weight_decay=0.1)
    assert p.data.dtype == np.float32
    np.testing.assert_allclose(p.data, lion_reference(p0, grads, 3e-3, (0.95, 0.98), 0.1)[0], atol=1e-5)


def test_lion_update_is_plus_minus_lr():
    p0 = RNG.standard_normal((9,))
    g = RNG.standard_normal((9,))
    p, _ = _run(Lion, p0, [g], lr=0.05)
    np.testing.assert_allclose(np.abs(p.data - p0), 0.05, rtol=1e-12)
    np.testing.assert_array_equal(np.sign(p0 - p.data), np.sign(g))


# ----------------------------------------------------------------------------- Muon

def test_newton_schulz_classic_coefficients_converge_to_polar_factor():
    # With the cubic coefficients (1.5, -0.5, 0) the iteration converges to U V^T exactly.
    u, _, vt = np.linalg.svd(RNG.standard_normal((6, 9)), full_matrices=False)
    g = u @ np.diag([3.0, 2.5, 2.0, 1.5, 1.2, 1.0]) @ vt
    out = newton_schulz_orthogonalize(g, steps=60, coefficients=(1.5, -0.5, 0.0))
    np.testing.assert_allclose(out, u @ vt, atol=1e-8)
    out_t = newton_schulz_orthogonalize(g.T.copy(), steps=60, coefficients=(1.5, -0.5, 0.0))
    np.testing.assert_allclose(out_t, (u @ vt).T, atol=1e-8)


def test_newton_schulz_quintic_flattens_the_spectrum():
    g = RNG.standard_normal((16, 40)) * np.logspace(0, 3, 40)  # badly conditioned
    s = np.linalg.svd(newton_schulz_orthogonalize(g, steps=5), compute_uv=False)
    assert s.min() > 0.3 and s.max() < 1.3  # every direction moves at a similar rate
    np.testing.assert_allclose(newton_schulz_orthogonalize(g, 5), ns_reference(g, 5), atol=1e-10)


@pytest.mark.parametrize("shape", [(7, 3), (3, 7), (5, 5), (1, 4), (3, 2, 4)])
@pytest.mark.parametrize("nesterov", [True, False])
def test_muon_matches_float64_reference(shape, nesterov):
    p0 = RNG.standard_normal(shape)
    grads = [RNG.standard_normal(shape) for _ in range(6)]
    p, opt = _run(Muon, p0, grads, lr=0.02, momentum=0.9, nesterov=nesterov, weight_decay=0.05, ns_steps=5)
    ref_p, ref_buf = muon_reference(p0, grads, 0.02, 0.9, nesterov, 0.05, 5)
    np.testing.assert_allclose(p.data, ref_p, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(opt.state[p]["momentum_buffer"], ref_buf, rtol=1e-12)


def test_muon_match_rms_adamw_scaling():
    p0, grads = RNG.standard_normal((4, 6)), [RNG.standard_normal((4, 6)) for _ in range(3)]
    p, _ = _run(Muon, p0, grads, lr=0.01, adjust_lr_fn="match_rms_adamw", weight_decay=0.0)
    ref, _ = muon_reference(p0, grads, 0.01, 0.95, True, 0.0, 5, adjust="match_rms_adamw")
    np.testing.assert_allclose(p.data, ref, rtol=1e-10, atol=1e-12)


def test_muon_vectors_fall_back_to_adamw():
    p0, grads = RNG.standard_normal((5,)), [RNG.standard_normal((5,)) for _ in range(7)]
    p, opt = _run(Muon, p0, grads, lr=0.02, weight_decay=0.1, fallback_lr=1e-2, fallback_betas=(0.8, 0.9))
    np.testing.assert_allclose(p.data, adamw_reference(p0, grads, 1e-2, (0.8, 0.9), 1e-8, 0.1), rtol=1e-12)
    assert "exp_avg_sq" in opt.state[p] and "momentum_buffer" not in opt.state[p]


@pytest.mark.parametrize("shape", [(5,), ()])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_muon_fallback_is_the_core_adamw_to_the_bit(shape, dtype):
    """One Adam implementation: Muon's fallback calls the core's adam_update, so its numbers
    and state are AdamW's exactly, not merely close."""
    p0, grads = RNG.standard_normal(shape), [RNG.standard_normal(shape) for _ in range(7)]
    p, opt = _run(Muon, p0, grads, dtype=dtype, lr=0.02, weight_decay=0.1, fallback_lr=1e-2,
                  fallback_betas=(0.8, 0.9), fallback_eps=1e-6)
    q, ref = _run(AdamW, p0, grads, dtype=dtype, lr=1e-2, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.1)
    np.testing.assert_array_equal(p.data, q.data)
    for name in ("exp_avg", "exp_avg_sq", "step"):
        np.testing.assert_array_equal(opt.state[p][name], ref.state[q][name])


def test_muon_matches_torch_when_installed():
    torch = pytest.importorskip("torch")
    if not hasattr(torch.optim, "Muon"):
        pytest.skip("this torch has no torch.optim.Muon")
    w0 = RNG.standard_normal((8, 12)).astype(np.float32)   # TinyTorch (in, out)
    grads = [RNG.standard_normal((8, 12)).astype(np.float32) for _ in range(3)]
    p, _ = _run(Muon, w0, grads, dtype=np.float32, lr=0.02, weight_decay=0.1)
    tw = torch.nn.Parameter(torch.tensor(w0.T.copy()))      # PyTorch (out, in)
    topt = torch.optim.Muon([tw], lr=0.02, weight_decay=0.1)
    for g in grads:
        tw.grad = torch.tensor(g.T.copy())
        topt.step()
    # PyTorch runs Newton-Schulz in bfloat16 (8-bit significand): compare the total update.
    ours, theirs = p.data - w0, tw.detach().numpy().T - w0
    assert np.linalg.norm(ours - theirs) / np.linalg.norm(theirs) < 0.03


def test_frozen_and_gradless_parameters_are_skipped_and_state_round_trips():
    lin = Linear(4, 3)
    lin.bias.requires_grad = False
    before_bias = lin.bias.data.copy()
    opt = Muon(lin.parameters(), lr=0.02)
    lin.weight.grad = RNG.standard_normal((4, 3)).astype(np.float32)
    lin.bias.grad = RNG.standard_normal((3,)).astype(np.float32)
    opt.step()
    np.testing.assert_array_equal(lin.bias.data, before_bias)
    assert lin.bias not in opt.state and not lin.bias.requires_grad
    sd = opt.state_dict()
    other = Muon(lin.parameters(), lr=0.5)
    other.load_state_dict(sd)
    assert other.lr == 0.02
    np.testing.assert_array_equal(other.state[lin.weight]["momentum_buffer"],
                                  opt.state[lin.weight]["momentum_buffer"])
    lion = Lion(lin.parameters(), lr=1e-3)
    lion.step()
    Lion(lin.parameters()).load_state_dict(lion.state_dict())


def test_bad_hyperparameters():
    p = [Tensor(np.zeros((2, 2), np.float32), requires_grad=True)]
    with pytest.raises(ValueError, match="betas"):
        Lion(p, betas=(1.5, 0.9))
    with pytest.raises(ValueError, match="weight_decay"):
        Lion(p, weight_decay=-1)
    with pytest.raises(ValueError, match="momentum"):
        Muon(p, momentum=1.0)
    with pytest.raises(ValueError, match="ns_steps"):
        Muon(p, ns_steps=-1)
    with pytest.raises(ValueError, match="adjust_lr_fn"):
        Muon(p, adjust_lr_fn="bogus")
    with pytest.raises(ValueError, match="learning rate"):
        Muon(p, lr=-1.0)
    with pytest.raises(ValueError, match="matrix"):
        newton_schulz_orthogonalize(np.zeros(3))
