"""Upstream TinyTorch (harvard-edge/cs249r_book, tinytorch/tinytorch/core) code, called the
way upstream code calls it, checked against this project's implementation, a float64
reference, or PyTorch (docs/compat.md lists every name)."""
import numpy as np
import pytest
import torch

import tinytorch
from tinytorch.core.tensor import Tensor


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------ package top level

UPSTREAM_TOP_LEVEL = [
    "Tensor", "Sigmoid", "ReLU", "Tanh", "GELU", "Softmax", "Layer", "Linear", "Dropout",
    "MSELoss", "CrossEntropyLoss", "BinaryCrossEntropyLoss", "SGD", "Adam", "AdamW",
    "Trainer", "CosineSchedule", "clip_grad_norm", "Dataset", "TensorDataset", "DataLoader",
    "RandomHorizontalFlip", "RandomCrop", "Compose", "Conv2d", "MaxPool2d", "AvgPool2d",
    "Tokenizer", "CharTokenizer", "BPETokenizer", "Embedding", "PositionalEncoding",
    "EmbeddingLayer", "MultiHeadAttention", "scaled_dot_product_attention", "LayerNorm", "MLP",
    "TransformerBlock", "GPT", "create_causal_mask", "benchmarking", "enable_autograd",
]


@pytest.mark.parametrize("name", UPSTREAM_TOP_LEVEL)
def test_upstream_top_level_name_is_one_of_ours(name):
    obj = getattr(tinytorch, name)
    if name == "benchmarking":
        import tinytorch.perf.benchmarking as mod
        assert obj is mod
    else:
        assert obj.__module__.startswith("tinytorch.")
    assert name in dir(tinytorch)


def test_from_tinytorch_import_star_style_names():
    from tinytorch import Conv2D, MaxPool2D, AvgPool2D, Conv2d, MaxPool2d, AvgPool2d
    assert Conv2D is Conv2d and MaxPool2D is MaxPool2d and AvgPool2D is AvgPool2d


# ------------------------------------------------------------------ tensor

def test_tensor_helpers_numel_memory_footprint_size():
    t = Tensor(np.zeros((3, 4), np.float32))
    assert t.numel() == 12 == t.size == torch.zeros(3, 4).numel()
    assert t.memory_footprint() == 48 == t.data.nbytes
    assert Tensor([1, 2, 3]).dtype == np.float32  # upstream: every Tensor is float32


def test_tensor_ops_upstream_calls():
    a = Tensor([[1, 2], [3, 4]])
    b = Tensor([[5, 6], [7, 8]])
    np.testing.assert_array_equal(a.matmul(b).data, [[19, 22], [43, 50]])
    np.testing.assert_array_equal(Tensor([1, 2, 3, 4, 5, 6]).reshape(2, -1).shape, (2, 3))
    np.testing.assert_array_equal(Tensor([[1, 2, 3], [4, 5, 6]]).transpose().data, [[1, 4], [2, 5], [3, 6]])
    np.testing.assert_array_equal(Tensor([[1, 2, 3], [4, 5, 6]]).sum(axis=0).data, [5, 7, 9])
    np.testing.assert_array_equal(Tensor([[1, 2, 3], [4, 5, 6]]).max(axis=1).data, [3, 6])
    with pytest.raises(ValueError):
        Tensor(np.ones((2, 3))).matmul(Tensor(np.ones((2, 3))))


# ------------------------------------------------------------------ autograd

def test_enable_autograd_is_a_harmless_entry_point(capsys):
    from tinytorch.core.autograd import enable_autograd, is_grad_enabled
    assert enable_autograd() is None
    enable_autograd(quiet=False)
    assert "autograd" in capsys.readouterr().out
    assert is_grad_enabled()
    x = Tensor([2.0], requires_grad=True)
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad, [3.0])


# ------------------------------------------------------------------ activations

