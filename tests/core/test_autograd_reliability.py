"""Regression tests for silent wrong gradients and crashes in autograd ("Reliability
first"), each checked against PyTorch in float64 (or float32 where the bug is float32's)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tinytorch.core.activations import log_softmax, softmax  # noqa: E402
from tinytorch.core.attention import attention  # noqa: E402
from tinytorch.core.autograd import bump_version  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import SGD, Adam, AdamW, clip_grad_norm_  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402

F = torch.nn.functional


def t64(a, grad=True):
    return Tensor(np.asarray(a, dtype=np.float64), requires_grad=grad, dtype=np.float64)


def p64(a, grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def same(ours, theirs, rtol=1e-12, atol=1e-12):
    """Values, shape and the positions of nan/inf all agree."""
    theirs = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    ours = np.asarray(ours)
    assert ours.shape == theirs.shape, (ours.shape, theirs.shape)
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=atol, equal_nan=True)


# ------------------------------------------------------------------ cross-entropy, all ignored

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_every_target_ignored(reduction, smoothing):
    logits = np.random.default_rng(0).standard_normal((3, 4))
    target = np.array([-100, -100, -100])
    x, px = t64(logits), p64(logits)
    loss = cross_entropy(x, target, label_smoothing=smoothing, reduction=reduction)
    ref = F.cross_entropy(px, torch.tensor(target), label_smoothing=smoothing, reduction=reduction)
    same(loss.data, ref)  # mean over zero targets is nan in both
    w = np.ones(ref.shape)
    loss.backward(w)
    ref.backward(torch.tensor(w))
    assert not np.isnan(x.grad).any()
    same(x.grad, px.grad)


def test_cross_entropy_single_ignored_row():
    x, px = t64([[0.5, -1.0, 2.0]]), p64([[0.5, -1.0, 2.0]])
    loss = cross_entropy(x, np.array([-100]))
    ref = F.cross_entropy(px, torch.tensor([-100]))
    loss.backward()
    ref.backward()
    same(loss.data, ref)
    same(x.grad, np.zeros((1, 3)))
    same(x.grad, px.grad)


# ------------------------------------------------------------------ 0-d parameters

def _is_grad_array(t):
    return type(t.grad) is np.ndarray and t.grad.shape == t.shape and t.grad.dtype == t.dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_zero_dim_leaf_used_twice_gets_an_array(dtype):
    p = Tensor(np.array(3.0, dtype=dtype), requires_grad=True)
    (p * p + p).backward()
    assert _is_grad_array(p)
    assert p.grad == 7.0


def test_zero_dim_grad_accumulates_over_two_backwards_as_an_array():
    p = Tensor(3.0, requires_grad=True)
    (p * 2).backward()
    (p * 4).backward()
    assert _is_grad_array(p)
    assert p.grad == 6.0


def test_clip_grad_norm_clips_a_zero_dim_grad_like_torch():
    p, pp = Tensor(3.0, requires_grad=True, dtype=np.float64), p64(3.0)
    (p + p).backward()
    (pp + pp).backward()
    (p * 4).backward()
    (pp * 4).backward()
    assert _is_grad_array(p) and float(p.grad) == 6.0
    norm = clip_grad_norm_([p], 1.0)
    ref = torch.nn.utils.clip_grad_norm_([pp], 1.0)
    assert norm == pytest.approx(float(ref))
    same(p.grad, pp.grad, rtol=1e-9)
    assert abs(float(p.grad)) == pytest.approx(1.0, rel=1e-5)


@pytest.mark.parametrize("name", ["sgd_momentum", "adam", "adam_l2", "adamw"])
def test_optimizers_on_zero_dim_parameters_match_torch(name):
    make = {
        "sgd_momentum": (lambda ps: SGD(ps, lr=0.1, momentum=0.9),
                         lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9)),
        "adam": (lambda ps: Adam(ps, lr=0.1), lambda ps: torch.optim.Adam(ps, lr=0.1)),
        "adam_l2": (lambda ps: Adam(ps, lr=0.1, weight_decay=0.1),
                    lambda ps: torch.optim.Adam(ps, lr=0.1, weight_decay=0.1)),
        "adamw": (lambda ps: AdamW(ps, lr=0.1, weight_decay=0.1),
                  lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.1)),
    }[name]
    p, pp = t64(1.5), p64(1.5)
    opt, popt = make[0]([p]), make[1]([pp])
    for _ in range(5):
        opt.zero_grad()
        popt.zero_grad()
        (p * p * p + p).backward()   # p used several times: accumulated 0-d grads
        (pp * pp * pp + pp).backward()
        opt.step()
        popt.step()
        assert type(p.data) is np.ndarray and p.data.shape == ()
    same(p.data, pp, rtol=1e-10)


# ------------------------------------------------------------------ pow at zero

@pytest.mark.parametrize("x,y", [
    ([0.0, 0.0, 2.0], [2.0, 0.0, 3.0]),                            # the reported case
    ([0.0, 0.0, 0.0, -2.0, -2.0, -2.0, 0.5], [-1.0, 0.5, 1.0, 2.0, 0.5, 0.0, 0.0]),
])
def test_pow_tensor_exponent_at_zero_matches_torch(x, y):
    a, b, pa, pb = t64(x), t64(y), p64(x), p64(y)
    out, ref = a ** b, pa ** pb
    same(out.data, ref)
    out.sum().backward()
    ref.sum().backward()
    same(a.grad, pa.grad)
    same(b.grad, pb.grad)


def test_pow_reported_values():
    a, b = t64([0.0, 0.0, 2.0]), t64([2.0, 0.0, 3.0])
    (a ** b).sum().backward()
    same(a.grad, [0.0, 0.0, 12.0])
    same(b.grad, [0.0, 0.0, 8 * np.log(2.0)])


@pytest.mark.parametrize("e", [0, 0.5, 2, 3, -1])
def test_pow_scalar_exponent_and_scalar_base_at_zero(e):
    x = [0.0, 1.5, -2.0]
    a, pa = t64(x), p64(x)
    out, ref = a ** e, pa ** e
    same(out.data, ref)
    out.sum().backward()
    ref.sum().backward()
    same(a.grad, pa.grad)
    b, pb = t64([0.0, 1.0, -1.5]), p64([0.0, 1.0, -1.5])
    for base in (0.0, 2.0):
        b.grad, pb.grad = None, None
        (base ** b).sum().backward()
        (base ** pb).sum().backward()
        same(b.grad, pb.grad)


# ------------------------------------------------------------------ div underflow

def test_div_gradient_does_not_underflow_in_float32():
    a = Tensor(np.float32(1e-23), requires_grad=True)
    b = Tensor(np.float32(1e-23), requires_grad=True)
    pa = torch.tensor(1e-23, dtype=torch.float32, requires_grad=True)
    pb = torch.tensor(1e-23, dtype=torch.float32, requires_grad=True)
    (a / b).backward()
    (pa / pb).backward()
    assert np.isfinite(b.grad)
    np.testing.assert_allclose(b.grad, pb.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad, -1e23, rtol=1e-6)
    np.testing.assert_allclose(a.grad, pa.grad.numpy(), rtol=1e-6)


def test_div_gradient_matches_torch_float64():
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((4,)) + 3.0
    a, b, pa, pb = t64(x), t64(y), p64(x), p64(y)
    (a / b).sum().backward()
    (pa / pb).sum().backward()
    same(a.grad, pa.grad)
    same(b.grad, pb.grad, rtol=1e-12)
    c, pc = t64(y), p64(y)
    (2.0 / c).sum().backward()
    (2.0 / pc).sum().backward()
    same(c.grad, pc.grad)


# ------------------------------------------------------------------ saved tensors changed in place

def test_in_place_change_of_a_saved_input_raises():
    a = Tensor([1.0, 2.0], requires_grad=True)
    y = (a * a).sum()
    a.data -= 1.0
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_in_place_change_of_a_saved_output_raises():
    a = Tensor([1.0, 2.0], requires_grad=True)
    y = a.exp()
    y.data *= 2.0
    with pytest.raises(RuntimeError, match="output of Exp"):
        y.sum().backward()


def test_optimizer_step_between_forward_and_backward_raises_like_torch():
    w, pw = t64([[1.0, 2.0], [3.0, 4.0]]), p64([[1.0, 2.0], [3.0, 4.0]])
    x, px = t64(np.ones((1, 2))), p64(np.ones((1, 2)))
    loss, ploss = (x @ w).sum(), (px @ pw).sum()   # d/dx needs w
    w.grad, pw.grad = np.ones((2, 2)), torch.ones(2, 2, dtype=torch.float64)
    Adam([w]).step()
    torch.optim.Adam([pw]).step()
    with pytest.raises(RuntimeError):
        ploss.backward()
    with pytest.raises(RuntimeError, match="input 1 of MatMul"):
        loss.backward()


def test_change_of_an_input_that_nothing_saved_is_fine():
    a = Tensor([1.0, 2.0], requires_grad=True)
    y = (a + 1.0).sum()       # Add saves nothing: PyTorch allows this too
    a.data -= 1.0
    y.backward()
    np.testing.assert_array_equal(a.grad, [1.0, 1.0])


def test_written_through_the_array_needs_bump_version():
    a = Tensor([1.0, 2.0], requires_grad=True)
    y = (a * a).sum()
    a.data[...] = 5.0
    bump_version(a)
    with pytest.raises(RuntimeError, match="modified in place"):
        y.backward()


def test_normal_training_loop_does_not_trip_the_check():
    w = t64([0.5, -0.5])
    opt = SGD([w], lr=0.1, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        opt.step()
    # a retained graph may be reused as long as nothing it saved changed
    w.grad = None
    y = (w * w).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(w.grad, 4 * w.data)


# ------------------------------------------------------------------ size-0 dimensions

@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape,axis", [((0, 3), 1), ((2, 0, 3), 2), ((0, 3), (1,))])
def test_max_min_over_a_non_empty_axis_of_an_empty_tensor(op, shape, axis):
    x, px = t64(np.zeros(shape)), p64(np.zeros(shape))
    out = getattr(x, op)(axis=axis)
    dim = axis if isinstance(axis, int) else axis[0]
    ref = getattr(px, "amax" if op == "max" else "amin")(dim=dim)
    same(out.data, ref)
    out.sum().backward()
    ref.sum().backward()
    same(x.grad, px.grad)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_over_an_empty_axis_still_raises(op):
    x = t64(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="empty axis"):
        getattr(x, op)(axis=0)
    with pytest.raises(ValueError, match="empty axis"):
        getattr(x, op)()


@pytest.mark.parametrize("fn,ref", [(softmax, F.softmax), (log_softmax, F.log_softmax)])
@pytest.mark.parametrize("shape,axis", [((3, 0), -1), ((0, 3), -1), ((0, 3), 0), ((0,), 0)])
def test_softmax_with_a_size_zero_dimension(fn, ref, shape, axis):
    x, px = t64(np.zeros(shape)), p64(np.zeros(shape))
    out, r = fn(x, axis), ref(px, dim=axis)
    same(out.data, r)
    out.sum().backward()
    r.sum().backward()
    same(x.grad, px.grad)


@pytest.mark.parametrize("sa,sb", [((0,), (0, 4)), ((3, 0), (0,)), ((0,), (0,)), ((2, 0), (0, 3)),
                                   ((2, 3, 0), (0,)), ((0,), (2, 0, 3)), ((0, 3), (3,))])
def test_matmul_with_size_zero_inner_or_outer_dims(sa, sb):
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal(sa), rng.standard_normal(sb)
    a, b, pa, pb = t64(x), t64(y), p64(x), p64(y)
    out, ref = a @ b, pa @ pb
    same(out.data, ref)
    w = rng.standard_normal(ref.shape)
    out.backward(w)
    ref.backward(torch.tensor(w))
    same(a.grad, pa.grad)
    same(b.grad, pb.grad)


def test_attention_over_zero_keys_gives_zeros_like_torch():
    q = np.random.default_rng(3).standard_normal((1, 2, 3))
    k, v = np.zeros((1, 0, 3)), np.zeros((1, 0, 4))
    tq, tk, tv = t64(q), t64(k), t64(v)
    pq, pk, pv = p64(q), p64(k), p64(v)
    out = attention(tq, tk, tv)
    ref = F.scaled_dot_product_attention(pq, pk, pv)
    same(out.data, ref)
    out.sum().backward()
    ref.sum().backward()
    same(tq.grad, pq.grad)


def test_gradients_summed_in_place_never_leak_between_tensors():
    """Tensors used three or more times get their later gradient contributions added in
    place into a sum the engine made; random graphs of adds and products (where Add hands
    one array to both inputs) must still give PyTorch's gradients for every input."""
    import torch
    from tinytorch.core.tensor import Tensor

    rng = np.random.default_rng(5)
    for trial in range(30):
        xs = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
        ours = [Tensor(x.copy(), requires_grad=True) for x in xs]
        theirs = [torch.tensor(x.copy(), requires_grad=True) for x in xs]
        nodes_o, nodes_t = list(ours), list(theirs)
        for _ in range(8):
            i, j = rng.integers(0, len(nodes_o), 2)
            if rng.random() < 0.5:
                nodes_o.append(nodes_o[i] + nodes_o[j])
                nodes_t.append(nodes_t[i] + nodes_t[j])
            else:
                nodes_o.append(nodes_o[i] * nodes_o[j])
                nodes_t.append(nodes_t[i] * nodes_t[j])
        out_o, out_t = nodes_o[-1], nodes_t[-1]
        for k in rng.integers(0, len(nodes_o), 3):  # more uses of earlier nodes
            out_o = out_o + nodes_o[k]
            out_t = out_t + nodes_t[k]
        out_o.sum().backward()
        out_t.sum().backward()
        for a, b in zip(ours, theirs):
            want = np.zeros(4) if b.grad is None else b.grad.numpy()
            got = np.zeros(4) if a.grad is None else a.grad
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"trial {trial}")
