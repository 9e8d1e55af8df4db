"""Token shards: one flat binary file per token stream, read through a memory map.

Bottleneck it removes: the data path of a training step. A loader that keeps one Python
object per sample (a list of arrays, a pickle per sample) pays an allocation, a
deserialisation and a ``np.stack`` copy for every window of every batch, and its worker
processes pay a pickle of every batch on top. A shard is the token stream itself, laid out
contiguously on disk; ``np.memmap`` maps it once and the page cache does the I/O. A batch of
``batch_size`` consecutive windows of ``context`` tokens is then the contiguous run
``tokens[start : start + batch_size * context]`` reshaped to (batch, context), and its targets
the same run one token later: two views of the map, no byte copied, no object per sample,
wrapped as Tensors with ``Tensor.from_numpy`` (which does not copy either).

File layout (format version 2, little-endian):

    8 bytes   magic b"TTSHARD\\0"
    4 bytes   uint32 length H of the JSON header
    H bytes   JSON header: format_version, dtype ("uint16" | "uint32"), token_count,
              vocab_size, vocab_hash, checksum ("sha256:<hex>" of the payload), payload_offset,
              header_checksum ("sha256:<hex>" of the other keys as sorted compact JSON)
    padding   zeros up to payload_offset (a multiple of 64)
    payload   token_count tokens of dtype

``pack_tokens`` writes through ``tinytorch._atomic`` (a temporary file in the same folder,
fsync'ed, given the old file's mode, renamed into place), so a reader never sees a
half-written shard. ``TokenShard`` opens the path once and reads the size, the header and the
memory map from that one descriptor: a reader racing a replace sees the old file or the new
one, never one's header with the other's payload. It refuses, with a ValueError naming the
problem and before it serves a single token, a wrong magic, an unreadable header, a header
whose own checksum fails (an edited vocab_hash, say), an unknown version or dtype, a payload
whose size disagrees with the header (truncated file, wrong dtype), a checksum mismatch, a
token outside the vocabulary and an unexpected vocabulary hash.

Batches: ``ShardDataset`` is a ``Dataset`` of non-overlapping (input, target) windows (a
``get_batch`` of consecutive indices is a view; other index sets are one fancy index, a copy).
``ShardBatcher`` serves whole batches as views: a sequential epoch order, or (``shuffle``)
a seeded random order of the batches plus a seeded random alignment of the windows each
epoch, reproducible from ``seed`` and the epoch number. Worker processes (``num_workers``)
are started with ``spawn`` (a child forked after OpenMP has run in the parent can hang), in a
``ProcessPoolExecutor`` so that a worker which cannot start raises ``BrokenProcessPool`` instead
of being respawned forever; each opens the shard itself and ships arrays back, which costs the
copy that in-process loading avoids. A shard replaced on disk after the parent opened it is a
ValueError from the iteration naming the file (a worker's own failure travels back with the
first batch it is asked for; a worker that dies is a RuntimeError naming the shard).

Assumes: the core's Dataset and Tensor; a shard file is replaced atomically
(tinytorch._atomic), and worker processes use spawn.
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import struct
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from ..._atomic import replacing
from ...core.dataloader import Dataset
from ...core.tensor import Tensor

__all__ = ["pack_tokens", "TokenShard", "ShardDataset", "ShardBatcher", "vocab_hash", "FORMAT_VERSION"]

FORMAT_VERSION = 2
MAGIC = b"TTSHARD\0"
_ALIGN = 64
_DTYPES = {"uint16": np.uint16, "uint32": np.uint32}
_MAX_HEADER = 1 << 20  # a header is a few hundred bytes; anything this big is corruption


def vocab_hash(vocabulary=None, vocab_size=None) -> str:
    """A short hash naming a vocabulary, stored in a shard's header.

    Args:
        vocabulary: the token strings in id order (a sequence of str) or a fitted
            ``Tokenizer`` (its ``to_dict()``); None hashes ``vocab_size`` alone.
        vocab_size: the vocabulary size, used when ``vocabulary`` is None.
    """
    if vocabulary is None:
        payload = {"vocab_size": int(vocab_size)}
    elif isinstance(vocabulary, (list, tuple)):
        payload = {"vocab": [str(s) for s in vocabulary]}
    elif hasattr(vocabulary, "to_dict"):  # a Tokenizer: its own JSON description
        payload = {"tokenizer": vocabulary.to_dict()}
    else:
        raise TypeError(f"vocab_hash: vocabulary must be a sequence of str or a Tokenizer, "
                        f"got {type(vocabulary).__name__}")
    return hashlib.sha256(json.dumps(payload, ensure_ascii=True, sort_keys=True).encode()).hexdigest()[:16]


def _header_checksum(header: dict) -> str:
    """The seal of a header: SHA-256 of every key but itself, as sorted compact JSON."""
    rest = {k: v for k, v in header.items() if k != "header_checksum"}
    return "sha256:" + hashlib.sha256(json.dumps(rest, sort_keys=True).encode()).hexdigest()


def _checked_tokens(tokens) -> np.ndarray:
    arr = tokens.data if isinstance(tokens, Tensor) else np.asarray(tokens)
    if arr.ndim != 1:
        raise ValueError(f"pack_tokens: tokens must be a 1-D stream, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("pack_tokens: the token stream is empty (an empty corpus makes no shard)")
    if arr.dtype.kind not in "iu":
        raise TypeError(f"pack_tokens: tokens must be integers, got dtype {arr.dtype}")
    if arr.min() < 0:
        raise ValueError(f"pack_tokens: token ids must be non-negative, found {int(arr.min())}")
    return arr


def pack_tokens(tokens, path, vocab_size=None, vocabulary=None):
    """Write one shard holding ``tokens``; returns ``path``.

    Args:
        tokens: the token stream, a non-empty 1-D sequence, array or Tensor of non-negative ints.
        path: the file to write (replaced atomically if it exists).
        vocab_size: the vocabulary size V (every token must be < V); default max(tokens) + 1.
            The payload is uint16 when V <= 65536, else uint32.
        vocabulary: optional token strings (or a fitted Tokenizer) whose hash goes in the header;
            without it the header hashes ``vocab_size``.
    """
    arr = _checked_tokens(tokens)
    top = int(arr.max())
    if vocab_size is None:
        vocab_size = top + 1
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)) or vocab_size < 1:
        raise ValueError(f"pack_tokens: vocab_size must be a positive int, got {vocab_size!r}")
    if top >= vocab_size:
        raise ValueError(f"pack_tokens: token id {top} is outside the vocabulary of size {vocab_size}")
    if vocab_size > 2 ** 32:
        raise ValueError(f"pack_tokens: vocab_size {vocab_size} does not fit uint32 ids")
    dtype_name = "uint16" if vocab_size <= 2 ** 16 else "uint32"
    payload = np.ascontiguousarray(arr, dtype=np.dtype(_DTYPES[dtype_name]).newbyteorder("<"))
    header = {"format_version": FORMAT_VERSION, "dtype": dtype_name, "token_count": int(payload.size),
              "vocab_size": int(vocab_size), "vocab_hash": vocab_hash(vocabulary, vocab_size),
              "checksum": "sha256:" + hashlib.sha256(payload.data).hexdigest()}
    # payload_offset is part of the header, so size the header with a fixed-width offset field
    header["payload_offset"] = 0
    header["header_checksum"] = _header_checksum(header)  # same length as the final one
    head_len = len(json.dumps(header, sort_keys=True).encode()) + 12  # room for the offset digits
    offset = -(-(len(MAGIC) + 4 + head_len) // _ALIGN) * _ALIGN
    header["payload_offset"] = offset
    header["header_checksum"] = _header_checksum(header)
    text = json.dumps(header, sort_keys=True).encode()
    preamble = MAGIC + struct.pack("<I", len(text)) + text
    preamble += b"\0" * (offset - len(preamble))
    path = os.fspath(path)
    with replacing(path) as f:
        f.write(preamble)
        f.write(payload.data)
    return path


def _read_header(f, path: str, file_size: int) -> dict:
    """The checked header of the shard open as ``f`` (positioned at 0)."""
    magic = f.read(len(MAGIC))
    if magic != MAGIC:
        raise ValueError(f"TokenShard: {path} is not a token shard (magic {magic!r}, expected {MAGIC!r})")
    raw = f.read(4)
    if len(raw) != 4:
        raise ValueError(f"TokenShard: {path} is truncated inside the header length")
    (length,) = struct.unpack("<I", raw)
    if length > min(_MAX_HEADER, file_size):
        raise ValueError(f"TokenShard: {path} has a bad header (declared length {length} bytes)")
    text = f.read(length)
    try:
        header = json.loads(text.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"TokenShard: {path} has a bad header (not JSON: {e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"TokenShard: {path} has a bad header (a JSON object is expected)")
    if header.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"TokenShard: {path} has format version {header.get('format_version')!r}; "
                         f"this reader knows version {FORMAT_VERSION} (pack the tokens again)")
    missing = [k for k in ("format_version", "dtype", "token_count", "vocab_size", "vocab_hash",
                           "checksum", "payload_offset", "header_checksum") if k not in header]
    if missing:
        raise ValueError(f"TokenShard: {path} has a bad header (missing {missing})")
    if header["header_checksum"] != _header_checksum(header):
        raise ValueError(f"TokenShard: {path} fails its header checksum: the header was edited or "
                         "corrupted")
    if header["dtype"] not in _DTYPES:
        raise ValueError(f"TokenShard: {path} declares dtype {header['dtype']!r}; "
                         f"expected one of {sorted(_DTYPES)}")
    for key in ("token_count", "vocab_size", "payload_offset"):
        v = header[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"TokenShard: {path} has a bad header ({key} = {v!r})")
    if header["payload_offset"] < len(MAGIC) + 4 + length:
        raise ValueError(f"TokenShard: {path} has a bad header (payload_offset {header['payload_offset']} "
                         "overlaps the header)")
    return header


class TokenShard:
    """A shard opened read-only through ``np.memmap``; every check runs before any token is served.

    Args:
        path: the shard file written by ``pack_tokens``.
        verify: recompute the payload checksum and check every token against ``vocab_size``
            (one sequential read of the payload); False checks only the header and the sizes.
        expected_vocab_hash: if given, the header's ``vocab_hash`` must equal it.

    ``tokens`` is the memory map of the payload (a read-only ``np.memmap``), ``len(shard)``
    its token count, ``header`` the parsed header. Pickling keeps only the path, so a shard
    can be sent to a spawned worker, which maps the file itself.
    """

    def __init__(self, path, verify: bool = True, expected_vocab_hash=None):
        self.path = os.fspath(path)
        self.verify = bool(verify)
        self.expected_vocab_hash = expected_vocab_hash
        if not os.path.isfile(self.path):
            raise ValueError(f"TokenShard: no such shard file: {self.path}")
        # one descriptor for the size, the header and the map: a concurrent replace of the
        # path cannot pair one file's header with another's payload
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            raise ValueError(f"TokenShard: no such shard file: {self.path}") from None
        with f:
            self._open(f)

    def _open(self, f):
        """Check and map the shard open as ``f`` (everything read from that descriptor)."""
        expected_vocab_hash = self.expected_vocab_hash
        size = os.fstat(f.fileno()).st_size
        header = _read_header(f, self.path, size)
        dtype = np.dtype(_DTYPES[header["dtype"]]).newbyteorder("<")
        expected = header["payload_offset"] + header["token_count"] * dtype.itemsize
        if size != expected:
            what = "truncated" if size < expected else "longer than its header says"
            raise ValueError(f"TokenShard: {self.path} is {what}: {size} bytes on disk, the header "
                             f"({header['token_count']} tokens of {header['dtype']} at offset "
                             f"{header['payload_offset']}) needs {expected}; wrong dtype or a partial write")
        if header["token_count"] == 0:
            raise ValueError(f"TokenShard: {self.path} holds no tokens (empty corpus)")
        if expected_vocab_hash is not None and header["vocab_hash"] != expected_vocab_hash:
            raise ValueError(f"TokenShard: {self.path} was packed for vocabulary {header['vocab_hash']}, "
                             f"expected {expected_vocab_hash}")
        tokens = np.memmap(f, dtype=dtype, mode="r", offset=header["payload_offset"],
                           shape=(header["token_count"],))
        if self.verify:
            digest = "sha256:" + hashlib.sha256(tokens).hexdigest()
            if digest != header["checksum"]:
                raise ValueError(f"TokenShard: {self.path} fails its checksum (payload {digest[:23]}..., "
                                 f"header {str(header['checksum'])[:23]}...): the payload is corrupted")
            top = int(tokens.max())
            if top >= header["vocab_size"]:
                raise ValueError(f"TokenShard: {self.path} holds token {top}, outside its vocabulary "
                                 f"of size {header['vocab_size']}")
        self.header, self.tokens = header, tokens

    def __len__(self) -> int:
        return int(self.header["token_count"])

    @property
    def dtype(self) -> np.dtype:
        """The payload's dtype (uint16 or uint32)."""
        return self.tokens.dtype

    @property
    def vocab_size(self) -> int:
        """The vocabulary size recorded in the header."""
        return int(self.header["vocab_size"])

    def window_batch(self, start: int, rows: int, context: int):
        """(inputs, targets), each [rows, context]: ``rows`` consecutive windows from token
        ``start`` as two views of the map (targets are the inputs shifted by one token).

        Args:
            start: index of the first input token.
            rows: number of windows.
            context: tokens per window.
        """
        stop = start + rows * context + 1
        if start < 0 or rows < 1 or context < 1 or stop > len(self):
            raise ValueError(f"TokenShard.window_batch: {rows} windows of {context} tokens from {start} "
                             f"need tokens up to {stop}, the shard has {len(self)}")
        base = np.asarray(self.tokens)  # the same buffer as a plain ndarray (no copy)
        x = base[start:stop - 1].reshape(rows, context)
        y = base[start + 1:stop].reshape(rows, context)
        return x, y

    def __getstate__(self):
        return {"path": self.path, "verify": False, "expected_vocab_hash": self.expected_vocab_hash,
                "header_checksum": self.header["header_checksum"]}

    def __setstate__(self, state):
        self.__init__(state["path"], verify=state["verify"], expected_vocab_hash=state["expected_vocab_hash"])
        # the header seals the payload checksum too: equal seals, the same shard
        if self.header["header_checksum"] != state["header_checksum"]:
            raise ValueError(f"TokenShard: {self.path} changed on disk since it was opened")

    def __repr__(self):
        return f"TokenShard({self.path!r}, tokens={len(self)}, dtype={self.header['dtype']})"


