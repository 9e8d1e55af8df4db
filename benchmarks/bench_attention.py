"""FlashAttention in the runtime against the stock attention and PyTorch's SDPA on the CPU.

Contenders, on the same q, k, v ([1, heads, S, d] float32), in the same process:
  flash   tinytorch.extensions.flash_attention: the runtime's tiled kernel
          (runtime/cpu/attention*.cpp, online softmax; FlashAttention-2 backward)
  stock   tinytorch.core.attention.attention(flash=False): the whole S x S score
          matrix, softmax in NumPy, products through the runtime's GEMM
  torch   torch.nn.functional.scaled_dot_product_attention (PyTorch's CPU kernel)
for S in --seqs, causal and not, forward alone ("fwd", ndarrays / no_grad) and forward +
backward ("fwd+bwd", autograd Tensors, upstream gradient of ones), on each --threads count.

Time: C.measure_rounds: per round, each contender gets a block (a pause, so other libraries'
spinning threads settle, a warm-up call, then calls for ~0.2 s, at least one) whose median is
kept; the median over rounds (fewer rounds for S >= 2048, whose calls are long). GFLOP/s
count 4 S^2 d per head for the forward (S (S + 1) / 2 visible pairs when causal) and 2.5x
that for the backward (FlashAttention's convention), against the FMA peak of peak.c.
Memory (one extra call per contender, on one thread): the tracemalloc peak above the
inputs (NumPy's allocations: outputs, saved tensors, score matrices), the runtime's
storage peak (tt_memory_stats: the kernel's workspace) and the peak RSS above the RSS
before the call (/proc/self/status VmHWM after clear_refs; the only figure PyTorch's
allocator shows). Nothing here asserts: the report says what was measured.

The OpenBLAS environment (OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE) of the shared machine is
meant to be unset for this run: env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python ...
"""
from __future__ import annotations

import _common as C
import numpy as np

from tinytorch.core.attention import attention as stock_attention
from tinytorch.core.tensor import Tensor
from tinytorch.extensions import flash_attention, last_path
from tinytorch.scorecard.attention import flops, peak_memory  # one copy of each measurement

torch = C.optional_torch()


def seq_list(text):
    return [int(s) for s in str(text).split(",") if s.strip()]


def make_contenders(q, k, v, causal):
    """{name: (fwd callable, fwd+bwd callable)}; each returns the forward output."""
    out = {}

    def flash_fwd():
        return flash_attention(q, k, v, causal=causal)

    def stock_fwd():
        return stock_attention(q, k, v, causal=causal, flash=False)  # the S x S path, not the default flash

    def tensors():  # fresh leaves over the same arrays (no copy), so grads do not pile up
        return [Tensor.from_numpy(x, requires_grad=True) for x in (q, k, v)]

    def fwd_bwd(fn):
        def run():
            ts = tensors()
            o = fn(*ts)
            o.backward(np.ones_like(o.data))
            return o.data
        return run

    out["flash"] = (flash_fwd, fwd_bwd(lambda a, b, c: flash_attention(a, b, c, causal=causal)))
    out["stock"] = (stock_fwd, fwd_bwd(lambda a, b, c: stock_attention(a, b, c, causal=causal, flash=False)))
    if torch is not None:
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def torch_fwd():
            with torch.no_grad():
                return sdpa(tq, tk, tv, is_causal=causal).numpy()

        def torch_fwd_bwd():
            a, b, c = (x.detach().requires_grad_() for x in (tq, tk, tv))
            o = sdpa(a, b, c, is_causal=causal)
            o.backward(torch.ones_like(o))
            return o.detach().numpy()

        out["torch"] = (torch_fwd, torch_fwd_bwd)
    return out


