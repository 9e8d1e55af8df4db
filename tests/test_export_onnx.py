"""ONNX export (tinytorch.export.to_onnx): each file passes onnx.checker, ONNX Runtime's outputs equal
ours within 1e-5 relative on random inputs at two batch sizes (and two sequence lengths for the GPT)
for the MLP, milestone 04's CNN, the GPT (tied head or not) and a LoRA-merged GPT; wrong mappings
(a reversed weight, q/k swapped, a transposed projection, the causal mask or the GELU form changed)
break parity; unmapped layers are refused by name; weights go to an external data file above the
threshold and ONNX Runtime loads them; without onnx, ImportError says what to install."""
import importlib.util
import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tinytorch import _export_layers, export  # noqa: E402
from tinytorch.core.activations import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh  # noqa: E402
from tinytorch.core.layers import Dropout, Flatten, Linear, Sequential  # noqa: E402
from tinytorch.core.random import manual_seed  # noqa: E402
from tinytorch.core.spatial import AvgPool2d, BatchNorm2d, Conv2d, MaxPool2d  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.core.transformers import GPT, MLP, LayerNorm  # noqa: E402
from tinytorch.extensions.lora import inject_lora, merge_and_unload  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _mlp():
    return Sequential(Flatten(), Linear(16, 32), ReLU(), Linear(32, 10), LogSoftmax())


def _lenet():
    """Milestone 04's CNN, from the milestone's own file."""
    spec = importlib.util.spec_from_file_location("lenet", os.path.join(ROOT, "milestones", "04_1998_cnn", "lenet.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.lenet()


def _gpt(tie=False, seed=0):
    manual_seed(seed)
    model = GPT(vocab_size=37, embed_dim=32, num_layers=2, num_heads=4, max_seq_len=16, tie_weights=tie)
    rng = np.random.default_rng(seed)
    for _, p in model.named_parameters():  # beyond the init's tiny scale, so every weight matters
        p.data[...] = rng.normal(0.0, 0.3, p.shape)
    return model


def _session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = 1, 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _ours(model, x):
    out = model(x if x.dtype.kind in "iu" else Tensor(x))
    return out.data


def _assert_parity(path, model, x):
    np.testing.assert_allclose(_session(path).run(None, {"input": x})[0], _ours(model, x), rtol=1e-5, atol=1e-6)


def _gap(path, model, x):
    return float(np.abs(_session(path).run(None, {"input": x})[0] - _ours(model, x)).max())


def _ids(rng, batch, seq, vocab=37):
    return rng.integers(0, vocab, (batch, seq))


# ---------------------------------------------------------------------------- parity

def test_mlp_matches_onnxruntime_at_two_batch_sizes(tmp_path):
    model, path = _mlp(), tmp_path / "mlp.onnx"
    rng = np.random.default_rng(0)
    export.to_onnx(model, rng.standard_normal((2, 4, 4)).astype(np.float32), path)
    onnx.checker.check_model(onnx.load(str(path)))
    for batch in (1, 7):
        _assert_parity(path, model, rng.standard_normal((batch, 4, 4)).astype(np.float32))


def test_milestone_cnn_matches_onnxruntime_at_two_batch_sizes(tmp_path):
    model, path = _lenet(), tmp_path / "cnn.onnx"
    rng = np.random.default_rng(1)
    export.to_onnx(model, rng.standard_normal((2, 1, 8, 8)).astype(np.float32), path)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"Conv", "MaxPool", "Relu", "Flatten", "MatMul"} <= ops
    for batch in (1, 9):
        _assert_parity(path, model, rng.standard_normal((batch, 1, 8, 8)).astype(np.float32))


@pytest.mark.parametrize("tie", [False, True])
def test_gpt_matches_onnxruntime_at_two_batches_and_lengths(tmp_path, tie):
    model, path = _gpt(tie), tmp_path / "gpt.onnx"
    rng = np.random.default_rng(2)
    export.to_onnx(model, _ids(rng, 2, 5), path)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto)
    names = [i.name for i in proto.graph.initializer]
    assert "blocks.1.attn.q_proj.weight" in names and "token_embedding.weight" in names
    assert ("lm_head.weight" in names) != tie  # a tied head is stored once, as the token table
    for batch, seq in ((1, 3), (4, 16)):
        _assert_parity(path, model, _ids(rng, batch, seq))