def test_activations_upstream_values():
    from tinytorch.core.activations import GELU, ReLU, Sigmoid, Softmax, Tanh
    x = np.array([-2.0, 0.0, 2.0], np.float32)
    np.testing.assert_allclose(Sigmoid()(Tensor(x)).data, torch.sigmoid(torch.tensor(x)).numpy(), atol=1e-6)
    np.testing.assert_allclose(ReLU()(Tensor(x)).data, [0, 0, 2])
    np.testing.assert_allclose(Tanh()(Tensor(x)).data, np.tanh(x), atol=1e-6)
    # different on purpose: tanh-form GELU (upstream core uses x * sigmoid(1.702 x))
    np.testing.assert_allclose(GELU()(Tensor(x)).data,
                               torch.nn.functional.gelu(torch.tensor(x), approximate="tanh").numpy(), atol=1e-6)
    s = Softmax()
    m = f32(2, 3)
    np.testing.assert_allclose(s(Tensor(m), dim=0).data, torch.softmax(torch.tensor(m), 0).numpy(), atol=1e-6)
    np.testing.assert_allclose(s.forward(Tensor(m), dim=-1).data, torch.softmax(torch.tensor(m), -1).numpy(),
                               atol=1e-6)
    assert s.parameters() == [] and ReLU().parameters() == []


# ------------------------------------------------------------------ layers

def test_linear_layout_and_dropout_training_flag():
    from tinytorch.core.layers import Dropout, Linear, Sequential
    from tinytorch.core.activations import ReLU
    layer = Linear(784, 10)
    assert layer.weight.shape == (784, 10) and layer.bias.shape == (10,)
    assert Linear(3, 2, bias=False).bias is None
    x = Tensor(f32(4, 784))
    np.testing.assert_allclose(layer.forward(x).data, x.data @ layer.weight.data + layer.bias.data, atol=1e-5)
    model = Sequential(Linear(4, 3), ReLU(), Linear(3, 2))
    assert len(model.parameters()) == 4
    d = Dropout(0.5)
    x = Tensor(np.ones((200, 50), np.float32))
    assert d(x, training=False) is x  # explicit flag: identity even in train mode
    assert d.forward(x, training=False) is x
    tinytorch.manual_seed(0)
    y = d(x, training=True).data
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    d.eval()
    y = d(x, training=True).data  # the flag wins over the mode, as upstream
    assert (y == 0).any()
    with pytest.raises(ValueError):
        Dropout(1.5)


# ------------------------------------------------------------------ losses

def test_losses_upstream_calls_match_torch():
    from tinytorch.core.losses import BinaryCrossEntropyLoss, CrossEntropyLoss, MSELoss, log_softmax
    p, t = Tensor([1.0, 2.0, 3.0]), Tensor([1.5, 2.5, 2.8])
    assert np.isclose(MSELoss()(p, t).data, 0.18)
    logits = f32(4, 5)
    np.testing.assert_allclose(log_softmax(Tensor(logits), dim=-1).data,
                               torch.log_softmax(torch.tensor(logits), -1).numpy(), atol=1e-6)
    labels = np.array([0, 1, 4, 2])
    ce = CrossEntropyLoss()(Tensor(logits), Tensor(labels))  # int labels (see docs/compat.md)
    assert np.isclose(ce.data, torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(labels)).item(),
                      atol=1e-6)
    probs = np.array([0.9, 0.1, 0.7, 0.3, 1.0, 0.0], np.float32)
    tgt = np.array([1, 0, 1, 0, 1, 0], np.float32)
    pt = Tensor(probs, requires_grad=True)
    loss = BinaryCrossEntropyLoss()(pt, Tensor(tgt))
    tp = torch.tensor(probs.astype(np.float64)).clamp(1e-7, 1 - 1e-7)
    ref = -(torch.tensor(tgt) * tp.log() + (1 - torch.tensor(tgt)) * (1 - tp).log()).mean()
    assert np.isclose(loss.data, ref.item(), rtol=1e-5)
    loss.backward()
    tq = torch.tensor(probs[:4], requires_grad=True)
    torch.nn.functional.binary_cross_entropy(tq, torch.tensor(tgt[:4])).backward()
    np.testing.assert_allclose(pt.grad[:4], tq.grad.numpy() * 4 / 6, rtol=1e-4)


