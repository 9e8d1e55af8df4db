"""LoRALinear, inject_lora and the adapter state dicts against float64 NumPy."""
import numpy as np
import pytest

from contract import check_contract, run_with_grads
from tinytorch.core import random as tt_random
from tinytorch.core.layers import Layer, Linear, Sequential
from tinytorch.core.optimizers import AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import LoRALinear, inject_lora, load_lora_state_dict, lora_state_dict

RNG = np.random.default_rng(7)


def _ref(scaling):
    def reference(x, w, b, a, bb):
        return x @ w + b + scaling * (x @ a) @ bb
    return reference


def _layer_fn(rank, alpha):
    """fn(x, W, b, A, B) through a real LoRALinear whose Tensors are the given ones."""
    def fn(x, w, b, a, bb):
        layer = LoRALinear(w.shape[0], w.shape[1], rank=rank, alpha=alpha)
        wrap = lambda t: t if isinstance(t, Tensor) else Tensor(t)  # noqa: E731
        layer.weight, layer.bias, layer.lora_A, layer.lora_B = wrap(w), wrap(b), wrap(a), wrap(bb)
        return layer(x)
    return fn


@pytest.mark.parametrize("x_shape,d,k,r", [((5, 7), 7, 3, 2), ((2, 3, 6), 6, 11, 1), ((1, 4), 4, 4, 4),
                                          ((0, 5), 5, 2, 1)])
def test_contract_and_float64_reference(x_shape, d, k, r):
    alpha = 3.0
    inputs = [RNG.standard_normal(s).astype(np.float32) for s in (x_shape, (d, k), (k,), (d, r), (r, k))]
    small = [RNG.standard_normal(s) for s in ((3, d), (d, k), (k,), (d, r), (r, k))]
    check_contract(_layer_fn(r, alpha), inputs, reference=_ref(alpha / r), atol=1e-4, rtol=1e-4,
                   gradcheck_inputs=small)


def test_starts_equal_to_base_and_parameters_are_the_adapters():
    tt_random.manual_seed(0)
    base = Linear(9, 5)
    lora = LoRALinear.from_linear(base, rank=3, alpha=6.0)
    assert lora.weight is base.weight and lora.bias is base.bias  # wrapped, not copied
    assert not base.weight.requires_grad and not base.bias.requires_grad
    params = lora.parameters()
    assert len(params) == 2 and params[0] is lora.lora_A and params[1] is lora.lora_B
    assert lora.A is lora.lora_A and lora.B is lora.lora_B
    assert np.all(lora.lora_B.data == 0)
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    np.testing.assert_array_equal(lora(Tensor(x)).data, base(Tensor(x)).data)
    assert set(lora.state_dict()) == {"weight", "bias", "lora_A", "lora_B"}


def test_gradients_reach_only_adapters():
    lora = LoRALinear(6, 4, rank=2, alpha=4.0)
    lora.lora_B.data[...] = RNG.standard_normal((2, 4))
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    out = lora(Tensor(x))
    g = RNG.standard_normal(out.shape).astype(np.float32)
    out.backward(g)
    assert lora.weight.grad is None and lora.bias.grad is None
    s, A, B = 2.0, lora.lora_A.data.astype(np.float64), lora.lora_B.data.astype(np.float64)
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    np.testing.assert_allclose(lora.lora_A.grad, s * x64.T @ g64 @ B.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lora.lora_B.grad, s * (x64 @ A).T @ g64, rtol=1e-5, atol=1e-5)


def test_ndarray_in_ndarray_out_without_recording():
    lora = LoRALinear(3, 2, rank=1)
    out = lora(RNG.standard_normal((4, 3)))
    assert isinstance(out, np.ndarray) and out.shape == (4, 2)


def test_merge_unmerge_round_trip():
    lora = LoRALinear(8, 6, rank=3, alpha=1.5)
    lora.lora_B.data[...] = RNG.standard_normal((3, 6))
    w0 = lora.weight.data.copy()
    x = Tensor(RNG.standard_normal((5, 8)).astype(np.float32))
    before = lora(x).data.copy()
    lora.merge()
    assert lora.merged
    np.testing.assert_allclose(lora(x).data, before, rtol=1e-5, atol=1e-5)
    expected_w = w0.astype(np.float64) + 0.5 * lora.lora_A.data.astype(np.float64) @ lora.lora_B.data
    np.testing.assert_allclose(lora.weight.data, expected_w, rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="already merged"):
        lora.merge()
    lora.unmerge()
    np.testing.assert_allclose(lora.weight.data, w0, atol=1e-6)
    np.testing.assert_allclose(lora(x).data, before, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match="not merged"):
        lora.unmerge()


