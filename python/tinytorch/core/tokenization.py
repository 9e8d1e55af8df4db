"""Tokenization: turning raw text into integer ids and next-token training windows.

What this file owns
  Tokenizer        the base class (the extension guide's name). Its default ``fit`` builds a
                   character vocabulary from raw text, so ``Tokenizer(text)`` is already usable.
  CharTokenizer    a character tokenizer with an optional unknown token.
  BPETokenizer     byte-level byte-pair encoding: the base alphabet is the 256 byte values, so
                   ``decode(encode(s)) == s`` for every string, whatever its characters.
  make_windows     (inputs, targets) windows for next-token prediction, with a context length
                   and a stride; ``NextTokenDataset`` is the same thing as a ``Dataset``.

What it assumes
  Text is a Python ``str``; ids are non-negative Python/NumPy integers. Vocabularies are saved as
  JSON (never pickle) so a saved tokenizer can be inspected and loaded safely.

What it never does
  It never silently drops text: an unknown character raises (unless an unknown token was asked
  for) and an empty corpus raises ``ValueError``.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Iterable, Sequence

import numpy as np

from .._atomic import write_file
from .dataloader import Dataset as _DatasetBase
from .tensor import KB_TO_BYTES  # noqa: F401  (upstream's name here; the one definition)

__all__ = ["Tokenizer", "CharTokenizer", "BPETokenizer", "make_windows", "NextTokenDataset", "tokenize_dataset",
           "KB_TO_BYTES"]


def _require_text(text, what: str = "corpus") -> str:
    if isinstance(text, (list, tuple)):
        if not all(isinstance(t, str) for t in text):
            raise TypeError(f"{what} must be a str or a list of str")
        text = "".join(text)
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, got {type(text).__name__}")
    if len(text) == 0:
        raise ValueError(f"cannot build a vocabulary from an empty {what}")
    return text


def _as_id_list(ids) -> list[int]:
    if hasattr(ids, "data") and isinstance(getattr(ids, "data"), np.ndarray):
        ids = ids.data  # a Tensor
    arr = np.asarray(ids)
    if arr.size == 0:
        return []
    if arr.ndim != 1:
        raise ValueError(f"decode expects a 1-D sequence of ids, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise TypeError(f"token ids must be integers, got dtype {arr.dtype}")
    return [int(i) for i in arr]


class Tokenizer:
    """Base tokenizer: ``encode(text) -> list[int]``, ``decode(ids) -> str``, ``vocab_size``.

    Subclasses override ``fit``, ``encode``, ``decode`` and the JSON hooks. The default
    implementation is a character tokenizer whose vocabulary is the sorted set of characters
    of the training text, so ``Tokenizer("hello world")`` works as is.

    Args:
        text: optional training text (a str or a list of str) to ``fit`` right away.
    """

    kind = "char"

    def __init__(self, text: str | Sequence[str] | None = None):
        self.itos: list[str] = []
        self.stoi: dict[str, int] = {}
        if text is not None:
            self.fit(text)

    # -- vocabulary -------------------------------------------------------------------------
    def fit(self, text: str | Sequence[str]) -> "Tokenizer":
        """Build the vocabulary from raw text (the sorted set of its characters)."""
        text = _require_text(text)
        self._set_vocab(sorted(set(text)))
        return self

    # upstream-style alias: build_vocab(corpus)
    def build_vocab(self, corpus: str | Sequence[str]) -> "Tokenizer":
        """``fit(corpus)`` under its other common name; returns self."""
        return self.fit(corpus)

    def _set_vocab(self, symbols: list[str]) -> None:
        self.itos = list(symbols)
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    @property
    def vocab_size(self) -> int:
        """Number of distinct ids (0 before ``fit``)."""
        return len(self.itos)

    def __len__(self) -> int:
        return self.vocab_size

    def _check_fitted(self) -> None:
        if self.vocab_size == 0:
            raise ValueError(f"{type(self).__name__} has no vocabulary yet: call fit(text) first")

    # -- encode / decode --------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """The ids of the characters of ``text``; ValueError names the first character
        not in the vocabulary."""
        self._check_fitted()
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        out = []
        for pos, ch in enumerate(text):
            idx = self.stoi.get(ch)
            if idx is None:
                raise ValueError(f"character {ch!r} at position {pos} is not in the vocabulary "
                                 f"of {self.vocab_size} symbols")
            out.append(idx)
        return out

    def decode(self, ids) -> str:
        """The text for ``ids`` (a 1-D list, array or Tensor of ints); ValueError for an id
        out of range."""
        self._check_fitted()
        parts = []
        for i in _as_id_list(ids):
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is out of range for vocab size {self.vocab_size}")
            parts.append(self.itos[i])
        return "".join(parts)

    def make_windows(self, text: str, context_length: int, stride: int | None = None):
        """Encode ``text`` and cut it into next-token (inputs, targets) windows of
        ``context_length`` tokens, starting every ``stride`` tokens (see ``make_windows``)."""
        return make_windows(self.encode(text), context_length, stride)

    # -- persistence ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The JSON-serialisable description ``save`` writes (kind and vocabulary)."""
        return {"kind": self.kind, "itos": self.itos}

    def _load_dict(self, d: dict) -> None:
        self._set_vocab(list(d["itos"]))

    def save(self, path) -> None:
        """Write ``to_dict()`` as UTF-8 JSON to ``path`` (atomically: the old file or the new)."""
        write_file(path, json.dumps(self.to_dict(), ensure_ascii=False))

    @classmethod
    def load(cls, path) -> "Tokenizer":
        """Read a tokenizer saved at ``path``; ``Tokenizer.load`` returns whichever kind was
        saved, a subclass's ``load`` insists on that kind."""
        with open(path, "r", encoding="utf-8") as f:
            d = json.load(f)
        kinds = {"char": Tokenizer, "char+unk": CharTokenizer, "bpe": BPETokenizer}
        kind = d.get("kind")
        if kind not in kinds:
            raise ValueError(f"unknown tokenizer kind {kind!r} in {path}; expected one of {sorted(kinds)}")
        target = kinds[kind]
        if cls is not Tokenizer and not issubclass(target, cls):
            raise ValueError(f"{path} holds a {target.__name__}, not a {cls.__name__}")
        tok = target.__new__(target)
        Tokenizer.__init__(tok)
        tok._load_dict(d)
        return tok


