"""Token shards under concurrency and tampering: a reader racing pack_tokens' atomic replace
always gets one whole shard (never a spurious error, never one file's header with the other's
payload), the header's own checksum catches an edited vocab_hash, a repack keeps the file's
mode, and a shard replaced under ShardBatcher(num_workers > 0) is a clear ValueError."""
import json
import os
import stat
import struct
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tinytorch.extensions import tinyverse as tv

# two streams that differ in everything a reader could mix up: dtype, length, vocabulary
STREAM_A = (np.arange(3000) * 7919) % 50_000
STREAM_B = (np.arange(5000) * 104_729) % 70_000 + 1


def _pack(which, path):
    tokens = STREAM_A if which == "a" else STREAM_B
    return tv.pack_tokens(tokens, path, vocab_size=50_000 if which == "a" else 70_001)


def _writer(path, seconds):
    """A process that repacks A and B at ``path`` in turn for ``seconds``."""
    code = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_shard_reliability import _pack
        _pack("a", {str(path)!r})
        print("ready", flush=True)
        end = time.time() + {seconds}
        k = 0
        while time.time() < end:
            _pack("ab"[k % 2], {str(path)!r})
            k += 1
        print(k, flush=True)
    """)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("verify", [True, False])
def test_a_reader_racing_the_writer_always_gets_one_whole_shard(tmp_path, verify):
    path = tmp_path / "race.shard"
    writer = _writer(path, 2.5)
    assert writer.stdout.readline().strip() == "ready"
    opens = {"a": 0, "b": 0}
    deadline = time.time() + 2.0
    try:
        while time.time() < deadline:
            shard = tv.TokenShard(path, verify=verify)  # must never raise
            which = "a" if len(shard) == STREAM_A.size else "b"
            want = STREAM_A if which == "a" else STREAM_B
            assert shard.header["vocab_size"] == (50_000 if which == "a" else 70_001)
            np.testing.assert_array_equal(np.asarray(shard.tokens), want)
            opens[which] += 1
    finally:
        writer.wait(timeout=30)
    replaced = int(writer.stdout.readline())
    assert replaced > 10 and opens["a"] + opens["b"] > 10, (replaced, opens)
    assert [p for p in os.listdir(tmp_path) if p != "race.shard"] == []  # no temporary files left


def test_the_header_has_its_own_checksum(tmp_path):
    path = _pack("a", tmp_path / "s.shard")
    raw = bytearray(open(path, "rb").read())
    (length,) = struct.unpack("<I", raw[8:12])
    header = json.loads(raw[12:12 + length])
    forged = json.dumps(dict(header, vocab_hash="0" * 16), sort_keys=True).encode()
    assert len(forged) == length
    raw[12:12 + length] = forged
    open(path, "wb").write(bytes(raw))
    with pytest.raises(ValueError, match="header checksum"):
        tv.TokenShard(path)
    with pytest.raises(ValueError, match="header checksum"):
        tv.TokenShard(path, verify=False)


def test_a_repack_keeps_the_files_mode(tmp_path):
    path = _pack("a", tmp_path / "s.shard")
    os.chmod(path, 0o604)
    _pack("b", path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o604


def test_a_shard_replaced_under_workers_is_a_clear_error(tmp_path):
    path = _pack("a", tmp_path / "s.shard")
    shard = tv.TokenShard(path)
    _pack("b", path)  # the parent keeps its map of A; a worker would open B
    with pytest.raises(ValueError, match="changed on disk since it was opened"):
        list(tv.ShardBatcher(shard, 2, 8, num_workers=1, max_batches=2))
