"""ONNX Runtime vs TinyTorch inference on the same exported models, same run, same threads.

What this owns: the benchmark rows of issue 29's ONNX export. Three models are exported with
tinytorch.export.to_onnx and run by ONNX Runtime (CPU provider, intra_op_num_threads = --threads,
inter_op 1) and by our forward under no_grad with tinytorch.set_num_threads(--threads):
  MLP  784 -> 256 -> 128 -> 10 (ReLU, LogSoftmax), batch 1 and 64;
  CNN  milestone 04's LeNet (milestones/04_1998_cnn/lenet.py) on 1x8x8 digits, batch 1 and 64;
  GPT  4 blocks, width 128, 4 heads, vocabulary 256 (TinyTalks-sized), tied head,
       batch 1 x 64 tokens and 8 x 64 (a full forward, no KV cache, in both).
Reported: medians (10th-90th percentile) and the ratio ours / ONNX Runtime. Every model's outputs
are checked equal (1e-5 relative) before it is timed; the rows of one model are interleaved
(ours, then ORT, per row) so load changes hit both sides alike.

Usage: python benchmarks/bench_onnx.py [--quick] [--threads 1] [--reps 300] [--out PATH] [--save]
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
import time

import numpy as np

import _common as C

import tinytorch  # noqa: E402
from tinytorch import export  # noqa: E402
from tinytorch.core.activations import LogSoftmax, ReLU  # noqa: E402
from tinytorch.core.autograd import no_grad  # noqa: E402
from tinytorch.core.layers import Linear, Sequential  # noqa: E402
from tinytorch.core.random import manual_seed  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.core.transformers import GPT  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _time(fn, reps):
    fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e6)
    return C.spread(out)


def _lenet():
    spec = importlib.util.spec_from_file_location("lenet", os.path.join(ROOT, "milestones", "04_1998_cnn", "lenet.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.lenet()


def _models(rng):
    """(label, model, example input, [(row label, input), ...]) per model."""
    mlp = Sequential(Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10), LogSoftmax())
    gpt = GPT(vocab_size=256, embed_dim=128, num_layers=4, num_heads=4, max_seq_len=64, tie_weights=True)
    gpt.eval()
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    ids = lambda b, t: rng.integers(0, 256, (b, t))  # noqa: E731
    return [("MLP 784-256-128-10", mlp, f32(1, 784), [("batch 1", f32(1, 784)), ("batch 64", f32(64, 784))]),
            ("CNN (milestone 04 LeNet, 1x8x8)", _lenet(), f32(1, 1, 8, 8),
             [("batch 1", f32(1, 1, 8, 8)), ("batch 64", f32(64, 1, 8, 8))]),
            ("GPT (4 x 128, 4 heads, vocab 256)", gpt, ids(1, 8),
             [("1 x 64 tokens", ids(1, 64)), ("8 x 64 tokens", ids(8, 64))])]


def main():
    ap = C.arguments(__doc__, "bench_onnx.md", threads=1, quick={"reps": 20})
    ap.add_argument("--reps", type=int, default=300, help="timed calls per row (default 300)")
    args = C.parse(ap)
    import onnxruntime as ort
    tinytorch.set_num_threads(args.threads)
    manual_seed(0)
    rng = np.random.default_rng(0)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
    folder, rows = tempfile.mkdtemp(), []
    for label, model, example, cases in _models(rng):
        path = export.to_onnx(model, example, os.path.join(folder, "model.onnx"))
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for case, x in cases:
            ours_in = x if x.dtype.kind in "iu" else Tensor(x)
            with no_grad():
                np.testing.assert_allclose(sess.run(None, {"input": x})[0], model(ours_in).data, rtol=1e-5, atol=1e-6)
                ours = _time(lambda: model(ours_in), args.reps)
            theirs = _time(lambda: sess.run(None, {"input": x}), args.reps)
            rows.append([label, case, f"{ours[0]:.1f} ({ours[1]:.1f}-{ours[2]:.1f})",
                         f"{theirs[0]:.1f} ({theirs[1]:.1f}-{theirs[2]:.1f})", ours[0] / theirs[0]])
            print(" | ".join(str(v) for v in rows[-1]), flush=True)
    body = [f"{args.threads} thread(s) on both sides (tinytorch.set_num_threads, ORT intra_op_num_threads), "
            f"{args.reps} calls per row, onnxruntime {ort.__version__}, opset {export.OPSET}; times in us, "
            "median (p10-p90); every model's outputs equal within 1e-5 before timing.", ""]
    body += C.table(["model", "input", "TinyTorch", "ONNX Runtime", "ours / ORT"], rows)
    C.write_report(args.report, "ONNX Runtime vs TinyTorch inference (exported MLP, CNN, GPT)", body, args.threads)


if __name__ == "__main__":
    main()
