"""LossScaler / DynamicLossScaler: real float16 backprop of small gradients, the unscale-once
rule, skipped steps and scale adaptation (against torch.amp.GradScaler when installed)."""
import numpy as np
import pytest

from contract import check_gradcheck, check_ndarray_in_ndarray_out, check_tensor_in_tensor_out
from tinytorch.core.layers import Linear
from tinytorch.core.optimizers import SGD
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import DynamicLossScaler, LossScaler, MixedPrecisionOptimizer, to_half
from tinytorch.extensions.loss_scaler import grads_are_finite

RNG = np.random.default_rng(3)


def test_scale_keeps_the_contract():
    scaler = LossScaler(1024.0)
    x = RNG.standard_normal((3, 2)).astype(np.float32)
    check_ndarray_in_ndarray_out(scaler.scale, [x], reference=lambda a: 1024.0 * a)
    out, (g,) = check_tensor_in_tensor_out(scaler.scale, [x], reference=lambda a: 1024.0 * a)
    assert out.dtype == np.float32
    check_gradcheck(scaler.scale, [RNG.standard_normal((2, 2))])


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
def test_scale_of_a_float16_loss_is_float32_and_finite():
    loss = Tensor(np.array(3.0, np.float16), requires_grad=True)
    scaled = LossScaler(65536.0).scale(loss)
    assert scaled.dtype == np.float32 and scaled.item() == 3.0 * 65536.0  # float16 would be inf
    scaled.backward()
    assert loss.grad.dtype == np.float16 and np.isinf(loss.grad)  # 65536 > float16 max: overflow


def _half_weight_grad(true_grad, scaler=None):
    """Backprop ``loss = true_grad * sum(x W)`` (loss in float32, model in float16) with x = 1,
    so d loss / dW = true_grad exactly. Returns the float32 weight gradient the optimizer sees."""
    lin = to_half(Linear(4, 3, bias=False))
    opt = MixedPrecisionOptimizer(lin.parameters(), SGD, lr=0.0)
    x = Tensor(np.ones((1, 4), np.float16))
    loss = lin(x).astype(np.float32).sum() * true_grad
    if scaler is None:
        loss.backward()
        opt.sync_grads()
    else:
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    return lin.weight.grad, opt.params[0].grad


@pytest.mark.parametrize("true_grad", [1e-3, 1e-7, 2e-9])
def test_small_gradients_survive_float16_backprop_with_scaling(true_grad):
    half_grad, master_grad = _half_weight_grad(true_grad, LossScaler(65536.0))
    assert half_grad.dtype == np.float16 and master_grad.dtype == np.float32
    # the scaled gradient is a normal float16: relative rounding error <= 2^-11
    np.testing.assert_allclose(master_grad, true_grad, rtol=2.0 ** -11)


def test_without_scaling_float16_loses_the_small_gradients():
    g3, _ = _half_weight_grad(1e-3)
    np.testing.assert_allclose(g3.astype(np.float64), 1e-3, rtol=2.0 ** -11)
    g7, _ = _half_weight_grad(1e-7)          # subnormal: rounds to 2 * 2^-24
    np.testing.assert_array_equal(g7, np.float16(2.0 ** -23))
    assert abs(float(g7[0, 0]) - 1e-7) / 1e-7 > 0.15
    g9, _ = _half_weight_grad(2e-9)          # below half the smallest subnormal: zero
    assert np.all(g9 == 0)


def _model_and_opt(lr=0.1):
    lin = Linear(3, 2)
    return lin, SGD(lin.parameters(), lr=lr)


def test_unscale_divides_once_and_refuses_a_second_call():
    lin, opt = _model_and_opt()
    scaler = LossScaler(8.0)
    x = Tensor(RNG.standard_normal((5, 3)).astype(np.float32))
    scaler.backward(lin(x).sum())
    expected = lin.weight.grad / 8.0
    assert scaler.unscale_(opt)
    np.testing.assert_allclose(lin.weight.grad, expected, rtol=1e-7)
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    np.testing.assert_allclose(lin.weight.grad, expected, rtol=1e-7)  # not divided twice
    w = lin.weight.data.copy()
    scaler.step(opt)  # uses the already-unscaled gradients
    np.testing.assert_allclose(lin.weight.data, w - 0.1 * expected, rtol=1e-6)


