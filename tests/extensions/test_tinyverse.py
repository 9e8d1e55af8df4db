"""TinyVerse data systems: shards (packer, reader, batches), generated corpora, the AST gate.

Every check compares against a reference built another way (plain Python slicing of the
token list, ast.parse on hand-written texts, a second generation from the same seed), on
awkward sizes (1 token, odd and prime lengths, a short last batch).
"""
import ast
import hashlib
import json
import os
import pickle
import struct

import numpy as np
import pytest

from tinytorch.core.dataloader import DataLoader
from tinytorch.core.optimizers import AdamW
from tinytorch.core.random import manual_seed
from tinytorch.core.tensor import Tensor
from tinytorch.core.tokenization import Tokenizer
from tinytorch.core.training import Trainer
from tinytorch.core.transformers import GPT
from tinytorch.extensions import tinyverse as tv
from tinytorch.extensions.tinyverse import shards as shards_module


def _stream(n, vocab, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=n)


# ---------------------------------------------------------------------- packer and reader

@pytest.mark.parametrize("n", [1, 2, 7, 9973])
@pytest.mark.parametrize("vocab, dtype", [(65, np.uint16), (65536, np.uint16), (65537, np.uint32),
                                          (1_000_003, np.uint32)])
def test_round_trip_gives_every_token_back(tmp_path, n, vocab, dtype):
    tokens = _stream(n, vocab, seed=n)
    tokens[-1] = vocab - 1  # the largest id survives too
    path = tv.pack_tokens(tokens, tmp_path / "s.shard", vocab_size=vocab)
    shard = tv.TokenShard(path)
    assert isinstance(shard.tokens, np.memmap) and shard.tokens.dtype == dtype
    assert len(shard) == n and shard.header["token_count"] == n and shard.vocab_size == vocab
    assert [int(t) for t in shard.tokens] == [int(t) for t in tokens]
    assert shard.header["payload_offset"] % 64 == 0


def test_default_vocab_size_and_input_kinds(tmp_path):
    shard = tv.TokenShard(tv.pack_tokens([3, 0, 2], tmp_path / "a.shard"))
    assert shard.vocab_size == 4 and shard.dtype == np.uint16
    from_tensor = tv.TokenShard(tv.pack_tokens(Tensor(np.array([5, 1], dtype=np.int64)), tmp_path / "b.shard"))
    assert list(from_tensor.tokens) == [5, 1]


def test_packer_rejects_bad_input_and_writes_nothing(tmp_path):
    cases = [([], ValueError, "empty"), (np.zeros((2, 2), dtype=np.int64), ValueError, "1-D"),
             ([0.5, 1.0], TypeError, "integers"), ([-1, 2], ValueError, "non-negative")]
    for tokens, error, words in cases:
        with pytest.raises(error, match=words):
            tv.pack_tokens(tokens, tmp_path / "x.shard")
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tv.pack_tokens([1, 9], tmp_path / "x.shard", vocab_size=9)
    with pytest.raises(ValueError, match="vocab_size"):
        tv.pack_tokens([1], tmp_path / "x.shard", vocab_size=0)
    assert os.listdir(tmp_path) == []  # no partial file, no temporary left behind


def test_vocabulary_hash_is_recorded_and_checked(tmp_path):
    tok = Tokenizer("abcab")
    path = tv.pack_tokens(tok.encode("abcab"), tmp_path / "v.shard", vocab_size=tok.vocab_size, vocabulary=tok)
    shard = tv.TokenShard(path, expected_vocab_hash=tv.vocab_hash(tok))
    assert shard.header["vocab_hash"] == tv.vocab_hash(tok) != tv.vocab_hash(Tokenizer("abd"))
    with pytest.raises(ValueError, match="was packed for vocabulary"):
        tv.TokenShard(path, expected_vocab_hash=tv.vocab_hash(vocab_size=3))


# ---------------------------------------------------------------------- corruption

def _good_shard(tmp_path, n=101, vocab=50):
    return tv.pack_tokens(_stream(n, vocab), tmp_path / "good.shard", vocab_size=vocab)


