"""ONNX export (tinytorch.export.to_onnx): the file passes onnx.checker, ONNX Runtime's outputs equal
ours within 1e-5 relative at two batch sizes, a wrong mapping breaks parity, unmapped layers are named."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from tinytorch import export  # noqa: E402
from tinytorch.core.activations import LogSoftmax, ReLU  # noqa: E402
from tinytorch.core.layers import Dropout, Flatten, Linear, Sequential  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402


def _mlp():
    return Sequential(Flatten(), Linear(16, 32), ReLU(), Linear(32, 10), LogSoftmax())


def _run(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"input": x})[0]


def test_mlp_matches_onnxruntime_at_two_batch_sizes(tmp_path):
    model, path = _mlp(), tmp_path / "mlp.onnx"
    rng = np.random.default_rng(0)
    export.to_onnx(model, rng.standard_normal((2, 4, 4)).astype(np.float32), path)
    onnx.checker.check_model(onnx.load(str(path)))
    for batch in (1, 7):
        x = rng.standard_normal((batch, 4, 4)).astype(np.float32)
        np.testing.assert_allclose(_run(path, x), model(Tensor(x)).data, rtol=1e-5, atol=1e-6)


def test_a_wrong_mapping_breaks_parity(tmp_path, monkeypatch):
    model, path = _mlp(), tmp_path / "bad.onnx"
    real = np.asarray(model.layers[1].weight.data).copy()
    model.layers[1].weight.data[...] = real[::-1]  # export a reversed weight, compare with the real one
    x = np.random.default_rng(1).standard_normal((3, 4, 4)).astype(np.float32)
    export.to_onnx(model, x, path)
    model.layers[1].weight.data[...] = real
    assert np.abs(_run(path, x) - model(Tensor(x)).data).max() > 1e-3


def test_unsupported_layer_is_named(tmp_path):
    with pytest.raises(ValueError, match="Dropout"):
        export.to_onnx(Sequential(Linear(4, 4), Dropout(0.1)), np.zeros((1, 4), np.float32), tmp_path / "x.onnx")


def test_without_onnx_import_error_says_what_to_install(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match="pip install"):
        export.to_onnx(_mlp(), np.zeros((1, 4, 4), np.float32), tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()