# ------------------------------------------------------------------ optimizers

def _quadratic_step(opt, p, target):
    p.grad = (2 * (p.data - target)).astype(np.float32)
    opt.step()


def test_sgd_momentum_state_accessors_round_trip():
    from tinytorch.core.optimizers import SGD
    target = np.array([1.0, -2.0], np.float32)
    p = Tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = SGD([p], lr=0.1, momentum=0.9)
    assert opt.has_momentum() and not SGD([p], lr=0.1).has_momentum()
    assert opt.get_momentum_state() == [None]
    _quadratic_step(opt, p, target)
    state = opt.get_momentum_state()
    assert state[0] is not opt.momentum_buffers[0]  # a copy
    np.testing.assert_allclose(state[0], opt.state[p]["momentum_buffer"])
    # torch parity of the update these buffers carry
    tp = torch.zeros(2, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1, momentum=0.9)
    for _ in range(2):
        topt.zero_grad()
        ((tp - torch.tensor(target)) ** 2).sum().backward()
        topt.step()
    p2 = Tensor(p.data.copy(), requires_grad=True)
    opt2 = SGD([p2], lr=0.1, momentum=0.9)
    opt2.set_momentum_state(state)
    _quadratic_step(opt2, p2, target)
    np.testing.assert_allclose(p2.data, tp.detach().numpy(), atol=1e-6)
    with pytest.raises(ValueError):
        opt2.set_momentum_state([None, None])
    assert SGD([p], lr=0.1).get_momentum_state() is None


def test_adam_buffers_and_betas_names():
    from tinytorch.core.optimizers import Adam, AdamW
    p = Tensor(np.ones(3, np.float32), requires_grad=True)
    opt = Adam([p], lr=0.01, betas=(0.8, 0.95))
    assert (opt.beta1, opt.beta2) == (0.8, 0.95)
    assert opt.m_buffers == [None] and opt.v_buffers == [None]
    _quadratic_step(opt, p, np.zeros(3, np.float32))
    g = 2 * np.ones(3)
    np.testing.assert_allclose(opt.m_buffers[0], 0.2 * g, rtol=1e-6)
    np.testing.assert_allclose(opt.v_buffers[0], 0.05 * g ** 2, rtol=1e-6)
    assert opt.step_count == 1 and AdamW([p]).weight_decay == 0.01


# ------------------------------------------------------------------ training

def test_cosine_schedule_matches_torch_cosine_annealing():
    from tinytorch.core.training import CosineSchedule
    s = CosineSchedule(max_lr=0.1, min_lr=0.01, total_epochs=100)
    assert s.get_lr(0) == pytest.approx(0.1)
    assert s.get_lr(50) == pytest.approx(0.055)
    assert s.get_lr(100) == pytest.approx(0.01) and s.get_lr(250) == pytest.approx(0.01)
    tp = torch.zeros(1, requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.1)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=100, eta_min=0.01)
    for epoch in range(100):
        assert s.get_lr(epoch) == pytest.approx(topt.param_groups[0]["lr"], abs=1e-12)
        topt.step()
        sched.step()
    with pytest.raises(ValueError):
        CosineSchedule(total_epochs=0)


