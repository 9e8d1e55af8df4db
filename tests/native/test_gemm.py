"""The native GEMM through tinytorch.core.acceleration: values against float64 NumPy over
transposes, awkward shapes, strided and transposed views, out=, batching and broadcasting;
and proof that the native kernel of the active ISA ran (last_path() carries the runtime's
own kernel-path report). Every test runs on 1 and 2 threads. The ISA is whatever the
runtime chose, so CI runs this file once per ISA with TINYTORCH_ISA=scalar|avx2|...

Tolerance: the float32 accumulation bound, (K + 4) * 2^-23 times |op(A)| |op(B)|
elementwise; a wrong element is off by the size of the products and fails.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from tinytorch import _native, native
from tinytorch.core import acceleration as acc

RNG = np.random.default_rng(20261130)


def active_isa() -> str:
    """The ISA the runtime runs now (named apart from conftest's ``isa`` fixture, which sets one)."""
    return native.isa()


def expected_gemm_path(m, n, k, trans_a, trans_b=False):
    """The runtime's report for one float32 GEMM: with op(A) row-major, results at most 12
    columns wide, and "dot-shaped" products (B^T read in place, at most 16 x 96 results,
    K >= 64 N) take the narrow path (AVX2 dot products, no packing; the AVX-512 entry uses
    the same kernel)."""
    dot = trans_b and m <= 16 and n <= 96 and k >= 64 * n
    has_narrow = active_isa() in ("avx2", "avx512")
    narrow = has_narrow and not trans_a and m > 0 and k > 0 and n >= 1 and (n <= 12 or dot)
    # one to four rows of op(A) row-major: the row-vector path (test_gemm_rowvec.py)
    # (B^T goes to the narrow kernel, which the scalar entry lacks)
    rowvec = not trans_a and 1 <= m <= 4 and k > 0 and n >= 1 and not (has_narrow and n <= 12)
    if rowvec and (has_narrow or not trans_b):
        return f"native:sgemm:{active_isa()}" + (":narrow" if trans_b else ":rowvec")
    return f"native:sgemm:{active_isa()}" + (":narrow" if narrow else "")


def assert_close_gemm(got, a_op, b_op):
    a64, b64 = a_op.astype(np.float64), b_op.astype(np.float64)
    want = a64 @ b64
    bound = (a64.shape[-1] + 4) * 2.0 ** -23 * (np.abs(a64) @ np.abs(b64)) + 1e-30
    assert got.shape == want.shape
    assert got.dtype == np.float32
    bad = np.abs(got - want) > bound
    assert not bad.any(), f"{bad.sum()} elements out of bound; worst {np.abs(got - want).max()}"


SHAPES = [(0, 5, 3), (4, 0, 3), (3, 4, 0), (1, 1, 1), (2, 7, 31), (7, 33, 31), (33, 31, 127),
          (127, 33, 7), (61, 67, 71), (513, 7, 33), (3, 301, 97), (96, 80, 300), (50, 40, 1),
          (9, 11, 2600),
          (8, 9, 50177), (16, 72, 4609), (3, 5, 9000), (37, 33, 50), (29, 65, 19), (13, 71, 40)]


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("trans_a", [False, True])
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_matches_float64(m, n, k, trans_a, trans_b, threads):
    a_op = RNG.standard_normal((m, k)).astype(np.float32)
    b_op = RNG.standard_normal((k, n)).astype(np.float32)
    a = np.ascontiguousarray(a_op.T) if trans_a else a_op
    b = np.ascontiguousarray(b_op.T) if trans_b else b_op
    got = acc.gemm(a, b, trans_a, trans_b)
    assert_close_gemm(got, a_op, b_op)
    if m * n * k >= acc.NATIVE_MIN_GEMM_WORK:
        assert acc.last_path() == expected_gemm_path(m, n, k, trans_a, trans_b)


def test_beta_zero_ignores_nan_in_out(threads):
    a = RNG.standard_normal((70, 80)).astype(np.float32)
    b = RNG.standard_normal((80, 90)).astype(np.float32)
    out = np.full((70, 90), np.nan, np.float32)
    got = acc.gemm(a, b, out=out)
    assert got is out
    assert acc.last_path() == f"native:sgemm:{active_isa()}"
    assert_close_gemm(out, a, b)


def test_out_with_row_stride_and_non_contiguous_out(threads):
    a = RNG.standard_normal((64, 96)).astype(np.float32)
    b = RNG.standard_normal((96, 72)).astype(np.float32)
    wide = np.full((64, 100), 7.0, np.float32)
    view = wide[:, 10:82]  # row stride 100 > 72: written in place through ldc
    assert acc.gemm(a, b, out=view) is view
    assert_close_gemm(view, a, b)
    assert np.all(wide[:, :10] == 7.0) and np.all(wide[:, 82:] == 7.0)
    fortran = np.asfortranarray(np.zeros((64, 72), np.float32))  # not row-major: via a temporary
    assert acc.gemm(a, b, out=fortran) is fortran
    assert_close_gemm(fortran, a, b)


def test_views_are_passed_without_copies(monkeypatch, threads):
    """Transposed and row-strided views reach the kernel as flags and leading dimensions."""
    base_a = RNG.standard_normal((90, 80)).astype(np.float32)
    base_b = RNG.standard_normal((100, 70)).astype(np.float32)
    a = base_a.T[:, :85]       # column-major view: passed as transA
    b = base_b[5:90, :]        # row-major with ld = 70
    want_a, want_b = a.copy(), b.copy()

    def no_copy(*args, **kwargs):
        raise AssertionError("a contiguous copy was made")

    monkeypatch.setattr(acc.np, "ascontiguousarray", no_copy)
    got = acc.gemm(a, b)
    monkeypatch.undo()
    assert acc.last_path() == f"native:sgemm:{active_isa()}"
    assert_close_gemm(got, want_a, want_b)


def test_other_strides_are_copied_once(threads):
    base = RNG.standard_normal((200, 200)).astype(np.float32)
    a = base[::2, ::3][:50, :44]   # strides (2 rows, 3 columns): neither row- nor column-major
    b = base[1::3, ::2][:44, :60]
    assert not (a.flags.c_contiguous or a.flags.f_contiguous or b.flags.c_contiguous)
    got = acc.gemm(a, b)
    assert acc.last_path() == f"native:sgemm:{active_isa()}"
    assert_close_gemm(got, a, b)


@pytest.mark.parametrize("shape_a,shape_b", [
    ((4, 3, 33, 17), (3, 17, 29)),     # batch broadcast
    ((1, 40, 64), (6, 64, 50)),        # a shared by every matrix: stride 0
    ((5, 48, 40), (40, 56)),           # (..., M, K) @ (K, N): rows folded into one GEMM
    ((2, 6, 9, 70), (1, 70, 80)),
    ((700,), (3, 700, 90)),            # 1-D promotion
    ((4, 90, 700), (700,)),
])
def test_matmul_batched_and_broadcast(shape_a, shape_b, threads):
    a = RNG.standard_normal(shape_a).astype(np.float32)
    b = RNG.standard_normal(shape_b).astype(np.float32)
    got = acc.matmul(a, b)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    k = shape_a[-1]
    bound = (k + 4) * 2.0 ** -23 * np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.abs(got - want) <= bound + 1e-30)
    kind, path_isa = acc.last_path().split(":")[1:3]
    assert kind in ("sgemm", "sgemm_strided_batched") and path_isa == active_isa(), acc.last_path()


