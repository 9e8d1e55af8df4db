"""Upstream TinyTorch course code, modules 01-09, second round (#31): each behaviour adapted so
that upstream's own tests run, checked here by our own tests against hand-computed values
or a float64 reference (upstream's tests themselves are not part of this repository)."""
import numpy as np
import pytest

from tinytorch.core.layers import Dropout, Layer, Linear, Parameter, Sequential, set_training_mode
from tinytorch.core.losses import BinaryCrossEntropyLoss, ClassIndexError, CrossEntropyLoss, MSELoss
from tinytorch.core.optimizers import SGD, Adam, AdamW
from tinytorch.core.tensor import Tensor
from tinytorch.core.training import CosineSchedule, Trainer, clip_grad_norm


# ------------------------------------------------------------------ optimizers
@pytest.mark.parametrize("make", [SGD, Adam, AdamW])
@pytest.mark.parametrize("name", ["lr", "weight_decay"])
@pytest.mark.parametrize("value", [-1.0, float("nan"), float("inf")])
def test_bad_hyper_parameters_are_refused_by_name(make, name, value):
    with pytest.raises(ValueError, match=name):
        make([Tensor([1.0])], **{name: value})


def test_tensor_grads_and_hand_set_grads_on_plain_tensors_are_applied():
    p = Tensor([1.0, 2.0])  # requires_grad False, as upstream code writes it
    opt = SGD([p], lr=0.5)
    p.grad = Tensor([2.0, -2.0])
    opt.step()
    np.testing.assert_allclose(p.data, [0.0, 3.0])
    frozen = Parameter(np.ones(2))
    frozen.requires_grad = False
    frozen.grad = np.ones(2, np.float32)
    SGD([frozen], lr=1.0).step()
    np.testing.assert_array_equal(frozen.data, np.ones(2))  # a frozen Parameter stays


def test_adam_update_counts_are_per_parameter_moment_ages():
    a, b = Tensor([1.0]), Tensor([1.0])
    ref = Tensor([1.0])
    opt, ref_opt = Adam([a, b], lr=0.1), Adam([ref], lr=0.1)
    a.grad = np.array([1.0], np.float32)
    opt.step()
    opt.step()
    b.grad = ref.grad = np.array([0.5], np.float32)
    a.grad = None
    opt.step()
    ref_opt.step()
    assert opt.update_counts == [2, 1]
    np.testing.assert_allclose(b.data, ref.data)  # bias-corrected from b's own first step


def test_momentum_state_round_trips_and_bad_states_change_nothing():
    p = Tensor([1.0, 2.0])
    opt = Adam([p])
    p.grad = np.array([1.0, -1.0], np.float32)
    opt.step()
    saved = opt.get_momentum_state()
    with pytest.raises(ValueError, match="shape"):
        opt.set_momentum_state([(np.zeros(3), np.zeros(3))])
    with pytest.raises(ValueError, match="both"):
        opt.set_momentum_state([(np.zeros(2), None)])
    np.testing.assert_array_equal(opt.m_buffers[0], saved[0][0])
    other = Adam([Tensor([1.0, 2.0])])
    other.set_momentum_state(saved)
    np.testing.assert_array_equal(other.v_buffers[0], saved[0][1])
    sgd = SGD([p], momentum=0.9)
    p.grad = np.array([1.0, 1.0], np.float32)
    sgd.step()
    sgd.set_momentum_state([None])
    assert sgd.momentum_buffers == [None]
    with pytest.raises(ValueError, match="length mismatch"):
        sgd.set_momentum_state([None, None])


# ------------------------------------------------------------------ layers
def test_dropout_helpers_are_forward_s_two_steps():
    d = Dropout(0.25)
    assert d._should_apply_dropout(True) and not d._should_apply_dropout(False)
    assert not Dropout(0.0)._should_apply_dropout(True)
    mask = d._generate_dropout_mask((4000,)).data
    assert set(np.unique(mask)) <= {0.0, np.float32(1 / 0.75)}
    assert abs((mask == 0).mean() - 0.25) < 0.03