def test_clip_grad_norm_upstream_call_matches_torch():
    from tinytorch.core.training import clip_grad_norm
    a = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    a.grad = Tensor([10.0, 20.0, 30.0])  # upstream examples set Tensor grads
    b = Tensor([1.0], requires_grad=True)
    b.grad = np.array([5.0], np.float32)
    norm = clip_grad_norm([a, b], max_norm=1.0)
    ta, tb = torch.ones(3, requires_grad=True), torch.ones(1, requires_grad=True)
    ta.grad, tb.grad = torch.tensor([10.0, 20.0, 30.0]), torch.tensor([5.0])
    tnorm = torch.nn.utils.clip_grad_norm_([ta, tb], 1.0)
    assert norm == pytest.approx(tnorm.item(), rel=1e-6)
    np.testing.assert_allclose(a.grad, ta.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(b.grad, tb.grad.numpy(), rtol=1e-5)
    assert clip_grad_norm([], 1.0) == 0.0


def test_trainer_upstream_construction_with_cosine_schedule(tmp_path):
    from tinytorch.core.dataloader import DataLoader, TensorDataset
    from tinytorch.core.layers import Linear
    from tinytorch.core.losses import CrossEntropyLoss
    from tinytorch.core.optimizers import SGD
    from tinytorch.core.training import CosineSchedule, Trainer
    tinytorch.manual_seed(0)
    x = f32(24, 4)
    y = (x[:, 0] > 0).astype(np.int64)
    model = Linear(4, 2)
    opt = SGD(model.parameters(), lr=0.5)
    sched = CosineSchedule(max_lr=0.1, min_lr=0.01, total_epochs=3)
    trainer = Trainer(model, opt, CrossEntropyLoss(), scheduler=sched, grad_clip_norm=1.0, progress=False)
    loader = DataLoader(TensorDataset(Tensor(x), Tensor(y)), batch_size=8, shuffle=True)
    lrs = []
    for _ in range(3):
        loss = trainer.train_epoch(loader)
        lrs.append(opt.lr)  # upstream: after epoch k the optimizer still holds get_lr(k)
        assert np.isfinite(loss)
    assert lrs == pytest.approx([sched.get_lr(0), sched.get_lr(1), sched.get_lr(2)])
    assert trainer.history["learning_rates"] == pytest.approx(lrs)
    loss, acc = trainer.evaluate(loader)
    assert np.isfinite(loss) and 0.0 <= acc <= 1.0
    trainer.save_checkpoint(tmp_path / "ck.npz")
    trainer.load_checkpoint(tmp_path / "ck.npz")
    trainer.train_epoch(loader)
    assert opt.lr == pytest.approx(sched.get_lr(3))


# ------------------------------------------------------------------ data

def test_dataset_dataloader_and_transforms():
    from tinytorch.core.dataloader import Compose, DataLoader, Dataset, RandomCrop, RandomHorizontalFlip, \
        TensorDataset

    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.array([i], np.float32), np.array(i * i)

    batches = list(DataLoader(Squares(), batch_size=2))
    assert len(batches) == 3 and isinstance(batches[0][0], Tensor)
    np.testing.assert_array_equal(batches[1][1].data, [4, 9])
    ds = TensorDataset(Tensor([[1, 2], [3, 4], [5, 6]]), Tensor([0, 1, 0]))
    assert len(ds) == 3
    np.testing.assert_array_equal(ds[1][0], [3, 4])
    assert len(DataLoader(ds, batch_size=2, shuffle=True)) == 2

    img = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert RandomHorizontalFlip(p=0.0)(img) is img
    np.testing.assert_array_equal(RandomHorizontalFlip(p=1.0)(img), img[:, ::-1])
    flipped = RandomHorizontalFlip(1.0)(Tensor(img))
    assert isinstance(flipped, Tensor)
    np.testing.assert_array_equal(flipped.data, torch.flip(torch.tensor(img), [-1]).numpy())
    with pytest.raises(ValueError):
        RandomHorizontalFlip(2.0)
    tinytorch.manual_seed(1)
    chw = f32(3, 8, 8)
    out = RandomCrop(8, padding=2)(chw)
    assert out.shape == (3, 8, 8)
    padded = np.pad(chw, ((0, 0), (2, 2), (2, 2)))
    found = any(np.array_equal(out, padded[:, i:i + 8, j:j + 8]) for i in range(5) for j in range(5))
    assert found
    assert RandomCrop(8, padding=0)(chw).tolist() == chw.tolist()
    assert RandomCrop((6, 6), padding=4)(f32(8, 8, 5)).shape == (6, 6, 5)  # HWC
    with pytest.raises(ValueError):
        RandomCrop(8)(f32(2, 2, 2, 2))
    pipe = Compose([RandomHorizontalFlip(1.0), RandomHorizontalFlip(1.0)])
    np.testing.assert_array_equal(pipe(img), img)


# ------------------------------------------------------------------ spatial

def test_conv_and_pool_spellings_match_torch():
    from tinytorch.core.spatial import AvgPool2D, Conv2D, MaxPool2D
    x = f32(2, 3, 8, 8)
    conv = Conv2D(3, 4, kernel_size=3, padding=1)
    assert conv.weight.shape == (4, 3, 3, 3)
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(conv.weight.data), torch.tensor(conv.bias.data),
                                     padding=1)
    np.testing.assert_allclose(conv(Tensor(x)).data, ref.numpy(), atol=1e-4)
    np.testing.assert_allclose(MaxPool2D(kernel_size=2)(Tensor(x)).data,
                               torch.nn.functional.max_pool2d(torch.tensor(x), 2).numpy())
    np.testing.assert_allclose(AvgPool2D(2, stride=2)(Tensor(x)).data,
                               torch.nn.functional.avg_pool2d(torch.tensor(x), 2).numpy(), atol=1e-6)


