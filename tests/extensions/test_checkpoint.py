"""checkpoint / checkpoint_sequential: gradients equal the un-checkpointed run, intermediates
are not kept, parameters and dropout masks are handled."""
import gc
import weakref

import numpy as np
import pytest

from contract import check_contract, check_gradcheck, check_tensor_in_tensor_out
from tinytorch.core import random as tt_random
from tinytorch.core.activations import GELU, Tanh
from tinytorch.core.autograd import no_grad
from tinytorch.core.layers import Dropout, Layer, Linear, Sequential
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import checkpoint, checkpoint_sequential, scaled_matmul
from tinytorch.extensions.activation_checkpoint import CheckpointFunction
from tinytorch.core.acceleration import use_native
from tinytorch.extensions.template import last_path


def _numpy_only():
    return use_native(False)

RNG = np.random.default_rng(11)


def _f(x, w):
    h = (x @ w).tanh()
    return (h * x[..., : h.shape[-1]] + h * h).sum(axis=-1, keepdims=True) * h


def test_contract_through_a_polymorphic_function():
    # checkpoint of an ndarray/Tensor-polymorphic function keeps the whole contract.
    a = RNG.standard_normal((5, 7)).astype(np.float32)
    b = RNG.standard_normal((7, 3)).astype(np.float32)
    fn = lambda x, y: checkpoint(scaled_matmul, x, y, 0.5)  # noqa: E731
    check_contract(fn, [a, b], reference=lambda x, y: 0.5 * x @ y, disable_native=_numpy_only,
                   path_report=last_path, atol=1e-5, rtol=1e-5,
                   gradcheck_inputs=[RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))])


def test_gradcheck_and_graph_of_a_composite():
    x, w = RNG.standard_normal((4, 5)), RNG.standard_normal((5, 3))
    fn = lambda x, w: checkpoint(_f, x, w)  # noqa: E731
    check_gradcheck(fn, [x, w])
    out, grads = check_tensor_in_tensor_out(fn, [x.astype(np.float32), w.astype(np.float32)],
                                            reference=lambda x, w: _f(Tensor(x, dtype=np.float64),
                                                                      Tensor(w, dtype=np.float64)).data,
                                            atol=1e-5, rtol=1e-5)
    assert isinstance(out.grad_fn, CheckpointFunction)


def _grads(model, x, fn):
    model.zero_grad()
    xt = Tensor(x, requires_grad=True)
    out = fn(model, xt)
    g = np.random.default_rng(0).standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    return out.data.copy(), xt.grad, {n: p.grad.copy() for n, p in model.named_parameters()}


def _mlp():
    return Sequential(Linear(6, 16), GELU(), Dropout(0.3), Linear(16, 16), Tanh(), Dropout(0.2),
                      Linear(16, 4))


