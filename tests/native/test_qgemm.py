"""The INT8 GEMM through the door (acceleration.quantized_*) and QuantizedLinear, against
int64 NumPy references. Runs under whatever ISA the runtime chose (run_all.sh runs tests/native
once per ISA with TINYTORCH_ISA), and proves the path that ran: last_path() names the kernel.
Every kernel this machine can run (avx512bw too, on a VNNI CPU) is also driven directly
through the binding, with bit-identical int32 results."""
import copy
import ctypes

import numpy as np
import pytest

import tinytorch
from tinytorch import _native, native
from tinytorch.backends import numpy_fallback
from tinytorch.core import acceleration as acc
from tinytorch.core.layers import Linear
from tinytorch.core.quantization import QuantizedLinear, quantize_model
from tinytorch.core.tensor import Tensor

# awkward shapes: empty, 1, odd, prime, K not a multiple of 4 or 64
SHAPES = [(0, 5, 7), (3, 4, 0), (1, 1, 1), (1, 64, 64), (7, 13, 5), (13, 67, 31), (6, 64, 63),
          (17, 129, 65), (50, 97, 131), (1, 300, 769), (64, 96, 130)]
KERNEL_FOR_ISA = {"avx2": {"avx2"}, "avx512": {"avx512_vnni", "avx512bw", "scalar"},
                  "neon": {"neon", "neon_dot"}, "scalar": {"scalar"}}


def active_kernel() -> str:
    lib = _native.lib
    return lib.tt_qgemm_kernel_name(lib.tt_qgemm_kernel_active()).decode()


def reference_int32(q, zp, w):
    return (q.astype(np.int64) - zp.astype(np.int64)[:, None]) @ w.astype(np.int64)


def test_path_names_the_kernel_of_the_active_isa():
    assert _native.has_qgemm()
    assert active_kernel() in KERNEL_FOR_ISA[native.isa()]
    assert acc.quantized_path() == (True, "qgemm:" + active_kernel())
    if native.isa() == "avx512" and "avx512_vnni" in open("/proc/cpuinfo").read():
        assert active_kernel() == "avx512_vnni"


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_int32_bit_identical_to_int64_reference(m, n, k, threads):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    q = rng.integers(0, 256, (m, k)).astype(np.uint8)
    zp = rng.integers(0, 256, m).astype(np.int32)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    packs = {}
    acc.quantized_pack(w, packs)
    out = acc.quantized_matmul(q, zp, w, packs)
    assert acc.last_path() == f"native:qgemm:{active_kernel()}" or m * n == 0
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, reference_int32(q, zp, w))


def test_int32_extremes_at_the_exact_bound():
    # a = 255, zero point 0, w = -128: the sum is -K * 32640, at K = 65793 one step from 2^31
    k = acc.QGEMM_MAX_K
    q = np.full((2, k), 255, np.uint8)
    w = np.tile(np.array([[-128, 127, -128]], np.int8), (k, 1))
    out = acc.quantized_matmul(q, np.zeros(2, np.int32), w)
    np.testing.assert_array_equal(out, reference_int32(q, np.zeros(2, np.int32), w))
    assert out[0, 0] == -2147483520
    # zero point 255 with a = 0 and w = 127: the corrected sum is -K * 255 * 127
    out = acc.quantized_matmul(np.zeros((1, k), np.uint8), np.array([255], np.int32), w)
    np.testing.assert_array_equal(out, reference_int32(np.zeros((1, k), np.uint8), np.array([255]), w))
    with pytest.raises(ValueError, match="exact"):
        acc.quantized_matmul(np.zeros((1, k + 1), np.uint8), np.zeros(1, np.int32),
                             np.zeros((k + 1, 2), np.int8))


def _pack_raw(kernel: int, w: np.ndarray):
    lib = _native.lib
    size = ctypes.c_int64()
    assert lib.tt_qgemm_pack_size(w.shape[0], w.shape[1], kernel, ctypes.byref(size)) == 0
    buf = np.empty(size.value + 64, np.uint8)
    off = (-buf.ctypes.data) % 64
    st = lib.tt_qgemm_pack(kernel, w.shape[0], w.shape[1], w.ctypes.data, max(w.shape[1], 1),
                           buf.ctypes.data + off, size.value)
    assert st == 0, lib.tt_last_error()
    return buf, buf.ctypes.data + off, size.value