def _rewrite_header(path, edit, reseal=True):
    """Edit a shard's header in place; ``reseal`` recomputes its header checksum so the
    check under test is the one that fires."""
    raw = open(path, "rb").read()
    (length,) = struct.unpack("<I", raw[8:12])
    header = json.loads(raw[12:12 + length])
    edit(header)
    if reseal and "header_checksum" in header:
        header["header_checksum"] = shards_module._header_checksum(header)
    text = json.dumps(header, sort_keys=True).encode()
    assert len(text) <= header["payload_offset"] - 12
    padded = raw[:8] + struct.pack("<I", len(text)) + text
    padded += b"\0" * (header["payload_offset"] - len(padded))
    open(path, "wb").write(padded + raw[header["payload_offset"]:])


def test_truncated_shard_is_refused(tmp_path):
    path = _good_shard(tmp_path)
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[:-1])
    with pytest.raises(ValueError, match="is truncated: "):
        tv.TokenShard(path)
    open(path, "wb").write(raw[:10])  # cut inside the header length
    with pytest.raises(ValueError, match="truncated inside the header"):
        tv.TokenShard(path)


def test_bad_header_is_refused(tmp_path):
    path = _good_shard(tmp_path)
    raw = bytearray(open(path, "rb").read())
    bad_magic = bytes(b"NOTSHARD" + raw[8:])
    open(path, "wb").write(bad_magic)
    with pytest.raises(ValueError, match="not a token shard"):
        tv.TokenShard(path)
    not_json = bytes(raw[:12] + b"{" + raw[13:])
    not_json = not_json[:12] + b"\x00garbage" + not_json[20:]
    open(path, "wb").write(not_json)
    with pytest.raises(ValueError, match="bad header"):
        tv.TokenShard(path)
    open(path, "wb").write(bytes(raw))
    _rewrite_header(path, lambda h: h.pop("checksum"))
    with pytest.raises(ValueError, match="missing"):
        tv.TokenShard(path)
    open(path, "wb").write(bytes(raw))
    _rewrite_header(path, lambda h: h.update(format_version=99))
    with pytest.raises(ValueError, match="format version"):
        tv.TokenShard(path)


def test_wrong_dtype_is_refused(tmp_path):
    path = _good_shard(tmp_path)
    raw = open(path, "rb").read()
    _rewrite_header(path, lambda h: h.update(dtype="uint32"))  # payload is uint16: sizes disagree
    with pytest.raises(ValueError, match="wrong dtype"):
        tv.TokenShard(path)
    open(path, "wb").write(raw)
    _rewrite_header(path, lambda h: h.update(dtype="float32"))
    with pytest.raises(ValueError, match="dtype 'float32'"):
        tv.TokenShard(path)


def test_checksum_mismatch_and_out_of_vocabulary_token_are_refused(tmp_path):
    path = _good_shard(tmp_path)
    raw = bytearray(open(path, "rb").read())
    raw[-2] ^= 0x01  # the low bit of the last token (little-endian): still inside the vocabulary
    open(path, "wb").write(bytes(raw))
    with pytest.raises(ValueError, match="fails its checksum"):
        tv.TokenShard(path)
    assert tv.TokenShard(path, verify=False).header["token_count"] == 101  # the sizes are fine
    # a token outside the vocabulary with a matching checksum: caught by the vocabulary check
    tokens = _stream(20, 50)
    path = tv.pack_tokens(tokens, tmp_path / "v.shard", vocab_size=50)
    _rewrite_header(path, lambda h: h.update(vocab_size=int(tokens.max())))
    with pytest.raises(ValueError, match="outside its vocabulary"):
        tv.TokenShard(path)


def test_a_shard_declaring_no_tokens_is_refused(tmp_path):
    path = _good_shard(tmp_path)
    _rewrite_header(path, lambda h: h.update(token_count=0))
    raw = open(path, "rb").read()
    (length,) = struct.unpack("<I", raw[8:12])
    offset = json.loads(raw[12:12 + length])["payload_offset"]
    open(path, "wb").write(raw[:offset])  # sizes agree: an empty payload
    with pytest.raises(ValueError, match="holds no tokens"):
        tv.TokenShard(path)


