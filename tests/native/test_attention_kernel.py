"""The runtime's FlashAttention kernels (tt_attention_forward / tt_attention_backward)
through the cpu back end: values and gradients against a float64 naive formula for every
ISA this CPU runs (switched with tinytorch.native.set_isa) on 1 and 2 threads, proof of
the path that ran, the layouts folded without copies (transposed heads, broadcast batch,
strided rows) and those copied (strided last dim), NaN propagation, the workspace the
runtime counters see (O(S d), never O(S^2)), what the back end declines, and the C layer's
refusals surfacing as exceptions with its message.
"""
import ctypes

import numpy as np
import pytest

import tinytorch
from tinytorch import _native, backends, native
from tinytorch.backends import cpu
from tinytorch.core import acceleration as acc

RNG = np.random.default_rng(7)


def naive(q, k, v, causal=0, scale=None):
    """(out, lse, P) in float64; causal 0, 1 (top-left) or 2 (bottom-right)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    scale = 1 / np.sqrt(d) if scale is None else scale
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    if causal:
        off = 0 if causal == 1 else sk - sq
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + off, s, -np.inf)
    m = s.max(-1, keepdims=True, initial=-np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        e = np.exp(s - np.where(m == -np.inf, 0, m))
        l = e.sum(-1, keepdims=True)
        p = np.where(l == 0, 0, e / l)
        lse = np.where(l == 0, -np.inf, m + np.log(l))[..., 0]
    return p @ v, lse, p


def naive_grads(q, k, v, g, causal=0, scale=None):
    q, k, v, g = (np.asarray(x, np.float64) for x in (q, k, v, g))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    _, _, p = naive(q, k, v, causal, scale)
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


SHAPES = [  # (batch dims, sq, sk, d); sq <= lanes / 2 takes the rows forward (decoding)
    ((1, 1), 1, 1, 1), ((2,), 65, 130, 16), ((2, 3), 127, 61, 64), ((1,), 200, 200, 128),
    ((), 70, 9, 5), ((1, 2), 3, 0, 8), ((1, 2), 0, 5, 8), ((3, 1), 97, 97, 64),
    ((1, 12), 1, 290, 64), ((2,), 2, 77, 33), ((1, 3), 4, 131, 65), ((), 1, 300, 7),
    ((2,), 5, 40, 64), ((1,), 8, 19, 16),
]
LANES = {"scalar": 1, "avx2": 8, "avx512": 16, "neon": 4}


def forward_path(isa, sq):
    """The block kernels, or the rows forward when a block would leave half its lanes empty."""
    return f"native:attention_forward:{isa}" + (":rows" if isa != "scalar" and 1 <= sq and 2 * sq <= LANES[isa] else "")


@pytest.mark.parametrize("batch,sq,sk,d", SHAPES)
@pytest.mark.parametrize("causal", [False, True, "bottom_right"])
def test_values_and_gradients_match_float64(isa, threads, batch, sq, sk, d, causal):
    code = {False: 0, True: 1, "bottom_right": 2}[causal]
    q, k, v, g = rand(*batch, sq, d), rand(*batch, sk, d), rand(*batch, sk, d), rand(*batch, sq, d)
    out, lse = acc.attention(q, k, v, causal=causal, any_size=True)
    assert acc.last_path() == forward_path(isa, sq)
    assert out.dtype == np.float32 and out.shape == batch + (sq, d) and lse.shape == batch + (sq,)
    want, want_lse, _ = naive(q, k, v, code)
    np.testing.assert_allclose(out, want, atol=2e-6 * max(1, np.sqrt(d)), rtol=1e-5)
    np.testing.assert_allclose(lse, want_lse, atol=2e-6, rtol=1e-5)
    grads = acc.attention_backward(q, k, v, out, lse, g, causal=causal, any_size=True)
    assert acc.last_path() == f"native:attention_backward:{isa}"
    for got, ref in zip(grads, naive_grads(q, k, v, g, code)):
        np.testing.assert_allclose(got, ref, atol=2e-5 * max(1, np.sqrt(d)), rtol=1e-4)


def test_unneeded_gradients_are_not_computed():
    q, k, v, g = rand(2, 40, 16), rand(2, 50, 16), rand(2, 50, 16), rand(2, 40, 16)
    out, lse = acc.attention(q, k, v, any_size=True)
    dq, dk, dv = acc.attention_backward(q, k, v, out, lse, g, need=(False, True, False),
                                        any_size=True)
    assert dq is None and dv is None
    np.testing.assert_allclose(dk, naive_grads(q, k, v, g)[1], atol=2e-5)


def test_layouts_without_copies_and_with(threads):
    b, t, h, d = 2, 77, 3, 24
    x = rand(b, t, 3 * h * d)
    # q, k, v carved out of one fused projection and split into heads: strided, no copy
    q, k, v = (x[..., i * h * d:(i + 1) * h * d].reshape(b, t, h, d).transpose(0, 2, 1, 3)
               for i in range(3))
    assert not q.flags.c_contiguous
    out, _ = acc.attention(q, k, v, causal=True, any_size=True)
    np.testing.assert_allclose(out, naive(q, k, v, 1)[0], atol=3e-6)
    # one K/V head shared by every query head (stride 0 over heads), batch broadcast too
    q2, k2, v2 = rand(b, h, t, d), rand(1, 1, t, d), rand(1, 1, t, d)
    out2, _ = acc.attention(q2, k2, v2, any_size=True)
    np.testing.assert_allclose(out2, naive(q2, k2, v2)[0], atol=3e-6)
    # every other row, and a strided last dimension (that one is copied)
    q3 = rand(2, 3, 2 * t, 2 * d)[:, :, ::2, ::2]
    out3, _ = acc.attention(q3, q3, q3, any_size=True)
    np.testing.assert_allclose(out3, naive(q3, q3, q3)[0], atol=3e-6)
    # more than two leading dims, mixed with broadcasting
    q4, k4 = rand(2, 2, 3, 20, 8), rand(2, 1, 3, 20, 8)
    out4, _ = acc.attention(q4, k4, k4, any_size=True)
    np.testing.assert_allclose(out4, naive(q4, k4, k4)[0], atol=3e-6)


def test_fold_batch_keeps_views():
    q = rand(2, 5, 3, 8).transpose(0, 2, 1, 3)  # [B, H, T, d] over [B, T, H, d] memory
    k = rand(1, 3, 5, 8)
    b, h, folded = cpu.attention_ops._fold_batch([q, k], (2, 3))
    assert (b, h) == (2, 3)
    (qv, qs), (kv, ks) = folded
    assert np.shares_memory(qv, q) and np.shares_memory(kv, k)
    assert qs == (5 * 3 * 8, 8, 3 * 8) and ks == (0, 5 * 8, 8)


def test_nan_propagates_as_in_the_naive_formula():
    q, k, v = rand(1, 70, 8), rand(1, 70, 8), rand(1, 70, 8)
    q[0, 3, 1] = np.nan
    out, lse = acc.attention(q, k, v, any_size=True)
    assert np.isnan(out[0, 3]).all() and np.isnan(lse[0, 3])
    assert np.isfinite(np.delete(out[0], 3, axis=0)).all()
    q[0, 3, 1] = 0.5
    k[0, 66, 0] = np.nan  # a key in the second block: queries 66.. see it under causal
    out, _ = acc.attention(q, k, v, causal=True, any_size=True)
    assert np.isnan(out[0, 66:]).all() and np.isfinite(out[0, :66]).all()
    v[0, 10, 2] = np.nan
    out, _ = acc.attention(q, np.nan_to_num(k), v, any_size=True)
    assert np.isnan(out[0, :, 2]).all() and np.isfinite(out[0, :, :2]).all()


def test_rows_forward_decoding_layout_nan_and_threads(isa):
    """The rows forward (few queries) on the decode layout: one new query per head over a
    KV cache whose rows are a strided window of a larger buffer; NaN in a key or value
    reaches exactly the outputs it should; the bits do not depend on the thread count."""
    if isa == "scalar":
        pytest.skip("the scalar table has no rows forward (its block kernels waste no lanes)")
    cache = rand(2, 12, 400, 64)
    k, v = cache[:, :, :290], cache[:, :, 100:390]   # views: rows 64 floats apart, heads 400 x 64
    q = rand(2, 1, 12, 64).transpose(0, 2, 1, 3)     # [B, H, 1, d] over [B, 1, H, d] memory
    out, lse = acc.attention(q, k, v, causal="bottom_right", any_size=True)
    assert acc.last_path() == forward_path(isa, 1)
    want, want_lse, _ = naive(q, k, v, 2)
    np.testing.assert_allclose(out, want, atol=2e-5, rtol=1e-5)
    np.testing.assert_allclose(lse, want_lse, atol=2e-6, rtol=1e-6)
    before = tinytorch.get_num_threads()
    try:
        runs = []
        for nt in (1, 2, 3):
            tinytorch.set_num_threads(nt)
            runs.append(acc.attention(q, k, v, any_size=True))
    finally:
        tinytorch.set_num_threads(before)
    for o, l in runs[1:]:
        assert np.array_equal(o.view(np.uint32), runs[0][0].view(np.uint32))
        assert np.array_equal(l.view(np.uint32), runs[0][1].view(np.uint32))
    q2, k2, v2 = rand(3, 2, 16), rand(3, 70, 16), rand(3, 70, 16)
    k2[1, 66, 0] = np.nan   # a key in the second block of batch 1: its queries turn NaN
    v2[2, 5, 3] = np.nan    # a value: column 3 of batch 2's outputs turns NaN
    out2, lse2 = acc.attention(q2, k2, v2, any_size=True)
    assert acc.last_path() == forward_path(isa, 2)
    assert np.isnan(out2[1]).all() and np.isnan(lse2[1]).all()
    assert np.isnan(out2[2, :, 3]).all() and np.isfinite(np.delete(out2[2], 3, axis=1)).all()
    np.testing.assert_allclose(out2[0], naive(q2[0], k2[0], v2[0])[0], atol=2e-6)
    # top-left causality: query 0 sees key 0 only, query 1 keys 0 and 1
    out3, _ = acc.attention(q2[:1], k2[:1], v2[:1], causal=True, any_size=True)
    np.testing.assert_allclose(out3[0, 0], v2[0, 0], atol=1e-6)
    np.testing.assert_allclose(out3, naive(q2[:1], k2[:1], v2[:1], 1)[0], atol=2e-6)


def test_workspace_is_counted_and_linear_in_seq():
    s, d = 2048, 64
    q, k, v, g = rand(1, s, d), rand(1, s, d), rand(1, s, d), rand(1, s, d)
    native.reset_peak_memory()
    base = native.memory_stats()["bytes_in_use"]
    out, lse = acc.attention(q, k, v, causal=True)
    acc.attention_backward(q, k, v, out, lse, g, causal=True)
    stats = native.memory_stats()
    assert stats["bytes_in_use"] == base
    extra = stats["peak_bytes"] - base
    # per thread: Q^T and dO^T of the head (2 S d floats) plus the 64 x 64 blocks; one head
    # is cut into 8 groups of key blocks, each with a partial dQ (8 S d floats, whatever the
    # thread count); S x S scores alone would be 16 MiB
    per_thread = (2 * s * d + 64 * 1024) * 4
    assert 0 < extra <= per_thread * tinytorch.get_num_threads() + 8 * s * d * 4, extra


def test_declines_what_it_does_not_serve():
    q = rand(2, 32, 16)
    assert cpu.attention(q.astype(np.float64), q, q, None, 0, 0.25, True) is NotImplemented
    assert cpu.attention(q, q, q, np.ones((32, 32), bool), 0, 0.25, True) is NotImplemented
    assert cpu.attention(q, q, q[..., :8], None, 0, 0.25, True) is NotImplemented  # dv != d
    # a tiny problem is served natively (NATIVE_MIN_ATTENTION_WORK is 0: the call costs less
    # than NumPy's reference even at 4 x 4) and agrees with the reference
    tiny = np.ascontiguousarray(q[:, :4, :4])
    out, _ = acc.attention(tiny, tiny, tiny)
    assert acc.last_path().startswith("native:attention_forward")
    with backends.use_native(False):
        ref, _ = acc.attention(tiny, tiny, tiny)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    with backends.use_native(False):
        acc.attention(q, q, q, any_size=True)
        assert acc.last_path() == "numpy"


def test_c_refusals_surface_with_the_runtime_message():
    lib = _native.lib
    x = np.zeros((1, 1, 4, 8), np.float32)
    o, lse = np.zeros_like(x), np.zeros((1, 1, 4), np.float32)
    with pytest.raises(ValueError, match=r"tt_attention_forward: causal=5"):
        _native.check(lib.tt_attention_forward(x.ctypes.data, None, x.ctypes.data, None,
                                               x.ctypes.data, None, o.ctypes.data, None,
                                               lse.ctypes.data, 1, 1, 4, 4, 8, 1.0, 5))
    bad = (ctypes.c_int64 * 3)(32, -1, 8)
    with pytest.raises(ValueError, match=r"k_strides\[1\]=-1 is negative"):
        _native.check(lib.tt_attention_forward(x.ctypes.data, None, x.ctypes.data, bad,
                                               x.ctypes.data, None, o.ctypes.data, None,
                                               lse.ctypes.data, 1, 1, 4, 4, 8, 1.0, 0))
    with pytest.raises(ValueError, match=r"o overlaps q"):
        _native.check(lib.tt_attention_forward(x.ctypes.data, None, x.ctypes.data, None,
                                               x.ctypes.data, None, x.ctypes.data, None,
                                               lse.ctypes.data, 1, 1, 4, 4, 8, 1.0, 0))
    assert not o.any()


def test_head_split_views_give_results_whose_heads_merge_without_a_copy(threads):
    """q, k, v as the head split of [B, T, H*d] projections (transposed views): the output
    and the gradients are written in [B, T, H, d] memory, so merging heads back is a view;
    values equal the float64 formula."""
    b, t, h, d = 2, 67, 3, 16
    q, k, v = (rand(b, t, h * d).reshape(b, t, h, d).transpose(0, 2, 1, 3) for _ in range(3))
    out, lse = acc.attention(q, k, v, causal=True)
    assert acc.last_path().startswith("native:attention")
    merged = out.transpose(0, 2, 1, 3)
    assert merged.flags.c_contiguous  # the merge is free: no copy needed
    want, want_lse, _ = naive(q, k, v, causal=1)
    np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5)
    g = rand(b, t, h * d).reshape(b, t, h, d).transpose(0, 2, 1, 3)
    dq, dk, dv = acc.attention_backward(q, k, v, out, lse, g, causal=True)
    for got, ref in zip((dq, dk, dv), naive_grads(q, k, v, g, causal=1)):
        assert got.transpose(0, 2, 1, 3).flags.c_contiguous
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
