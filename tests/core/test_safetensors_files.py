"""safetensors state files: Layer.save/load round trips with named_parameters() names and the
framework's metadata, old .npz files still load, name/shape mismatches name the first one
(strict=False reports them as PyTorch does), truncated or corrupt files are clear ValueErrors,
LoRA adapters alone, and merge_and_unload + save gives the plain model's checkpoint."""
import json

import numpy as np
import pytest

pytest.importorskip("safetensors")
from safetensors.numpy import load_file, save_file  # noqa: E402

from tinytorch import __version__  # noqa: E402
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.layers import Linear, Sequential  # noqa: E402
from tinytorch.core.safetensors_files import read_metadata  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402
from tinytorch.extensions.lora import (inject_lora, load_lora, merge_and_unload,  # noqa: E402
                                       save_lora)


def _model(seed=0):
    tt_random.manual_seed(seed)
    return Sequential(Linear(3, 4), ReLU(), Linear(4, 2))


def test_round_trip_names_and_metadata(tmp_path):
    path = tmp_path / "m.safetensors"
    model = _model(0)
    assert model.save(path) == str(path)
    stored = load_file(str(path))  # the library's own reader sees our names
    assert sorted(stored) == sorted(n for n, _ in model.named_parameters())  # the file sorts them
    meta = read_metadata(path)
    assert meta["framework"] == "tinytorch" and meta["tinytorch_version"] == __version__
    assert json.loads(meta["dtypes"]) == {n: "float32" for n in stored}
    other = _model(1)
    other.load(path)
    for (n, p), (_, q) in zip(model.named_parameters(), other.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=n)


def test_old_npz_files_still_load_and_suffixless_files_are_sniffed(tmp_path):
    model = _model(0)
    model.save(tmp_path / "old.npz")
    other = _model(1)
    other.load(tmp_path / "old.npz")
    np.testing.assert_array_equal(other[0].weight.data, model[0].weight.data)
    save_file(model.state_dict(), str(tmp_path / "weights.bin"))  # written elsewhere, odd suffix
    _model(2).load(tmp_path / "weights.bin")


def test_mismatches_name_the_first_one(tmp_path):
    model = _model()
    state = model.state_dict()
    state["1.weight"] = state.pop("2.weight")  # a wrong name
    save_file(state, str(tmp_path / "renamed.safetensors"))
    with pytest.raises(KeyError, match=r"first mismatch: missing key '2.weight'"):
        model.load(tmp_path / "renamed.safetensors")
    missing, unexpected = model.load(tmp_path / "renamed.safetensors", strict=False)
    assert (missing, unexpected) == (["2.weight"], ["1.weight"])
    result = model.load(tmp_path / "renamed.safetensors", strict=False)
    assert result.missing_keys == ["2.weight"] and result.unexpected_keys == ["1.weight"]
    state = model.state_dict()
    state["0.bias"] = np.zeros(5, np.float32)
    save_file(state, str(tmp_path / "shape.safetensors"))
    with pytest.raises(ValueError, match=r"'0.bias' has shape \(5,\).*\(4,\)"):
        model.load(tmp_path / "shape.safetensors")


@pytest.mark.parametrize("damage, why", [
    (lambda b: b[:-7], "ends at byte"),
    (lambda b: b[:200], "header claims"),
    (lambda b: b[:5], "shorter than the 8-byte"),
    (lambda b: b[:8] + b"\xff" * (len(b) - 8), "not JSON"),
    (lambda b: (10 ** 9).to_bytes(8, "little") + b[8:], "header claims"),
])
def test_truncated_or_corrupt_files_are_refused_clearly(tmp_path, damage, why):
    path = tmp_path / "m.safetensors"
    model = _model()
    model.save(path)
    path.write_bytes(damage(path.read_bytes()))
    before = model.state_dict()
    with pytest.raises(ValueError, match=f"not a readable .safetensors file.*{why}"):
        model.load(path)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


def _gpt(seed):
    tt_random.manual_seed(seed)
    return GPT(vocab_size=13, embed_dim=16, num_layers=1, num_heads=2, max_seq_len=8)


def test_lora_adapters_alone_and_merge_gives_a_plain_checkpoint(tmp_path):
    model = _gpt(0)
    plain_names = [n for n, _ in model.named_parameters()]
    inject_lora(model, ["q_proj", "v_proj"], rank=2)
    for name, p in model.named_parameters():
        if "lora_B" in name:
            p.data[...] = np.random.default_rng(1).normal(size=p.shape)  # a trained-looking adapter
    save_lora(model, tmp_path / "adapter.safetensors")
    assert sorted(load_file(str(tmp_path / "adapter.safetensors"))) == sorted(
        n for n, _ in model.named_parameters() if ".lora_" in n)
    idx = np.array([[1, 2, 3, 4]])
    want = model(idx).data
    again = _gpt(0)
    inject_lora(again, ["q_proj", "v_proj"], rank=2)
    load_lora(again, tmp_path / "adapter.safetensors")
    np.testing.assert_allclose(again(idx).data, want, rtol=1e-6, atol=1e-6)
    merge_and_unload(model)
    model.save(tmp_path / "merged.safetensors")
    assert sorted(load_file(str(tmp_path / "merged.safetensors"))) == sorted(plain_names)
    fresh = _gpt(5)
    fresh.load(tmp_path / "merged.safetensors")
    np.testing.assert_allclose(fresh(idx).data, want, rtol=1e-5, atol=1e-5)