def test_lora_merged_gpt_matches_onnxruntime(tmp_path):
    model, path = _gpt(seed=3), tmp_path / "lora.onnx"
    rng = np.random.default_rng(3)
    base = model(_ids(rng, 2, 6)).data
    inject_lora(model, ["q_proj", "v_proj", "fc1"], rank=2)
    for name, p in model.named_parameters():
        if name.endswith("lora_B"):  # B starts at zero: give the adapters an effect to merge
            p.data[...] = rng.normal(0.0, 0.3, p.shape)
    with pytest.raises(export.UnsupportedLayerError, match="LoRALinear.*merge_and_unload"):
        export.to_onnx(model, _ids(rng, 2, 6), path)
    merge_and_unload(model)
    export.to_onnx(model, _ids(rng, 2, 6), path)
    for batch, seq in ((1, 6), (3, 11)):
        _assert_parity(path, model, _ids(rng, batch, seq))
    rng = np.random.default_rng(3)
    assert np.abs(_session(path).run(None, {"input": _ids(rng, 2, 6)})[0] - base).max() > 1e-2  # the merge counted


CASES = {
    "conv_stride_pad": (lambda: Conv2d(3, 4, (3, 2), stride=2, padding=(1, 0)), (2, 3, 9, 8)),
    "conv_no_bias": (lambda: Conv2d(2, 3, 3, padding=1, bias=False), (2, 2, 5, 5)),
    "maxpool_pad": (lambda: MaxPool2d(3, stride=2, padding=1), (2, 3, 7, 8)),
    "avgpool_pad": (lambda: AvgPool2d(2, padding=1), (2, 3, 5, 6)),
    "sigmoid": (Sigmoid, (3, 5)), "tanh": (Tanh, (3, 5)), "silu": (SiLU, (3, 5)),
    "gelu_tanh": (GELU, (3, 5)), "gelu_erf": (lambda: GELU("none"), (3, 5)),
    "softmax_axis1": (lambda: Softmax(axis=1), (3, 4, 5)),
    "layernorm": (lambda: LayerNorm(6, eps=1e-3), (3, 4, 6)),
    "layernorm_2d": (lambda: LayerNorm((4, 6)), (3, 4, 6)),
    "layernorm_plain": (lambda: LayerNorm(6, elementwise_affine=False), (3, 6)),
    "mlp_block": (lambda: MLP(8), (2, 3, 8)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_layer_matches_onnxruntime(tmp_path, case):
    make, shape = CASES[case]
    manual_seed(4)
    model, path = make(), tmp_path / f"{case}.onnx"
    rng = np.random.default_rng(4)
    for _, p in model.named_parameters():
        p.data[...] = rng.normal(0.0, 1.0, p.shape)
    export.to_onnx(model, (3 * rng.standard_normal(shape)).astype(np.float32), path)
    for batch in (1, 5):
        _assert_parity(path, model, (3 * rng.standard_normal((batch,) + shape[1:])).astype(np.float32))


# ---------------------------------------------------------------------------- the comparison catches mistakes

def test_a_wrong_mapping_breaks_parity(tmp_path):
    model, path = _mlp(), tmp_path / "bad.onnx"
    real = np.asarray(model.layers[1].weight.data).copy()
    model.layers[1].weight.data[...] = real[::-1]  # export a reversed weight, compare with the real one
    x = np.random.default_rng(1).standard_normal((3, 4, 4)).astype(np.float32)
    export.to_onnx(model, x, path)
    model.layers[1].weight.data[...] = real
    assert _gap(path, model, x) > 1e-3


def _exported_with(tmp_path, model, change, undo):
    path = tmp_path / "wrong.onnx"
    change()
    export.to_onnx(model, _ids(np.random.default_rng(5), 2, 7), path)
    undo()
    return path


def test_gpt_q_k_swapped_breaks_parity(tmp_path):
    model = _gpt()
    attn = model.blocks[0].attn
    q, k = attn.q_proj, attn.k_proj

    def use(a, b):
        attn.q_proj, attn.k_proj = a, b

    path = _exported_with(tmp_path, model, lambda: use(k, q), lambda: use(q, k))
    assert _gap(path, model, _ids(np.random.default_rng(6), 2, 7)) > 1e-3


def test_gpt_transposed_projection_breaks_parity(tmp_path):
    model = _gpt()
    w = model.blocks[1].attn.out_proj.weight
    real = w.data.copy()
    path = _exported_with(tmp_path, model, lambda: w.data.__setitem__(..., real.T), lambda: w.data.__setitem__(..., real))
    assert _gap(path, model, _ids(np.random.default_rng(6), 2, 7)) > 1e-3


def test_gpt_without_the_causal_mask_breaks_parity(tmp_path, monkeypatch):
    model = _gpt()
    monkeypatch.setattr(_export_layers, "_causal_where", lambda g, x, scores: scores)
    export.to_onnx(model, _ids(np.random.default_rng(5), 2, 7), tmp_path / "nomask.onnx")
    assert _gap(tmp_path / "nomask.onnx", model, _ids(np.random.default_rng(6), 2, 7)) > 1e-3


def test_gelu_erf_form_in_the_mlp_breaks_parity(tmp_path, monkeypatch):
    """Our MLP uses the tanh GELU; exporting the erf form instead is caught."""
    manual_seed(7)
    model, x = MLP(8), (3 * np.random.default_rng(7).standard_normal((2, 3, 8))).astype(np.float32)
    real = _export_layers._gelu
    monkeypatch.setattr(_export_layers, "_gelu", lambda g, h, approximate: real(g, h, "none"))
    export.to_onnx(model, x, tmp_path / "erf.onnx")
    assert _gap(tmp_path / "erf.onnx", model, x) > 1e-5


# ---------------------------------------------------------------------------- axes, refusals, files

def test_dynamic_axes_are_named_and_fixed_without_them(tmp_path):
    model, rng = _gpt(), np.random.default_rng(8)
    export.to_onnx(model, _ids(rng, 2, 5), tmp_path / "dyn.onnx")
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa: E731
    graph = onnx.load(str(tmp_path / "dyn.onnx")).graph
    assert dims(graph.input[0]) == ["batch", "sequence"] and dims(graph.output[0]) == ["batch", "sequence", 37]
    export.to_onnx(model, _ids(rng, 2, 5), tmp_path / "fixed.onnx", dynamic_batch=False, dynamic_sequence=False)
    assert dims(onnx.load(str(tmp_path / "fixed.onnx")).graph.input[0]) == [2, 5]
    with pytest.raises(Exception, match="[Dd]imension|[Ss]hape|dim"):
        _session(tmp_path / "fixed.onnx").run(None, {"input": _ids(rng, 3, 5)})


def test_unsupported_layer_is_named(tmp_path):
    with pytest.raises(ValueError, match="Dropout"):
        export.to_onnx(Sequential(Linear(4, 4), Dropout(0.1)), np.zeros((1, 4), np.float32), tmp_path / "x.onnx")
    with pytest.raises(NotImplementedError, match="BatchNorm2d at '1'"):
        export.to_onnx(Sequential(Conv2d(1, 2, 3), BatchNorm2d(2)), np.zeros((1, 1, 5, 5), np.float32),
                       tmp_path / "x.onnx")
    with pytest.raises(export.UnsupportedLayerError, match="Flatten.*start_dim=1"):
        export.to_onnx(Flatten(2), np.zeros((1, 2, 3, 4), np.float32), tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()


def test_dropout_exports_in_eval_mode(tmp_path):
    model = Sequential(Linear(4, 4), Dropout(0.5), ReLU())
    model.eval()
    x = np.random.default_rng(9).standard_normal((3, 4)).astype(np.float32)
    export.to_onnx(model, x, tmp_path / "eval.onnx")
    _assert_parity(tmp_path / "eval.onnx", model, x)


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(TypeError, match="token ids"):
        export.to_onnx(_gpt(), np.zeros((1, 4), np.float32), tmp_path / "x.onnx")
    with pytest.raises(ValueError, match="external_data_threshold_bytes"):
        export.to_onnx(_mlp(), np.zeros((1, 4, 4), np.float32), tmp_path / "x.onnx", external_data_threshold_bytes=-1)
    with pytest.raises(TypeError, match="dtype"):
        export.to_onnx(_mlp(), np.zeros((1, 4, 4), bool), tmp_path / "x.onnx")


def test_external_data_above_the_threshold_loads_in_onnxruntime(tmp_path):
    model, rng = _gpt(), np.random.default_rng(10)
    path = tmp_path / "big.onnx"
    weights = sum(p.data.nbytes for _, p in model.named_parameters())
    export.to_onnx(model, _ids(rng, 2, 5), path, external_data_threshold_bytes=weights // 2)
    data = [f for f in os.listdir(tmp_path) if f.endswith(".data")]
    assert len(data) == 1 and data[0].startswith("big.onnx.")
    assert os.path.getsize(path) < weights // 4 <= os.path.getsize(tmp_path / data[0])
    onnx.checker.check_model(str(path))
    for batch, seq in ((1, 4), (3, 9)):
        _assert_parity(path, model, _ids(rng, batch, seq))
    export.to_onnx(model, _ids(rng, 2, 5), path, external_data_threshold_bytes=weights // 2)  # again: old data removed
    again = [f for f in os.listdir(tmp_path) if f.endswith(".data")]
    assert len(again) == 1 and again != data
    export.to_onnx(model, _ids(rng, 2, 5), path)  # under the default threshold: one file, no data file
    assert sorted(os.listdir(tmp_path)) == ["big.onnx"] and os.path.getsize(path) > weights
    _assert_parity(path, model, _ids(rng, 2, 5))


def test_without_onnx_import_error_says_what_to_install(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match="pip install"):
        export.to_onnx(_mlp(), np.zeros((1, 4, 4), np.float32), tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()
