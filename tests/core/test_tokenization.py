"""Tokenizers and next-token windows: round trips, persistence, BPE training, bad input."""
import json

import numpy as np
import pytest

from tinytorch.core.tokenization import (BPETokenizer, CharTokenizer, NextTokenDataset, Tokenizer,
                                         make_windows)

TEXT = ("From fairest creatures we desire increase,\n"
        "That thereby beauty's rose might never die,\n"
        "But as the riper should by time decease,\n"
        "His tender heir might bear his memory.\n") * 3

AWKWARD = ["", "a", " ", "\n\n", "héllo wörld", "日本語のテキスト", "emoji 🙂🚀 and \u200d joiner",
           "tabs\tand  double  spaces   ", "mixed123numbers456", "\x00nul byte", "ÅÅÅÅÅÅ",
           "e\u0301 combining", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢"]


def test_base_tokenizer_builds_sorted_char_vocab_from_raw_text():
    tok = Tokenizer(TEXT)
    assert tok.itos == sorted(set(TEXT))
    assert tok.vocab_size == len(set(TEXT)) == len(tok)
    ids = tok.encode(TEXT)
    assert ids == [sorted(set(TEXT)).index(c) for c in TEXT]
    assert tok.decode(ids) == TEXT
    assert tok.decode(np.asarray(ids, dtype=np.int32)) == TEXT


def test_base_tokenizer_unknown_char_and_bad_ids_raise():
    tok = Tokenizer("abc")
    with pytest.raises(ValueError, match="'z'.*position 2"):
        tok.encode("abz")
    with pytest.raises(ValueError, match="out of range for vocab size 3"):
        tok.decode([0, 3])
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([-1])
    with pytest.raises(TypeError):
        tok.decode([0.5])
    with pytest.raises(ValueError, match="no vocabulary"):
        Tokenizer().encode("a")


@pytest.mark.parametrize("cls", [Tokenizer, CharTokenizer, BPETokenizer])
@pytest.mark.parametrize("empty", ["", [], [""]])
def test_empty_corpus_raises(cls, empty):
    with pytest.raises(ValueError, match="empty"):
        cls().fit(empty)


def test_char_tokenizer_unknown_token():
    tok = CharTokenizer("hello", unk_token="<unk>")
    assert tok.unk_id == 0 and tok.itos[0] == "<unk>"
    ids = tok.encode("help!")
    assert ids[3] == 0 and ids[4] == 0 and ids[:3] == tok.encode("hel")
    assert tok.decode(tok.encode("hell")) == "hell"
    strict = CharTokenizer("hello")
    with pytest.raises(ValueError, match="'!'"):
        strict.encode("!")


@pytest.mark.parametrize("cls,kwargs", [(Tokenizer, {}), (CharTokenizer, {"unk_token": "?"})])
def test_char_tokenizers_save_load_json(tmp_path, cls, kwargs):
    tok = cls(TEXT, **kwargs)
    path = tmp_path / "tok.json"
    tok.save(path)
    json.loads(path.read_text(encoding="utf-8"))  # plain JSON, no pickle
    back = Tokenizer.load(path)
    assert type(back) is cls
    assert back.itos == tok.itos
    assert back.encode(TEXT) == tok.encode(TEXT)


def _reference_bpe_merges(text, vocab_size, pattern):
    """Independent, slow reference: recount pairs over the chunked byte stream every step."""
    import re
    chunks = [list(c.encode("utf-8")) for c in re.findall(pattern, text)]
    merges = []
    for new_id in range(256, vocab_size):
        counts = {}
        for ch in chunks:
            for p in zip(ch, ch[1:]):
                counts[p] = counts.get(p, 0) + 1
        if not counts:
            break
        best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        if best[1] < 2:
            break
        merges.append(best[0])
        new_chunks = []
        for ch in chunks:
            out, i = [], 0
            while i < len(ch):
                if i + 1 < len(ch) and (ch[i], ch[i + 1]) == best[0]:
                    out.append(new_id)
                    i += 2
                else:
                    out.append(ch[i])
                    i += 1
            new_chunks.append(out)
        chunks = new_chunks
    return merges, sum(len(c) for c in chunks)


def test_bpe_trains_to_vocab_size_and_matches_reference():
    from tinytorch.core import tokenization
    tok = BPETokenizer(vocab_size=300).train(TEXT)
    ref_merges, ref_len = _reference_bpe_merges(TEXT, 300, tokenization._CHUNK_PATTERN)
    assert tok.vocab_size == 300
    assert tok.merges == ref_merges
    ids = tok.encode(TEXT)
    # Encoding the training text with the learned merges reproduces the training segmentation.
    assert len(ids) == ref_len
    assert len(ids) < len(TEXT.encode("utf-8")) * 0.6
    assert max(ids) < tok.vocab_size


@pytest.mark.parametrize("s", AWKWARD)
def test_bpe_round_trips_any_utf8(s):
    tok = BPETokenizer(vocab_size=320).train(TEXT + "héllo wörld 日本語")
    ids = tok.encode(s)
    assert tok.decode(ids) == s
    # bytes of the tokens concatenate to the UTF-8 encoding exactly
    assert b"".join(tok.token_to_bytes(i) for i in ids) == s.encode("utf-8")


def test_bpe_random_unicode_round_trip():
    rng = np.random.default_rng(0)
    tok = BPETokenizer(vocab_size=280).train(TEXT)
    for _ in range(20):
        cps = rng.integers(1, 0x2FFFF, size=int(rng.integers(0, 40)))
        s = "".join(chr(c) for c in cps if not 0xD800 <= c <= 0xDFFF)
        assert tok.decode(tok.encode(s)) == s


def test_bpe_stops_when_no_pair_repeats():
    tok = BPETokenizer(vocab_size=1000).train("abcd")
    assert tok.vocab_size == 256  # no pair occurs twice: nothing worth merging
    assert tok.decode(tok.encode("abcd")) == "abcd"


def test_bpe_save_load(tmp_path):
    tok = BPETokenizer(vocab_size=290).train(TEXT)
    path = tmp_path / "bpe.json"
    tok.save(path)
    back = BPETokenizer.load(path)
    assert isinstance(back, BPETokenizer)
    assert back.merges == tok.merges and back.vocab_size == tok.vocab_size
    assert back.encode(TEXT) == tok.encode(TEXT)
    with pytest.raises(ValueError, match="not a CharTokenizer"):
        CharTokenizer.load(path)
    bad = json.loads(path.read_text())
    bad["merges"][0] = [999, 1]
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="merge 0"):
        Tokenizer.load(path)