def test_missing_file_and_window_longer_than_the_shard(tmp_path):
    with pytest.raises(ValueError, match="no such shard"):
        tv.TokenShard(tmp_path / "nope.shard")
    shard = tv.TokenShard(tv.pack_tokens(_stream(9, 10), tmp_path / "s.shard", vocab_size=10))
    for make in (lambda: tv.ShardDataset(shard, 9), lambda: tv.ShardBatcher(shard, 1, 9)):
        with pytest.raises(ValueError, match="needs 10 tokens"):
            make()
    with pytest.raises(ValueError, match="need tokens up to"):
        shard.window_batch(0, 2, 8)
    one = tv.TokenShard(tv.pack_tokens([4], tmp_path / "one.shard"))
    with pytest.raises(ValueError, match="needs 2 tokens"):
        tv.ShardDataset(one, 1)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="context"):
            tv.ShardDataset(shard, bad)
    with pytest.raises(TypeError):
        tv.ShardDataset(object(), 2)


# ---------------------------------------------------------------------- batches: views, order, seeds

def _reference_windows(tokens, starts, context):
    """(inputs, targets) built by plain Python slicing of the token list."""
    tokens = [int(t) for t in tokens]
    return ([tokens[s:s + context] for s in starts], [tokens[s + 1:s + 1 + context] for s in starts])


