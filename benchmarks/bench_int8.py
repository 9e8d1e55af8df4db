"""INT8 GEMMs of GPT-2 small's Linear layers: TinyTorch int8 against float32 and PyTorch.

Shapes: M = 1, 16, 64, 256 rows (M = 1 is one decoding step) times the three weight shapes of a
GPT-2 small block, K x N = 768 x 768 (attention projection), 768 x 3072 (MLP up), 3072 x 768
(MLP down). Each is timed, on the same float32 input, as

  TT int8     the runtime's tt_qgemm_f32 on an 8-bit pack (QuantizedLinear(..., reduce_range=False)):
              per-row dynamic u8 quantization of the input, the exact u8 x s8 int32 product on
              the weight packed once, per-channel scales and bias (what QuantizedLinear.forward
              calls; the ctypes call into a preallocated output);
  TT int8 rr  the same call on a reduce_range pack, QuantizedLinear's default: 7-bit
              activations, [0, 127], as PyTorch's dynamic Linear quantizes them; on AVX2
              this runs the vpmaddubsw kernel avx2_u7, the like-for-like rival of Torch int8;
  TT fp32     tt_sgemm, the float32 GEMM (no bias: it favours float32 slightly);
  Torch int8  torch.ao.quantization.quantize_dynamic's Linear (fbgemm / onednn: dynamic u8
              activations, s8 weights), called on a Tensor under inference_mode;
  Torch fp32  torch.nn.functional.linear;
  ORT int8    ONNX Runtime's dynamically quantized MatMul, where onnx and onnxruntime are
              installed (the report says when they are not): the layer exported by
              tinytorch.export.to_onnx, then onnxruntime.quantization.quantize_dynamic (s8
              per-channel 7-bit weights, its reduce_range; dynamic u8 activations), run by an
              InferenceSession with intra_op_num_threads = the row's threads (its run() call
              included, as users call it).

Times are medians of rounds of timed blocks (measure_rounds). GOP/s count 2 ops per
multiply-add, held against this machine's measured integer ceiling of the instructions the
active kernel runs (int8_peak.c beside this file: vpdpbusd for the VNNI kernel, vpmaddwd on zmm
for avx512bw, vpmaddwd on ymm for avx2, vpmaddubsw on ymm for avx2_u7). For M = 1 the weight read is the bound: the table
gives the time to read the int8 weights once at the copy bandwidth np.copyto reaches on an array
of the weights' size (the cache level they sit in while a model decodes one layer after the
other in this loop) and at DRAM size.

Usage: python benchmarks/bench_int8.py [--threads 1,2] [--rounds 5] [--quick] [--out PATH] [--save]
Writes build/benchmarks/bench_int8.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import importlib
import os
import subprocess

import warnings

import numpy as np

import _common as C

from tinytorch.backends import cpu as cpu_backend  # noqa: E402
from tinytorch.backends.fusion.executors import compiler_on_path  # noqa: E402
from tinytorch.core import acceleration  # noqa: E402

torch = C.optional_torch()
# quantize_dynamic is deprecated in favour of torchao (not installed); it is still PyTorch's
# shipped dynamic int8 Linear (fbgemm / onednn), the comparison the issue asks for.
warnings.filterwarnings("ignore", message=".*(deprecated|quantize_per_tensor).*")
SHAPES = [(768, 768), (768, 3072), (3072, 768)]
ROWS = [1, 16, 64, 256]


def int8_peaks(max_threads: int) -> dict:
    """{(kind, threads): GOP/s} from int8_peak.c ({} where it cannot be built or run)."""
    cc = compiler_on_path()  # the package's one C-compiler search ($CC, cc, gcc, clang)
    if cc is None:
        return {}
    exe = os.path.join(C.SCRATCH, "int8_peak")
    os.makedirs(C.SCRATCH, exist_ok=True)
    build = subprocess.run([cc, "-O2", "-pthread", "-o", exe, os.path.join(C.HERE, "int8_peak.c")],
                           capture_output=True, text=True)
    if build.returncode != 0:
        return {}
    out = subprocess.run([exe, str(max_threads), "0.3"], capture_output=True, text=True).stdout
    peaks = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "peak":
            peaks[(parts[1], int(parts[2]))] = float(parts[3])
    return peaks


def torch_contenders(x, w, bias):
    """(int8 callable, fp32 callable) of PyTorch for x (M, K) @ w (K, N) + bias."""
    k, n = w.shape
    lin = torch.nn.Linear(k, n)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
        lin.bias.copy_(torch.from_numpy(bias))
    qlin = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                  dtype=torch.qint8)
    xt = torch.from_numpy(x)
    wt, bt = lin.weight.detach(), lin.bias.detach()

    def int8():
        with torch.inference_mode():
            return qlin(xt)

    def fp32():
        with torch.inference_mode():
            return torch.nn.functional.linear(xt, wt, bt)
    return int8, fp32


def ort_available() -> bool:
    try:
        importlib.import_module("onnx")
        importlib.import_module("onnxruntime")
    except ImportError:
        return False
    return True


_ORT_MODELS = {}  # (K, N) -> (the int8 ONNX file of that Linear, the bias it was made with)


def ort_int8(x, w, bias, threads):
    """ONNX Runtime's int8 callable for x (M, K) @ w (K, N) + bias (module docstring)."""
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tinytorch.core.layers import Linear, Sequential
    from tinytorch.core.tensor import Tensor
    from tinytorch.export import to_onnx
    k, n = w.shape
    path, bias = _ORT_MODELS.get((k, n), (None, bias))
    if path is None:
        folder = os.path.join(C.SCRATCH, "bench_int8_ort")
        os.makedirs(folder, exist_ok=True)
        lin = Linear(k, n)
        lin.weight.data[...] = w
        lin.bias.data[...] = bias
        fp32 = os.path.join(folder, f"linear_{k}x{n}.onnx")
        path = os.path.join(folder, f"linear_{k}x{n}_int8.onnx")
        to_onnx(Sequential(lin), Tensor(x), fp32)
        # reduce_range=True (7-bit weights in ORT): its advice for x86 without VNNI, where its
        # u8 x s8 kernel saturates 16-bit pair sums; with 8-bit per-channel weights the output
        # was off by 7.5 % of its max here (1.3 % with reduce_range, ours 1.1 %)
        quantize_dynamic(fp32, path, weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
        _ORT_MODELS[(k, n)] = path, bias
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    feed = {name: x}
    want = x @ w + bias
    got = sess.run(None, feed)[0]
    err = float(np.abs(got - want).max() / (np.abs(want).max() + 1e-12))
    if not err < 0.05:  # int8 rounding: a few percent of the largest output at most
        raise RuntimeError(f"ORT int8 output differs from the float product by {err:.3f} of its max")
    return lambda: sess.run(None, feed)


def contenders(lib, m, w_f32, rng, threads, with_ort):
    k, n = w_f32.shape
    ql_scale = np.abs(w_f32).max(axis=0) / 127
    w_q = np.clip(np.round(w_f32 / ql_scale), -127, 127).astype(np.int8)
    ws = ql_scale.astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    packs = {}
    acceleration.quantized_pack(w_q, packs)
    address, nbytes = cpu_backend.pack_for(lib, w_q, packs)
    acceleration.quantized_pack(w_q, packs, reduce_range=True)
    rr_address, rr_nbytes = cpu_backend.pack_for(lib, w_q, packs, reduce_range=True)
    x = rng.standard_normal((m, k)).astype(np.float32)
    y8 = np.empty((m, n), np.float32)
    y32 = np.empty((m, n), np.float32)
    fns = {
        # packs=packs: the closure keeps the pack's buffer alive
        "TT int8": lambda packs=packs: lib.tt_qgemm_f32(m, n, k, x.ctypes.data, k, address, nbytes,
                                                        ws.ctypes.data, bias.ctypes.data, 0,
                                                        y8.ctypes.data, n),
        "TT int8 rr": lambda packs=packs: lib.tt_qgemm_f32(m, n, k, x.ctypes.data, k, rr_address,
                                                           rr_nbytes, ws.ctypes.data, bias.ctypes.data,
                                                           0, y8.ctypes.data, n),
        "TT fp32": lambda: lib.tt_sgemm(0, 0, m, n, k, 1.0, x.ctypes.data, k, w_f32.ctypes.data, n, 0.0,
                                        y32.ctypes.data, n),
    }
    if torch is not None:
        fns["Torch int8"], fns["Torch fp32"] = torch_contenders(x, w_f32, bias)
    if with_ort:
        fns["ORT int8"] = ort_int8(x, w_f32, bias, threads)
    return fns, w_q.nbytes, lambda: lib.tt_last_kernel_path().decode()


def main():
    ap = C.arguments(__doc__, "bench_int8.md", threads=[1, 2],
                     quick=dict(rounds=1, threads=[[1]], shapes=SHAPES[:1], rows=[1, 16]))
    ap.add_argument("--rounds", type=int, default=5)
    ap.set_defaults(shapes=SHAPES, rows=ROWS)
    args = C.parse(ap)
    lib = C.require_native()
    ok, path = acceleration.quantized_path()
    rr_ok, rr_path = acceleration.quantized_path(reduce_range=True)
    if not (ok and rr_ok):
        raise SystemExit(f"the INT8 kernels are not available: {path if not ok else rr_path}")
    peaks = int8_peaks(max(args.threads))
    # the ceiling of the instructions the active kernel runs (int8_peak.c's kinds)
    kinds = {"qgemm:avx512_vnni": "vnni", "qgemm:avx512bw": "vpmaddwd", "qgemm:avx2": "vpmaddwd_ymm",
             "qgemm:avx2_u7": "vpmaddubsw_ymm"}
    kind, rr_kind = kinds.get(path), kinds.get(rr_path)
    dram_copy = C.copy_bandwidth(nbytes=(64 if args.quick else 381) * 2 ** 20, rounds=3, block_time=0.2)
    with_ort = ort_available()
    names = (["TT int8", "TT int8 rr", "TT fp32"] + (["Torch int8", "Torch fp32"] if torch is not None else [])
             + (["ORT int8"] if with_ort else []))
    body = [f"INT8 kernel: `{path}` (8-bit activations), `{rr_path}` for TT int8 rr (reduce_range, "
            f"QuantizedLinear's default: 7-bit activations, as Torch int8); integer ceiling measured by benchmarks/int8_peak.c "
            f"({kind}): " + ", ".join(f"{t} thread{'s' if t > 1 else ''} {peaks[(kind, t)]:.0f} GOP/s"
                                      for t in args.threads if (kind, t) in peaks)
            + ("" if kind != "vpmaddwd_ymm" or ("vpmaddubsw_ymm", 1) not in peaks else
               f"; vpmaddubsw on ymm (u8 x s8, 16-bit pair sums that saturate for 8-bit "
               f"activations, so exact only for the 7-bit ones of reduce_range; avx2_u7's ceiling): "
               + ", ".join(f"{t} thread{'s' if t > 1 else ''} {peaks[('vpmaddubsw_ymm', t)]:.0f} GOP/s"
                           for t in args.threads if ("vpmaddubsw_ymm", t) in peaks))
            + f"; DRAM copy bandwidth {dram_copy:.1f} GB/s (np.copyto, read + write).",
            "ONNX Runtime: " + (f"onnxruntime {importlib.import_module('onnxruntime').__version__}, "
                                "the ORT int8 column (quantize_dynamic, per_channel=True, reduce_range=True: "
                                "7-bit s8 weights, ORT's advice for x86 without VNNI, whose u8 x s8 kernel "
                                "saturates 16-bit pair sums: with 8-bit per-channel weights its output was "
                                "off by 7.5 % of the output's max on this machine's AVX2, 1.3 % with it)." if with_ort
                                else "onnx / onnxruntime not installed, so no ORT column (the onnx extra)."),
            "", "Times in microseconds (medians); GOP/s = 2 M N K / time.", ""]
    summary = []
    rng = np.random.default_rng(0)
    weights = {s: rng.standard_normal(s).astype(np.float32) / np.sqrt(s[0]) for s in args.shapes}
    copy_same = {s: C.copy_bandwidth(nbytes=s[0] * s[1], rounds=3, block_time=0.1) for s in args.shapes}
    for threads in args.threads:
        rows_out = []
        with C.Threads(threads):
            for shape in args.shapes:
                k, n = shape
                for m in args.rows:
                    fns, wbytes, last = contenders(lib, m, weights[shape], rng, threads, with_ort)
                    t = C.measure_rounds(fns, args.rounds, block_time=0.1)
                    for nm, want in (("TT int8", path), ("TT int8 rr", rr_path)):
                        status = fns[nm]()
                        assert status == 0 and last() == want, (nm, status, last(), lib.tt_last_error())
                    row = [m, f"{k}x{n}"] + [t[nm] * 1e6 for nm in names]
                    for nm, knd in (("TT int8", kind), ("TT int8 rr", rr_kind)):
                        gops = 2 * m * n * k / t[nm] / 1e9
                        peak = peaks.get((knd, threads))
                        row += [gops, f"{100 * gops / peak:.0f}%" if peak else "n/a",
                                f"{t['TT fp32'] / t[nm]:.2f}x",
                                f"{t['Torch int8'] / t[nm]:.2f}x" if torch is not None else "n/a"]
                    if with_ort:
                        row.append(f"{t['ORT int8'] / t['TT int8 rr']:.2f}x")
                    if m == 1:
                        read_same = 2 * wbytes / (copy_same[shape] * 1e9)  # copy GB/s counts read + write
                        read_dram = 2 * wbytes / (dram_copy * 1e9)
                        row.append(f"{read_same * 1e6:.1f} / {read_dram * 1e6:.1f} us: "
                                   f"{t['TT int8'] / read_same:.2f}x / {t['TT int8'] / read_dram:.2f}x")
                    else:
                        row.append("")
                    rows_out.append(row)
                    print(f"{threads}T M={m} {k}x{n}: " + ", ".join(f"{nm} {t[nm] * 1e6:.1f} us" for nm in names),
                          flush=True)
        body += [f"### {threads} thread{'s' if threads > 1 else ''}", ""]
        body += C.table(["M", "K x N"] + [f"{nm} us" for nm in names] +
                        ["TT int8 GOP/s", "of int peak", "TT int8 vs TT fp32", "TT int8 vs Torch int8",
                         "TT int8 rr GOP/s", "rr of int peak", "TT int8 rr vs TT fp32",
                         "TT int8 rr vs Torch int8"] + (["TT int8 rr vs ORT int8"] if with_ort else []) + [
                         "M = 1: weight read at copy bw (same size / DRAM), TT int8 / that"], rows_out)
        body.append("")
        first = 2 + len(names)  # the first column after the times
        for label, at in (("TT int8", first), ("TT int8 rr", first + 4)):
            big = [r for r in rows_out if r[0] >= 16]
            if not big:
                continue
            speedups = [float(r[at + 2].rstrip("x")) for r in big]
            vs_torch = [float(r[at + 3].rstrip("x")) for r in big if r[at + 3] != "n/a"]
            all_torch = [float(r[at + 3].rstrip("x")) for r in rows_out if r[at + 3] != "n/a"]
            summary.append(f"{threads} thread(s), M >= 16: {label} is {min(speedups):.2f}x to "
                           f"{max(speedups):.2f}x TT fp32"
                           + (f"; {min(vs_torch):.2f}x to {max(vs_torch):.2f}x Torch int8 "
                              f"(all M: min {min(all_torch):.2f}x)" if vs_torch else ""))
        if with_ort:
            vs_ort = [float(r[first + 8].rstrip("x")) for r in rows_out]
            summary.append(f"{threads} thread(s), every M: TT int8 rr is {min(vs_ort):.2f}x to "
                           f"{max(vs_ort):.2f}x ORT int8")
    body = ["## Summary", ""] + [f"- {s}" for s in summary] + [""] + body
    C.write_report(args.report, "INT8 GEMMs on GPT-2 small shapes", body, threads=args.threads)


if __name__ == "__main__":
    main()
