"""Real float16 training: to_half, float32 master weights, and the loss scalers together."""
import numpy as np
import pytest

from contract import check_tensor_in_tensor_out
from tinytorch.core import acceleration
from tinytorch.core import random as tt_random
from tinytorch.core.activations import GELU
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.optimizers import SGD, AdamW, CosineAnnealingLR
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import DynamicLossScaler, MixedPrecisionOptimizer, to_float, to_half

RNG = np.random.default_rng(17)


def _mlp(seed=0):
    tt_random.manual_seed(seed)
    return Sequential(Linear(8, 16), GELU(), Linear(16, 4))


def test_half_model_runs_float16_forward_and_backward_through_the_dispatch_point():
    model = to_half(_mlp())
    assert all(p.dtype == np.float16 for p in model.parameters())
    x = RNG.standard_normal((5, 8)).astype(np.float16)
    out, grads = check_tensor_in_tensor_out(lambda t: model(t), [x])
    assert out.dtype == np.float16 and grads[0].dtype == np.float16
    assert acceleration.last_path() not in ("", "none")  # the f16 matmuls went through acceleration
    assert all(p.grad.dtype == np.float16 for p in model.parameters())
    # float16 result close to the float32 model on the same (float16-rounded) weights
    ref = to_float(_mlp())
    for p, q in zip(ref.parameters(), model.parameters()):
        p.data[...] = q.data.astype(np.float32)
    np.testing.assert_allclose(out.data, ref(Tensor(x.astype(np.float32))).data, atol=2e-2, rtol=2e-2)


def test_half_model_matmuls_take_the_native_float16_gemm():
    from tinytorch import native
    if not native.available():
        pytest.skip("the native runtime is not loaded: float16 matmuls use NumPy")
    tt_random.manual_seed(3)
    model = to_half(Sequential(Linear(64, 96), GELU(), Linear(96, 32)))
    x = Tensor(RNG.standard_normal((48, 64)).astype(np.float16), requires_grad=True)
    out = model(x)
    assert acceleration.last_path().startswith("native:hgemm"), acceleration.last_path()
    (out.astype(np.float32) ** 2).sum().backward()
    assert acceleration.last_path().startswith("native:hgemm"), acceleration.last_path()
    # the same computation in float64 from the float16 weights and input
    w1, b1, w2, b2 = (p.data.astype(np.float64) for p in model.parameters())
    u = x.data.astype(np.float64) @ w1 + b1
    h = 0.5 * u * (1 + np.tanh(0.7978845608028654 * (u + 0.044715 * u ** 3)))
    np.testing.assert_allclose(out.data.astype(np.float64), h @ w2 + b2, rtol=2e-2, atol=3e-2)