def test_dropout_applies_to_adapter_path_only_and_replays_with_seed():
    p = 0.25
    lora = LoRALinear(7, 3, rank=2, alpha=2.0, dropout=p)
    lora.lora_B.data[...] = RNG.standard_normal((2, 3))
    x = RNG.standard_normal((6, 7)).astype(np.float32)
    tt_random.manual_seed(123)
    out = lora(Tensor(x)).data
    tt_random.manual_seed(123)
    keep = tt_random.get_generator().random(x.shape, dtype=np.float32) >= p
    xd = x.astype(np.float64) * keep / (1 - p)
    W, b = lora.weight.data.astype(np.float64), lora.bias.data.astype(np.float64)
    expected = x @ W + b + 1.0 * (xd @ lora.lora_A.data) @ lora.lora_B.data
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    lora.eval()
    no_drop = x @ W + b + (x @ lora.lora_A.data.astype(np.float64)) @ lora.lora_B.data
    np.testing.assert_allclose(lora(Tensor(x)).data, no_drop, rtol=1e-5, atol=1e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(4, 4, rank=0)
    with pytest.raises(ValueError, match="dropout"):
        LoRALinear(4, 4, rank=1, dropout=1.0)
    with pytest.raises(ValueError, match=r"\(2, 5\).*4"):
        LoRALinear(4, 3, rank=1)(Tensor(np.zeros((2, 5), np.float32)))
    with pytest.raises(TypeError, match="Linear"):
        LoRALinear.from_linear(Sequential(Linear(2, 2)), rank=1)


# ----------------------------------------------------------------------------- injection

class Block(Layer):
    def __init__(self, d):
        self.q_proj = Linear(d, d)
        self.v_proj = Linear(d, d)
        self.fc = Linear(d, 2 * d)
        self.out = Linear(2 * d, d)

    def forward(self, x):
        h = self.q_proj(x) + self.v_proj(x)
        return self.out(self.fc(h).relu())


class Net(Layer):
    def __init__(self, d=6, n=3):
        self.blocks = [Block(d) for _ in range(n)]
        self.head = Linear(d, 2)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def test_inject_lora_replaces_matches_and_freezes_the_rest():
    tt_random.manual_seed(1)
    net = Net()
    x = Tensor(RNG.standard_normal((4, 6)).astype(np.float32))
    before = net(x).data.copy()
    names = inject_lora(net, ["q_proj", "blocks.2.v_proj"], rank=2)
    assert names == ["blocks.0.q_proj", "blocks.1.q_proj", "blocks.2.q_proj", "blocks.2.v_proj"]
    for n in names:
        assert isinstance(net.get_submodule(n), LoRALinear)
    assert isinstance(net.get_submodule("blocks.1.v_proj"), Linear)
    trainable = [name for name, p in net.named_parameters() if p.requires_grad]
    assert trainable == [f"{n}.{a}" for n in names for a in ("lora_A", "lora_B")]
    np.testing.assert_array_equal(net(x).data, before)  # B = 0: the model is unchanged
    # one optimizer step changes only the adapters
    frozen = {name: p.data.copy() for name, p in net.named_parameters() if not p.requires_grad}
    opt = AdamW(net.parameters(), lr=1e-2, weight_decay=0.1)
    net(x).sum().backward()
    opt.step()
    for name, p in net.named_parameters():
        if name in frozen:
            np.testing.assert_array_equal(p.data, frozen[name])
            assert p.grad is None
    assert not np.allclose(net(x).data, before)


def test_inject_lora_glob_and_missing_target():
    net = Net()
    names = inject_lora(net, "blocks.*.fc", rank=1)
    assert names == ["blocks.0.fc", "blocks.1.fc", "blocks.2.fc"]
    with pytest.raises(ValueError, match=r"available Linear layers: \['blocks.0.q_proj'"):
        inject_lora(net, ["attn.c_attn"])


def test_inject_lora_into_gpt_attention_trains_under_two_percent():
    transformers = pytest.importorskip("tinytorch.core.transformers")
    tt_random.manual_seed(3)
    gpt = transformers.GPT(vocab_size=30, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=8)
    idx = RNG.integers(0, 30, (2, 8))
    before = gpt(idx).data.copy()
    names = inject_lora(gpt, ["q_proj", "k_proj", "v_proj", "out_proj"], rank=1)
    assert len(names) == 8 and all(".attn." in n for n in names)
    np.testing.assert_array_equal(gpt(idx).data, before)
    total = sum(p.data.size for _, p in gpt.named_parameters())
    trainable = sum(p.data.size for _, p in gpt.named_parameters() if p.requires_grad)
    assert trainable == 8 * (32 + 32) and trainable / total < 0.02


def test_lora_state_dict_round_trip(tmp_path):
    net = Net()
    inject_lora(net, ["q_proj"], rank=2)
    for _, p in net.named_parameters():
        if p.requires_grad:
            p.data[...] = RNG.standard_normal(p.data.shape)
    sd = lora_state_dict(net)
    assert list(sd) == [f"blocks.{i}.q_proj.lora_{a}" for i in range(3) for a in "AB"]
    np.savez(tmp_path / "lora.npz", **sd)
    other = Net()
    inject_lora(other, ["q_proj"], rank=2)
    with np.load(tmp_path / "lora.npz", allow_pickle=False) as f:
        load_lora_state_dict(other, f)
    for name, arr in lora_state_dict(other).items():
        np.testing.assert_array_equal(arr, sd[name])
    bad = dict(sd)
    bad.pop("blocks.1.q_proj.lora_B")
    with pytest.raises(KeyError, match="blocks.1.q_proj.lora_B"):
        load_lora_state_dict(other, bad)
    bad = dict(sd)
    bad["blocks.0.q_proj.lora_A"] = np.zeros((6, 3), np.float32)
    with pytest.raises(ValueError, match=r"blocks.0.q_proj.lora_A.*\(6, 3\).*\(6, 2\)"):
        load_lora_state_dict(other, bad)
    with pytest.raises(ValueError, match="no LoRALinear"):
        load_lora_state_dict(Net(), sd)


def test_matches_torch_formula_when_installed():
    torch = pytest.importorskip("torch")
    lora = LoRALinear(5, 4, rank=2, alpha=8.0)
    lora.lora_B.data[...] = RNG.standard_normal((2, 4))
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    out, grads, g = run_with_grads(lambda t: lora(t), [x])
    tx = torch.tensor(x, requires_grad=True)
    W, b, A, B = (torch.tensor(a) for a in (lora.weight.data, lora.bias.data, lora.lora_A.data,
                                           lora.lora_B.data))
    ty = tx @ W + b + 4.0 * (tx @ A) @ B
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(out.data, ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grads[0], tx.grad.numpy(), rtol=1e-5, atol=1e-5)
