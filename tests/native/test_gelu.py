"""The native fused bias + GELU through tinytorch.core.acceleration: forward and backward
against a float64 reference over random and extreme inputs (+-1e30, +-inf, NaN,
denormals), proof that the native kernel of the active ISA ran, agreement with the
NumPy path, the reference kernels of the runtime, and training parity: a Linear + GELU
model trained with the native kernels matches the same model trained on NumPy.

Every test runs on 1 and 2 threads; CI runs the file once per ISA (TINYTORCH_ISA).
Tolerance follows float conditioning: z = 2 sqrt(2/pi)(u + 0.044715 u^3) is rounded to
float (~1e-7 relative), which moves exp(-|z|) by ~|z| 1e-7 relative.
"""
import numpy as np
import pytest

from tinytorch import _native, native
from tinytorch.core import acceleration as acc

RNG = np.random.default_rng(7)
S = np.sqrt(2.0 / np.pi)




def reference(u32):
    """(y, dy/du, |z|) in float64 from float32 u; tanh form where it is well conditioned,
    sigmoid form (no cancellation) elsewhere, limits at +-inf, NaN propagated."""
    u = u32.astype(np.float64)
    with np.errstate(all="ignore"):
        inner = S * (u + 0.044715 * u ** 3)
        z = 2 * inner
        e = np.exp(-np.abs(z))
        s = np.where(z >= 0, 1 / (1 + e), e / (1 + e))
        y = np.where(u >= -3, 0.5 * u * (1 + np.tanh(inner)), u * s)
        slope = u * 2 * S * (1 + 3 * 0.044715 * u ** 2) * (e / (1 + e) ** 2)
        dy = s + np.where(e == 0, 0.0, slope)
        terms = np.abs(s) + np.abs(np.where(e == 0, 0.0, slope))
    y = np.where(np.isposinf(u), np.inf, np.where(np.isneginf(u), 0.0, y))
    dy = np.where(np.isposinf(u), 1.0, np.where(np.isneginf(u), 0.0, dy))
    return y, dy, np.where(np.isfinite(z), np.abs(z), 0.0), terms


def check_forward(y, u32):
    want, _, az, _ = reference(u32)
    nan = np.isnan(u32)
    assert np.array_equal(np.isnan(y), nan), "NaN must propagate exactly where the input is NaN"
    with np.errstate(invalid="ignore"):  # inf - inf where both are inf: equal, handled first
        ok = nan | (y == want) | (np.abs(y - want) <= 5e-7 * (2 + az) * np.abs(want) + 1e-37)
    assert ok.all(), f"{(~ok).sum()} bad; e.g. u={u32[~ok][:3]} y={y[~ok][:3]} want={want[~ok][:3]}"


def check_backward(gx, u32, g):
    _, dy, az, terms = reference(u32)
    want = g.astype(np.float64) * dy
    nan = np.isnan(u32)
    assert np.array_equal(np.isnan(gx), nan)
    bound = 5e-7 * (2 + az) * np.abs(g.astype(np.float64)) * terms + 1e-37
    ok = nan | (gx == want) | (np.abs(gx - want) <= bound)
    assert ok.all(), f"{(~ok).sum()} bad; e.g. u={u32[~ok][:3]} gx={gx[~ok][:3]} want={want[~ok][:3]}"
    return want