def test_master_step_is_a_float32_step_written_back_as_float16():
    model = to_half(_mlp())
    opt = MixedPrecisionOptimizer(model.parameters(), SGD, lr=0.1, momentum=0.9)
    assert all(m.dtype == np.float32 for m in opt.params) and len(opt.params) == 4
    x = Tensor(RNG.standard_normal((6, 8)).astype(np.float16))
    (model(x).astype(np.float32) ** 2).mean().backward()
    before = [m.data.copy() for m in opt.params]
    grads = [p.grad.astype(np.float32) for p in model.parameters()]
    opt.step()
    for m, p, b, g in zip(opt.params, model.parameters(), before, grads):
        np.testing.assert_allclose(m.data, b - 0.1 * g, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(p.data, m.data.astype(np.float16))
    opt.zero_grad()
    assert all(p.grad is None for p in model.parameters()) and all(m.grad is None for m in opt.params)


def test_master_weights_keep_updates_that_float16_cannot_hold():
    # update 1e-4 on a weight of 1.0: below half a float16 ulp (2^-10 / 2), lost every time in float16
    w16 = Tensor(np.ones(4, np.float16), requires_grad=True)
    plain = SGD([w16], lr=1e-4)
    wm = Tensor(np.ones(4, np.float16), requires_grad=True)
    mixed = MixedPrecisionOptimizer([wm], SGD, lr=1e-4)
    for _ in range(50):
        w16.grad = np.ones(4, np.float16)
        plain.step()
        wm.grad = np.ones(4, np.float16)
        mixed.step()
    np.testing.assert_array_equal(w16.data, 1.0)  # stalled
    np.testing.assert_allclose(mixed.params[0].data, 1.0 - 50 * 1e-4, rtol=1e-6)
    np.testing.assert_array_equal(wm.data, np.float16(1.0 - 50 * 1e-4))


def _train(mode, steps=25, loss_weight=1.0, init_scale=2.0 ** 16):
    """Regression on fixed data; mode is 'fp32', 'fp16' (no scaling) or 'fp16+scaler'."""
    model = _mlp(seed=1)
    data = np.random.default_rng(5)
    x = data.standard_normal((32, 8)).astype(np.float32)
    y = data.standard_normal((32, 4)).astype(np.float32)
    if mode == "fp32":
        opt = AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    else:
        to_half(model)
        x = x.astype(np.float16)
        opt = MixedPrecisionOptimizer(model.parameters(), AdamW, lr=3e-3, weight_decay=0.0)
    scaler = DynamicLossScaler(init_scale=init_scale, growth_interval=10) if mode == "fp16+scaler" else None
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        err = model(Tensor(x)).astype(np.float32) - Tensor(y)
        loss = (err * err).mean()
        losses.append(loss.item())
        weighted = loss * loss_weight
        if scaler is None:
            weighted.backward()
            opt.step()
        else:
            scaler.scale(weighted).backward()
            scaler.step(opt)
            scaler.update()
    return np.array(losses), model, scaler


def test_fp16_with_dynamic_scaling_tracks_fp32_where_unscaled_fp16_stalls():
    # A loss weight of 1e-8 puts every gradient below float16's range; float32 still trains
    # (Adam divides the weight out, up to its eps).
    fp32, _, _ = _train("fp32", loss_weight=1e-8)
    fp16, model16, _ = _train("fp16", loss_weight=1e-8)
    scaled, _, scaler = _train("fp16+scaler", loss_weight=1e-8)
    assert fp32[-1] < 0.99 * fp32[0]
    np.testing.assert_array_equal(fp16, fp16[0])  # stalled: every gradient underflowed to zero
    assert all(p.grad is None or not p.grad.any() for p in model16.parameters())
    np.testing.assert_allclose(scaled, fp32, rtol=5e-2)
    assert scaler.steps_skipped == 0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_induced_overflow_skips_steps_and_backs_off():
    # 2^24 times gradients of ~1e-2 is far above float16's 65504: overflow until the scale backs off
    losses, _, scaler = _train("fp16+scaler", steps=16, init_scale=2.0 ** 24)
    skipped = [h for h in scaler.history if h["skipped"]]
    assert len(skipped) >= 1
    scales = [h["scale"] for h in scaler.history]
    assert scales[0] == 2.0 ** 24 and all(b == a * 0.5 for a, b, h in zip(scales, scales[1:], scaler.history)
                                          if h["skipped"])
    assert not scaler.history[-1]["skipped"] and scales[-1] < 65504.0 * 4
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_scheduler_and_state_dict_drive_the_inner_optimizer():
    model = to_half(_mlp())
    opt = MixedPrecisionOptimizer(model, AdamW, lr=1e-2)
    sched = CosineAnnealingLR(opt, T_max=4)
    x = Tensor(RNG.standard_normal((3, 8)).astype(np.float16))
    for _ in range(2):
        opt.zero_grad()
        model(x).astype(np.float32).sum().backward()
        opt.step()
        sched.step()
    assert opt.inner.lr == opt.lr and opt.lr < 1e-2
    sd = opt.state_dict()
    model2 = to_half(_mlp(seed=9))
    opt2 = MixedPrecisionOptimizer(model2, AdamW, lr=1e-2)
    opt2.load_state_dict(sd)
    for p, q in zip(model.parameters(), model2.parameters()):
        np.testing.assert_array_equal(p.data, q.data)
    np.testing.assert_array_equal(opt2.inner.state[opt2.params[0]]["exp_avg"],
                                  opt.inner.state[opt.params[0]]["exp_avg"])


def test_bad_arguments():
    model = to_half(_mlp())
    with pytest.raises(TypeError, match="optimizer_cls"):
        MixedPrecisionOptimizer(model, AdamW(model.parameters()))
    with pytest.raises(TypeError, match="float16 or float32"):
        MixedPrecisionOptimizer([Tensor(np.zeros(2), requires_grad=True, dtype=np.float64)], SGD)
    with pytest.raises(ValueError, match="no trainable"):
        MixedPrecisionOptimizer([Tensor(np.zeros(2, np.float16))], SGD)
    with pytest.raises(TypeError, match="Layer"):
        to_half([1, 2])
    with pytest.raises(KeyError, match="master"):
        MixedPrecisionOptimizer(model, SGD).load_state_dict({"inner": {}})
