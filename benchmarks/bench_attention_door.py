"""Small attention through the door: the runtime's kernel vs the NumPy reference at the sizes of
KV-cache decoding (a few queries against the cache) and of tiny models.

Why: the door sends every float32 attention without a mask to the runtime
(backends/cpu/attention_ops.py, NATIVE_MIN_ATTENTION_WORK = 0). That rule holds only if the
native call, Python and ctypes included, is cheaper than NumPy's reference even at one query
against a handful of keys. This script measures both through ``acceleration.attention`` (and
``attention_backward``), the path layers take, so the per-call overhead counts.

Shapes: 12 heads x d 64 (GPT-2 small's heads), queries 1 and 4 (decoding), keys 8 to 290, causal
bottom-right (the queries are the last positions, as in decoding); plus the tiny training shapes
of the tests. Medians of measure_rounds, 1 thread.

Usage: python benchmarks/bench_attention_door.py [--rounds 5] [--quick] [--out PATH] [--save]
Writes build/benchmarks/bench_attention_door.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import numpy as np

import _common as C

from tinytorch.core import acceleration as acc  # noqa: E402

DECODE = [(1, 12, sq, sk, 64) for sq in (1, 4) for sk in (8, 64, 290)]
TINY = [(1, 1, 1, 1, 8), (1, 4, 8, 8, 16), (2, 4, 16, 16, 16)]


def contenders(shape, backward):
    b, h, sq, sk, d = shape
    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, h, sq, d), dtype=np.float32)
    k, v = (rng.standard_normal((b, h, sk, d), dtype=np.float32) for _ in range(2))
    g = rng.standard_normal(q.shape, dtype=np.float32)

    def call():
        out, lse = acc.attention(q, k, v, None, "bottom_right", None)
        if backward:
            acc.attention_backward(q, k, v, out, lse, g, None, "bottom_right", None)

    def reference():
        with acc.use_native(False):
            call()
    call()
    path = acc.last_path()
    return {"native": call, "numpy": reference}, path


def main():
    ap = C.arguments(__doc__, "bench_attention_door.md", threads=1, quick=dict(rounds=1))
    ap.add_argument("--rounds", type=int, default=5)
    args = C.parse(ap)
    rows = []
    with C.Threads(args.threads):
        for backward in (False, True):
            for shape in DECODE + TINY:
                fns, path = contenders(shape, backward)
                t = C.measure_rounds(fns, args.rounds, block_time=0.1)
                rows.append(["forward + backward" if backward else "forward", "x".join(map(str, shape)),
                             f"{t['native'] * 1e6:.0f}", f"{t['numpy'] * 1e6:.0f}",
                             f"{t['numpy'] / t['native']:.2f}x", f"`{path}`"])
                print(" | ".join(rows[-1]), flush=True)
    body = ["Through `acceleration.attention` / `attention_backward` (Python, ctypes and the kernel), "
            "causal bottom-right, float32; us per call, medians.", ""]
    body += C.table(["work", "B x H x queries x keys x d", "native us", "NumPy reference us",
                     "NumPy / native", "native path"], rows)
    C.write_report(args.report, "Small attention: the runtime's kernel vs the NumPy reference",
                   body, threads=args.threads)


if __name__ == "__main__":
    main()