def test_batched_swapped_views_use_transpose_flags(threads):
    q = RNG.standard_normal((8, 64, 32)).astype(np.float32)
    k = RNG.standard_normal((8, 64, 32)).astype(np.float32)
    got = acc.matmul(q, np.swapaxes(k, -1, -2))  # attention scores, K^T as a flag
    assert acc.last_path() == f"native:sgemm_strided_batched:{active_isa()}"
    want = np.matmul(q.astype(np.float64), np.swapaxes(k, -1, -2).astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_tiny_and_float64_stay_on_numpy():
    # (float16 goes to the native half-precision GEMM: tests/native/test_hgemm.py)
    a = RNG.standard_normal((4, 5)).astype(np.float32)
    b = RNG.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(acc.gemm(a, b), a @ b, rtol=1e-6)
    assert acc.last_path() == "numpy"
    x = RNG.standard_normal((80, 80))
    got = acc.matmul(x, x)
    assert got.dtype == np.float64 and acc.last_path() == "numpy"
    np.testing.assert_array_equal(got, x @ x)


def test_use_native_false_forces_numpy():
    a = RNG.standard_normal((80, 80)).astype(np.float32)
    with acc.use_native(False):
        acc.gemm(a, a)
        assert acc.last_path() == "numpy"
    acc.gemm(a, a)
    assert acc.last_path() == f"native:sgemm:{active_isa()}"


def test_environment_variable_disables_native():
    code = ("import numpy as np; from tinytorch.core import acceleration as acc; "
            "a = np.ones((80, 80), np.float32); acc.gemm(a, a); print(acc.last_path())")
    env = dict(os.environ, TINYTORCH_DISABLE_NATIVE="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "numpy"


def test_mismatched_shapes_raise_value_error():
    a = np.ones((80, 70), np.float32)
    with pytest.raises(ValueError):
        acc.gemm(a, a)
    with pytest.raises(ValueError):
        acc.matmul(np.ones((2, 80, 70), np.float32), np.ones((3, 70, 80), np.float32))


def test_bad_leading_dimension_from_python_names_the_argument():
    a = np.ones((3, 4), np.float32)
    c = np.zeros((3, 3), np.float32)
    f = _native.f32_ptr
    with pytest.raises(ValueError, match="ldc=2"):
        _native.check(_native.lib.tt_sgemm(0, 1, 3, 3, 4, 1.0, f(a), 4, f(a), 4, 0.0, f(c), 2))
    with pytest.raises(ValueError, match="batch=-1"):
        _native.check(_native.lib.tt_sgemm_strided_batched(0, 0, 3, 3, 4, 1.0, f(a), 4, 0, f(a), 3,
                                                           0, 0.0, f(c), 3, 9, -1))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10, 12])