def test_static_scaler_two_line_loop_equals_unscaled_sgd():
    lin, opt = _model_and_opt(lr=0.05)
    ref, ref_opt = _model_and_opt(lr=0.05)
    ref.load_state_dict(lin.state_dict())
    scaler = LossScaler(1024.0)
    for _ in range(4):
        x = Tensor(RNG.standard_normal((4, 3)).astype(np.float32))
        opt.zero_grad()
        ref_opt.zero_grad()
        scaler.backward((lin(x) ** 2).mean())
        scaler.step(opt)               # no update(): the fixed scaler ends the step here
        (ref(x) ** 2).mean().backward()
        ref_opt.step()
    np.testing.assert_allclose(lin.weight.data, ref.weight.data, rtol=1e-5, atol=1e-6)
    assert scaler.steps_skipped == 0


def test_non_finite_gradient_skips_the_step():
    lin, opt = _model_and_opt()
    w, b = lin.weight.data.copy(), lin.bias.data.copy()
    scaler = LossScaler(4.0)
    lin.weight.grad = np.ones((3, 2), np.float32)
    lin.bias.grad = np.array([1.0, np.nan], np.float32)
    assert scaler.step(opt) is None
    np.testing.assert_array_equal(lin.weight.data, w)
    np.testing.assert_array_equal(lin.bias.data, b)
    assert scaler.steps_skipped == 1 and scaler.history[-1]["skipped"]


def test_grads_are_finite_one_pass():
    assert grads_are_finite([np.ones(3, np.float16), None, np.zeros(0)])
    assert not grads_are_finite([np.ones(3), np.array([np.inf, -np.inf])])
    assert not grads_are_finite([np.array([1.0, np.nan], np.float32)])
    big = np.full(10, 3e38, np.float32)  # finite elements whose float32 sum overflows
    assert grads_are_finite([big])


def test_dynamic_backoff_growth_and_state_dict():
    lin, opt = _model_and_opt()
    scaler = DynamicLossScaler(init_scale=1024.0, growth_interval=3)
    pattern = [False, True, False, False, False, True, False]  # True: inject an inf gradient
    scales = []
    for bad in pattern:
        lin.weight.grad = np.ones((3, 2), np.float32)
        lin.bias.grad = np.array([np.inf if bad else 1.0, 1.0], np.float32)
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    # 1024 -> overflow: 512 -> 3 clean steps: 1024 -> overflow: 512 -> 1 clean
    assert scales == [1024.0, 512.0, 512.0, 512.0, 1024.0, 512.0, 512.0]
    assert scaler.steps_skipped == 2
    sd = scaler.state_dict()
    assert sd == {"scale": 512.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3,
                  "_growth_tracker": 1}
    other = DynamicLossScaler()
    other.load_state_dict(sd)
    assert other.state_dict() == sd
    with pytest.raises(KeyError, match="_growth_tracker"):
        other.load_state_dict({"scale": 1.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                               "growth_interval": 3})


def test_dynamic_protocol_errors():
    lin, opt = _model_and_opt()
    scaler = DynamicLossScaler()
    with pytest.raises(RuntimeError, match="nothing to update"):
        scaler.update()
    lin.weight.grad, lin.bias.grad = np.ones((3, 2), np.float32), np.ones(2, np.float32)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="update"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    scaler.update(new_scale=8.0)
    assert scaler.get_scale() == 8.0


def test_bad_arguments():
    with pytest.raises(ValueError, match="scale"):
        LossScaler(0.0)
    with pytest.raises(ValueError, match="growth_factor"):
        DynamicLossScaler(growth_factor=1.0)
    with pytest.raises(ValueError, match="backoff_factor"):
        DynamicLossScaler(backoff_factor=1.5)
    with pytest.raises(ValueError, match="growth_interval"):
        DynamicLossScaler(growth_interval=0)
    with pytest.raises(TypeError, match="params"):
        LossScaler().unscale_(object())
    with pytest.raises(TypeError, match="Tensor loss"):
        LossScaler().backward(1.0)


def test_scale_trajectory_matches_torch_grad_scaler():
    torch = pytest.importorskip("torch")
    pattern = [False, False, True, False, False, False, False, True, True, False, False, False]
    tw = torch.nn.Parameter(torch.ones(2))
    topt = torch.optim.SGD([tw], lr=0.1)
    tscaler = torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2)
    lin, opt = _model_and_opt()
    scaler = DynamicLossScaler(init_scale=256.0, growth_interval=2)
    ours, theirs = [], []
    for bad in pattern:
        tscaler.scale(torch.tensor(1.0))  # GradScaler initialises its scale lazily here
        tw.grad = torch.tensor([float("inf") if bad else 1.0, 1.0])
        tscaler.step(topt)
        tscaler.update()
        theirs.append(tscaler.get_scale())
        lin.weight.grad = np.ones((3, 2), np.float32)
        lin.bias.grad = np.array([np.inf if bad else 1.0, 1.0], np.float32)
        scaler.step(opt)
        scaler.update()
        ours.append(scaler.get_scale())
    assert ours == theirs
