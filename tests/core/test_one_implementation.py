"""One implementation each: the matmul backward, the cast, the stable sigmoid, the Adam step.

Each formula lives in one place and every user calls it there, so a fix (or a native
kernel routed in) reaches all of them:
  * matmul backward: ``acceleration.matmul_backward``, called by ``Tensor @``, ``Linear``,
    the fused Linear+GELU of the transformer MLP and ``Conv2d`` (whose GEMM is w2 @ cols).
  * cast with gradient: ``ops.Cast``.
  * stable sigmoid: ``acceleration.stable_sigmoid`` (defined in backends/reference/__init__.py).
  * Adam/AdamW step: ``optimizers.adam_update`` (Muon's fallback too:
    tests/extensions/test_optimizers_ext.py).
"""
import ast
from pathlib import Path

import numpy as np
import pytest

from tinytorch.core import acceleration, ops
from tinytorch.core import optimizers as core_optimizers
from tinytorch.core.activations import sigmoid, silu
from tinytorch.core.layers import Linear
from tinytorch.core.losses import binary_cross_entropy_with_logits
from tinytorch.core.spatial import Conv2d
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformers import MLP

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "tinytorch"
SOURCES = sorted(p for p in PACKAGE.rglob("*.py"))


def _spy(monkeypatch, name):
    calls = []
    real = getattr(acceleration, name)

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)
    monkeypatch.setattr(acceleration, name, spy)
    return calls


def _x(rng, *shape):
    return Tensor(rng.standard_normal(shape), requires_grad=True)


@pytest.mark.parametrize("build", [
    lambda rng: (lambda x: x @ _x(rng, 4, 3), (2, 5, 4)),
    lambda rng: (Linear(4, 3), (2, 5, 4)),
    lambda rng: (Linear(4, 3, bias=False), (6, 4)),
    lambda rng: (MLP(4, 8), (2, 3, 4)),
    lambda rng: (Conv2d(2, 3, 3, padding=1), (2, 2, 5, 5)),
], ids=["matmul", "linear", "linear_no_bias", "mlp_fused_linear_gelu", "conv2d"])
def test_every_matmul_backward_is_the_doors(monkeypatch, rng, build):
    layer, shape = build(rng)
    calls = _spy(monkeypatch, "matmul_backward")
    x = _x(rng, *shape)
    layer(x).sum().backward()
    assert calls, "the backward did not call acceleration.matmul_backward"
    assert x.grad is not None and x.grad.shape == x.shape


def test_linear_gradients_unchanged_by_the_door(rng):
    """The same numbers as the two GEMMs the Linear backward wrote before."""
    layer = Linear(4, 3)
    x = _x(rng, 2, 5, 4)
    g = rng.standard_normal((2, 5, 3)).astype(np.float32)
    layer(x).backward(g)
    g2 = g.reshape(-1, 3)
    np.testing.assert_array_equal(x.grad, acceleration.gemm(g2, layer.weight.data, trans_b=True).reshape(2, 5, 4))
    np.testing.assert_array_equal(layer.weight.grad, acceleration.gemm(x.data.reshape(-1, 4), g2, trans_a=True))
    np.testing.assert_array_equal(layer.bias.grad, g2.sum(axis=0))


def _classes(path):
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)]


def test_one_cast_function():
    casts = [(p.relative_to(PACKAGE).as_posix(), c.name) for p in SOURCES for c in _classes(p)
             if "cast" in c.name.lower() and any(getattr(b, "id", getattr(b, "attr", "")) == "Function"
                                                for b in c.bases)]
    assert casts == [("core/ops.py", "Cast")]
    t = Tensor(np.ones(3, np.float32), requires_grad=True)
    for cast in (t.half(), t.double(), t.float(), t.astype(np.float64), t.to(np.float16)):
        assert type(cast.grad_fn) is ops.Cast


def _computes_exp_of_minus_abs(tree):
    """Any ``exp(-abs(...))``: the core of a stable sigmoid."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and getattr(n.func, "attr", None) == "exp" and n.args:
            arg = n.args[0]
            if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub) and \
                    isinstance(arg.operand, ast.Call) and getattr(arg.operand.func, "attr", None) == "abs":
                yield n.lineno


def test_one_stable_sigmoid():
    copies = {p.relative_to(PACKAGE).as_posix(): list(_computes_exp_of_minus_abs(ast.parse(p.read_text())))
              for p in SOURCES}
    copies = {k: v for k, v in copies.items() if v}
    # The Triton kernels are device code in Triton's language (tl.exp on tiles), which cannot
    # call the NumPy helper: their GELU and sigmoid are written in it once, in that one file.
    copies.pop("backends/triton/gelu_kernels.py", None)
    assert list(copies) == ["backends/reference/__init__.py"], copies
    from tinytorch.core import activations
    assert not hasattr(activations, "_stable_sigmoid")


@pytest.mark.parametrize("call", [
    lambda x: sigmoid(x), lambda x: silu(x), lambda x: x.sigmoid(),
    lambda x: binary_cross_entropy_with_logits(x, np.ones(x.shape)),
], ids=["sigmoid", "silu", "tensor_sigmoid", "bce_with_logits"])
def test_sigmoids_call_the_door(monkeypatch, rng, call):
    calls = _spy(monkeypatch, "stable_sigmoid")
    call(_x(rng, 3, 4)).sum().backward()
    assert calls


@pytest.mark.parametrize("cls", [core_optimizers.Adam, core_optimizers.AdamW])
def test_adam_and_adamw_step_through_the_door_in_one_call(monkeypatch, rng, cls):
    """Adam and AdamW update every parameter with one call of the door's adam_step (the one
    Adam rule: the runtime's tt_adam_step, or the NumPy back end's), and adam_update, the
    single-tensor entry other optimizers use, goes through the same door."""
    calls = []
    real = core_optimizers._acc.adam_step
    monkeypatch.setattr(core_optimizers._acc, "adam_step", lambda *a, **k: calls.append(a) or real(*a, **k))
    p, q = _x(rng, 5), _x(rng, 3)
    p.grad = rng.standard_normal(5).astype(np.float32)
    q.grad = rng.standard_normal(3).astype(np.float32)
    cls([p, q], lr=0.1, weight_decay=0.1).step()
    assert len(calls) == 1 and calls[0][0][0] is p.data and calls[0][0][1] is q.data
    core_optimizers.adam_update(p.data, p.grad, {}, 0.1, (0.9, 0.999), 1e-8, 0.0, True)
    assert len(calls) == 2 and calls[1][0][0] is p.data
