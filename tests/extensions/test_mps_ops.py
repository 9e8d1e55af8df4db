"""mps_ops: mps_matmul off Apple platforms, and the tt_mps_* ABI's refusal there.

On Linux (this suite's machines) the Metal bridge is not compiled: the runtime's stubs
return TT_ERR_UNSUPPORTED / 0 with a message naming Apple, the registry's ``mps`` entry is
unusable with that reason, and mps_matmul returns the CPU result (float64 parity on awkward
shapes, Tensors with autograd) with the reason in ``mps_last_run()``. On macOS the same
parity tests run on the GPU (the no-MPS checks are skipped there).
"""
import ctypes
import mmap
import sys

import numpy as np
import pytest

from contract import check_tensor_in_tensor_out, run_with_grads
from tinytorch import _native, backends
from tinytorch.core.acceleration import use_native
from tinytorch.extensions import mps_ops

HAS_MPS_ABI = _native.available() and getattr(_native.lib, "tt_mps_sgemm", None) is not None
needs_abi = pytest.mark.skipif(not HAS_MPS_ABI, reason="the loaded libtinytorch predates tt_mps_* "
                               "(rebuild it, or point TINYTORCH_LIB at a fresh build)")
off_apple = pytest.mark.skipif(sys.platform == "darwin", reason="MPS may really run on macOS")


def _ref(a, b):
    return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


@needs_abi
@off_apple
def test_the_stubs_refuse_with_a_reason():
    lib = _native.lib
    lib.tt_clear_error()
    assert lib.tt_mps_available() == 0
    assert b"Apple" in lib.tt_last_error()
    a = np.ones((2, 3), np.float32)
    b = np.ones((3, 4), np.float32)
    c = np.zeros((2, 4), np.float32)
    copied = ctypes.c_int(-1)
    status = lib.tt_mps_sgemm(2, 4, 3, a.ctypes.data, b.ctypes.data, c.ctypes.data, ctypes.byref(copied))
    assert _native.STATUS_NAMES[status] == "TT_ERR_UNSUPPORTED"
    assert b"tt_mps_sgemm" in lib.tt_last_error() and b"Apple" in lib.tt_last_error()
    with pytest.raises(RuntimeError, match="Apple.*TT_ERR_UNSUPPORTED"):
        _native.check(status, "mps")
    assert not c.any()


@off_apple
def test_registry_says_why_mps_is_unusable():
    ok, detail = backends.status("mps")
    assert ok is False and detail
    if HAS_MPS_ABI:
        assert "Apple" in detail
    assert mps_ops.has_mps_support() is False
    info = mps_ops.mps_build_info()
    assert info == {"mps": False, "detail": detail, "kernel": False}
    assert set({b.name: b for b in backends.registered()}["mps"].ops) == {"mps_matmul"}


SHAPES = [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (7, 13, 5), (37, 11, 23)]


@pytest.mark.parametrize("mnk", SHAPES, ids=str)
def test_matches_float64_on_awkward_shapes(mnk):
    m, k, n = mnk
    rng = np.random.default_rng(m + 7 * k + 31 * n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    out = mps_ops.mps_matmul(a, b)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (m, n)
    np.testing.assert_allclose(out, _ref(a, b), rtol=1e-5, atol=1e-5)
    run = mps_ops.mps_last_run()
    if not mps_ops.has_mps_support():
        assert run["path"] == "cpu" and run["reason"] == mps_ops.mps_build_info()["detail"]
        assert run["copied"] == []


def test_tensors_non_contiguous_and_autograd():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((6, 8)).astype(np.float32)[:, ::2]     # strided view
    b = rng.standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_allclose(mps_ops.mps_matmul(a, b), _ref(a, b), rtol=1e-5, atol=1e-5)
    check_tensor_in_tensor_out(mps_ops.mps_matmul, [a, b], _ref)
    _, (ga, gb), g = run_with_grads(mps_ops.mps_matmul, [a, b])
    np.testing.assert_allclose(ga, g.astype(np.float64) @ b.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gb, a.T.astype(np.float64) @ g, rtol=1e-5, atol=1e-5)


def test_dtype_rules_bad_input_and_switch():
    a64 = np.random.default_rng(3).standard_normal((3, 2))
    out = mps_ops.mps_matmul(a64, a64.T)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, a64 @ a64.T, rtol=1e-12)
    assert mps_ops.mps_matmul(np.ones((2, 2), np.int64), np.ones((2, 2), np.int64)).dtype == np.float32
    with pytest.raises(ValueError, match="Incompatible matrix dimensions"):
        mps_ops.mps_matmul(a64, a64)
    with pytest.raises(TypeError, match="real-valued"):
        mps_ops.mps_matmul(a64.astype(np.complex128), a64.T)
    with use_native(False):
        assert mps_ops.has_mps_support() is False
        np.testing.assert_allclose(mps_ops.mps_matmul(a64, a64.T), a64 @ a64.T, rtol=1e-12)


@pytest.mark.parametrize("shape", [(0,), (3, 5), (1025, 3)], ids=str)
def test_page_aligned_empty(shape):
    out = mps_ops.page_aligned_empty(shape)
    assert out.shape == shape and out.dtype == np.float32 and out.flags.c_contiguous
    assert out.size == 0 or out.ctypes.data % mmap.PAGESIZE == 0
    out[...] = 1.5   # the memory is writable and ours
    assert float(out.sum()) == 1.5 * out.size