# ------------------------------------------------------------------ embeddings

def test_embeddings_upstream_names():
    from tinytorch.core.embeddings import Embedding, EmbeddingLayer, PositionalEncoding, \
        create_sinusoidal_embeddings
    emb = Embedding(100, 64)
    out = emb(Tensor(np.array([[1, 2, 3], [4, 5, 6]])))
    assert out.shape == (2, 3, 64)
    np.testing.assert_array_equal(out.data[1, 2], emb.weight.data[6])
    with pytest.raises(ValueError):
        emb(Tensor(np.array([[100]])))
    pe = PositionalEncoding(max_seq_len=16, embed_dim=8)
    x = f32(2, 5, 8)
    np.testing.assert_allclose(pe(Tensor(x)).data, x + pe.weight.data[:5], atol=1e-6)
    with pytest.raises(ValueError):
        pe(Tensor(f32(1, 17, 8)))
    table = create_sinusoidal_embeddings(10, 6)
    pos = np.arange(10, dtype=np.float64)[:, None]
    div = np.exp(np.arange(0, 6, 2) * -(np.log(10000.0) / 6))
    ref = np.zeros((10, 6))
    ref[:, 0::2], ref[:, 1::2] = np.sin(pos * div), np.cos(pos * div)
    assert isinstance(table, Tensor) and table.dtype == np.float32
    np.testing.assert_allclose(table.data, ref, atol=1e-6)
    for kind in ("learned", "sinusoidal", None):
        layer = EmbeddingLayer(50, 8, max_seq_len=12, pos_encoding=kind, scale_embeddings=True)
        ids = np.array([[1, 2, 3]])
        tok = layer.token_embedding.weight.data[ids] * np.sqrt(8)
        extra = {"learned": lambda: layer.pos_encoding.weight.data[:3],
                 "sinusoidal": lambda: ref_table(12, 8)[:3], None: lambda: 0.0}[kind]()
        np.testing.assert_allclose(layer(Tensor(ids)).data, tok + extra, atol=1e-5)
        assert layer(Tensor(np.array([1, 2]))).shape == (2, 8)
    with pytest.raises(ValueError):
        EmbeddingLayer(5, 4, pos_encoding="rotary")


def ref_table(n, d):
    from tinytorch.core.embeddings import sinusoidal_table
    return sinusoidal_table(n, d)