def test_every_runnable_kernel_is_bit_identical():
    # the door picks one kernel per ISA; the binding reaches each (avx512bw on a VNNI CPU too)
    lib = _native.lib
    ran = []
    for kernel in range(1, 7):
        if not lib.tt_qgemm_kernel_usable(kernel):
            continue
        name = lib.tt_qgemm_kernel_name(kernel).decode()
        for m, n, k in SHAPES:
            rng = np.random.default_rng(k)
            a = rng.integers(0, 256, (m, k)).astype(np.uint8)
            a[:, :1] = 255  # the extremes in every row
            w = rng.integers(-128, 128, (k, n)).astype(np.int8)
            w[:1, :] = -128
            keep, address, nbytes = _pack_raw(kernel, w)
            c = np.empty((m, n), np.int32)
            st = lib.tt_qgemm_u8s8s32(m, n, k, a.ctypes.data, max(k, 1), address, nbytes,
                                      c.ctypes.data, max(n, 1))
            assert st == 0, lib.tt_last_error()
            assert lib.tt_last_kernel_path().decode() == f"qgemm:{name}"
            np.testing.assert_array_equal(c, a.astype(np.int64) @ w.astype(np.int64), err_msg=name)
        ran.append(name)
    assert "scalar" in ran and active_kernel() in ran


def test_pack_for_another_isa_is_refused_not_run():
    lib = _native.lib
    w = np.ones((8, 4), np.int8)
    for kernel in range(2, 7):
        size = ctypes.c_int64()
        if lib.tt_qgemm_pack_size(8, 4, kernel, ctypes.byref(size)) != 0 or lib.tt_qgemm_kernel_usable(kernel):
            continue
        keep, address, nbytes = _pack_raw(kernel, w)
        c = np.empty((1, 4), np.int32)
        a = np.zeros((1, 8), np.uint8)
        st = lib.tt_qgemm_u8s8s32(1, 4, 8, a.ctypes.data, 8, address, nbytes, c.ctypes.data, 4)
        assert st == 6 and b"cannot run now" in lib.tt_last_error()
        # a misaligned copy of a pack is refused too
        st = lib.tt_qgemm_u8s8s32(1, 4, 8, a.ctypes.data, 8, address + 1, nbytes, c.ctypes.data, 4)
        assert st == 2 and b"aligned" in lib.tt_last_error()