def test_set_training_mode_reaches_layers_of_a_plain_model_class():
    class Plain:
        def __init__(self):
            self.blocks = [Linear(2, 2), {"drop": Dropout(0.5)}]
            self.me = self

    m = Plain()
    set_training_mode(m, False)
    assert m.blocks[0].training is False and m.blocks[1]["drop"].training is False
    set_training_mode(Sequential(m.blocks[0]), True)
    assert m.blocks[0].training is True


def test_linear_dtype_is_the_parameters_dtype():
    lin = Linear(3, 2, dtype=np.float64)
    assert lin.weight.dtype == np.float64 and lin.bias.dtype == np.float64


# ------------------------------------------------------------------ losses
def test_bce_refuses_non_probabilities_and_broadcast_shapes():
    for pred, target in (([1.1], [1.0]), ([np.nan], [1.0]), ([0.5], [-0.1])):
        with pytest.raises(ValueError, match="finite values"):
            BinaryCrossEntropyLoss()(Tensor(pred), Tensor(target))
    for loss in (MSELoss(), BinaryCrossEntropyLoss()):
        with pytest.raises(ValueError, match="matching, nonempty"):
            loss(Tensor([[0.2], [0.8]]), Tensor([0.0, 1.0]))


def test_bce_soft_target_gradient_is_minus_the_logit():
    p = np.array([0.7, 0.2, 0.9])
    t = Tensor([0.6, 0.1, 0.3], requires_grad=True)
    BinaryCrossEntropyLoss()(Tensor(p), t).backward()
    np.testing.assert_allclose(t.grad, -np.log(p / (1 - p)) / 3, rtol=1e-5)


def test_cross_entropy_fractional_labels_are_type_and_value_errors():
    with pytest.raises(ClassIndexError, match="finite integer"):
        CrossEntropyLoss()(Tensor([[2.0, 0.0]]), Tensor([0.5]))
    assert issubclass(ClassIndexError, TypeError) and issubclass(ClassIndexError, ValueError)
    with pytest.raises(ValueError, match="logits.*targets"):
        CrossEntropyLoss()(Tensor(np.zeros((2, 0))), Tensor(np.array([0, 1])))


# ------------------------------------------------------------------ training
def _trainer(lr=0.1):
    model = Linear(1, 1)
    model.weight.data[:] = 1.0
    model.bias.data[:] = 0.0
    return Trainer(model, SGD(model.parameters(), lr=lr), MSELoss(), progress=False)


def test_unequal_accumulation_window_equals_one_batch_of_its_samples():
    xs = np.array([[1.0], [2.0], [3.0]], np.float32)
    acc, ref = _trainer(), _trainer()
    acc.train_epoch([(Tensor(xs[:2]), Tensor(np.zeros((2, 1)))), (Tensor(xs[2:]), Tensor(np.zeros((1, 1))))],
                    accumulation_steps=2)
    ref.train_epoch([(Tensor(xs), Tensor(np.zeros((3, 1))))])
    np.testing.assert_allclose(acc.model.weight.data, ref.model.weight.data, rtol=1e-6)
    assert acc.step == 1
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="positive integer"):
            acc.train_epoch([], accumulation_steps=bad)


def test_epoch_schedule_and_eval_mode_as_upstream(tmp_path):
    t = _trainer()
    t.scheduler = None
    sched = CosineSchedule(0.1, 0.01, 4)
    t = Trainer(t.model, t.optimizer, MSELoss(), scheduler=sched, progress=False)
    batch = [(Tensor([[1.0]]), Tensor([[0.0]]))]
    t.train_epoch(batch)
    assert t.optimizer.lr == pytest.approx(sched.get_lr(0)) and t.history["learning_rates"] == [pytest.approx(0.1)]
    t.evaluate(batch)
    assert t.model.training is False and t.training_mode is False
    path = tmp_path / "sub" / "ckpt.pkl"
    t.save_checkpoint(path)
    assert path.exists() and not path.with_suffix(".pkl.npz").exists()
    t.model.train()
    t.load_checkpoint(path)
    assert t.model.training is False


