"""triton_gelu: the Triton fused bias-GELU kernels, forward and backward, without a GPU.

Two halves:
  * interpreter tests (``test_interp_*``) run the real Triton kernels under Triton's CPU
    interpreter. TRITON_INTERPRET=1 must be set before triton is imported, so they run only
    in a child pytest process that has it (``test_interpreter_suite``, which starts it);
    in the main process they are skipped, so its triton import state is untouched. They
    compare forward and backward with the float64 tanh formula on awkward shapes (0, 1,
    odd, prime, not a multiple of the block, non-contiguous) and run the contract checker.
  * fallback tests, here: without a GPU (and without the interpreter) the functions return
    the CPU kernels' result and say why; with triton hidden (a child process) they say
    triton is missing; dtype and shape rules raise the documented errors.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

from contract import check_gradcheck, check_ndarray_in_ndarray_out, check_path_report, \
    check_tensor_in_tensor_out, run_with_grads
from tinytorch import backends
from tinytorch.core.acceleration import last_path, use_native
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import triton_gelu as tg

HERE = os.path.dirname(os.path.abspath(__file__))
INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
HAVE_TRITON = __import__("importlib").util.find_spec("triton") is not None
interp = pytest.mark.skipif(not INTERPRETER, reason="runs in the child process of "
                            "test_interpreter_suite (TRITON_INTERPRET=1 before import triton)")

S = np.sqrt(2.0 / np.pi)
C = 0.044715


def gelu64(x, b=None):
    """The tanh GELU in float64, written out independently of the package."""
    u = np.asarray(x, np.float64) + (0.0 if b is None else np.asarray(b, np.float64))
    return 0.5 * u * (1.0 + np.tanh(S * (u + C * u ** 3)))


def gelu64_grads(x, b, g):
    u = np.asarray(x, np.float64) + (0.0 if b is None else np.asarray(b, np.float64))
    t = np.tanh(S * (u + C * u ** 3))
    d = 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * S * (1.0 + 3.0 * C * u * u)
    gx = np.asarray(g, np.float64) * d
    gb = None if b is None else gx.sum(axis=tuple(range(gx.ndim - 1)))
    return gx, gb


def data(shape, seed, scale=3.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


# (shape of x): empty, one element, odd, prime, rows not a multiple of the row block,
# columns not a multiple of the column block (interpreter blocks: 4096 wide), 3-D
SHAPES = [(0, 5), (3, 0), (1, 1), (7, 13), (131, 37), (2, 4099), (3, 5, 17), (17,)]


# ------------------------------------------------------------------ interpreter (child)

@interp
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
def test_interp_forward_and_backward_match_float64(shape, with_bias):
    assert tg.has_triton_support() and tg.triton_build_info()["mode"] == "interpreter"
    x = data(shape, 1)
    b = data(shape[-1:], 2) if with_bias else None
    y = tg.triton_fused_gelu(x, b)
    assert last_path() == "triton:interpreter:bias_gelu_forward"
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, gelu64(x, b), rtol=2e-6, atol=2e-6)
    g = data(shape, 3, 1.0)
    gx, gb = tg.triton_fused_gelu_backward(x, b, g)
    assert last_path() == "triton:interpreter:bias_gelu_backward"
    rgx, rgb = gelu64_grads(x, b, g)
    np.testing.assert_allclose(gx, rgx, rtol=2e-5, atol=2e-6)
    if with_bias:
        assert gb.shape == b.shape and gb.dtype == np.float32
        np.testing.assert_allclose(gb, rgb, rtol=1e-5, atol=1e-5)
    else:
        assert gb is None


@interp
def test_interp_limits_and_nan_follow_the_cpu_kernels():
    x = np.array([[np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, -1e30, 80.0, -80.0]], np.float32)
    with np.errstate(over="ignore", invalid="ignore"):  # the interpreter's own NumPy maths
        y = tg.triton_fused_gelu(x)
        gx, _ = tg.triton_fused_gelu_backward(x, None, np.ones_like(x))
    assert np.isposinf(y[0, 0]) and y[0, 1] == 0 and np.signbit(y[0, 1]) and np.isnan(y[0, 2])
    np.testing.assert_array_equal(y[0, 3:], np.array([0.0, -0.0, 1e30, -0.0, 80.0, -0.0], np.float32))
    assert np.isnan(gx[0, 2])
    np.testing.assert_array_equal(gx[0, [0, 1, 3, 5, 6, 7, 8]], [1.0, 0.0, 0.5, 1.0, 0.0, 1.0, 0.0])
    with use_native(False):  # the CPU reference follows the same rules
        np.testing.assert_array_equal(np.signbit(y), np.signbit(tg.triton_fused_gelu(x)))


@interp
def test_interp_non_contiguous_and_tensor_autograd():
    base = data((9, 40), 4)
    x = base[:, ::2]                       # strided columns
    b = data((20,), 5)
    np.testing.assert_allclose(tg.triton_fused_gelu(x, b), gelu64(x, b), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(tg.triton_fused_gelu(x.T), gelu64(x.T), rtol=2e-6, atol=2e-6)
    out, (gx, gb), g = run_with_grads(tg.triton_fused_gelu, [x, b])
    assert isinstance(out, Tensor) and type(out.grad_fn).__name__ == "TritonBiasGeluFunction"
    rgx, rgb = gelu64_grads(x, b, g)
    np.testing.assert_allclose(gx, rgx, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(gb, rgb, rtol=1e-5, atol=1e-5)


@interp
def test_interp_extension_contract():
    x, b = data((6, 33), 6), data((33,), 7)
    check_ndarray_in_ndarray_out(tg.triton_fused_gelu, [x, b], gelu64, atol=2e-6, rtol=2e-6)
    check_tensor_in_tensor_out(tg.triton_fused_gelu, [x, b], gelu64, atol=2e-6, rtol=2e-6)
    # float64 inputs keep float64 on the CPU path: gradcheck checks that path's derivative
    check_gradcheck(tg.triton_fused_gelu, [x[:2, :5].astype(np.float64), b[:5].astype(np.float64)])
    path = check_path_report(tg.triton_fused_gelu, [x, b], last_path, lambda: use_native(False),
                             fallback_name="numpy", native_expected=True, native_prefix="triton:")
    assert path == "triton:interpreter:bias_gelu_forward"
    # the fallback (switch off) agrees with the kernel, values and gradients
    fast = run_with_grads(tg.triton_fused_gelu, [x, b])
    with use_native(False):
        ref = run_with_grads(tg.triton_fused_gelu, [x, b])
    assert tg.triton_last_run()["path"] == "cpu" and "turned off" in tg.triton_last_run()["reason"]
    np.testing.assert_allclose(fast[0].data, ref[0].data, rtol=2e-6, atol=2e-6)
    for f, r in zip(fast[1], ref[1]):
        np.testing.assert_allclose(f, r, rtol=1e-4, atol=1e-5)


@interp
def test_interp_dtype_rules():
    x = data((4, 9), 8)
    y16 = tg.triton_fused_gelu(x.astype(np.float16))   # other reals run as float32
    assert y16.dtype == np.float32 and last_path().startswith("triton:interpreter")
    np.testing.assert_allclose(y16, gelu64(x.astype(np.float16)), rtol=2e-6, atol=2e-6)
    yi = tg.triton_fused_gelu(np.arange(-3, 3).reshape(2, 3))
    assert yi.dtype == np.float32
    np.testing.assert_allclose(yi, gelu64(np.arange(-3, 3).reshape(2, 3)), rtol=2e-6, atol=2e-6)
    y64 = tg.triton_fused_gelu(x.astype(np.float64))    # float64 is never lowered
    assert y64.dtype == np.float64 and "float64" in tg.triton_last_run()["reason"]
    np.testing.assert_allclose(y64, gelu64(x), rtol=1e-12, atol=1e-12)
    assert tg.triton_last_run()["path"] == "cpu"
    tg.triton_fused_gelu(x)
    run = tg.triton_last_run()
    assert run["path"] == "triton:interpreter" and run["reason"] == "" and run["kernel_s"] > 0
    assert run["copy_in_s"] == run["copy_out_s"] == 0.0   # host memory, nothing copied


@interp
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_interp_device_array_path_with_torch_tensors(dtype):
    # Under the interpreter, PyTorch CPU tensors take the device-array path (no copy, a
    # tensor back), so the code that serves CUDA tensors on a GPU runs here too.
    torch = pytest.importorskip("torch")
    tdtype = getattr(torch, dtype)
    x = torch.from_numpy(data((5, 3, 70), 12)).to(tdtype)[:, :, ::2]   # non-contiguous
    b = torch.from_numpy(data((35,), 13)).to(tdtype)
    g = torch.from_numpy(data((5, 3, 35), 14, 1.0)).to(tdtype)
    y = tg.triton_fused_gelu(x, b)
    assert isinstance(y, torch.Tensor) and y.dtype == tdtype and tuple(y.shape) == (5, 3, 35)
    assert last_path() == "triton:interpreter:bias_gelu_forward"
    x64, b64, g64 = (t.double().numpy() for t in (x, b, g))
    tol = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    np.testing.assert_allclose(y.double().numpy(), gelu64(x64, b64), rtol=tol, atol=tol)
    gx, gb = tg.triton_fused_gelu_backward(x, b, g)
    assert isinstance(gx, torch.Tensor) and gx.dtype == tdtype and gb.dtype == tdtype
    rgx, rgb = gelu64_grads(x64, b64, g64)
    np.testing.assert_allclose(gx.double().numpy(), rgx, rtol=tol * 10, atol=tol)
    np.testing.assert_allclose(gb.double().numpy(), rgb, rtol=tol * 10, atol=tol * 10)
    y_nobias = tg.triton_fused_gelu(x)
    np.testing.assert_allclose(y_nobias.double().numpy(), gelu64(x64), rtol=tol, atol=tol)
    with pytest.raises(TypeError, match="device arrays must be one of"):
        tg.triton_fused_gelu(x.double())
    with pytest.raises(TypeError, match="bias must be a torch device array"):
        tg.triton_fused_gelu(x, np.ones(35, np.float32))


# FlashAttention forward (triton_attention.py): the same Triton back end, the same child.
# (batch of q, L, S, d, dv, causal): one element, dv != d, prime sizes, L > S and L < S
# bottom-right (queries that see no key), sizes past one block, broadcast batch dims.
ATTENTION_CASES = [((), 1, 1, 1, 1, False), ((2,), 5, 7, 3, 4, False), ((1, 3), 17, 33, 8, 8, True),
                   ((2, 1), 40, 13, 5, 6, "bottom_right"), ((3,), 130, 150, 16, 16, "bottom_right"),
                   ((2,), 67, 67, 24, 9, "top_left"), ((1,), 3, 0, 4, 4, False)]


def _attention_inputs(case, seed):
    bq, L, S, d, dv, causal = case
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(bq + (L, d)).astype(np.float32)
    k = rng.standard_normal((S, d)).astype(np.float32)
    v = rng.standard_normal((1, S, dv)).astype(np.float32)
    return q, k, v, causal


@interp
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_interp_attention_forward_matches_the_float64_reference(case):
    from tinytorch.backends.attention_reference import attention_forward_reference
    from tinytorch.extensions.triton_attention import triton_flash_attention
    q, k, v, causal = _attention_inputs(case, 21)
    out = triton_flash_attention(q, k, v, causal=causal)
    assert last_path() == "triton:interpreter:attention_forward"
    ref, ref_lse = attention_forward_reference(*(a.astype(np.float64) for a in (q, k, v)), causal=causal)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-6)
    _, lse = backends.routes("triton_attention_forward")[0](q, k, v, {False: 0, True: 1, "top_left": 1,
                                                                      "bottom_right": 2}[causal], 0.7)
    _, ref_lse = attention_forward_reference(*(a.astype(np.float64) for a in (q, k, v)), causal=causal,
                                             scale=0.7)
    np.testing.assert_array_equal(np.isneginf(lse), np.isneginf(ref_lse))   # rows that see no key
    finite = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[finite], ref_lse[finite], rtol=1e-5, atol=2e-6)


@interp
def test_interp_attention_tensors_and_backward():
    from tinytorch.backends.attention_reference import (attention_backward_reference,
                                                        attention_forward_reference)
    from tinytorch.extensions.triton_attention import triton_flash_attention
    q, k, v, _ = _attention_inputs(((2,), 9, 11, 4, 5, None), 22)
    k, v = np.broadcast_to(k, (2, 11, 4)).copy(), np.broadcast_to(v, (2, 11, 5)).copy()
    out, grads, g = run_with_grads(lambda a, b, c: triton_flash_attention(a, b, c, causal="bottom_right"),
                                   [q, k, v])
    assert type(out.grad_fn).__name__ == "TritonFlashAttentionFunction"
    args64 = [a.astype(np.float64) for a in (q, k, v)]
    ref, lse = attention_forward_reference(*args64, causal="bottom_right")
    np.testing.assert_allclose(out.data, ref, rtol=1e-5, atol=2e-6)
    refs = attention_backward_reference(*args64, ref, lse, g.astype(np.float64), causal="bottom_right")
    for got, want in zip(grads, refs):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    y64 = triton_flash_attention(*args64)     # float64 stays float64, on the CPU
    assert y64.dtype == np.float64 and tg.triton_last_run()["path"] == "cpu"
    assert "float64" in tg.triton_last_run()["reason"]


# ------------------------------------------------------------------ main process

@pytest.mark.skipif(INTERPRETER, reason="this is the child")
@pytest.mark.skipif(not HAVE_TRITON, reason="triton is not installed (pip install .[triton])")
def test_interpreter_suite():
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           "-k", "interp_", os.path.join(HERE, "test_triton_gelu.py")],
                          env=env, capture_output=True, text=True, timeout=240, cwd=HERE)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout.splitlines()[-1], done.stdout[-2000:]


@pytest.mark.skipif(INTERPRETER, reason="main-process behaviour")
def test_without_a_gpu_it_falls_back_and_says_why():
    if backends.status("triton")[0]:
        pytest.skip("a GPU is present: the fallback is not what runs here")
    assert tg.has_triton_support() is False
    info = tg.triton_build_info()
    assert info["kernel"] is False and info["mode"] is None and info["detail"]
    x, b = data((5, 7), 9), data((7,), 10)
    y = tg.triton_fused_gelu(x, b)
    np.testing.assert_allclose(y, gelu64(x, b), rtol=2e-6, atol=2e-6)
    run = tg.triton_last_run()
    assert run["path"] == "cpu" and run["reason"] == info["detail"]
    assert ("GPU" in run["reason"]) or ("not installed" in run["reason"])
    assert not last_path().startswith("triton")
    out, (gx, gb), g = run_with_grads(tg.triton_fused_gelu, [x, b])
    rgx, rgb = gelu64_grads(x, b, g)
    np.testing.assert_allclose(gx, rgx, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(gb, rgb, rtol=1e-5, atol=1e-5)
    gx2, gb2 = tg.triton_fused_gelu_backward(x, b, g)
    np.testing.assert_allclose(gx2, rgx, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(gb2, rgb, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(INTERPRETER, reason="main-process behaviour")
def test_the_function_runs_the_cpu_door_when_triton_does_not_route():
    """TritonBiasGeluFunction applied while the registry routes no Triton op (as when
    use_native(False) comes between a forward and its backward): the CPU door's kernels,
    with "cpu" and the reason filed in triton_last_run()."""
    x, b = data((5, 7), 14), data((7,), 15)
    xt, bt = Tensor(x, requires_grad=True), Tensor(b, requires_grad=True)
    with use_native(False):
        out = tg.TritonBiasGeluFunction.apply(xt, bt)
        run = tg.triton_last_run()
        assert run["path"] == "cpu" and run["reason"] == tg.triton_build_info()["detail"] != "", run
        g = data((5, 7), 16, scale=1.0)
        out.backward(g)
    np.testing.assert_allclose(out.data, gelu64(x, b), rtol=2e-6, atol=2e-6)
    rgx, rgb = gelu64_grads(x, b, g)
    np.testing.assert_allclose(xt.grad, rgx, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(bt.grad, rgb, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(INTERPRETER, reason="main-process behaviour")
def test_attention_without_a_gpu_falls_back_to_flash_attention():
    from tinytorch.backends.attention_reference import attention_forward_reference
    from tinytorch.extensions.triton_attention import triton_flash_attention
    if backends.status("triton")[0]:
        pytest.skip("a GPU is present: the fallback is not what runs here")
    q, k, v, causal = _attention_inputs(ATTENTION_CASES[3], 23)
    out = triton_flash_attention(q, k, v, causal=causal)
    ref, _ = attention_forward_reference(*(a.astype(np.float64) for a in (q, k, v)), causal=causal)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=2e-6)
    assert tg.triton_last_run() == {"path": "cpu", "reason": tg.triton_build_info()["detail"],
                                    "copy_in_s": 0.0, "kernel_s": 0.0, "copy_out_s": 0.0}
    with pytest.raises(ValueError, match="q and k must share the last dim"):
        triton_flash_attention(q, k[:, :2], v)
    with pytest.raises(ValueError, match="causal must be"):
        triton_flash_attention(q, k, v, causal="left")


def test_bad_inputs_name_the_problem():
    x = data((3, 4), 11)
    with pytest.raises(ValueError, match=r"bias must have shape \(4,\)"):
        tg.triton_fused_gelu(x, np.ones(5, np.float32))
    with pytest.raises(ValueError, match="scalar"):
        tg.triton_fused_gelu(np.array(1.0, np.float32))
    with pytest.raises(TypeError, match="real-valued"):
        tg.triton_fused_gelu(x.astype(np.complex64))
    with pytest.raises(TypeError, match="Tensor or a numpy.ndarray"):
        tg.triton_fused_gelu([[1.0, 2.0]])
    with pytest.raises(ValueError, match="grad_output must have the shape"):
        tg.triton_fused_gelu_backward(x, None, np.ones((3, 5), np.float32))


@pytest.mark.skipif(INTERPRETER, reason="main-process behaviour")
def test_without_triton_installed_it_falls_back_and_says_so():
    code = ("import sys; sys.modules['triton'] = None\n"   # import triton now fails
            "import numpy as np\n"
            "from tinytorch.extensions import triton_gelu as tg\n"
            "x = np.linspace(-4, 4, 12, dtype=np.float32).reshape(3, 4)\n"
            "y = tg.triton_fused_gelu(x, np.ones(4, np.float32))\n"
            "print(repr(y.tolist())); print(tg.has_triton_support()); print(tg.triton_last_run()['reason'])\n")
    env = dict(os.environ, TRITON_INTERPRET="1")   # even asking for the interpreter
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    values, support, reason = done.stdout.strip().splitlines()
    x = np.linspace(-4, 4, 12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(np.array(eval(values)), gelu64(x, np.ones(4)), rtol=2e-6, atol=2e-6)
    assert support == "False" and "triton package is not installed" in reason


def test_registry_lists_triton_with_its_ops():
    names = {b.name: b for b in backends.registered()}
    assert set(names["triton"].ops) == {"triton_bias_gelu", "triton_bias_gelu_backward",
                                        "triton_attention_forward"}
    ok, detail = backends.status("triton")
    assert isinstance(ok, bool) and detail
    with use_native(False):
        assert backends.routes("triton_bias_gelu") == ()