@pytest.mark.parametrize("k", [1, 7, 8, 9, 131, 784, 30011])
@pytest.mark.parametrize("trans_b", [False, True])
def test_narrow_results_with_beta_and_padding(n, k, trans_b, threads):
    """Results 12 or fewer columns wide (classifier heads): K tails that are not a multiple
    of 8, B read in place or transposed, beta != 0, ldc > N, row-split across threads."""
    m = 37
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b_op = RNG.standard_normal((k, n)).astype(np.float32)
    b = np.ascontiguousarray(b_op.T) if trans_b else b_op
    c_full = RNG.standard_normal((m, n + 3)).astype(np.float32)
    c0 = c_full.copy()
    from tinytorch import _native
    f = _native.f32_ptr
    _native.check(_native.lib.tt_sgemm(0, int(trans_b), m, n, k, 0.5, f(a), k, f(b), k if trans_b else n,
                                       -1.5, f(c_full), n + 3))
    assert _native.last_kernel_path() == expected_gemm_path(m, n, k, False, trans_b).split(":", 1)[1]
    want = 0.5 * (a.astype(np.float64) @ b_op.astype(np.float64)) - 1.5 * c0[:, :n].astype(np.float64)
    bound = (k + 4) * 2.0 ** -23 * (0.5 * np.abs(a.astype(np.float64)) @ np.abs(b_op.astype(np.float64))
                                    + 1.5 * np.abs(c0[:, :n])) + 1e-30
    assert np.all(np.abs(c_full[:, :n] - want) <= bound)
    assert np.array_equal(c_full[:, n:], c0[:, n:])  # the padding columns are untouched


@pytest.mark.parametrize("m,n,k", [(1, 13, 4099), (8, 9, 50177), (16, 72, 12544), (5, 96, 6151), (16, 17, 1088)])
def test_dot_shaped_products_with_beta(m, n, k, threads):
    """Weight gradients of small layers (g @ cols^T: few rows and columns, long K) take the
    narrow path in K chunks; beta applies once, ldc > N, padding columns untouched."""
    from tinytorch import _native
    f = _native.f32_ptr
    a = RNG.standard_normal((m, k)).astype(np.float32)
    bt = RNG.standard_normal((n, k)).astype(np.float32)
    c_full = RNG.standard_normal((m, n + 2)).astype(np.float32)
    c0 = c_full.copy()
    _native.check(_native.lib.tt_sgemm(0, 1, m, n, k, 2.0, f(a), k, f(bt), k, 0.25, f(c_full), n + 2))
    assert _native.last_kernel_path() == expected_gemm_path(m, n, k, False, True).split(":", 1)[1]
    a64, b64 = a.astype(np.float64), bt.T.astype(np.float64)
    want = 2.0 * (a64 @ b64) + 0.25 * c0[:, :n].astype(np.float64)
    bound = (k + 4) * 2.0 ** -23 * (2.0 * np.abs(a64) @ np.abs(b64) + 0.25 * np.abs(c0[:, :n])) + 1e-30
    assert np.all(np.abs(c_full[:, :n] - want) <= bound)
    assert np.array_equal(c_full[:, n:], c0[:, n:])


@pytest.mark.parametrize("n", [33, 65, 70, 72, 40])
@pytest.mark.parametrize("trans_b", [False, True])
def test_edge_columns_split_matches_float64(n, trans_b, threads):
    """N a few columns past a multiple of the tile width: full panels tiled, the rest by the
    narrow kernel (same results as one tiled product, within the float32 bound)."""
    m, k = 131, 77
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b_op = RNG.standard_normal((k, n)).astype(np.float32)
    b = np.ascontiguousarray(b_op.T) if trans_b else b_op
    got = acc.gemm(a, b, False, trans_b)
    assert_close_gemm(got, a, b_op)
    c = np.full((m, n), np.nan, np.float32)  # beta == 0 must not read C in either part
    out = acc.gemm(a, b, False, trans_b, alpha=1.0, beta=0.0, out=c)
    assert np.isfinite(out).all()