class CharTokenizer(Tokenizer):
    """Character tokenizer. With ``unk_token`` set, id 0 is reserved for characters never seen
    in training and ``encode`` maps them there instead of raising.

    Args:
        text: optional training text to ``fit`` right away.
        unk_token: the symbol for unknown characters (None: unknown characters raise).
    """

    kind = "char+unk"

    def __init__(self, text: str | Sequence[str] | None = None, unk_token: str | None = None):
        self.unk_token = unk_token
        super().__init__(text)

    def fit(self, text):
        """Build the vocabulary from ``text`` (the unknown token first, when set); returns self."""
        text = _require_text(text)
        symbols = sorted(set(text))
        if self.unk_token is not None:
            symbols = [self.unk_token] + [s for s in symbols if s != self.unk_token]
        self._set_vocab(symbols)
        return self

    @property
    def unk_id(self) -> int | None:
        """0 when an unknown token is set, else None."""
        return None if self.unk_token is None else 0

    def encode(self, text: str) -> list[int]:
        """The ids of the characters of ``text``; unseen ones map to ``unk_id`` when set."""
        if self.unk_token is None:
            return super().encode(text)
        self._check_fitted()
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        return [self.stoi.get(ch, 0) for ch in text]

    def to_dict(self) -> dict:
        """Kind, vocabulary and unknown token, for ``save``."""
        return {"kind": self.kind, "itos": self.itos, "unk_token": self.unk_token}

    def _load_dict(self, d: dict) -> None:
        self.unk_token = d.get("unk_token")
        super()._load_dict(d)


# Pre-tokenisation keeps merges inside word-like chunks (a leading space belongs to the word
# after it), which makes the learned tokens meaningful and lets encode cache per chunk.
# Any character not matched by the first three classes is still matched by the last two, so the
# chunks always concatenate back to the input.
_CHUNK_PATTERN = r" ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+"


