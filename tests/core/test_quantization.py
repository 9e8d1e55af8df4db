"""INT8 quantization: the affine maps against float64 formulas and PyTorch, error bounds,
QuantizedLinear's exact int32 path, and error and size reduction on a trained model."""
import numpy as np
import pytest

from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.activations import ReLU
from tinytorch.core.losses import cross_entropy
from tinytorch.core.optimizers import Adam
from tinytorch.core.quantization import (QuantizedLinear, compute_qparams, dequantize, model_size_bytes,
                                         quantization_error, quantize, quantize_int8, quantize_model,
                                         quantize_rows, size_report)
from tinytorch.core.random import manual_seed
from tinytorch.core.tensor import Tensor
from tinytorch.data import digits_split

SHAPES = [(1,), (7,), (3, 5), (4, 1), (2, 3, 5), (13, 11)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("symmetric", [True, False])
def test_per_tensor_round_trip_error_is_at_most_half_a_step(rng, shape, symmetric):
    x = (rng.standard_normal(shape) * rng.uniform(0.1, 10)).astype(np.float32)
    qt = quantize_int8(x, symmetric=symmetric)
    assert qt.q.dtype == np.int8
    scale = float(qt.params.scale)
    back = qt.dequantize()
    assert np.max(np.abs(back - x)) <= scale / 2 * (1 + 1e-5) + 1e-7
    lo, hi = min(x.min(), 0), max(x.max(), 0)
    if symmetric:
        assert qt.params.zero_point == 0
        np.testing.assert_allclose(scale, max(-lo, hi) / 127, rtol=1e-6)
        assert qt.q.min() >= -127
    else:
        np.testing.assert_allclose(scale, (hi - lo) / 255, rtol=1e-6)
        assert qt.q.min() >= -128 and qt.q.max() <= 127
    # zero is always represented exactly (padding and ReLU zeros stay zero)
    assert dequantize(quantize(np.zeros(3, np.float32), qt.params), qt.params).tolist() == [0.0, 0.0, 0.0]


def test_quantize_matches_float64_formula(rng):
    x = rng.uniform(-3, 5, size=(6, 9)).astype(np.float32)
    qp = compute_qparams(x, symmetric=False)
    s, zp = float(qp.scale), int(qp.zero_point)
    expected = np.clip(np.round(x.astype(np.float64) / s) + zp, -128, 127)
    got = quantize(x, qp).astype(np.float64)
    # float32 reciprocal vs float64 division can only disagree on exact half-way points
    assert np.max(np.abs(got - expected)) <= 1
    assert np.mean(got != expected) < 0.01
    np.testing.assert_allclose(dequantize(quantize(x, qp), qp), (got - zp) * s, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("axis", [0, 1])
def test_per_channel_uses_each_channels_range(rng, symmetric, axis):
    # channels with wildly different ranges: per-channel keeps the small ones precise
    scales = np.array([0.01, 1.0, 100.0, 3.0, 0.5])
    x = (rng.standard_normal((5, 5)) * (scales[:, None] if axis == 0 else scales[None, :])).astype(np.float32)
    pc = quantize_int8(x, symmetric=symmetric, per_channel=True, axis=axis)
    pt = quantize_int8(x, symmetric=symmetric)
    assert pc.params.scale.shape == (5,)
    for c in range(5):
        xc = np.take(x, c, axis=axis)
        ref = compute_qparams(xc, symmetric=symmetric)  # per-channel == per-tensor on that channel
        np.testing.assert_array_equal(np.take(pc.q, c, axis=axis), quantize(xc, ref))
    err_pc = quantization_error(x, pc.dequantize())
    err_pt = quantization_error(x, pt.dequantize())
    assert err_pc["rmse"] <= err_pt["rmse"]
    small = np.take(x, 0, axis=axis)
    assert np.max(np.abs(np.take(pc.dequantize(), 0, axis=axis) - small)) < 0.01 * np.abs(small).max()


@pytest.mark.filterwarnings("ignore:.*quantize_per_tensor.*:UserWarning")
def test_quantize_matches_torch(rng):
    torch = pytest.importorskip("torch")
    x = (rng.standard_normal((8, 6)) * 2).astype(np.float32)
    for symmetric in (True, False):
        qp = compute_qparams(x, symmetric=symmetric)
        tq = torch.quantize_per_tensor(torch.from_numpy(x), float(qp.scale), int(qp.zero_point), torch.qint8)
        np.testing.assert_array_equal(quantize(x, qp), tq.int_repr().numpy())
        np.testing.assert_array_equal(dequantize(quantize(x, qp), qp), tq.dequantize().numpy())
        qc = compute_qparams(x, symmetric=symmetric, per_channel=True, axis=1)
        tqc = torch.quantize_per_channel(torch.from_numpy(x), torch.from_numpy(qc.scale.astype(np.float64)),
                                         torch.from_numpy(qc.zero_point.astype(np.int64)), 1, torch.qint8)
        np.testing.assert_array_equal(quantize(x, qc), tqc.int_repr().numpy())


def test_all_zero_and_bad_input():
    qt = quantize_int8(np.zeros((3, 4), np.float32), per_channel=True, axis=1)
    assert np.all(qt.q == 0) and np.all(qt.dequantize() == 0)
    with pytest.raises(TypeError, match="floating-point"):
        quantize_int8(np.arange(4))
    with pytest.raises(ValueError, match="NaN or inf"):
        quantize_int8(np.array([1.0, np.inf], np.float32))
    with pytest.raises(TypeError, match="int8"):
        dequantize(np.zeros(3, np.int32), qt.params)
    with pytest.raises(ValueError, match="shapes differ"):
        quantization_error(np.zeros(3), np.zeros(4))


def test_quantization_error_metrics():
    x = np.array([1.0, -2.0, 3.0, 0.0])
    xh = np.array([1.1, -2.0, 2.8, 0.0])
    e = quantization_error(x, xh)
    np.testing.assert_allclose(e["max_abs_error"], 0.2)
    np.testing.assert_allclose(e["mean_abs_error"], 0.075)
    np.testing.assert_allclose(e["rmse"], np.sqrt((0.01 + 0.04) / 4))
    np.testing.assert_allclose(e["sqnr_db"], 10 * np.log10((1 + 4 + 9) / 4 / ((0.01 + 0.04) / 4)))
    assert quantization_error(x, x)["sqnr_db"] == float("inf")


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 7), (1, 7)])
@pytest.mark.parametrize("per_channel", [True, False])
def test_quantized_linear_integer_path_is_exact(rng, shape, per_channel):
    lin = Linear(7, 4)
    ql = QuantizedLinear.from_linear(lin, per_channel=per_channel)
    x = rng.standard_normal(shape).astype(np.float32)
    x2 = x.reshape(-1, 7)
    xq = ql.quantize_input(x2)
    assert xq.q.dtype == np.uint8 and xq.zero_point.shape == (x2.shape[0],)
    acc = ql.int_matmul(xq.q, xq.zero_point)
    assert acc.dtype == np.int32
    exact = (xq.q.astype(np.int64) - xq.zero_point[:, None]) @ ql.weight_q.astype(np.int64)
    np.testing.assert_array_equal(acc, exact)
    # the float output is the dequantized operands' product (float64 reference) plus bias
    ref = xq.dequantize().astype(np.float64) @ ql.dequantized_weight().astype(np.float64) + lin.bias.data
    out = ql(Tensor(x))
    assert isinstance(out, Tensor) and out.shape == shape[:-1] + (4,)
    np.testing.assert_allclose(out.data.reshape(-1, 4), ref, rtol=1e-5, atol=1e-5)
    # and close to the float layer
    float_out = lin(Tensor(x)).data
    assert np.max(np.abs(out.data - float_out)) < 0.05 * np.abs(float_out).max() + 1e-3
    assert ql.parameters() == []  # nothing trainable


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 7), (1, 7)])
def test_quantized_linear_reduce_range_is_exact_on_7_bit_inputs(rng, shape):
    lin = Linear(7, 4)
    ql = QuantizedLinear.from_linear(lin)
    ql8 = QuantizedLinear.from_linear(lin, reduce_range=False)
    assert ql.reduce_range and not ql8.reduce_range  # 7 bits by default, as PyTorch's dynamic Linear
    x = rng.standard_normal(shape).astype(np.float32)
    x2 = x.reshape(-1, 7)
    xq = ql.quantize_input(x2)
    assert xq.q.max() <= 127 and xq.zero_point.max() <= 127
    np.testing.assert_array_equal(xq.q, quantize_rows(x2).q)  # the layer's and the function's default agree
    np.testing.assert_array_equal(ql8.quantize_input(x2).q, quantize_rows(x2, reduce_range=False).q)
    assert ql8.quantize_input(x2).q.max() > 127  # 8 bits use the upper half
    acc = ql.int_matmul(xq.q, xq.zero_point)
    exact = (xq.q.astype(np.int64) - xq.zero_point[:, None]) @ ql.weight_q.astype(np.int64)
    np.testing.assert_array_equal(acc, exact)
    ref = xq.dequantize().astype(np.float64) @ ql.dequantized_weight().astype(np.float64) + lin.bias.data
    out = ql(Tensor(x))
    np.testing.assert_allclose(out.data.reshape(-1, 4), ref, rtol=1e-5, atol=1e-5)
    # half the activation resolution, still close to the float layer
    float_out = lin(Tensor(x)).data
    assert np.max(np.abs(out.data - float_out)) < 0.05 * np.abs(float_out).max() + 1e-3
    with pytest.raises(ValueError, match="above 127"):
        ql.int_matmul(np.full((1, 7), 200, np.uint8), [0])