def main():
    ap = C.arguments(__doc__, "bench_attention.md", threads=[1, 2],
                     quick={"seqs": [256, 512], "dims": [64], "rounds": 1, "d128_seqs": []})
    ap.add_argument("--seqs", type=seq_list, default=[512, 1024, 2048, 4096],
                    help="sequence lengths (comma-separated)")
    ap.add_argument("--dims", type=seq_list, default=[64], help="head dims for every S")
    ap.add_argument("--d128-seqs", dest="d128_seqs", type=seq_list, default=[1024, 2048],
                    help="extra S measured with d=128 (empty string: none)")
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3, help="timed calls per contender")
    args = C.parse(ap)
    lib_ok = C.native.available()
    if not lib_ok:
        print(f"warning: the runtime is not loaded ({C.native.reason()}): flash runs the NumPy reference")

    configs = [(s, d) for d in args.dims for s in args.seqs]
    configs += [(s, 128) for s in args.d128_seqs if 128 not in args.dims]
    peaks = C.fma_peaks(max(args.threads))
    rng = np.random.default_rng(0)
    time_rows = {"fwd": [], "fwd+bwd": []}
    mem_rows = []
    summary = []  # (s, d, causal, threads, pass, flash_ms, torch_ms, stock_ms)
    for s, d in configs:
        q, k, v = (rng.standard_normal((1, args.heads, s, d)).astype(np.float32) for _ in range(3))
        for causal in (False, True):
            contenders = make_contenders(q, k, v, causal)
            # correctness of what is timed: flash against PyTorch (or the stock) once
            ref_name = "torch" if "torch" in contenders else "stock"
            got = contenders["flash"][0]()
            flash_path = last_path()
            err = float(np.abs(got - contenders[ref_name][0]()).max())
            for nt in args.threads:
                with C.Threads(nt):
                    for p, which in (("fwd", 0), ("fwd+bwd", 1)):
                        fns = {name: pair[which] for name, pair in contenders.items()}
                        # long calls: fewer rounds (each block is a warm-up and >= 1 call)
                        rounds = args.rounds if s <= 1024 else max(1, args.rounds - (s // 2048))
                        ms = {n: 1e3 * t for n, t in
                              C.measure_rounds(fns, rounds, block_time=0.2).items()}
                        work = flops(s, d, args.heads, causal) * (1.0 if p == "fwd" else 3.5)
                        g = work / (ms["flash"] * 1e-3) / 1e9
                        ceiling, _ = C.fma_ceiling(peaks, nt)
                        t_ms = ms.get("torch")
                        time_rows[p].append([s, d, "yes" if causal else "no", nt, ms["flash"],
                                             t_ms if t_ms else "n/a", ms["stock"],
                                             f"{t_ms / ms['flash']:.2f}x" if t_ms else "n/a",
                                             f"{ms['stock'] / ms['flash']:.1f}x", f"{g:.0f}",
                                             C.percent_of_peak(g, ceiling)])
                        summary.append((s, d, causal, nt, p, ms["flash"], t_ms, ms["stock"]))
                        print(f"S={s} d={d} causal={causal} threads={nt} {p}: " +
                              ", ".join(f"{n} {v:.1f} ms" for n, v in ms.items()), flush=True)
            with C.Threads(1):
                for p, which in (("fwd", 0), ("fwd+bwd", 1)):
                    mem = {n: peak_memory(pair[which]) for n, pair in contenders.items()}
                    unit = args.heads * s * d * 4  # one [heads, S, d] float32 array
                    f = mem["flash"]
                    mem_rows.append([s, d, "yes" if causal else "no", p,
                                     f"{f['traced'] / 2**20:.1f}", f"{f['runtime'] / 2**20:.2f}",
                                     f"{(f['traced'] + f['runtime']) / unit:.2f}",
                                     f"{(f['rss'] or 0) / 2**20:.0f}",
                                     f"{mem['stock']['traced'] / 2**20:.0f}",
                                     f"{(mem['stock']['rss'] or 0) / 2**20:.0f}",
                                     f"{(mem['torch']['rss'] or 0) / 2**20:.0f}" if "torch" in mem else "n/a"])
            summary.append((s, d, causal, None, "check", err, flash_path, ref_name))

    body = [
        "## What is compared",
        "",
        f"q, k, v: [1, {args.heads}, S, d] float32, self-attention (S queries, S keys), scale 1/sqrt(d).",
        "`flash` is `tinytorch.extensions.flash_attention` (the runtime's kernel: 64-query x 64-key "
        "blocks, queries along the SIMD lanes, online softmax, log-sum-exp saved; the backward "
        "recomputes each block's probabilities, FlashAttention-2); `stock` is "
        "`tinytorch.core.attention.attention(flash=False)` (S x S scores, NumPy softmax, "
        "GEMMs through the runtime); `torch` is `torch.nn.functional.scaled_dot_product_attention`. "
        "fwd: ndarrays (torch under no_grad); fwd+bwd: autograd Tensors and `backward(ones)`. "
        "Times: medians of per-contender blocks after a settle pause (C.measure_rounds); GFLOP/s are flash's "
        "(4 S^2 d per head forward, S(S+1)/2 pairs when causal, backward 2.5x the forward).",
        "",
    ]
    checks = [r for r in summary if r[4] == "check"]
    body += ["Correctness of what was timed (flash forward against "
             f"{checks[0][7] if checks else 'torch'}): max |difference| "
             f"{max(c[5] for c in checks):.2e} over all configurations; path "
             f"`{checks[0][6] if checks else 'n/a'}`.", ""]
    header = ["S", "d", "causal", "threads", "flash ms", "torch ms", "stock ms", "flash vs torch",
              "flash vs stock", "flash GFLOP/s", "of FMA peak"]
    for p in ("fwd", "fwd+bwd"):
        body += [f"## {p}", ""] + C.table(header, time_rows[p]) + [""]
    body += ["## Peak memory above the inputs (1 thread)", "",
             "flash traced: NumPy allocations (outputs, lse, saved tensors, gradients); runtime: "
             "the kernel's workspace (storage counters); flash / [H,S,d]: both together in units "
             "of one [heads, S, d] float32 array (constant in S means O(S d)); RSS: the process's "
             "peak resident set above its size before the call (includes allocator effects, and "
             "is the only figure for PyTorch).", ""]
    body += C.table(["S", "d", "causal", "pass", "flash traced MiB", "flash runtime MiB",
                     "flash / [H,S,d]", "flash RSS MiB", "stock traced MiB", "stock RSS MiB",
                     "torch RSS MiB"], mem_rows) + [""]
    body += _targets(summary, args.threads)
    C.write_report(args.report, "FlashAttention: runtime kernel vs stock attention vs PyTorch SDPA",
                   body, threads=args.threads)


def _targets(summary, threads) -> list[str]:
    """The issue's targets against what was measured."""
    rows = [r for r in summary if r[4] != "check"]
    lines = ["## Targets", ""]

    def verdict(ok):
        return "met" if ok else "MISSED"

    fwd1 = [r for r in rows if r[4] == "fwd" and r[3] == 1 and r[0] >= 1024 and r[6]]
    if fwd1:
        worst = min(r[6] / r[5] for r in fwd1)
        lines.append(f"- forward, 1 thread, S >= 1024, at least as fast as torch SDPA: worst ratio "
                     f"{worst:.2f}x ({verdict(worst >= 1.0)})")
    fb = [r for r in rows if r[4] == "fwd+bwd" and r[6]]
    if fb:
        worst = min(r[6] / r[5] for r in fb)
        lines.append(f"- fwd+bwd at least 0.8x torch's speed: worst ratio {worst:.2f}x over every "
                     f"S, causal mode and thread count ({verdict(worst >= 0.8)})")
    big = [r for r in rows if r[0] == max(x[0] for x in rows)]
    if big:
        worst = min(r[7] / r[5] for r in big)
        lines.append(f"- at S = {big[0][0]}, at least 5x faster than the stock attention: worst "
                     f"{worst:.1f}x ({verdict(worst >= 5.0)})")
    lines.append("- peak extra memory O(S d): see `flash / [H,S,d]` above (constant across S)")
    lines.append("")
    return lines


if __name__ == "__main__":
    main()
