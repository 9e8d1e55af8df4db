"""ONNX Runtime vs TinyTorch inference on the same exported model, same run, same threads.

What this owns: the benchmark row of issue 29's ONNX export. A milestone-04-sized MLP
(784 -> 256 -> 128 -> 10, ReLU, LogSoftmax) is exported with tinytorch.export.to_onnx and run
by ONNX Runtime (CPU provider, intra_op_num_threads = --threads, inter_op 1) and by our forward
under no_grad at --threads, at batch 1 and 64; reported: medians (10th-90th percentile) and the
ratio ours / ONNX Runtime. The outputs are checked equal (1e-5 relative) before timing.

Usage: python benchmarks/bench_onnx.py [--quick] [--threads 1] [--out PATH] [--save]
"""
from __future__ import annotations

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
from tinytorch.core.tensor import Tensor  # noqa: E402


def _time(fn, reps):
    fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e6)
    return C.spread(out)


def main():
    ap = C.arguments(__doc__, "bench_onnx.md", threads=1, quick={"reps": 20})
    ap.add_argument("--reps", type=int, default=300, help="timed calls per row (default 300)")
    args = C.parse(ap)
    import onnxruntime as ort
    tinytorch.set_num_threads(args.threads)
    model = Sequential(Linear(784, 256), ReLU(), Linear(256, 128), ReLU(), Linear(128, 10), LogSoftmax())
    rng = np.random.default_rng(0)
    path = os.path.join(tempfile.mkdtemp(), "mlp.onnx")
    export.to_onnx(model, rng.standard_normal((1, 784)).astype(np.float32), path)
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.threads, 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    rows = []
    for batch in (1, 64):
        x = rng.standard_normal((batch, 784)).astype(np.float32)
        with no_grad():
            np.testing.assert_allclose(sess.run(None, {"input": x})[0], model(Tensor(x)).data, rtol=1e-5, atol=1e-6)
            ours = _time(lambda: model(Tensor(x)), args.reps)
        theirs = _time(lambda: sess.run(None, {"input": x}), args.reps)
        rows.append([batch, f"{ours[0]:.1f} ({ours[1]:.1f}-{ours[2]:.1f})",
                     f"{theirs[0]:.1f} ({theirs[1]:.1f}-{theirs[2]:.1f})", ours[0] / theirs[0]])
    body = [f"MLP 784-256-128-10, {args.threads} thread(s), {args.reps} calls per row, "
            f"onnxruntime {ort.__version__}; times in us, median (p10-p90).", ""]
    body += C.table(["batch", "TinyTorch", "ONNX Runtime", "ours / ORT"], rows)
    C.write_report(args.report, "ONNX Runtime vs TinyTorch inference (exported MLP)", body, args.threads)


if __name__ == "__main__":
    main()