@pytest.mark.parametrize("n, batch, context", [(2, 1, 1), (97, 3, 5), (1009, 7, 13)])
def test_sequential_batches_are_views_of_the_map_and_match_slicing(tmp_path, n, batch, context):
    tokens = _stream(n, 300, seed=n)
    shard = tv.TokenShard(tv.pack_tokens(tokens, tmp_path / "s.shard", vocab_size=300))
    batcher = tv.ShardBatcher(shard, batch, context, shuffle=False)
    windows = (n - 1) // context
    got_rows = 0
    for k, (x, y) in enumerate(batcher):
        assert isinstance(x, Tensor) and isinstance(y, Tensor) and x.dtype == np.uint16
        assert np.shares_memory(x.data, shard.tokens) and np.shares_memory(y.data, shard.tokens)
        starts = [(k * batch + r) * context for r in range(x.shape[0])]
        ref_x, ref_y = _reference_windows(tokens, starts, context)
        assert x.data.tolist() == ref_x and y.data.tolist() == ref_y
        got_rows += x.shape[0]
    assert got_rows == windows and len(batcher) == -(-windows // batch)  # short last batch included


def test_dataset_items_and_dataloader_batches_share_memory(tmp_path):
    tokens = _stream(211, 40, seed=3)
    shard = tv.TokenShard(tv.pack_tokens(tokens, tmp_path / "s.shard", vocab_size=40))
    ds = tv.ShardDataset(shard, 10)
    assert len(ds) == 21
    x, y = ds[-1]
    assert np.shares_memory(x, shard.tokens) and x.tolist() == [int(t) for t in tokens[200:210]]
    assert y.tolist() == [int(t) for t in tokens[201:211]]
    with pytest.raises(IndexError):
        ds[21]
    loader = DataLoader(ds, batch_size=4, shuffle=False)
    for k, (bx, by) in enumerate(loader):
        assert np.shares_memory(bx.data, shard.tokens) and np.shares_memory(by.data, shard.tokens)
        ref_x, _ = _reference_windows(tokens, [i * 10 for i in range(4 * k, min(4 * k + 4, 21))], 10)
        assert bx.data.tolist() == ref_x
    # a shuffled loader gathers (one fancy index), with the same windows
    idx = np.array([5, 2, 17])
    gx, gy = ds.get_batch(idx)
    ref_x, ref_y = _reference_windows(tokens, idx * 10, 10)
    assert gx.tolist() == ref_x and gy.tolist() == ref_y


def test_shuffled_epochs_are_seeded_cover_each_window_once_and_differ(tmp_path):
    tokens = _stream(2003, 500, seed=1)
    shard = tv.TokenShard(tv.pack_tokens(tokens, tmp_path / "s.shard", vocab_size=500))
    a, b, c = (tv.ShardBatcher(shard, 4, 16, seed=s) for s in (7, 7, 8))
    epochs_a = [[(x.data.copy(), y.data.copy()) for x, y in a] for _ in range(2)]
    epochs_b = [[(x.data.copy(), y.data.copy()) for x, y in b] for _ in range(2)]
    for ea, eb in zip(epochs_a, epochs_b):
        assert len(ea) == len(eb) == len(a)
        assert all(np.array_equal(p[0], q[0]) and np.array_equal(p[1], q[1]) for p, q in zip(ea, eb))
    assert a.plan(0) != a.plan(1) and a.plan(0) != c.plan(0)  # epochs and seeds reshuffle
    phases = {min(s for s, _ in a.plan(e)) for e in range(12)}
    assert len(phases) > 1 and max(phases) <= a.slack < 16  # the window alignment moves too
    for epoch in range(3):
        plan = a.plan(epoch)
        starts = sorted(s + r * 16 for s, rows in plan for r in range(rows))
        phase = starts[0]
        assert phase < 16 and starts == [phase + 16 * w for w in range(a.num_windows)]
        x, y = next(iter(tv.ShardBatcher(shard, 4, 16, seed=7)))  # a fresh batcher replays epoch 0
    first_start = a.plan(0)[0][0]
    ref_x, ref_y = _reference_windows(tokens, [first_start + 16 * r for r in range(4)], 16)
    assert x.data.tolist() == ref_x and y.data.tolist() == ref_y
    assert np.shares_memory(x.data, shard.tokens)


def test_shard_pickles_by_path(tmp_path):
    shard = tv.TokenShard(tv.pack_tokens(_stream(50, 9), tmp_path / "s.shard", vocab_size=9))
    again = pickle.loads(pickle.dumps(tv.ShardDataset(shard, 7)))
    assert len(pickle.dumps(shard)) < 1000  # the path, not the payload
    assert np.array_equal(again.get_batch([0, 1])[0], tv.ShardDataset(shard, 7).get_batch([0, 1])[0])


def test_spawn_workers_deliver_the_same_batches_as_in_process(tmp_path):
    tokens = _stream(701, 70, seed=5)
    shard = tv.TokenShard(tv.pack_tokens(tokens, tmp_path / "s.shard", vocab_size=70))
    assert shards_module.multiprocessing.get_context("spawn").get_start_method() == "spawn"
    local = [(x.data.copy(), y.data.copy()) for x, y in tv.ShardBatcher(shard, 3, 11, seed=2)]
    remote = [(x.data, y.data) for x, y in tv.ShardBatcher(shard, 3, 11, seed=2, num_workers=2)]
    assert len(local) == len(remote) > 1
    assert all(np.array_equal(p[0], q[0]) and np.array_equal(p[1], q[1]) for p, q in zip(local, remote))
    loader_local = list(DataLoader(tv.ShardDataset(shard, 11), batch_size=5))
    loader_remote = list(DataLoader(tv.ShardDataset(shard, 11), batch_size=5, num_workers=1))
    assert all(np.array_equal(p[0].data, q[0].data) and np.array_equal(p[1].data, q[1].data)
               for p, q in zip(loader_local, loader_remote)) and len(loader_local) == len(loader_remote)


def test_a_worker_that_cannot_open_the_shard_raises_instead_of_hanging(tmp_path):
    path = tv.pack_tokens(_stream(100, 9), tmp_path / "gone.shard", vocab_size=9)
    shard = tv.TokenShard(path)
    os.unlink(path)  # this process keeps its map; a spawned worker finds no file
    with pytest.raises(ValueError, match="no such shard file"):  # the worker's reason, not BrokenProcessPool
        list(tv.ShardBatcher(shard, 2, 5, num_workers=1))


def test_trainer_takes_the_batcher_as_is(tmp_path):
    tokens = _stream(400, 12, seed=9)
    shard = tv.TokenShard(tv.pack_tokens(tokens, tmp_path / "s.shard", vocab_size=12))
    manual_seed(0)
    model = GPT(12, 16, 1, 2, max_seq_len=8)
    trainer = Trainer(model, AdamW(model.parameters(), lr=1e-2), tv.NextTokenLoss(), progress=False)
    batcher = tv.ShardBatcher(shard, 4, 8, seed=0)
    first = trainer.train_epoch(batcher)
    for _ in range(4):
        last = trainer.train_epoch(batcher)
    assert trainer.global_step == 5 * len(batcher) and np.isfinite(first) and last < first
    # the loss is the package's cross-entropy over every position (a float64 reference)
    x, y = next(iter(tv.ShardBatcher(shard, 4, 8, seed=0)))
    logits = model(x).data.astype(np.float64).reshape(-1, 12)
    top = logits.max(1, keepdims=True)
    logp = logits - top - np.log(np.exp(logits - top).sum(1, keepdims=True))
    ref = -logp[np.arange(32), y.data.reshape(-1).astype(np.int64)].mean()
    assert float(tv.NextTokenLoss()(model(x), y).data) == pytest.approx(ref, rel=1e-4)


# ---------------------------------------------------------------------- corpora

@pytest.mark.parametrize("generate", [tv.generate_tinypy, tv.generate_tinytalks])
def test_corpora_regenerate_identically_and_stay_small(generate):
    a, b, other = generate(seed=3), generate(seed=3), generate(seed=4)
    assert a.train == b.train and a.heldout == b.heldout and a.manifest == b.manifest
    assert a.train != other.train
    assert 0 < len(a.train.encode()) < 100_000 == tv.MAX_CORPUS_BYTES
    assert a.manifest["train_bytes"] == len(a.train.encode())
    assert a.manifest["train_sha256"] == hashlib.sha256(a.train.encode()).hexdigest()
    assert a.manifest["heldout_count"] == len(a.heldout) > 0
    tok = a.tokenizer()
    for prompt in a.heldout:
        assert tok.decode(tok.encode(prompt)) == prompt  # prompts use only training characters


def test_tinypy_samples_parse_and_heldout_names_are_unseen():
    corpus = tv.generate_tinypy(seed=0)
    functions = corpus.train.split("\n\n")
    assert len(functions) == corpus.manifest["train_samples"] == len(set(functions))
    for source in functions:
        tree = ast.parse(source)
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
    assert len(corpus.heldout) == 7 == len(set(corpus.heldout_names))
    train_names = {ast.parse(s).body[0].name for s in functions}
    for prompt, name in zip(corpus.heldout, corpus.heldout_names):
        assert prompt.startswith(f"def {name}(") and prompt.endswith("):\n")
        assert name not in train_names and name not in corpus.train


def test_tinytalks_pairs_and_heldout_questions():
    corpus = tv.generate_tinytalks(seed=0)
    pairs = corpus.train.split("\n\n")
    assert all(p.startswith("Q: ") and "\nA: " in p for p in pairs)
    questions = {p.split("\n")[0] for p in pairs}
    for prompt in corpus.heldout:
        assert prompt.endswith("\nA:") and prompt.split("\n")[0] not in questions


def test_corpus_save_writes_the_manifest(tmp_path):
    corpus = tv.generate_tinytalks(seed=1)
    corpus.save(tmp_path)
    assert open(tmp_path / "train.txt", encoding="utf-8").read() == corpus.train
    assert json.load(open(tmp_path / "manifest.json")) == corpus.manifest


# ---------------------------------------------------------------------- the AST gate

VALID = [
    "def f(x):\n    return x\n",
    "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total\n\ndef g(",  # 2nd cut
    "def f(x):\n    if x:\n        return 1\n    return 2\nprint(broken syntax here",  # dedent ends f
    "def f(x):\n    return [v for v in x if v > 1]",  # stream ends inside the function
    "def f(x): return x\nprint(broken",                  # a one-line function is complete at its newline
]
INVALID = [
    "def f(x)\n    return x\n",                      # missing colon
    "def f(x):\nreturn x\n",                          # body not indented
    "def f(x):\n    return (x + 1\n",                 # unclosed parenthesis
    "def f(x):\n    for v in x:\n    return v\n",     # for without a body
    "    return x\n",                                 # no def at all
    "",
    "def f(x):\n    return x +\n\ndef g(): pass\n",   # first function broken, second fine
]


def test_gate_counts_a_known_set_of_valid_and_invalid_completions():
    for text in VALID:
        assert tv.ast_validity_rate([text]) == 100.0, text
    for text in INVALID:
        assert tv.ast_validity_rate([text]) == 0.0, text
    assert tv.is_valid_function("def f(): pass", "f") and not tv.is_valid_function("def f(): pass", "g")
    assert not tv.is_valid_function("x = 1") and not tv.is_valid_function("def f(): pass\nx = 1")
    mixed = VALID[:3] + INVALID[:4]
    assert tv.ast_validity_rate(mixed) == pytest.approx(100 * 3 / 7)
    assert tv.ast_validity_rate(["def f(x):\n    return x\n"], expected_names=["g"]) == 0.0
    with pytest.raises(ValueError, match="no completions"):
        tv.ast_validity_rate([])
    with pytest.raises(TypeError):
        tv.ast_validity_rate("def f(): pass")


def test_streaming_gate_stops_at_the_first_complete_function():
    text = "def f(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n\ndef g(x):\n"
    gate = tv.StreamingASTGate("f")
    stopped_at = None
    for i, ch in enumerate(text):
        if gate.feed(ch):
            stopped_at = i
            break
    end = text.index("\n\n") + 1
    assert stopped_at == end and gate.function == text[:end] and gate.valid
    assert gate.parse_attempts == 2  # the def line alone, then the blank line
    # a blank line inside an unfinished body does not stop the stream
    gate = tv.StreamingASTGate()
    assert not gate.feed("def f(x):\n    if x:\n\n")
    assert gate.feed("        return 1\nx")
    assert gate.function == "def f(x):\n    if x:\n\n        return 1\n" and gate.valid
    assert tv.first_complete_function("no function here") is None


def test_greedy_completion_and_hook_record_the_curve():
    corpus = tv.generate_tinypy(seed=0)
    tok = corpus.tokenizer()
    manual_seed(1)
    model = GPT(tok.vocab_size, 16, 1, 2, max_seq_len=24)  # untrained: whatever it says is scored
    gate = tv.greedy_complete(model, tok, corpus.heldout[0], max_new_tokens=30)
    assert gate.text.startswith(corpus.heldout[0]) and len(gate.text) <= len(corpus.heldout[0]) + 30
    assert gate.valid == tv.is_valid_function(gate.function or "")
    hook = tv.ASTValidityHook(model, tok, corpus.heldout[:2], corpus.heldout_names[:2], max_new_tokens=30)
    result = hook(5, 2.5)
    assert hook.history["step"] == [5] and hook.history["loss"] == [2.5]
    assert hook.history["rate"] == [100.0 * result["valid"] / 2]
    assert result["valid"] == sum(tv.is_valid_function(f, n) for f, n in
                                  zip(result["functions"], corpus.heldout_names[:2]) if f is not None)


def test_the_gate_training_run_returns_its_curve(tmp_path):
    curve = tv.run_ast_gate_training(seconds=0.3, eval_every=3, batch_size=4, context=32, embed_dim=16,
                                     num_layers=1, num_heads=2, max_new_tokens=12, work_dir=tmp_path)
    steps = curve["step"]
    assert steps[0] == 0 and all(0 < b - a <= 3 for a, b in zip(steps, steps[1:])) and len(steps) >= 2
    assert np.isnan(curve["loss"][0]) and all(np.isfinite(curve["loss"][1:]))
    assert curve["rate"] == [100.0 * v / 7 for v in curve["valid"]] and curve["total"] == 7
    assert curve["train_seconds"] >= 0.3 and curve["budget_clock"] == "cpu"
    assert ast_valid_count(curve["functions"], curve["corpus_manifest"]["heldout_names"]) == curve["valid"][-1]
    with pytest.raises(ValueError, match="budget_clock"):
        tv.run_ast_gate_training(seconds=0, budget_clock="gpu")


def ast_valid_count(functions, names):
    return sum(f is not None and tv.is_valid_function(f, n) for f, n in zip(functions, names))