class BPETokenizer(Tokenizer):
    """Byte-level BPE. Ids 0..255 are the raw bytes; each merge adds one id.

    ``train(text, vocab_size)`` learns ``vocab_size - 256`` merges (fewer if the text runs out of
    repeated pairs); ``encode`` applies them in the order they were learned.

    Args:
        vocab_size: target vocabulary size, >= 256 (the 256 byte tokens plus the merges).
        text: optional training text to ``train`` on right away.
    """

    kind = "bpe"

    def __init__(self, vocab_size: int = 512, text: str | None = None):
        self._check_vocab_size(vocab_size)
        self.target_vocab_size = int(vocab_size)
        self.merges: list[tuple[int, int]] = []
        self._build_tables()
        super().__init__(None)
        if text is not None:
            self.train(text, vocab_size)

    @staticmethod
    def _check_vocab_size(vocab_size) -> None:
        if not isinstance(vocab_size, (int, np.integer)) or vocab_size < 256:
            raise ValueError(f"a byte-level BPE vocabulary needs vocab_size >= 256, got {vocab_size}")

    def _build_tables(self) -> None:
        self.ranks = {pair: 256 + i for i, pair in enumerate(self.merges)}
        table = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            table.append(table[a] + table[b])
        self.token_bytes = table
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        """256 byte tokens plus the number of learned merges."""
        return 256 + len(self.merges)

    def _check_fitted(self) -> None:  # the 256 byte tokens always exist
        return None

    def fit(self, text):
        """``train(text)`` with the constructor's vocab_size; returns self."""
        return self.train(text)

    def train(self, text, vocab_size: int | None = None) -> "BPETokenizer":
        """Learn merges from ``text``: repeatedly merge the most frequent adjacent pair
        (inside word-like chunks) until ``vocab_size`` (default: the constructor's) is
        reached or no pair occurs twice. Replaces earlier merges; returns self."""
        text = _require_text(text)
        if vocab_size is not None:
            self._check_vocab_size(vocab_size)
            self.target_vocab_size = int(vocab_size)
        # Train on the distinct chunks with their counts: each chunk is merged independently.
        chunk_counts = Counter(re.findall(_CHUNK_PATTERN, text))
        words = [list(c.encode("utf-8")) for c in chunk_counts]
        counts = list(chunk_counts.values())
        self.merges = []
        for new_id in range(256, self.target_vocab_size):
            pair_counts: Counter = Counter()
            for w, n in zip(words, counts):
                for pair in zip(w, w[1:]):
                    pair_counts[pair] += n
            if not pair_counts:
                break
            # Most frequent pair; ties broken by the smaller pair so training is deterministic.
            best, best_n = min(pair_counts.items(), key=lambda kv: (-kv[1], kv[0]))
            if best_n < 2:
                break  # a pair seen once compresses nothing
            self.merges.append(best)
            words = [self._merge(w, best, new_id) for w in words]
        self._build_tables()
        return self

    @staticmethod
    def _merge(ids: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
        out, i, n = [], 0, len(ids)
        while i < n:
            if i + 1 < n and ids[i] == pair[0] and ids[i + 1] == pair[1]:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def _encode_chunk(self, chunk: str) -> list[int]:
        cached = self._cache.get(chunk)
        if cached is not None:
            return cached
        ids = list(chunk.encode("utf-8"))
        while len(ids) >= 2:
            # Apply the earliest-learned merge present, exactly as training did.
            pair = min(zip(ids, ids[1:]), key=lambda p: self.ranks.get(p, 1 << 62))
            if pair not in self.ranks:
                break
            ids = self._merge(ids, pair, self.ranks[pair])
        if len(self._cache) < 100_000:
            self._cache[chunk] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """The ids of ``text``: its UTF-8 bytes with the learned merges applied; any string
        can be encoded."""
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        out: list[int] = []
        for chunk in re.findall(_CHUNK_PATTERN, text):
            out.extend(self._encode_chunk(chunk))
        return out

    def decode(self, ids) -> str:
        """The text for ``ids``; byte sequences cut mid-character decode to U+FFFD."""
        data = bytearray()
        n = self.vocab_size
        for i in _as_id_list(ids):
            if not 0 <= i < n:
                raise ValueError(f"token id {i} is out of range for vocab size {n}")
            data += self.token_bytes[i]
        # A window cut in the middle of a multi-byte character is not valid UTF-8 on its own;
        # replacement characters keep decode total on arbitrary id sequences.
        return data.decode("utf-8", errors="replace")

    def token_to_bytes(self, token_id: int) -> bytes:
        """The bytes that id ``token_id`` stands for."""
        return self.token_bytes[token_id]

    def to_dict(self) -> dict:
        """Kind, target vocab_size and the merges in order, for ``save``."""
        return {"kind": self.kind, "vocab_size": self.target_vocab_size,
                "merges": [list(p) for p in self.merges]}

    def _load_dict(self, d: dict) -> None:
        merges = [tuple(int(v) for v in p) for p in d["merges"]]
        for i, (a, b) in enumerate(merges):
            if not (0 <= a < 256 + i and 0 <= b < 256 + i):
                raise ValueError(f"merge {i} refers to a token that does not exist yet: {(a, b)}")
        self.target_vocab_size = int(d.get("vocab_size", 256 + len(merges)))
        self.merges = merges
        self._build_tables()


def tokenize_dataset(texts, tokenizer, max_length: int | None = None) -> list[list[int]]:
    """``[tokenizer.encode(t)[:max_length] for t in texts]`` (upstream TinyTorch's helper).

    Args:
        texts: a list (or other iterable) of str; a bare str is refused (TypeError), since
            it would be read character by character.
        tokenizer: anything with ``encode(str) -> list[int]``.
        max_length: keep at most this many ids of each text (a positive int), or None.
    """
    if isinstance(texts, str):
        raise TypeError("tokenize_dataset: texts must be a list of str, not a single str")
    if max_length is not None and (not isinstance(max_length, (int, np.integer)) or max_length < 1):
        raise ValueError(f"tokenize_dataset: max_length must be a positive int or None, got {max_length!r}")
    out = []
    for text in texts:
        ids = list(tokenizer.encode(text))
        out.append(ids if max_length is None else ids[:max_length])
    return out


def make_windows(ids: Iterable[int], context_length: int, stride: int | None = None):
    """Cut a token stream into next-token windows.

    Returns ``(inputs, targets)``, both int64 arrays of shape ``[num_windows, context_length]``
    with ``targets[i] == ids[s + 1 : s + 1 + context_length]`` for the window starting at
    ``s = i * stride``. ``stride`` defaults to ``context_length`` (non-overlapping windows).
    """
    arr = np.asarray(ids.data if hasattr(ids, "data") and isinstance(ids.data, np.ndarray) else ids)
    if arr.ndim != 1:
        raise ValueError(f"make_windows expects a 1-D token stream, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"token ids must be integers, got dtype {arr.dtype}")
    if not isinstance(context_length, (int, np.integer)) or context_length < 1:
        raise ValueError(f"context_length must be a positive int, got {context_length!r}")
    stride = context_length if stride is None else stride
    if not isinstance(stride, (int, np.integer)) or stride < 1:
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    if arr.size < context_length + 1:
        raise ValueError(f"a stream of {arr.size} tokens is too short for one window of "
                         f"context_length={context_length} (needs {context_length + 1})")
    arr = arr.astype(np.int64, copy=False)
    starts = np.arange(0, arr.size - context_length, stride)
    offsets = np.arange(context_length)
    inputs = arr[starts[:, None] + offsets]
    targets = arr[starts[:, None] + offsets + 1]
    return inputs, targets


class NextTokenDataset(_DatasetBase):
    """A ``Dataset`` of (input, target) windows; ``__getitem__`` returns two int64 arrays.

    Args:
        ids: the token stream (a 1-D sequence, array or Tensor of ints).
        context_length: tokens per window.
        stride: distance between window starts (default ``context_length``).
    """

    def __init__(self, ids, context_length: int, stride: int | None = None):
        self.inputs, self.targets = make_windows(ids, context_length, stride)
        self.context_length = int(context_length)

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, idx):
        return self.inputs[idx], self.targets[idx]

    def get_batch(self, indices):
        """The windows at ``indices`` by fancy indexing, as (inputs, targets) each
        [len(indices), context_length] (the DataLoader uses this when present)."""
        indices = np.asarray(indices)
        return self.inputs[indices], self.targets[indices]
