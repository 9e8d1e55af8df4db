"""flash_attention (FlashAttentionFunction and the tiled NumPy reference) through the
extension contract checker, plus: the tiled reference against the naive formula (forward
and gradients, float64, tiles that do not divide the sizes, masks), the native path against
PyTorch's scaled_dot_product_attention (values and gradients, float32 tolerance) for S = 0,
1, odd, prime and block-straddling sizes, different query/key lengths, the causal modes and
d in {1, 16, 64, 128}; the stock attention of the core; the dtype rule; the ISA chosen by
TINYTORCH_ISA in a subprocess; NaN as the naive formula; shape errors that name the shapes.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from contract import check_contract, run_with_grads
from tinytorch import native
from tinytorch.core.acceleration import use_native
from tinytorch.core.attention import attention
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import FlashAttentionFunction, flash_attention
from tinytorch.extensions.flash_attn import (attention_backward_reference,
                                                  attention_forward_reference, attention_naive,
                                                  last_path)

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
NATIVE = native.available()


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def naive_grads(q, k, v, g, causal=False, scale=None, mask=None):
    """Gradients of attention_naive, differentiated by hand in float64."""
    q, k, v, g = (np.asarray(x, np.float64) for x in (q, k, v, g))
    scale = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    eye = np.eye(v.shape[-2])
    p = attention_naive(q, k, eye.reshape((1,) * (v.ndim - 2) + eye.shape) * np.ones(v.shape[:-2] + (1, 1)),
                        causal=causal, scale=scale, mask=mask)  # the probabilities themselves
    dv = np.swapaxes(p, -1, -2) @ g
    dp = g @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale, dv


# ------------------------------------------------------------------------------------
# The contract
# ------------------------------------------------------------------------------------

@pytest.mark.parametrize("causal", [False, True, "bottom_right"])
def test_contract(causal):
    q, k, v = rand(2, 3, 37, 16), rand(2, 3, 45, 16), rand(2, 3, 45, 16)
    small = [rand(1, 2, 5, 3, dtype=np.float64), rand(1, 2, 7, 3, dtype=np.float64),
             rand(1, 2, 7, 3, dtype=np.float64)]
    fn = lambda a, b, c: flash_attention(a, b, c, causal=causal)  # noqa: E731
    check_contract(fn, [q, k, v], reference=lambda a, b, c: attention_naive(a, b, c, causal=causal),
                   disable_native=lambda: use_native(False), path_report=last_path,
                   native_expected=NATIVE, atol=2e-6, rtol=1e-5, gradcheck_inputs=small)


def test_tensor_and_ndarray_mix_and_function_class():
    q, k = Tensor(rand(1, 20, 8), requires_grad=True), rand(1, 30, 8)
    out = flash_attention(q, k, k, causal=True)
    assert isinstance(out, Tensor) and isinstance(out.grad_fn, FlashAttentionFunction)
    out.sum().backward()
    assert q.grad.shape == (1, 20, 8) and np.isfinite(q.grad).all()
    assert last_path() == ("native:attention_backward:" + native.isa() if NATIVE else "numpy")


# ------------------------------------------------------------------------------------
# The tiled reference is the naive formula, tile by tile
# ------------------------------------------------------------------------------------

REF_CASES = [  # (batch, sq, sk, d, dv)
    ((2,), 0, 5, 4, 4), ((2,), 5, 0, 4, 4), ((1,), 1, 1, 1, 1), ((2, 2), 13, 29, 6, 5),
    ((3,), 31, 17, 8, 8), ((1,), 23, 23, 3, 7),
]


@pytest.mark.parametrize("batch,sq,sk,d,dv", REF_CASES)
@pytest.mark.parametrize("causal", [False, True, "bottom_right"])
@pytest.mark.parametrize("mask_kind", [None, "bool", "float"])
def test_tiled_reference_matches_naive(batch, sq, sk, d, dv, causal, mask_kind):
    q, k = rand(*batch, sq, d, dtype=np.float64), rand(*batch, sk, d, dtype=np.float64)
    v, g = rand(*batch, sk, dv, dtype=np.float64), rand(*batch, sq, dv, dtype=np.float64)
    mask = None
    if mask_kind == "bool":
        mask = RNG.random((sq, sk)) > 0.3
        if sq:
            mask[0] = False  # a query that sees nothing: zero row, no gradient
    elif mask_kind == "float":
        mask = RNG.standard_normal((sq, sk))
    out, lse = attention_forward_reference(q, k, v, causal, None, mask, block_q=7, block_k=5)
    np.testing.assert_allclose(out, attention_naive(q, k, v, causal, None, mask), atol=1e-12)
    grads = attention_backward_reference(q, k, v, out, lse, g, causal, None, mask, block_q=4,
                                         block_k=6)
    for got, want in zip(grads, naive_grads(q, k, v, g, causal, None, mask)):
        np.testing.assert_allclose(got, want, atol=1e-11)
    if mask_kind == "bool" and sq:
        assert not out[..., 0, :].any() and lse[..., 0].max() == -np.inf
        assert not grads[0][..., 0, :].any()


# ------------------------------------------------------------------------------------
# Against PyTorch's scaled_dot_product_attention (and the stock NumPy attention)
# ------------------------------------------------------------------------------------

def torch_sdpa(q, k, v, g, causal, mask=None):
    t = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v)]
    m = None
    if mask is not None:  # a float mask must have the inputs' dtype (PyTorch misreads others)
        m = torch.tensor(mask) if mask.dtype == np.bool_ else torch.tensor(mask, dtype=torch.float64)
    out = torch.nn.functional.scaled_dot_product_attention(*t, attn_mask=m, is_causal=causal)
    out.backward(torch.tensor(g, dtype=torch.float64))
    return out.detach().numpy(), [x.grad.numpy() for x in t]


TORCH_CASES = [  # (sq, sk, d): 0, 1, odd, prime, not multiples of the 64 x 64 blocks
    (0, 0, 16), (1, 1, 64), (1, 37, 16), (17, 17, 1), (64, 64, 64), (97, 97, 16),
    (131, 67, 64), (65, 130, 128), (200, 211, 64),
]


@pytest.mark.parametrize("sq,sk,d", TORCH_CASES)
@pytest.mark.parametrize("causal", [False, True])
def test_native_matches_torch_sdpa(sq, sk, d, causal):
    if causal and sq > sk:
        sk = sq  # rows that see no key: PyTorch gives NaN there, we give 0 (tested above)
    q, k, v, g = rand(2, 2, sq, d), rand(2, 2, sk, d), rand(2, 2, sk, d), rand(2, 2, sq, d)
    out, grads, _ = run_with_grads(lambda a, b, c: flash_attention(a, b, c, causal=causal),
                                   [q, k, v], upstream_seed=1)
    if sq and sk and NATIVE:
        assert last_path() == "native:attention_backward:" + native.isa()
    g = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
    want, want_grads = torch_sdpa(q, k, v, g, causal)
    tol = 3e-6 * max(1.0, np.sqrt(d))
    np.testing.assert_allclose(out.data, want, atol=tol, rtol=1e-5)
    for got, ref in zip(grads, want_grads):
        np.testing.assert_allclose(got, ref, atol=10 * tol, rtol=1e-4)


def test_masks_match_torch_and_the_stock_attention():
    q, k, v, g = rand(2, 2, 40, 16), rand(2, 2, 50, 16), rand(2, 2, 50, 16), rand(2, 2, 40, 16)
    bool_mask = RNG.random((2, 1, 40, 50)) > 0.4
    bool_mask[..., 0] = True  # every query sees at least one key (PyTorch gives NaN otherwise)
    for mask in (bool_mask, RNG.standard_normal((40, 50)).astype(np.float32)):
        out, grads, _ = run_with_grads(lambda a, b, c: flash_attention(a, b, c, mask=mask),
                                       [q, k, v], upstream_seed=1)
        assert last_path() == "numpy"  # masks are served by the tiled reference
        g = np.random.default_rng(1).standard_normal(out.shape).astype(np.float32)
        want, want_grads = torch_sdpa(q, k, v, g, False, mask)
        np.testing.assert_allclose(out.data, want, atol=3e-6)
        for got, ref in zip(grads, want_grads):
            np.testing.assert_allclose(got, ref, atol=3e-5)
        np.testing.assert_allclose(out.data, attention(q, k, v, mask=mask),
                                   atol=3e-6)
    np.testing.assert_allclose(flash_attention(q, q, q, causal=True),
                               attention(q, q, q, causal=True), atol=3e-6)


# ------------------------------------------------------------------------------------
# dtype rule, ISA choice, NaN, errors
# ------------------------------------------------------------------------------------

def test_dtype_rule():
    q = rand(1, 30, 8)
    assert flash_attention(q, q, q).dtype == np.float32
    out64 = flash_attention(q.astype(np.float64), q, q)  # mixed: float64 via the reference
    assert out64.dtype == np.float64 and last_path() == "numpy"
    np.testing.assert_allclose(out64, attention_naive(q.astype(np.float64), q, q), atol=1e-12)
    assert flash_attention(q.astype(np.float16), q.astype(np.float16), q.astype(np.float16)).dtype \
        == np.float32
    with pytest.raises(TypeError, match="real-valued"):
        flash_attention(q.astype(np.complex64), q, q)
    with pytest.raises(TypeError, match="Tensor or a numpy.ndarray"):
        flash_attention([[1.0]], q, q)


@pytest.mark.skipif(not NATIVE, reason="needs the runtime")
def test_isa_chosen_by_the_environment_runs():
    isas = [i for i in ("scalar", "avx2") if i in native.info()["isa_detected"]]
    code = ("import numpy as np; from tinytorch.extensions import flash_attention, last_path\n"
            "from tinytorch.extensions.flash_attn import attention_naive\n"
            "q = np.random.default_rng(0).standard_normal((2, 70, 24)).astype(np.float32)\n"
            "err = np.abs(flash_attention(q, q, q, causal=True) - attention_naive(q, q, q, True)).max()\n"
            "print(last_path(), err < 3e-6)")
    for isa in isas:
        env = dict(os.environ, TINYTORCH_ISA=isa)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.stdout.split() == [f"native:attention_forward:{isa}", "True"], done.stderr


def test_nan_propagates_as_the_naive_formula():
    q, k, v = rand(1, 50, 8), rand(1, 60, 8), rand(1, 60, 8)
    q[0, 7, 0] = np.nan
    k[0, 55, 3] = np.nan
    for disable in (False, True):
        with use_native(not disable):
            got = flash_attention(q, k, v, causal="bottom_right")
        want = attention_naive(q, k, v, causal="bottom_right")
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert np.isnan(got[0, 7]).all() and np.isnan(got[0, 45:]).all()
        assert np.isfinite(got[0, :7]).all() and np.isfinite(got[0, 8:45]).all()


@pytest.mark.parametrize("shapes,match", [
    (((2, 5, 8), (2, 6, 4), (2, 6, 4)), r"share the last dim, got q \(2, 5, 8\) and k \(2, 6, 4\)"),
    (((2, 5, 8), (2, 6, 8), (2, 7, 8)), r"same number of keys, got k \(2, 6, 8\) and v \(2, 7, 8\)"),
    (((2, 5, 8), (3, 6, 8), (3, 6, 8)), r"batch dims do not broadcast: q \(2, 5, 8\), k \(3, 6, 8\)"),
    (((8,), (6, 8), (6, 8)), r"must be \[\.\.\., seq, dim\], got q \(8,\)"),
])
def test_mismatched_shapes_raise_value_error_naming_them(shapes, match):
    q, k, v = (rand(*s) for s in shapes)
    with pytest.raises(ValueError, match=match):
        flash_attention(q, k, v)
    with pytest.raises(ValueError, match=match):
        flash_attention(Tensor(q, requires_grad=True), k, v)


def test_bad_mask_causal_and_scale_are_refused():
    q = rand(2, 5, 8)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 5\) does not broadcast to the scores \(2, 5, 5\)"):
        flash_attention(q, q, q, mask=np.ones((4, 5), bool))
    with pytest.raises(TypeError, match="bool or float"):
        flash_attention(q, q, q, mask=np.ones((5, 5), np.int32))
    with pytest.raises(ValueError, match="causal must be"):
        flash_attention(q, q, q, causal="left")
    with pytest.raises(ValueError, match="scale must be finite"):
        flash_attention(q, q, q, scale=float("inf"))