def awkward_rows(seed):
    """41 x 333 float32 rows of scales 0.01-100 with the quantization's edge cases: row 0 all
    positive (zero point 0), row 1 all negative (zero point qmax), row 2 all zero (scale 1),
    row 3 with ties (round half to even)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((41, 333)) * rng.uniform(0.01, 100, (41, 1))).astype(np.float32)
    x[0] = np.abs(x[0])
    x[1] = -np.abs(x[1])
    x[2] = 0.0
    x[3, ::2] = 0.5
    return x


def test_runtime_and_numpy_quantize_rows_identically():
    x = awkward_rows(7)
    q, s, z = acc.quantize_rows(x)
    assert acc.last_path() == "native:qgemm_quantize_rows"
    q2, s2, z2 = numpy_fallback.quantize_rows(x)
    np.testing.assert_array_equal(q, q2)
    np.testing.assert_array_equal(s, s2)
    np.testing.assert_array_equal(z, z2)
    assert z[0] == 0 and z[1] == 255 and s[2] == 1.0
    deq = (q.astype(np.float32) - z[:, None]) * s[:, None]
    assert np.all(np.abs(deq - x) <= 0.5001 * s[:, None])
    bad = x.copy()
    bad[5, 3] = np.nan
    with pytest.raises(ValueError, match="row 5"):
        acc.quantize_rows(bad)


@pytest.mark.parametrize("reduce_range", [False, True])
@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (5, 3, 2), (7, 70, 45), (33, 130, 97), (64, 768, 768)])
def test_float_output_matches_reference_epilogue(m, n, k, activation, reduce_range, threads):
    rng = np.random.default_rng(n + k + 5 * reduce_range)
    lin = Linear(k, n)
    lin.bias.data[:] = rng.standard_normal(n).astype(np.float32)
    ql = QuantizedLinear.from_linear(lin, activation=activation, reduce_range=reduce_range)
    x = rng.standard_normal((m, k)).astype(np.float32)
    y = ql(x)
    assert acc.last_path() == f"native:qgemm:{rr_kernel() if reduce_range else active_kernel()}"
    # reference epilogue on quantized rows (the runtime's own; NumPy's 7-bit ones, which must
    # stay <= 127) and exact int64 sums
    q, sx, zx = (numpy_fallback.quantize_rows(x, reduce_range=True) if reduce_range
                 else acc.quantize_rows(x))
    assert q.max(initial=0) <= (127 if reduce_range else 255)
    pre = reference_int32(q, zx, ql.weight_q).astype(np.int32).astype(np.float32) * \
        (sx[:, None] * ql.weight_scale[None, :])
    if activation == "gelu":
        ref = acc.bias_gelu(pre, ql.bias, any_size=True)  # the runtime's one GELU
    else:
        ref = pre + ql.bias
        if activation == "relu":
            ref = np.maximum(ref, 0)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-30)
    # and the NumPy fallback gives the same integers and nearly the same floats
    with acc.use_native(False):
        y_np = ql(x)
        assert acc.last_path() == "numpy"
    np.testing.assert_allclose(y_np, y, rtol=1e-5, atol=1e-5)


def test_thread_counts_give_identical_bits():
    rng = np.random.default_rng(3)
    ql = QuantizedLinear.from_linear(Linear(768, 3072), activation="gelu")
    x = rng.standard_normal((37, 768)).astype(np.float32)
    before = tinytorch.get_num_threads()
    try:
        outs = []
        for t in (1, 2):
            tinytorch.set_num_threads(t)
            outs.append(ql(x))
    finally:
        tinytorch.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_pack_made_once_and_remade_only_when_needed():
    lin = Linear(96, 40)
    ql = QuantizedLinear.from_linear(lin, reduce_range=False)  # 8-bit packs: keyed by the kernel alone
    assert list(ql._packs) == [_native.lib.tt_qgemm_kernel_active()]  # packed in from_linear
    buf = ql._packs[_native.lib.tt_qgemm_kernel_active()][0]
    x = np.random.default_rng(0).standard_normal((4, 96)).astype(np.float32)
    y = ql(x)
    assert ql._packs[_native.lib.tt_qgemm_kernel_active()][0] is buf  # reused, not repacked
    clone = copy.deepcopy(ql)  # the copy's buffer may sit at another alignment: repacked if so
    np.testing.assert_array_equal(clone(x), y)
    start = native.isa()
    if "avx2" in native.info()["isa_detected"] and start != "avx2":
        native.set_isa("avx2")
        try:
            y2 = ql(x)
            assert acc.last_path() == "native:qgemm:avx2"
            np.testing.assert_array_equal(y2, y)  # same integers, same float epilogue
        finally:
            native.set_isa(start)
    assert len(ql._packs) >= 1


def test_quantize_model_runs_native_and_bad_input_raises():
    from tinytorch.core.layers import Sequential
    from tinytorch.core.activations import ReLU
    model = Sequential(Linear(20, 30), ReLU(), Linear(30, 5))
    eight_bit = copy.deepcopy(model)
    assert quantize_model(model) == ["0", "2"]
    out = model(Tensor(np.ones((3, 20), np.float32)))
    assert out.shape == (3, 5) and acc.last_path() == f"native:qgemm:{rr_kernel()}"  # the 7-bit default
    assert quantize_model(eight_bit, reduce_range=False) == ["0", "2"]
    eight_bit(Tensor(np.ones((3, 20), np.float32)))
    assert acc.last_path() == f"native:qgemm:{active_kernel()}"
    x = np.ones((2, 20), np.float32)
    x[1, 4] = np.inf
    with pytest.raises(ValueError, match="row 1"):
        model[0](x)
    with pytest.raises(TypeError, match="floating-point"):
        model[0](np.ones((2, 20), np.int32))
    with pytest.raises(ValueError, match="activation"):
        QuantizedLinear.from_linear(Linear(2, 2), activation="tanh")


# --------------------------------------------------------------------------------------
# reduce_range: 7-bit activations (TT_QGEMM_REDUCE_RANGE packs; avx2_u7 on AVX2)
# --------------------------------------------------------------------------------------

REDUCE_RANGE = 1  # TT_QGEMM_REDUCE_RANGE
AVX2_U7 = 7       # TT_QGEMM_AVX2_U7
RR_SHAPES = SHAPES + [(0, 0, 0), (2, 3, 4099), (257, 5, 3), (3, 31, 1021)]  # + tall-skinny, prime K


def rr_kernel() -> str:
    lib = _native.lib
    return lib.tt_qgemm_kernel_name(lib.tt_qgemm_kernel_for(REDUCE_RANGE)).decode()


def _pack_raw_ex(kernel: int, flags: int, w: np.ndarray):
    lib = _native.lib
    size = ctypes.c_int64()
    st = lib.tt_qgemm_pack_size_ex(w.shape[0], w.shape[1], kernel, flags, ctypes.byref(size))
    assert st == 0, lib.tt_last_error()
    buf = np.empty(size.value + 64, np.uint8)
    off = (-buf.ctypes.data) % 64
    st = lib.tt_qgemm_pack_ex(kernel, flags, w.shape[0], w.shape[1], w.ctypes.data,
                              max(w.shape[1], 1), buf.ctypes.data + off, size.value)
    assert st == 0, lib.tt_last_error()
    return buf, buf.ctypes.data + off, size.value


def test_reduce_range_picks_avx2_u7_on_avx2():
    assert _native.has_qgemm_reduce_range()
    want = "avx2_u7" if native.isa() == "avx2" else active_kernel()
    assert rr_kernel() == want
    assert acc.quantized_path(reduce_range=True) == (True, "qgemm:" + want)


@pytest.mark.parametrize("m,n,k", RR_SHAPES)
def test_reduce_range_int32_bit_identical_to_int64_reference(m, n, k, threads):
    rng = np.random.default_rng(m * 1000 + n * 10 + k + 1)
    q = rng.integers(0, 128, (m, k)).astype(np.uint8)
    q[:, :1] = 127
    zp = rng.integers(0, 128, m).astype(np.int32)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    packs = {}
    acc.quantized_pack(w, packs, reduce_range=True)
    out = acc.quantized_matmul(q, zp, w, packs, reduce_range=True)
    assert acc.last_path() == f"native:qgemm:{rr_kernel()}" or m * n == 0
    np.testing.assert_array_equal(out, reference_int32(q, zp, w))
    # a non-contiguous q (every other column of a wider array) gives the same integers
    wide = np.zeros((m, 2 * k), np.uint8)
    wide[:, ::2] = q
    np.testing.assert_array_equal(acc.quantized_matmul(wide[:, ::2], zp, w, packs, reduce_range=True), out)


def test_reduce_range_extremes_where_8_bit_pairs_would_saturate():
    # a = 127 with w = -128 and +127: every vpmaddubsw pair is -32512 or 32258, inside s16;
    # the same pairs at a = 255 (-65280) would saturate. Long K: the int32 sums near -2^30.
    for k in (4099, acc.QGEMM_MAX_K):
        q = np.full((3, k), 127, np.uint8)
        w = np.tile(np.array([[-128, 127, -128, 127, 1]], np.int8), (k, 1))
        out = acc.quantized_matmul(q, np.zeros(3, np.int32), w, reduce_range=True)
        np.testing.assert_array_equal(out, reference_int32(q, np.zeros(3, np.int32), w))
        assert out[0, 0] == -127 * 128 * k and out[0, 1] == 127 * 127 * k
        # zero point 127 with a = 0: the corrected sum is -K * 127 * (-128)
        out = acc.quantized_matmul(np.zeros((1, k), np.uint8), np.array([127], np.int32), w,
                                   reduce_range=True)
        assert out[0, 0] == 127 * 128 * k


def test_every_runnable_kernel_agrees_on_reduce_range_packs():
    lib = _native.lib
    rng = np.random.default_rng(11)
    m, n, k = 13, 67, 131
    a = rng.integers(0, 128, (m, k)).astype(np.uint8)
    a[:, :3] = 127
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    w[:3, :] = -128
    ran = []
    for kernel in range(1, AVX2_U7 + 1):
        if not lib.tt_qgemm_kernel_usable(kernel):
            continue
        name = lib.tt_qgemm_kernel_name(kernel).decode()
        keep, address, nbytes = _pack_raw_ex(kernel, REDUCE_RANGE, w)
        c = np.empty((m, n), np.int32)
        st = lib.tt_qgemm_u8s8s32(m, n, k, a.ctypes.data, k, address, nbytes, c.ctypes.data, n)
        assert st == 0, lib.tt_last_error()
        assert lib.tt_last_kernel_path().decode() == f"qgemm:{name}"
        np.testing.assert_array_equal(c, a.astype(np.int64) @ w.astype(np.int64), err_msg=name)
        ran.append(name)
    assert rr_kernel() in ran and "scalar" in ran


def test_reduce_range_refuses_activations_above_127():
    w = np.ones((5, 3), np.int8)
    q = np.full((2, 5), 127, np.uint8)
    q[1, 3] = 128
    packs = {}
    acc.quantized_pack(w, packs, reduce_range=True)
    with pytest.raises(ValueError, match=r"a\[1\]\[3\] = 128 is above 127"):
        acc.quantized_matmul(q, np.zeros(2, np.int32), w, packs, reduce_range=True)
    with acc.use_native(False):  # the NumPy fallback keeps the same promise
        with pytest.raises(ValueError, match=r"q\[1\]\[3\] = 128 is above 127"):
            acc.quantized_matmul(q, np.zeros(2, np.int32), w, packs, reduce_range=True)
    # the 8-bit pack of the same weight takes it
    out = acc.quantized_matmul(q, np.zeros(2, np.int32), w)
    assert out[1, 0] == 4 * 127 + 128


def test_avx2_u7_pack_without_the_flag_is_refused():
    lib = _native.lib
    w = np.ones((8, 4), np.int8)
    size = ctypes.c_int64()
    assert lib.tt_qgemm_pack_size(8, 4, AVX2_U7, ctypes.byref(size)) == 2
    assert b"TT_QGEMM_REDUCE_RANGE" in lib.tt_last_error()
    if lib.tt_qgemm_pack_size_ex(8, 4, AVX2_U7, REDUCE_RANGE, ctypes.byref(size)) != 0:
        pytest.skip("this build has no avx2_u7 kernel")
    buf = np.empty(size.value + 64, np.uint8)
    address = buf.ctypes.data + (-buf.ctypes.data) % 64
    assert lib.tt_qgemm_pack_ex(AVX2_U7, 0, 8, 4, w.ctypes.data, 4, address, size.value) == 2
    assert b"TT_QGEMM_REDUCE_RANGE" in lib.tt_last_error()
    assert lib.tt_qgemm_pack(AVX2_U7, 8, 4, w.ctypes.data, 4, address, size.value) == 2
    assert lib.tt_qgemm_pack_ex(AVX2_U7, 2, 8, 4, w.ctypes.data, 4, address, size.value) == 2
    assert b"flags=2" in lib.tt_last_error()


def test_reduce_range_quantize_rows_bytes_equal_in_runtime_and_numpy():
    x = awkward_rows(8)
    q, s, z = acc.quantize_rows(x, reduce_range=True)
    assert acc.last_path() == "native:qgemm_quantize_rows"
    q2, s2, z2 = numpy_fallback.quantize_rows(x, reduce_range=True)
    np.testing.assert_array_equal(q, q2)
    np.testing.assert_array_equal(s, s2)
    np.testing.assert_array_equal(z, z2)
    assert q.max() == 127 and z[0] == 0 and z[1] == 127 and s[2] == 1.0
    deq = (q.astype(np.float32) - z[:, None]) * s[:, None]
    assert np.all(np.abs(deq - x) <= 0.5001 * s[:, None])
    # the 7-bit step is the 8-bit one doubled (to float32 rounding): one bit of precision
    s8 = acc.quantize_rows(x)[1]
    np.testing.assert_allclose(s[3:], s8[3:] * np.float32(255 / 127), rtol=1e-6)



def test_reduce_range_thread_counts_give_identical_bits():
    rng = np.random.default_rng(4)
    ql = QuantizedLinear.from_linear(Linear(768, 3072), activation="gelu", reduce_range=True)
    x = rng.standard_normal((37, 768)).astype(np.float32)
    before = tinytorch.get_num_threads()
    try:
        outs = []
        for t in (1, 2, 3):
            tinytorch.set_num_threads(t)
            outs.append(ql(x))
            assert acc.last_path() == f"native:qgemm:{rr_kernel()}"
    finally:
        tinytorch.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_quantize_model_reduce_range():
    from tinytorch.core.layers import Sequential
    from tinytorch.core.activations import ReLU
    model = Sequential(Linear(20, 30), ReLU(), Linear(30, 5))
    assert quantize_model(model, reduce_range=True) == ["0", "2"]
    assert model[0].reduce_range and "reduce_range" in repr(model[0])
    out = model(Tensor(np.ones((3, 20), np.float32)))
    assert out.shape == (3, 5) and acc.last_path() == f"native:qgemm:{rr_kernel()}"
    assert list(model[0]._packs) == [(_native.lib.tt_qgemm_kernel_for(REDUCE_RANGE), "reduce_range")]
