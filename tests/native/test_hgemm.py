"""float16 GEMM through the dispatch point: the native half-precision kernel runs
(path report), results match a float64 product of the float16 inputs to float16
rounding, over transposes, strided views, batching, 1-D promotion and empty shapes;
the runtime's float16 conversions agree bit for bit with NumPy's."""
import zlib

import numpy as np
import pytest

from tinytorch import _native
from tinytorch.core import acceleration as acc




@pytest.fixture
def rng(request):
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


def _reference(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def _assert_half_close(got, a, b):
    assert got.dtype == np.float16
    want = _reference(a, b)
    k = a.shape[-1]
    mag = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    # one float16 rounding of the result, plus float32 accumulation error
    tol = np.abs(want) * 2.0 ** -10 + mag * k * 2.0 ** -23 + 1e-7
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= tol), f"max error {err.max()} vs tolerance {tol[err.argmax() // tol.shape[-1]]}"


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (7, 33, 5), (64, 127, 31), (129, 65, 257), (0, 5, 3),
                                   (4, 0, 6)])
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_float16_runs_native(rng, m, k, n, trans_a, trans_b):
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float16)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float16)
    got = acc.gemm(a, b, trans_a=trans_a, trans_b=trans_b, any_size=True)
    assert acc.last_path().startswith("native:hgemm:"), acc.last_path()
    _assert_half_close(got, a.T if trans_a else a, b.T if trans_b else b)


def test_strided_views_and_out(rng):
    big = rng.standard_normal((80, 90)).astype(np.float16)
    a = big[::2, 1:60:3]           # neither row- nor column-major: copied once
    b = big[:20, :40]              # row-major with a padded leading dimension
    out = np.empty((40, 40), np.float16)
    got = acc.gemm(a, b, out=out)
    assert got is out and acc.last_path().startswith("native:hgemm")
    _assert_half_close(out, a, b)


@pytest.mark.parametrize("shape_a,shape_b", [((3, 17, 24), (24, 9)), ((2, 3, 17, 24), (3, 24, 9)),
                                             ((24,), (5, 24, 9)), ((4, 17, 24), (24,))])
def test_batched_matmul_float16(rng, shape_a, shape_b):
    a = rng.standard_normal(shape_a).astype(np.float16)
    b = rng.standard_normal(shape_b).astype(np.float16)
    got = acc.matmul(a, b)
    assert acc.last_path().startswith("native:hgemm"), acc.last_path()
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert got.shape == want.shape and got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=2e-3 * np.sqrt(shape_a[-1]))


def test_disabled_native_uses_numpy(rng):
    a = rng.standard_normal((40, 50)).astype(np.float16)
    b = rng.standard_normal((50, 30)).astype(np.float16)
    with acc.use_native(False):
        got = acc.gemm(a, b)
    assert acc.last_path() == "numpy"
    np.testing.assert_allclose(got.astype(np.float64), _reference(a, b), rtol=1e-2, atol=5e-2)


def test_mixed_dtypes_stay_on_numpy(rng):
    a = rng.standard_normal((40, 50)).astype(np.float16)
    b = rng.standard_normal((50, 30)).astype(np.float32)
    got = acc.gemm(a, b)
    assert acc.last_path() == "numpy" and got.dtype == np.float32


def test_conversions_match_numpy_bit_for_bit(rng):
    values = np.concatenate([
        (rng.standard_normal(5000) * 2.0 ** rng.integers(-30, 20, 5000)).astype(np.float32),
        np.array([0.0, -0.0, 65504, 65519.99, 65520, 1e30, -1e30, np.inf, -np.inf,
                  2.0 ** -24, 2.0 ** -25, 1.5 * 2.0 ** -25, 2.0 ** -14, 1 + 2.0 ** -11], np.float32)])
    halves = np.empty(values.shape, np.float16)
    _native.check(_native.lib.tt_f32_to_f16(_native.f32_ptr(values), _native.f16_ptr(halves), values.size))
    with np.errstate(over="ignore"):  # 1e30 -> inf is the point of the case
        want = values.astype(np.float16)
    assert np.array_equal(halves.view(np.uint16), want.view(np.uint16))
    every_half = np.arange(65536, dtype=np.uint16).view(np.float16)
    wide = np.empty(65536, np.float32)
    _native.check(_native.lib.tt_f16_to_f32(_native.f16_ptr(every_half), _native.f32_ptr(wide), 65536))
    ref = every_half.astype(np.float32)
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(wide), nan)
    assert np.array_equal(wide[~nan].view(np.uint32), ref[~nan].view(np.uint32))


def test_bad_arguments_raise_with_the_library_message():
    a = np.zeros((3, 4), np.float16)
    with pytest.raises(ValueError, match="lda=2"):
        _native.check(_native.lib.tt_hgemm(0, 0, 3, 4, 4, 1.0, _native.f16_ptr(a), 2, _native.f16_ptr(a), 4,
                                           0.0, _native.f16_ptr(a), 4))
    with pytest.raises(TypeError, match="float16"):
        _native.f16_ptr(np.zeros(3, np.float32))