@pytest.mark.parametrize("how", ["layer", "bound_method", "closure"])
def test_gradients_equal_plain_run_with_dropout(how):
    tt_random.manual_seed(5)
    model = _mlp()
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    call = {"layer": lambda m, t: checkpoint(m, t),
            "bound_method": lambda m, t: checkpoint(m.forward, t),
            "closure": lambda m, t: checkpoint(lambda u: m(u), t)}[how]
    tt_random.manual_seed(99)
    ref = _grads(model, x, lambda m, t: m(t))
    tt_random.manual_seed(99)
    got = _grads(model, x, call)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)
    for name in ref[2]:
        np.testing.assert_allclose(got[2][name], ref[2][name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_without_rng_preservation_dropout_masks_differ():
    # Shows the RNG replay matters: without it the recomputed masks are new draws.
    tt_random.manual_seed(5)
    model = _mlp()
    x = RNG.standard_normal((8, 6)).astype(np.float32)
    tt_random.manual_seed(99)
    ref = _grads(model, x, lambda m, t: m(t))
    tt_random.manual_seed(99)
    got = _grads(model, x, lambda m, t: checkpoint(m, t, preserve_rng_state=False))
    assert not np.allclose(got[2]["0.weight"], ref[2]["0.weight"])


def test_parameters_get_gradients_when_no_input_requires_grad():
    model = Sequential(Linear(4, 5), Tanh(), Linear(5, 2))
    x = Tensor(RNG.standard_normal((3, 4)).astype(np.float32))  # requires_grad=False
    model(x).sum().backward()
    ref = {n: p.grad.copy() for n, p in model.named_parameters()}
    model.zero_grad()
    out = checkpoint(model, x)
    assert out.requires_grad
    out.sum().backward()
    for n, p in model.named_parameters():
        np.testing.assert_allclose(p.grad, ref[n], rtol=1e-6, atol=1e-7, err_msg=n)


def test_gradients_accumulate_onto_existing_grads_and_shared_parameters():
    lin = Linear(3, 3)
    x = Tensor(RNG.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    # lin is used inside and outside the checkpoint: both contributions must arrive once.
    (lin(checkpoint(lin, x)) * 2.0).sum().backward()
    got_w, got_x = lin.weight.grad.copy(), x.grad.copy()
    lin.zero_grad()
    x.grad = None
    (lin(lin(x)) * 2.0).sum().backward()
    np.testing.assert_allclose(got_w, lin.weight.grad, rtol=1e-6)
    np.testing.assert_allclose(got_x, x.grad, rtol=1e-6)


def test_non_tensor_arguments_pass_through():
    def f(x, k, mode, scale=1.0):
        assert isinstance(k, int) and mode == "double"
        return x * (2.0 * k * scale)
    x = Tensor(RNG.standard_normal((2, 2)).astype(np.float32), requires_grad=True)
    out = checkpoint(f, x, 3, "double", scale=0.5)
    out.sum().backward()
    np.testing.assert_allclose(out.data, x.data * 3.0, rtol=1e-6)
    np.testing.assert_allclose(x.grad, np.full((2, 2), 3.0), rtol=1e-6)


def test_intermediates_are_not_kept():
    kept = []

    def f(x):
        h = x * 2.0
        kept.append(weakref.ref(h))
        return (h * h).sum()
    x = Tensor(RNG.standard_normal((50,)).astype(np.float32), requires_grad=True)
    plain = f(x)
    gc.collect()
    assert kept[-1]() is not None  # the ordinary graph holds h
    ck = checkpoint(f, x)
    gc.collect()
    assert kept[-1]() is None      # the checkpointed graph does not
    assert [id(p) for p in ck.grad_fn.parents] == [id(x)]
    ck.backward()
    np.testing.assert_allclose(x.grad, 8.0 * x.data, rtol=1e-6)
    del plain


def test_retain_graph_allows_a_second_backward():
    x = Tensor(RNG.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    out = checkpoint(lambda t: (t * t).sum(), x)
    out.backward(retain_graph=True)
    out.backward()
    np.testing.assert_allclose(x.grad, 4.0 * x.data, rtol=1e-6)


def test_nested_checkpoints():
    model = Sequential(Linear(4, 4), Tanh(), Linear(4, 4), Tanh())
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    ref = _grads(model, x, lambda m, t: m(t))
    inner = lambda t: checkpoint(model.layers[2], checkpoint(model.layers[1], t))  # noqa: E731
    got = _grads(model, x, lambda m, t: model.layers[3](inner(checkpoint(model.layers[0], t))))
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-7)
    for name in ref[2]:
        np.testing.assert_allclose(got[2][name], ref[2][name], rtol=1e-5, atol=1e-7, err_msg=name)


def test_no_grad_and_nothing_to_differentiate_just_call():
    calls = []

    def f(x):
        calls.append(1)
        return x * 2.0
    with no_grad():
        out = checkpoint(f, Tensor(np.ones(2, np.float32), requires_grad=True))
    assert out.grad_fn is None and calls == [1]
    out = checkpoint(f, np.ones(2, np.float32))
    assert isinstance(out, np.ndarray)


def test_bad_input():
    with pytest.raises(TypeError, match="callable"):
        checkpoint(3, Tensor(np.ones(2, np.float32)))
    with pytest.raises(TypeError, match="single Tensor"):
        checkpoint(lambda t: (t, t), Tensor(np.ones(2, np.float32), requires_grad=True))


# ----------------------------------------------------------------------------- sequential

@pytest.mark.parametrize("segments", [1, 2, 3, 6])
@pytest.mark.parametrize("checkpoint_last", [True, False])
def test_checkpoint_sequential_matches(segments, checkpoint_last):
    tt_random.manual_seed(2)
    layers = [Linear(5, 5) if i % 2 == 0 else Tanh() for i in range(6)]
    model = Sequential(layers)
    x = RNG.standard_normal((4, 5)).astype(np.float32)
    ref = _grads(model, x, lambda m, t: m(t))
    got = _grads(model, x, lambda m, t: checkpoint_sequential(m, segments, t, checkpoint_last=checkpoint_last))
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-7)
    for name in ref[2]:
        np.testing.assert_allclose(got[2][name], ref[2][name], rtol=1e-5, atol=1e-7, err_msg=name)


def test_checkpoint_sequential_transformer_blocks_with_dropout():
    transformers = pytest.importorskip("tinytorch.core.transformers")
    tt_random.manual_seed(4)
    blocks = Sequential([transformers.TransformerBlock(16, 2, dropout=0.1) for _ in range(4)])
    x = RNG.standard_normal((2, 5, 16)).astype(np.float32)
    tt_random.manual_seed(8)
    ref = _grads(blocks, x, lambda m, t: m(t))
    tt_random.manual_seed(8)
    got = _grads(blocks, x, lambda m, t: checkpoint_sequential(m, 2, t))
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-4, atol=1e-6)
    for name in ref[2]:
        np.testing.assert_allclose(got[2][name], ref[2][name], rtol=1e-4, atol=1e-6, err_msg=name)


def test_checkpoint_sequential_keeps_only_segment_boundaries():
    # The recorded graph holds one node per segment and, as inputs, only the boundaries.
    layers = Sequential([Linear(4, 4) for _ in range(6)])
    x = Tensor(RNG.standard_normal((2, 4)).astype(np.float32), requires_grad=True)
    out = checkpoint_sequential(layers, 3, x)
    nodes, t = [], out
    while t.grad_fn is not None:
        assert isinstance(t.grad_fn, CheckpointFunction)
        nodes.append(t.grad_fn)
        t = t.grad_fn.parents[0]
    assert len(nodes) == 3 and t is x
    out_last = checkpoint_sequential(layers, 3, x, checkpoint_last=False)
    assert not isinstance(out_last.grad_fn, CheckpointFunction)


def test_checkpoint_sequential_bad_segments():
    layers = [Linear(2, 2), Linear(2, 2)]
    x = Tensor(np.ones((1, 2), np.float32))
    for bad in (0, 3, 1.5, True):
        with pytest.raises(ValueError, match=r"segments must be an int in \[1, 2\]"):
            checkpoint_sequential(layers, bad, x)
    with pytest.raises(ValueError, match="no layers"):
        checkpoint_sequential([], 1, x)


class _Twice(Layer):
    def __init__(self):
        self.lin = Linear(3, 3)

    def forward(self, x, times=2):
        for _ in range(times):
            x = self.lin(x)
        return x


def test_layer_argument_parameters_are_found():
    m = _Twice()
    x = Tensor(RNG.standard_normal((2, 3)).astype(np.float32))
    run = lambda layer, t: layer(t, times=3)  # noqa: E731  - the layer arrives as an argument
    run(m, x).sum().backward()
    ref = m.lin.weight.grad.copy()
    m.zero_grad()
    checkpoint(run, m, x).sum().backward()
    np.testing.assert_allclose(m.lin.weight.grad, ref, rtol=1e-6)