def test_quantized_linear_bad_input():
    ql = QuantizedLinear.from_linear(Linear(3, 2))
    with pytest.raises(ValueError, match=r"expected \[..., 3\]"):
        ql(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="symmetrically"):
        QuantizedLinear(quantize_int8(np.ones((3, 2), np.float32), symmetric=False), None)


def _trained_digits_mlp():
    manual_seed(0)
    x_tr, y_tr, x_te, y_te = digits_split(0.25, seed=0)
    x_tr, x_te = x_tr.reshape(len(x_tr), -1), x_te.reshape(len(x_te), -1)
    model = Sequential(Linear(64, 64), ReLU(), Linear(64, 10))
    opt = Adam(model.parameters(), lr=1e-2)
    for _ in range(120):  # full-batch: a second or so
        loss = cross_entropy(model(Tensor(x_tr)), y_tr)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, x_te, y_te


def test_quantized_trained_model_error_and_size():
    import copy
    model, x_te, y_te = _trained_digits_mlp()
    float_logits = model(Tensor(x_te)).data
    float_acc = np.mean(float_logits.argmax(1) == y_te)
    qmodel = copy.deepcopy(model)
    replaced = quantize_model(qmodel)
    assert replaced == ["0", "2"]
    assert all(isinstance(qmodel[i], QuantizedLinear) for i in (0, 2))
    q_logits = qmodel(Tensor(x_te)).data
    q_acc = np.mean(q_logits.argmax(1) == y_te)
    err = quantization_error(float_logits, q_logits)
    report = size_report(model, qmodel)
    print(f"\nfloat acc {float_acc:.4f}, int8 acc {q_acc:.4f}, logit SQNR {err['sqnr_db']:.1f} dB, "
          f"size {report['float_bytes']} -> {report['quantized_bytes']} bytes ({report['reduction']:.2f}x)")
    assert float_acc > 0.9
    assert q_acc >= float_acc - 0.02
    assert err["sqnr_db"] > 25
    # weights shrink 4x; float32 biases and per-channel scales keep the total a little above 1/4
    w_bytes = (64 * 64 + 64 * 10) * 4
    assert report["float_bytes"] == w_bytes + (64 + 10) * 4
    assert report["quantized_bytes"] == w_bytes // 4 + 2 * (64 + 10) * 4
    assert report["reduction"] > 3.3
    assert model_size_bytes(qmodel) == report["quantized_bytes"]
    # 7-bit activations (PyTorch's reduce_range) cost little accuracy on the same model
    rmodel = copy.deepcopy(model)
    assert quantize_model(rmodel, reduce_range=True) == ["0", "2"]
    r_logits = rmodel(Tensor(x_te)).data
    r_acc = np.mean(r_logits.argmax(1) == y_te)
    r_err = quantization_error(float_logits, r_logits)
    print(f"reduce_range: int8 acc {r_acc:.4f}, logit SQNR {r_err['sqnr_db']:.1f} dB")
    assert r_acc >= float_acc - 0.02
    assert r_err["sqnr_db"] > 20
