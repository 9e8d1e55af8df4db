"""GPT-2 folders: GPT.from_pretrained matches GPT2LMHeadModel's logits within 1e-4 and its greedy
tokens for 32 steps (with and without the KV cache); a GPT fine-tuned here and written with
save_pretrained loads in transformers with the same logits; a wrong q/k/v mapping breaks parity.
Needs transformers (skipped without it; tests/core/test_gpt2_tiny_folder.py checks the checked-in folder without it)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from tinytorch.core import gpt2_format  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402

IDS = np.array([[3, 14, 15, 9, 2], [6, 5, 35, 8, 9]])


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=48, vocab_size=97,
                                     bos_token_id=None, eos_token_id=None)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # no zero biases or unit LayerNorms: every tensor's mapping matters
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    model.save_pretrained(folder)
    return folder


def _hf_logits(folder, ids):
    model = transformers.GPT2LMHeadModel.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy(), model


def test_logits_match_transformers(hf_folder):
    want, _ = _hf_logits(hf_folder, IDS)
    np.testing.assert_allclose(GPT.from_pretrained(hf_folder)(IDS).data, want, atol=1e-4, rtol=0)


def test_greedy_tokens_match_for_32_steps_with_and_without_cache(hf_folder):
    _, hf = _hf_logits(hf_folder, IDS)
    ids = torch.tensor(IDS)
    with torch.no_grad():
        for _ in range(32):
            ids = torch.cat([ids, hf(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    ours = GPT.from_pretrained(hf_folder)
    for cache in (False, True):
        np.testing.assert_array_equal(ours.generate(IDS, 32, temperature=0, use_cache=cache), ids.numpy())


def test_fine_tuned_here_loads_in_transformers(hf_folder, tmp_path):
    from tinytorch.core.losses import cross_entropy
    from tinytorch.core.optimizers import Adam
    from tinytorch.core.tensor import Tensor
    model = GPT.from_pretrained(hf_folder)
    opt = Adam(model.parameters(), lr=1e-2)
    for _ in range(3):
        logits = model(IDS[:, :-1])
        loss = cross_entropy(logits.reshape(-1, 97), Tensor(IDS[:, 1:].reshape(-1)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.save_pretrained(tmp_path)
    want, _ = _hf_logits(tmp_path, IDS)
    assert np.abs(want - _hf_logits(hf_folder, IDS)[0]).max() > 1e-2  # it did change
    np.testing.assert_allclose(model(IDS).data, want, atol=1e-4, rtol=0)


def test_a_wrong_mapping_breaks_parity(hf_folder, monkeypatch):
    want, _ = _hf_logits(hf_folder, IDS)
    monkeypatch.setattr(gpt2_format, "QKV_ORDER", ("k_proj", "q_proj", "v_proj"))
    assert np.abs(GPT.from_pretrained(hf_folder)(IDS).data - want).max() > 1e-3
