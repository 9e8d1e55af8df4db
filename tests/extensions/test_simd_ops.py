"""simd_ops (simd_matmul, simd_fused_bias_gelu, has_simd_support, simd_build_info) against
float64 NumPy through the extension contract checker, plus: the exact error messages, the
dtype rule, non-contiguous inputs, gradients against float64 formulas, and proof that the
native kernels of the active ISA ran in forward and backward. Runs on 1 and 2 threads;
CI runs the file once per ISA (TINYTORCH_ISA).
"""
import numpy as np
import pytest

from contract import check_contract, run_with_grads
from tinytorch import native
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import simd_ops
from tinytorch.core.acceleration import use_native
from tinytorch.extensions.simd_ops import (has_simd_support, simd_build_info,
                                           simd_fused_bias_gelu, simd_matmul)


def _numpy_only():
    return use_native(False)


RNG = np.random.default_rng(11)
S = np.sqrt(2.0 / np.pi)


def gelu64(x, b=None):
    u = np.asarray(x, np.float64) + (0.0 if b is None else np.asarray(b, np.float64))
    return 0.5 * u * (1 + np.tanh(S * (u + 0.044715 * u ** 3)))


def gelu64_grad(u):
    t = np.tanh(S * (u + 0.044715 * u ** 3))
    return 0.5 * (1 + t) + 0.5 * u * (1 - t * t) * S * (1 + 3 * 0.044715 * u * u)


def matmul64(a, b):
    return np.matmul(np.asarray(a, np.float64), np.asarray(b, np.float64))


MATMUL_SHAPES = [((7, 13), (13, 5)), ((1, 1), (1, 1)), ((3, 2, 11), (11, 17)), ((0, 4), (4, 3)),
                 ((5, 0), (0, 3)), ((2, 3), (3, 0)), ((4, 33, 20), (4, 20, 9)),
                 ((1, 30, 20), (3, 20, 7)), ((65, 70), (70, 66))]


@pytest.mark.parametrize("shape_a,shape_b", MATMUL_SHAPES)
def test_matmul_contract(shape_a, shape_b, threads):
    a = RNG.standard_normal(shape_a).astype(np.float32)
    b = RNG.standard_normal(shape_b).astype(np.float32)
    small = [RNG.standard_normal(shape_a[:-2] + (min(shape_a[-2], 3), shape_a[-1])),
             RNG.standard_normal(shape_b[:-1] + (min(shape_b[-1], 4),))]
    check_contract(simd_matmul, [a, b], reference=matmul64, disable_native=_numpy_only,
                   path_report=simd_ops.last_path, native_expected=native.available(),
                   atol=1e-4, rtol=1e-4, gradcheck_inputs=small)