def test_model_state_by_index_is_checked_before_copying():
    t = _trainer()
    before = t.model.weight.data.copy()
    with pytest.raises(ValueError, match="Checkpoint parameter"):
        t._set_model_state({0: np.zeros((2, 1)), 1: np.zeros(1)})
    np.testing.assert_array_equal(t.model.weight.data, before)
    t._set_model_state({0: np.full((1, 1), 3.0), 1: np.zeros(1)})
    assert t.model.weight.data[0, 0] == 3.0


def test_clip_grad_norm_limits():
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite and nonnegative"):
            clip_grad_norm([], max_norm=bad)
    p = Tensor([0.0, 0.0])
    p.grad = Tensor([3.0, 4.0])
    assert clip_grad_norm([p], 1.0) == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad, [0.6, 0.8], rtol=1e-5)


def test_empty_parameter_list_is_a_no_op_optimizer():
    class Identity(Layer):
        def forward(self, x):
            return x

    t = Trainer(Identity(), SGD([]), CrossEntropyLoss(), progress=False)
    _, acc = t.evaluate([(Tensor([[3.0, 1.0], [1.0, 3.0]]), Tensor([0.0, 0.0]))])
    assert acc == 0.5  # whole-number float labels count as class ids


# ------------------------------------------------------------------ autograd: broadcast seeds
def test_reduce_broadcast_grad_sums_leading_and_singleton_axes():
    from tinytorch.core.autograd import _reduce_broadcast_grad
    rng = np.random.default_rng(3)
    g = rng.standard_normal((4, 7, 5))
    np.testing.assert_allclose(_reduce_broadcast_grad(g, (7, 1)), g.sum(axis=(0, 2))[:, None])
    np.testing.assert_allclose(_reduce_broadcast_grad(g, (5,)), g.sum(axis=(0, 1)))
    np.testing.assert_array_equal(_reduce_broadcast_grad(g, (4, 7, 5)), g)
    with pytest.raises(ValueError, match="does not broadcast"):
        _reduce_broadcast_grad(g, (3, 5))


def test_backward_seed_of_a_broadcast_shape_is_summed_down_on_a_leaf_only():
    rng = np.random.default_rng(4)
    leaf = Tensor(np.zeros(4), requires_grad=True)
    leaf.backward(np.ones((8, 4)))  # upstream's leaf accumulation: as if broadcast first
    np.testing.assert_array_equal(leaf.grad, np.full(4, 8.0))
    w = Tensor(rng.standard_normal((3, 1)), requires_grad=True)
    w.backward(rng.standard_normal((2, 3, 5)).astype(np.float32))
    assert w.grad.shape == (3, 1)
    # a computed tensor's seed must match its shape (PyTorch, and upstream's graph tests):
    # refused before any gradient changes, then the right seed works
    x = Tensor([2.0, 3.0], requires_grad=True)
    y = x * 2
    for bad in (1.0, [1.0], np.ones((3, 2)), Tensor([[1.0, 1.0]]), np.ones(3)):
        with pytest.raises(ValueError, match="gradient has shape"):
            y.backward(bad)
        assert x.grad is None
    y.backward(Tensor([3.0, 4.0]))
    np.testing.assert_array_equal(x.grad, [6.0, 8.0])
    z = Tensor(np.ones((2, 3)), requires_grad=True)
    for bad in (np.ones(3), np.ones((2, 4)), np.ones((3, 2))):  # smaller or not a broadcast
        with pytest.raises(ValueError, match="gradient has shape"):
            z.backward(bad)
