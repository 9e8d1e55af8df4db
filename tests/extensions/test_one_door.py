"""The one door to the kernels (tinytorch.core.acceleration): one switch turns every native
path off, the template's own back end included; one thread-local report says what ran, and
the extensions re-export it; no shipped extension reaches into the door's private names."""
import ast
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import tinytorch
from tinytorch import extensions
from tinytorch.core import acceleration as acc
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import scaled_matmul, simd_fused_bias_gelu, simd_matmul

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = pytest.mark.skipif(not tinytorch.native.available(), reason="needs the runtime")

RNG = np.random.default_rng(5)
A = RNG.standard_normal((8, 16)).astype(np.float32)
B = RNG.standard_normal((16, 8)).astype(np.float32)
BIG = RNG.standard_normal((128, 128)).astype(np.float32)


def every_extension_path():
    """(name, path after the call) for one float32 call of each native-capable entry point."""
    calls = {
        "template scaled_matmul": lambda: scaled_matmul(A, B, 0.5),
        "simd_matmul": lambda: simd_matmul(A, B),
        "simd_fused_bias_gelu": lambda: simd_fused_bias_gelu(A, A[0]),
        "core gemm": lambda: acc.gemm(BIG, BIG),
        "core matmul": lambda: acc.matmul(BIG[None], BIG[None]),
        "core bias_gelu": lambda: acc.bias_gelu(BIG, BIG[0]),
        "Tensor @ Tensor": lambda: Tensor(BIG) @ Tensor(BIG),
    }
    out = {}
    for name, call in calls.items():
        call()
        out[name] = acc.last_path()
    return out


def test_native_runs_when_enabled():
    for name, path in every_extension_path().items():
        assert path.startswith("native:"), (name, path)


def test_use_native_false_turns_off_every_native_path():
    with acc.use_native(False):
        assert acc.native_library() is None and not acc.native_available()
        for name, path in every_extension_path().items():
            assert path == "numpy", (name, path)
    assert acc.native_enabled()
    assert every_extension_path()["template scaled_matmul"].startswith("native:")


def test_environment_variable_is_the_same_switch():
    code = ("import numpy as np; from tinytorch.extensions import scaled_matmul, simd_matmul, last_path\n"
            "a = np.ones((4, 4), np.float32)\n"
            "scaled_matmul(a, a, 2.0); p1 = last_path(); simd_matmul(a, a); print(p1, last_path())")
    env = dict(os.environ, TINYTORCH_DISABLE_NATIVE="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["numpy", "numpy"]


def test_extensions_reexport_the_one_report():
    assert extensions.last_path is acc.last_path
    from tinytorch.extensions import simd_ops, template
    assert simd_ops.last_path is acc.last_path and template.last_path is acc.last_path


def test_last_path_is_per_thread():
    acc.gemm(BIG, BIG)
    seen = {}

    def other():
        seen["before"] = acc.last_path()
        with acc.use_native(True):
            acc.record_path("numpy")
        seen["after"] = acc.last_path()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"before": "none", "after": "numpy"}
    assert acc.last_path().startswith("native:sgemm")


def test_no_extension_uses_a_private_name_of_the_door():
    folder = os.path.join(ROOT, "python", "tinytorch", "extensions")
    offenders = []
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(folder, f)).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id in ("_acc", "acc", "acceleration") and node.attr.startswith("_"):
                offenders.append(f"{f}: {node.value.id}.{node.attr}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("acceleration"):
                offenders += [f"{f}: imports {a.name}" for a in node.names if a.name.startswith("_")]
    assert not offenders, offenders


def test_gemm_alpha_beta_match_float64():
    c = RNG.standard_normal((128, 128)).astype(np.float32)
    want = 0.5 * BIG.astype(np.float64).T @ BIG.astype(np.float64) + 2.0 * c.astype(np.float64)
    for native in (True, False):
        with acc.use_native(native):
            out = c.copy()
            got = acc.gemm(BIG, BIG, trans_a=True, alpha=0.5, beta=2.0, out=out)
            assert got is out
            assert np.abs(got - want).max() < 1e-3 * np.abs(want).max()
            assert acc.last_path() == ("native:sgemm:" + tinytorch.native.isa() if native else "numpy") \
                or acc.last_path() == "native:sgemm:avx2:narrow"
    with pytest.raises(ValueError, match="out must be given"):
        acc.gemm(BIG, BIG, beta=1.0)
    with pytest.raises(ValueError, match="inner sizes differ"):
        acc.gemm(A, A)


def reduce_to(x, shape):
    """Sum a broadcast gradient down to an operand's shape."""
    while x.ndim > len(shape):
        x = x.sum(0)
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and x.shape[i] != 1)
    return x.sum(axis=axes, keepdims=True) if axes else x


@pytest.mark.parametrize("shape_a,shape_b", [((5,), (5, 3)), ((4, 5), (5,)), ((2, 4, 5), (5, 3)),
                                             ((3, 1, 4, 5), (2, 5, 3)), ((0, 5), (5, 3)),
                                             ((5,), (5,))])
def test_matmul_backward_against_float64(shape_a, shape_b):
    a = RNG.standard_normal(shape_a)
    b = RNG.standard_normal(shape_b)
    g = RNG.standard_normal(np.matmul(a, b).shape)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        ga, gb = acc.matmul_backward(a.astype(dtype), b.astype(dtype), g.astype(dtype), any_size=True)
        # float64 reference by the chain rule on explicit promotion
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        g2 = g
        if b.ndim == 1:
            g2 = g2[..., None]
        if a.ndim == 1:
            g2 = g2[..., None, :]
        ra = np.matmul(g2, np.swapaxes(b2, -1, -2))
        rb = np.matmul(np.swapaxes(a2, -1, -2), g2)
        if a.ndim == 1:
            ra = ra.reshape(-1, ra.shape[-1]).sum(0)
        if b.ndim == 1:
            rb = rb.sum(axis=tuple(range(rb.ndim - 2)) + (rb.ndim - 1,))
        # batch axes stay broadcast; sum them down to compare
        ga, ra = reduce_to(ga, a.shape), reduce_to(ra, a.shape)
        gb, rb = reduce_to(gb, b.shape), reduce_to(rb, b.shape)
        assert ga.shape == a.shape and gb.shape == b.shape
        assert np.allclose(ga, ra, atol=tol * 10, rtol=tol), (dtype, shape_a, shape_b)
        assert np.allclose(gb, rb, atol=tol * 10, rtol=tol), (dtype, shape_a, shape_b)
    only_b = acc.matmul_backward(a, b, g, need=(False, True))
    assert only_b[0] is None and only_b[1] is not None


def test_stable_sigmoid_promotes_integers():
    z = np.array([0, 1, -1, 1000, -1000])
    s = acc.stable_sigmoid(z)
    assert s.dtype == np.float32
    with np.errstate(over="ignore"):
        assert np.allclose(s, 1 / (1 + np.exp(-z.astype(np.float64))), atol=1e-7)
    assert acc.stable_sigmoid(np.array([0.5], np.float64)).dtype == np.float64
    y = acc.bias_gelu(np.array([0, 1, -1, 3]), None)
    assert y.dtype == np.float32 and y[1] > 0.8
