"""The row-vector GEMM path (decoding: one to four rows of op(A) against a weight read in
place, never packed), through tt_sgemm itself so that sizes below the Python door's native
threshold are covered too: values against float64 on awkward shapes and strides, the path
each call reports, alpha / beta rules (beta = 0 never reads C), and bit-identical results
on 1, 2, 3 and 7 threads. CI runs this file once per ISA (TINYTORCH_ISA).

Tolerance: the float32 accumulation bound, (K + 4) * 2^-23 * |A| |B| elementwise.
"""
import ctypes

import numpy as np
import pytest

import tinytorch
from tinytorch import _native, native

RNG = np.random.default_rng(20261203)
LIB = _native.lib
MAX_ROWS = 4  # kGemmRowvecMaxRows in runtime/cpu/gemm_kernels.h
NARROW_MAX_N = 12  # kGemmNarrowMaxN: narrower results keep the narrow kernel


def ptr(x):
    return ctypes.c_void_p(x.ctypes.data)


def sgemm(a, b, trans_b, c, alpha=1.0, beta=0.0):
    """C = alpha A op(B) + beta C on (possibly row-strided) float32 views."""
    m, k = a.shape
    n = b.shape[0] if trans_b else b.shape[1]
    # a matrix with under two rows may report any row stride: its column count is valid
    lda, ldb, ldc = (x.strides[0] // 4 if x.shape[0] > 1 else x.shape[1] for x in (a, b, c))
    status = LIB.tt_sgemm(0, int(trans_b), m, n, k, alpha, ptr(a), lda, ptr(b), ldb, beta,
                          ptr(c), ldc)
    assert status == 0, _native.last_error()
    return native.last_kernel_path()


def strided(rows, cols, pad):
    """A rows x cols float32 view whose rows are `pad` floats apart beyond cols."""
    base = RNG.standard_normal((rows, cols + pad)).astype(np.float32)
    return base[:, :cols]


def expected_path(m, n, k, trans_b):
    isa = native.isa()
    has_narrow = isa in ("avx2", "avx512")
    if has_narrow and n <= NARROW_MAX_N:
        return f"sgemm:{isa}:narrow"
    if 1 <= m <= MAX_ROWS and k > 0:
        if not trans_b:
            return f"sgemm:{isa}:rowvec"
        if has_narrow:
            return f"sgemm:{isa}:narrow"
    return f"sgemm:{isa}"


def check(got, a, b_op, alpha=1.0, beta=0.0, c0=None):
    a64, b64 = a.astype(np.float64), b_op.astype(np.float64)
    want = alpha * (a64 @ b64)
    if beta != 0.0:
        want = want + beta * c0.astype(np.float64)
    bound = (a64.shape[1] + 4) * 2.0 ** -23 * (abs(alpha) * np.abs(a64) @ np.abs(b64)
                                               + abs(beta) * (np.abs(c0) if c0 is not None else 0)) + 1e-30
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= bound).all(), f"{(err > bound).sum()} elements out of bound; worst {err.max()}"


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("n,k", [(13, 1), (64, 7), (65, 127), (257, 31), (1031, 97), (4099, 5),
                                 (5003, 768)])
@pytest.mark.parametrize("trans_b", [False, True])
def test_rowvec_matches_float64(m, n, k, trans_b, threads):
    a = strided(m, k, 3)
    b = strided(n, k, 5) if trans_b else strided(k, n, 5)
    c = strided(m, n, 2)
    c[...] = np.nan  # beta = 0 must never read C
    path = sgemm(a, b, trans_b, c)
    check(c, a, b.T if trans_b else b)
    assert path == expected_path(m, n, k, trans_b)


@pytest.mark.parametrize("m", [1, 4])
def test_rowvec_alpha_beta(m, threads):
    k, n = 129, 700
    a, b = strided(m, k, 1), strided(k, n, 0)
    c = strided(m, n, 4)
    c0 = c.copy()
    path = sgemm(a, b, False, c, alpha=0.5, beta=-2.0)
    assert path == expected_path(m, n, k, False)
    check(c, a, b, alpha=0.5, beta=-2.0, c0=c0)


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("trans_b", [False, True])
def test_rowvec_bits_do_not_depend_on_threads(m, trans_b):
    k, n = 768, 3072 + 17
    a = strided(m, k, 0)
    b = strided(n, k, 0) if trans_b else strided(k, n, 0)
    before = tinytorch.get_num_threads()
    results = []
    try:
        for nt in (1, 2, 3, 7):
            tinytorch.set_num_threads(nt)
            c = np.zeros((m, n), np.float32)
            sgemm(a, b, trans_b, c)
            results.append(c)
    finally:
        tinytorch.set_num_threads(before)
    for r in results[1:]:
        assert np.array_equal(r.view(np.uint32), results[0].view(np.uint32))


def test_rowvec_k_zero_scales_c(threads):
    a = np.zeros((2, 0), np.float32)
    b = np.zeros((0, 300), np.float32)
    c = RNG.standard_normal((2, 300)).astype(np.float32)
    want = 3.0 * c
    sgemm(a, b, False, c, beta=3.0)
    assert np.array_equal(c, want)