def _as_shard(shard) -> TokenShard:
    if isinstance(shard, TokenShard):
        return shard
    if isinstance(shard, (str, os.PathLike)):
        return TokenShard(shard)
    raise TypeError(f"expected a TokenShard or a shard path, got {type(shard).__name__}")


def _positive_int(value, name: str, who: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{who}: {name} must be a positive int, got {value!r}")
    return int(value)


def _check_window(shard: TokenShard, context: int, who: str) -> None:
    if context + 1 > len(shard):
        raise ValueError(f"{who}: a window of context {context} needs {context + 1} tokens "
                         f"(input + shifted target); the shard holds {len(shard)}")


class ShardDataset(Dataset):
    """A ``Dataset`` of non-overlapping next-token windows sliced from a shard's map.

    Args:
        shard: a ``TokenShard`` (or the path of one).
        context: tokens per window; item ``i`` is ``(tokens[i*context : (i+1)*context],
            tokens[i*context + 1 : (i+1)*context + 1])``, two views of the map.

    ``get_batch(indices)`` (what the package's DataLoader calls) returns views when the
    indices are consecutive and ascending (an unshuffled loader), and one fancy index (a
    copy, still no object per sample) otherwise. Picklable for spawned DataLoader workers.
    """

    def __init__(self, shard, context: int):
        self.shard = _as_shard(shard)
        self.context = _positive_int(context, "context", "ShardDataset")
        _check_window(self.shard, self.context, "ShardDataset")
        self.num_windows = (len(self.shard) - 1) // self.context

    def __len__(self) -> int:
        return self.num_windows

    def __getitem__(self, index):
        i = int(index)
        if i < 0:
            i += self.num_windows
        if not 0 <= i < self.num_windows:
            raise IndexError(f"ShardDataset: index {index} out of range for {self.num_windows} windows")
        x, y = self.shard.window_batch(i * self.context, 1, self.context)
        return x[0], y[0]

    def get_batch(self, indices):
        """The windows at ``indices`` as (inputs, targets), each [len(indices), context].

        Args:
            indices: window indices (an integer array); consecutive ascending ones give views.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size == 0:
            raise ValueError("ShardDataset.get_batch: no indices")
        if idx.min() < 0 or idx.max() >= self.num_windows:
            raise IndexError(f"ShardDataset.get_batch: indices must lie in [0, {self.num_windows})")
        if idx.size == 1 or np.all(np.diff(idx) == 1):
            return self.shard.window_batch(int(idx[0]) * self.context, idx.size, self.context)
        base = np.asarray(self.shard.tokens)
        rows = idx[:, None] * self.context + np.arange(self.context)
        return base[rows], base[rows + 1]


# worker-process state (spawned children import this module fresh)
_worker_shard = None
_worker_error = None


def _worker_open(shard_state):
    # an initializer that raises only breaks the pool (BrokenProcessPool, no reason given):
    # keep the error and raise it from the first task, which carries it to the parent
    global _worker_shard, _worker_error
    try:
        _worker_shard = TokenShard.__new__(TokenShard)
        _worker_shard.__setstate__(shard_state)
    except ValueError as e:
        _worker_error = e


def _worker_batch(task):
    if _worker_error is not None:
        raise _worker_error
    start, rows, context = task
    x, y = _worker_shard.window_batch(start, rows, context)
    return np.array(x), np.array(y)  # the pipe pickles them anyway; own the bytes explicitly


class ShardBatcher:
    """Iterates (inputs, targets) batches of Tensors, each a pair of views of the shard's map.

    Args:
        shard: a ``TokenShard`` (or the path of one).
        batch_size: windows per batch.
        context: tokens per window.
        seed: seed of the shuffling; epoch ``e`` draws from ``default_rng([seed, e])``, so every
            epoch is reproducible on its own.
        shuffle: True: a random order of the epoch's batches and a random alignment of the
            windows (an offset below ``context``) each epoch; False: the sequential order,
            from token 0.
        num_workers: 0 slices in this process (zero-copy); > 0 builds batches in a pool of
            ``spawn``-started processes, which ship copies back, in the same order.
        max_batches: stop an epoch after this many batches (None: the whole epoch).

    A batch holds ``batch_size`` consecutive windows: the rows of one batch are contiguous
    in the stream, the batches are what the order moves. The last batch of an epoch may have
    fewer rows. ``len()`` is the number of batches per epoch, the same every epoch; ``epoch``
    counts the epochs started. Plugs into ``Trainer.train_epoch`` as it is.
    """

    def __init__(self, shard, batch_size: int, context: int, seed: int = 0, shuffle: bool = True,
                 num_workers: int = 0, max_batches=None):
        self.shard = _as_shard(shard)
        self.batch_size = _positive_int(batch_size, "batch_size", "ShardBatcher")
        self.context = _positive_int(context, "context", "ShardBatcher")
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) or num_workers < 0:
            raise ValueError(f"ShardBatcher: num_workers must be a non-negative int, got {num_workers!r}")
        if max_batches is not None:
            max_batches = _positive_int(max_batches, "max_batches", "ShardBatcher")
        _check_window(self.shard, self.context, "ShardBatcher")
        self.seed, self.shuffle = int(seed), bool(shuffle)
        self.num_workers, self.max_batches = int(num_workers), max_batches
        self.epoch = 0
        n, t = len(self.shard), self.context
        # shuffled epochs keep up to context - 1 tokens of slack for the random alignment
        self.num_windows = (n - t) // t if self.shuffle and (n - t) // t >= 1 else (n - 1) // t
        self.slack = min(t - 1, n - 1 - self.num_windows * t) if self.shuffle else 0

    def __len__(self) -> int:
        full = -(-self.num_windows // self.batch_size)
        return full if self.max_batches is None else min(full, self.max_batches)

    def plan(self, epoch: int):
        """The epoch's batches as (start token, rows) pairs, in serving order.

        Args:
            epoch: the epoch number (the shuffle of epoch ``e`` is the same on every call).
        """
        b, t = self.batch_size, self.context
        phase = 0
        order = np.arange(-(-self.num_windows // b))
        if self.shuffle:
            rng = np.random.default_rng([self.seed, int(epoch)])
            phase = int(rng.integers(0, self.slack + 1))
            order = rng.permutation(order)
        plan = [(phase + int(k) * b * t, min(b, self.num_windows - int(k) * b)) for k in order]
        return plan[:len(self)]

    def __iter__(self):
        plan = self.plan(self.epoch)
        self.epoch += 1
        if self.num_workers == 0:
            for start, rows in plan:
                x, y = self.shard.window_batch(start, rows, self.context)
                yield Tensor.from_numpy(x), Tensor.from_numpy(y)
            return
        # an executor, not a Pool: a worker that cannot start raises BrokenProcessPool here
        # instead of being respawned forever
        pool = ProcessPoolExecutor(self.num_workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=_worker_open, initargs=(self.shard.__getstate__(),))
        try:
            for x, y in pool.map(_worker_batch, [(s, r, self.context) for s, r in plan]):
                yield Tensor.from_numpy(x), Tensor.from_numpy(y)
        except BrokenProcessPool as e:
            raise RuntimeError(f"ShardBatcher: a worker process reading {self.shard.path} died "
                               f"({e})") from e
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