def test_batchnorm2d_matches_torch_train_and_eval():
    from tinytorch.core.spatial import BatchNorm2d
    x = f32(4, 3, 5, 5)
    bn, tb = BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    assert bn.gamma.shape == (3,) and bn.training
    X = Tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    y, ty = bn(X), tb(tx)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), atol=1e-5)
    w = f32(4, 3, 5, 5, seed=3)
    (y * Tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(X.grad, tx.grad.numpy(), atol=1e-5)
    np.testing.assert_allclose(bn.gamma.grad, tb.weight.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(bn.beta.grad, tb.bias.grad.numpy(), atol=1e-4)
    np.testing.assert_allclose(bn.running_mean, tb.running_mean.numpy(), atol=1e-6)
    np.testing.assert_allclose(bn.running_var, tb.running_var.numpy(), atol=1e-6)
    bn.eval(), tb.eval()
    np.testing.assert_allclose(bn(Tensor(x)).data, tb(torch.tensor(x)).detach().numpy(), atol=1e-5)
    with pytest.raises(ValueError):
        bn(Tensor(f32(2, 4, 3, 3)))
    with pytest.raises(ValueError):
        bn(Tensor(f32(3, 5, 5)))


def test_tokenizers_round_trip_upstream_calls():
    from tinytorch.core.tokenization import BPETokenizer, CharTokenizer
    tok = CharTokenizer(["h", "e", "l", "o"])
    ids = tok.encode("hello")
    assert isinstance(ids, list) and tok.decode(ids) == "hello"
    assert len(set(ids)) == 4 and tok.vocab_size >= 4
    bpe = BPETokenizer(vocab_size=300)
    bpe.train("hello hello help hello world " * 20)
    text = "hello world"
    assert bpe.decode(bpe.encode(text)) == text


def test_simple_cnn_matches_torch():
    from tinytorch.core.spatial import SimpleCNN
    tinytorch.manual_seed(0)
    model = SimpleCNN(num_classes=10)
    assert model.flattened_size == 2048 and model.num_classes == 10 and len(model.parameters()) == 4
    x = f32(2, 3, 32, 32)
    t = torch.tensor(x)
    for conv in (model.conv1, model.conv2):
        t = torch.nn.functional.max_pool2d(torch.relu(torch.nn.functional.conv2d(
            t, torch.tensor(conv.weight.data), torch.tensor(conv.bias.data), padding=1)), 2)
    out = model(Tensor(x))
    assert out.shape == (2, 2048)
    np.testing.assert_allclose(out.data, t.reshape(2, -1).numpy(), atol=1e-4)


def test_error_types_for_bad_input_match_upstream():
    x = Tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(ValueError):
        (x * 2).backward()  # non-scalar without a gradient
    with pytest.raises(ValueError):
        Tensor(np.ones(6)).reshape(4, 2)
    with pytest.raises(ValueError):
        Tensor(np.ones(6)).reshape(-1, -1)
    from tinytorch.core.attention import MultiHeadAttention
    with pytest.raises(ValueError):
        MultiHeadAttention(10, 3)
    from tinytorch.core.dataloader import TensorDataset
    with pytest.raises(ValueError):
        TensorDataset(np.ones((3, 2)), np.ones(4))


def test_cross_entropy_accepts_whole_number_float_labels():
    """Upstream writes labels as float32 Tensors: whole numbers are class ids; fractions are refused."""
    import numpy as np
    import pytest
    from tinytorch.core.losses import CrossEntropyLoss
    from tinytorch.core.tensor import Tensor
    logits = Tensor(np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0]], dtype=np.float32))
    as_float = CrossEntropyLoss()(logits, Tensor([0.0, 2.0])).data
    as_int = CrossEntropyLoss()(logits, np.array([0, 2])).data
    np.testing.assert_allclose(as_float, as_int, rtol=1e-6)
    with pytest.raises(TypeError, match="class index"):
        CrossEntropyLoss()(logits, Tensor([0.5, 2.0]))
    with pytest.raises(ValueError, match="out of range"):
        CrossEntropyLoss()(logits, Tensor([0.0, 3.0]))