def test_bpe_bad_vocab_size_and_ids():
    with pytest.raises(ValueError, match="vocab_size >= 256"):
        BPETokenizer(vocab_size=100)
    tok = BPETokenizer(vocab_size=260).train(TEXT)
    with pytest.raises(ValueError, match=f"out of range for vocab size {tok.vocab_size}"):
        tok.decode([tok.vocab_size])


@pytest.mark.parametrize("n,ctx,stride", [(10, 3, None), (10, 3, 1), (11, 4, 2), (5, 4, 7), (100, 7, 5)])
def test_make_windows_matches_loop_reference(n, ctx, stride):
    ids = np.random.default_rng(n).integers(0, 50, size=n)
    x, y = make_windows(ids, ctx, stride)
    s = ctx if stride is None else stride
    ref = [(ids[i:i + ctx], ids[i + 1:i + 1 + ctx]) for i in range(0, n - ctx, s)]
    assert x.shape == y.shape == (len(ref), ctx)
    assert x.dtype == np.int64
    for i, (rx, ry) in enumerate(ref):
        np.testing.assert_array_equal(x[i], rx)
        np.testing.assert_array_equal(y[i], ry)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])


def test_make_windows_bad_input():
    with pytest.raises(ValueError, match="too short"):
        make_windows([1, 2, 3], 3)
    with pytest.raises(ValueError, match="context_length"):
        make_windows([1, 2, 3], 0)
    with pytest.raises(ValueError, match="stride"):
        make_windows([1, 2, 3, 4], 2, stride=0)
    with pytest.raises(ValueError, match="1-D"):
        make_windows(np.zeros((2, 5), dtype=int), 2)
    with pytest.raises(TypeError, match="integers"):
        make_windows(np.zeros(5), 2)


def test_next_token_dataset_and_tokenizer_windows():
    tok = Tokenizer(TEXT)
    ds = NextTokenDataset(tok.encode(TEXT), context_length=16, stride=8)
    x0, y0 = ds[0]
    assert len(ds) == len(range(0, len(TEXT) - 16, 8))
    assert tok.decode(x0) == TEXT[:16] and tok.decode(y0) == TEXT[1:17]
    x, y = tok.make_windows(TEXT, 16, 8)
    np.testing.assert_array_equal(x, ds.inputs)
    np.testing.assert_array_equal(y, ds.targets)


def test_next_token_dataset_with_dataloader():
    from tinytorch.core.dataloader import DataLoader, Dataset
    ids = np.arange(50) % 7
    ds = NextTokenDataset(ids, context_length=5, stride=3)
    assert isinstance(ds, Dataset)
    batches = list(DataLoader(ds, batch_size=4, shuffle=True, seed=0))
    xs = np.concatenate([b[0].data for b in batches])
    ys = np.concatenate([b[1].data for b in batches])
    assert xs.shape == (len(ds), 5)
    # every window appears once, with its own target
    order = np.lexsort(xs.T[::-1])
    ref_order = np.lexsort(ds.inputs.T[::-1])
    np.testing.assert_array_equal(xs[order], ds.inputs[ref_order])
    np.testing.assert_array_equal(ys[order], ds.targets[ref_order])