@pytest.mark.parametrize("shape", [(5, 7), (2, 3, 16), (64, 768), (1, 1)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_gelu_contract(shape, with_bias, threads):
    x = (RNG.standard_normal(shape) * 2).astype(np.float32)
    small_x = RNG.standard_normal((2, shape[-1]))
    if with_bias:
        b = RNG.standard_normal(shape[-1]).astype(np.float32)
        check_contract(simd_fused_bias_gelu, [x, b], reference=gelu64,
                       disable_native=_numpy_only, path_report=simd_ops.last_path,
                       native_expected=native.available(), atol=2e-5, rtol=2e-5,
                       gradcheck_inputs=[small_x, RNG.standard_normal(shape[-1])])
    else:
        check_contract(lambda t: simd_fused_bias_gelu(t), [x], reference=gelu64,
                       disable_native=_numpy_only, path_report=simd_ops.last_path,
                       native_expected=native.available(), atol=2e-5, rtol=2e-5,
                       gradcheck_inputs=[small_x])


def test_matmul_gradients_use_native_kernels(threads):
    a = RNG.standard_normal((33, 40)).astype(np.float32)
    b = RNG.standard_normal((40, 27)).astype(np.float32)
    out, (ga, gb), g = run_with_grads(simd_matmul, [a, b])
    if native.available():
        assert simd_ops.last_path() == f"native:sgemm:{native.isa()}"  # the backward's GEMMs
    g64 = g.astype(np.float64)
    np.testing.assert_allclose(ga, g64 @ b.T.astype(np.float64), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, a.T.astype(np.float64) @ g64, rtol=1e-4, atol=1e-4)


def test_batched_matmul_gradients_reduce_broadcast(threads):
    a = RNG.standard_normal((1, 12, 20)).astype(np.float32)   # broadcast over the batch
    b = RNG.standard_normal((4, 20, 9)).astype(np.float32)
    out, (ga, gb), g = run_with_grads(simd_matmul, [a, b])
    g64 = g.astype(np.float64)
    want_a = (g64 @ np.swapaxes(b, -1, -2).astype(np.float64)).sum(axis=0, keepdims=True)
    want_b = np.swapaxes(a, -1, -2).astype(np.float64) @ g64
    np.testing.assert_allclose(ga, want_a, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, want_b, rtol=1e-4, atol=1e-4)


def test_gelu_gradients_match_float64_and_run_natively(threads):
    x = (RNG.standard_normal((48, 96)) * 2).astype(np.float32)
    b = RNG.standard_normal(96).astype(np.float32)
    out, (gx, gb), g = run_with_grads(simd_fused_bias_gelu, [x, b])
    if native.available():
        assert simd_ops.last_path() == f"native:bias_gelu_backward:{native.isa()}"
    u = (x + b).astype(np.float32).astype(np.float64)
    want = g.astype(np.float64) * gelu64_grad(u)
    np.testing.assert_allclose(gx, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb, want.sum(axis=0), rtol=1e-4, atol=1e-4)


def test_error_messages():
    with pytest.raises(ValueError, match=r"^Incompatible matrix dimensions: \(3, 4\) x \(5, 6\)$"):
        simd_matmul(np.ones((3, 4), np.float32), np.ones((5, 6), np.float32))
    with pytest.raises(ValueError, match=r"^Incompatible matrix dimensions: \(3, 4\) x \(5, 6\)$"):
        simd_matmul(Tensor(np.ones((3, 4), np.float32)), np.ones((5, 6), np.float32))
    with pytest.raises(ValueError, match=r"^bias must have shape \(6,\), got \(5,\)$"):
        simd_fused_bias_gelu(np.ones((2, 6), np.float32), np.ones(5, np.float32))
    with pytest.raises(ValueError, match=r"^bias must have shape \(6,\), got \(1, 6\)$"):
        simd_fused_bias_gelu(np.ones((2, 6), np.float32), np.ones((1, 6), np.float32))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        simd_matmul(np.ones(4, np.float32), np.ones((4, 2), np.float32))
    with pytest.raises(TypeError, match="Tensor or a numpy.ndarray"):
        simd_matmul([[1.0]], np.ones((1, 1), np.float32))
    with pytest.raises(TypeError, match="real-valued"):
        simd_matmul(np.ones((2, 2), np.complex64), np.ones((2, 2), np.complex64))


def test_dtype_rule():
    a_int = np.arange(12).reshape(3, 4)
    b_int = np.arange(8).reshape(4, 2)
    out = simd_matmul(a_int, b_int)
    assert out.dtype == np.float32 and np.array_equal(out, (a_int @ b_int).astype(np.float32))
    if native.available():
        assert simd_ops.last_path().startswith("native:sgemm")
    out16 = simd_matmul(a_int.astype(np.float16), b_int.astype(np.float16))
    assert out16.dtype == np.float32
    a64 = RNG.standard_normal((5, 6))
    out64 = simd_matmul(a64, a64.T)
    assert out64.dtype == np.float64 and simd_ops.last_path() == "numpy"
    np.testing.assert_allclose(out64, a64 @ a64.T, rtol=1e-12)
    y64 = simd_fused_bias_gelu(a64, np.zeros(6))
    assert y64.dtype == np.float64
    np.testing.assert_allclose(y64, gelu64(a64), rtol=1e-12, atol=1e-15)


def test_float16_tensor_gradients_flow_through_dtype_cast():
    a = Tensor(RNG.standard_normal((4, 5)).astype(np.float16), requires_grad=True)
    b = Tensor(RNG.standard_normal((5, 3)).astype(np.float32), requires_grad=True)
    out = simd_matmul(a, b)
    assert out.data.dtype == np.float32
    out.sum().backward()
    assert a.grad.shape == (4, 5) and a.grad.dtype == np.float16
    np.testing.assert_allclose(a.grad.astype(np.float64),
                               np.ones((4, 3)) @ b.data.T.astype(np.float64), rtol=1e-2)


def test_non_contiguous_inputs(threads):
    base = RNG.standard_normal((60, 80)).astype(np.float32)
    a = base[::2, :40]             # row stride 2 rows: ld = 160
    b = base.T[:40, :25]           # column-major: a transpose flag
    for run in (lambda: simd_matmul(a, b), lambda: simd_matmul(Tensor(a), Tensor(b)).data):
        np.testing.assert_allclose(run(), matmul64(a, b), rtol=1e-4, atol=1e-4)
    x = base[:, ::2]
    bias = base[0, :40]
    np.testing.assert_allclose(simd_fused_bias_gelu(x, bias), gelu64(x, bias), rtol=2e-5, atol=1e-6)


def test_has_simd_support_and_build_info():
    info = simd_build_info()
    assert info["available"] == native.available()
    assert info["simd"] == has_simd_support()
    if native.available():
        assert has_simd_support() == (native.isa() in ("avx2", "avx512", "neon"))
        assert info["isa_active"] == native.isa()
        assert "scalar" in info["isas_compiled"]
        with use_native(False):
            assert not has_simd_support()
    else:
        assert not has_simd_support() and info["reason"]