SHAPES = [(1, 256), (16, 17), (3, 5, 33), (64, 768), (257, 300)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_forward_and_backward_match_float64(shape, with_bias, threads):
    x = (RNG.standard_normal(shape) * 3).astype(np.float32)
    bias = RNG.standard_normal(shape[-1]).astype(np.float32) if with_bias else None
    u = x if bias is None else (x + bias).astype(np.float32)
    y = acc.bias_gelu(x, bias)
    assert acc.last_path() == f"native:bias_gelu_forward:{native.isa()}"
    assert y.dtype == np.float32 and y.shape == x.shape
    check_forward(y, u)
    g = RNG.standard_normal(shape).astype(np.float32)
    gx, gb = acc.bias_gelu_backward(x, bias, g)
    assert acc.last_path() == f"native:bias_gelu_backward:{native.isa()}"
    want = check_backward(gx, u, g)
    if with_bias:
        want_b = want.reshape(-1, shape[-1]).sum(axis=0)
        scale = np.abs(want).reshape(-1, shape[-1]).sum(axis=0)
        assert gb.shape == (shape[-1],) and gb.dtype == np.float32
        np.testing.assert_array_less(np.abs(gb - want_b), 2e-5 * scale + 1e-30)
    else:
        assert gb is None


def test_extreme_inputs(threads):
    specials = np.array([0.0, -0.0, 1e30, -1e30, 1e10, -1e10, 1e-30, -1e-30, 1e-40, -1e-40,
                         np.finfo(np.float32).max, -np.finfo(np.float32).max, -5.0, -9.5,
                         -12.0, -60.0, 3.0, 100.0, np.inf, -np.inf, np.nan, -0.7518],
                        dtype=np.float32)
    x = np.tile(specials, 20).reshape(20, -1)  # 440 elements: above the native threshold
    with np.errstate(all="ignore"):
        y = acc.bias_gelu(x, None)
    assert acc.last_path() == f"native:bias_gelu_forward:{native.isa()}"
    check_forward(y, x)
    assert np.all(y[:, 2] == np.float32(1e30)) and np.all(y[:, 3] == 0)
    assert np.all(y[:, 18] == np.inf) and np.all(y[:, 19] == 0) and np.all(np.isnan(y[:, 20]))
    finite = np.isfinite(x)
    assert np.all(np.isfinite(y[finite])), "no overflow or NaN for any finite input"
    g = np.ones_like(x)
    gx, _ = acc.bias_gelu_backward(x, None, g)
    check_backward(gx, x, g)
    assert np.all(np.isfinite(gx[finite]))
    assert np.all(gx[:, 18] == 1) and np.all(gx[:, 19] == 0)


def test_native_and_numpy_paths_agree_including_infinities(threads):
    x = (RNG.standard_normal((40, 70)) * 4).astype(np.float32)
    x[0, :4] = [np.inf, -np.inf, 1e30, -1e30]
    bias = RNG.standard_normal(70).astype(np.float32)
    g = RNG.standard_normal((40, 70)).astype(np.float32)
    y, (gx, gb) = acc.bias_gelu(x, bias), acc.bias_gelu_backward(x, bias, g)
    with acc.use_native(False):
        y_np, (gx_np, gb_np) = acc.bias_gelu(x, bias), acc.bias_gelu_backward(x, bias, g)
        assert acc.last_path() == "numpy"
    np.testing.assert_allclose(y, y_np, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(gx, gx_np, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(gb, gb_np, rtol=1e-4, atol=1e-5)


def test_runtime_reference_kernels_match_float64():
    x = (RNG.standard_normal((33, 65)) * 4).astype(np.float32)
    bias = RNG.standard_normal(65).astype(np.float32)
    g = RNG.standard_normal((33, 65)).astype(np.float32)
    y, gx, gb = np.empty_like(x), np.empty_like(x), np.empty(65, np.float32)
    f = _native.f32_ptr
    _native.check(_native.lib.tt_bias_gelu_forward_reference(f(x), f(bias), f(y), 33, 65))
    assert _native.last_kernel_path() == "bias_gelu_forward:reference"
    _native.check(_native.lib.tt_bias_gelu_backward_reference(f(x), f(bias), f(g), f(gx), f(gb), 33, 65))
    u = (x + bias).astype(np.float32)
    check_forward(y, u)
    want = check_backward(gx, u, g)
    np.testing.assert_allclose(gb, want.sum(axis=0), rtol=1e-5, atol=1e-6)


def test_non_float32_and_tiny_inputs_use_numpy():
    x = RNG.standard_normal((8, 300))
    y = acc.bias_gelu(x, None)
    assert y.dtype == np.float64 and acc.last_path() == "numpy"
    acc.bias_gelu(np.ones((2, 3), np.float32), None)
    assert acc.last_path() == "numpy"


def test_bad_arguments_from_python():
    x = np.ones((4, 4), np.float32)
    f = _native.f32_ptr
    with pytest.raises(ValueError, match="rows=-1"):
        _native.check(_native.lib.tt_bias_gelu_forward(f(x), None, f(x), -1, 4))
    with pytest.raises(ValueError, match="grad_y is NULL"):
        _native.check(_native.lib.tt_bias_gelu_backward(f(x), None, None, f(x), None, 4, 4))


def test_training_linear_gelu_matches_numpy_path():
    """A few SGD steps of Linear -> GELU -> Linear: native kernels vs the NumPy path."""
    from tinytorch.core.activations import GELU
    from tinytorch.core.layers import Linear, Sequential
    from tinytorch.core.losses import mse_loss
    from tinytorch.core.optimizers import SGD
    from tinytorch.core.tensor import Tensor

    data = np.random.default_rng(3)
    x = data.standard_normal((64, 48)).astype(np.float32)
    t = data.standard_normal((64, 8)).astype(np.float32)
    init = [data.uniform(-0.2, 0.2, s).astype(np.float32) for s in [(48, 96), (96,), (96, 8), (8,)]]

    def train(native_on: bool):
        model = Sequential(Linear(48, 96), GELU(), Linear(96, 8))
        params = [model.layers[0].weight, model.layers[0].bias, model.layers[2].weight,
                  model.layers[2].bias] if hasattr(model, "layers") else list(model.parameters())
        for p, v in zip(params, init):
            p.data[...] = v
        opt = SGD(list(model.parameters()), lr=0.05)
        paths = set()
        with acc.use_native(native_on):
            for _ in range(5):
                opt.zero_grad()
                loss = mse_loss(model(Tensor(x)), Tensor(t))
                loss.backward()
                paths.add(acc.last_path())
                opt.step()
        return [p.data.copy() for p in params], float(loss.data), paths

    p_native, loss_native, paths_native = train(True)
    p_numpy, loss_numpy, paths_numpy = train(False)
    assert paths_numpy == {"numpy"}
    assert any(p.startswith("native:") for p in paths_native), paths_native
    assert abs(loss_native - loss_numpy) <= 1e-4 * max(1.0, abs(loss_numpy))
    for a, b in zip(p_native, p_numpy):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
