"""Fault injection for the package's file writers: a child process rewrites a state dict
(Layer.save), a Trainer checkpoint, a token shard, a tokenizer and a text report
(tinytorch._atomic.write_file, what the scorecard, results and benchmark writers call) in a
loop, each write holding one version number everywhere, and is killed with SIGKILL at a
random moment. Every file must then be the previous version intact or a new one complete:
it loads, and holds one version throughout. The child is a fresh interpreter (subprocess),
never a fork of a process that has run threaded kernels."""
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from tinytorch.core.layers import Linear
from tinytorch.core.tokenization import CharTokenizer
from tinytorch.extensions import tinyverse as tv

CHILD = textwrap.dedent("""
    import sys
    import numpy as np
    from tinytorch import _atomic
    from tinytorch.core.layers import Linear
    from tinytorch.core.losses import CrossEntropyLoss
    from tinytorch.core.optimizers import SGD
    from tinytorch.core.tokenization import CharTokenizer
    from tinytorch.core.training import Trainer
    from tinytorch.extensions import tinyverse as tv

    folder = sys.argv[1]
    model = Linear(256, 512)
    trainer = Trainer(model, SGD(model.parameters(), lr=0.1), CrossEntropyLoss(), progress=False)

    def write_all(k):
        for p in model.parameters():
            p.data[...] = k
        model.save(folder + "/layer.npz")
        trainer.epoch = k
        trainer.save_checkpoint(folder + "/checkpoint.npz")
        tv.pack_tokens(np.full(300_000, k % 1000), folder + "/tokens.shard", vocab_size=1000)
        CharTokenizer().fit("v%d " % k + "abc" * 20_000).save(folder + "/tokenizer.json")
        _atomic.write_file(folder + "/report.md", ("version %d\\n" % k) * 50_000)

    write_all(0)
    print("ready", flush=True)
    k = 1
    while True:
        write_all(k)
        k += 1
""")


def _versions(folder):
    """The version each file holds (ValueError/AssertionError when one is torn)."""
    layer = Linear(256, 512)
    layer.load(os.path.join(folder, "layer.npz"))
    values = {float(v) for p in layer.parameters() for v in np.unique(p.data)}
    assert len(values) == 1, f"layer.npz mixes versions {sorted(values)[:5]}"
    with np.load(os.path.join(folder, "checkpoint.npz")) as f:
        epoch = json.loads(str(f["meta"]))["epoch"]
        weights = {float(v) for k in f.files if k.startswith("model/") for v in np.unique(f[k])}
    assert weights == {float(epoch)}, "the checkpoint's weights and counters disagree"
    tokens = np.asarray(tv.TokenShard(os.path.join(folder, "tokens.shard")).tokens)
    assert len(np.unique(tokens)) == 1 and tokens.size == 300_000
    tok = CharTokenizer.load(os.path.join(folder, "tokenizer.json"))
    assert tok.vocab_size > 3
    with open(os.path.join(folder, "report.md")) as f:
        lines = f.read().splitlines()
    assert len(lines) == 50_000 and len(set(lines)) == 1, "report.md is torn"
    return {"layer": values.pop(), "checkpoint": epoch, "shard": int(tokens[0]), "report": lines[0]}


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_writers_leave_the_old_file_or_a_complete_new_one(tmp_path):
    rng = random.Random()
    seen = set()
    for round_ in range(5):
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE,
                                 text=True)
        try:
            assert child.stdout.readline().strip() == "ready"
            time.sleep(rng.uniform(0.0, 0.8))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        seen.add(_versions(str(tmp_path))["checkpoint"])
    assert seen, "no round finished"
