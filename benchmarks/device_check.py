"""device_check: on a machine with an NVIDIA GPU, every GPU kernel's parity test and one
table of measurements, written as markdown.

    python benchmarks/device_check.py --out benchmarks/results/device_check.md [--quick]

What it runs (nothing is installed; what the machine lacks is reported and skipped):
  parity    the Triton fused bias-GELU forward and backward (device arrays and host arrays),
            the Triton FlashAttention forward
            and every CUDA SGEMM stage, against float64 NumPy on awkward shapes
  measured  device copy bandwidth (device-to-device copy, the roofline of an elementwise
            kernel); the fused GELU forward and backward at 16M and 64M elements in GB/s and
            % of that bandwidth; the SGEMM stages and cuBLAS FP32 (through PyTorch, TF32 off,
            or CuPy) at N = 1024..8192 in TFLOP/s and % of cuBLAS; the offload arithmetic:
            per N the host<->device copy time against the kernel time and the CPU GEMM
            (libtinytorch) time, and the break-even N where copy + GPU kernel beats the CPU
  targets   GELU >= 80% of copy bandwidth at 16M+ elements; register-tiled SGEMM >= 50% of
            cuBLAS at N = 4096
Timing: CUDA events (PyTorch or CuPy), medians of a few runs after a warm-up; a slow stage
is not run at a size whose projected time exceeds the budget (the table says so), so the
whole check stays under 5 minutes.

Exit status: 0 every parity test passed; 1 a parity test failed; 2 no NVIDIA GPU (or the
Triton interpreter was asked for): nothing is measured and --out is not written.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))  # a source checkout works too

EXIT_OK, EXIT_PARITY_FAILED, EXIT_NO_GPU = 0, 1, 2
GELU_SIZES = ((4096, 4096), (8192, 8192))            # 16M and 64M elements
COPY_ELEMENTS = (64 * 2 ** 20, 16 * 2 ** 20)          # copy-bandwidth buffer: full, --quick
GEMM_SIZES = (1024, 2048, 4096, 8192)
OFFLOAD_SIZES = (128, 256, 512, 1024, 2048, 4096)
STAGE_BUDGET_S = 20.0                                 # per stage and size, projected


# --------------------------------------------------------------------------------------
# Pure helpers (tested without a GPU)
# --------------------------------------------------------------------------------------

def gemm_flops(n: int) -> float:
    """FLOPs of an N x N by N x N product (one multiply and one add per term).

    Args:
        n: the matrix size N.
    """
    return 2.0 * n ** 3


def gelu_bytes(elements: int, direction: str, itemsize: int = 4) -> int:
    """DRAM bytes a fused bias-GELU must move: forward reads x, writes y; backward reads x
    and grad, writes grad_x (the bias and the partial sums are negligible).

    Args:
        elements: number of elements of x.
        direction: "forward" or "backward".
        itemsize: bytes per element.
    """
    return (2 if direction == "forward" else 3) * elements * itemsize


def break_even(sizes, cpu_ms, offload_ms):
    """The smallest size whose offloaded time (copies + GPU kernel) beats the CPU, or None.

    Args:
        sizes: increasing sizes.
        cpu_ms: CPU time per size.
        offload_ms: copy + kernel time per size.
    """
    for n, cpu, gpu in zip(sizes, cpu_ms, offload_ms):
        if gpu < cpu:
            return n
    return None


def _elements(n: int) -> str:
    return f"{n / 2 ** 20:.0f}M elements" if n >= 2 ** 20 else f"{n:,} elements"


def markdown_table(header, rows) -> str:
    """A markdown table.

    Args:
        header: column titles.
        rows: sequences of cells (converted with str).
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def projected_seconds(last_n: int, last_s: float, next_n: int) -> float:
    """Time of a GEMM at ``next_n`` projected from one at ``last_n`` (cubic in N).

    Args:
        last_n: size measured.
        last_s: its time in seconds.
        next_n: size to project to.
    """
    return last_s * (next_n / last_n) ** 3


# --------------------------------------------------------------------------------------
# The GPU side
# --------------------------------------------------------------------------------------

class Device:
    """The device-array library in use (PyTorch with CUDA, else CuPy): allocation, copies,
    event timing. ``name`` is "torch", "cupy" or None (then only host-array paths run)."""

    def __init__(self):
        self.name, self.lib = None, None
        try:
            import torch
            if torch.cuda.is_available():
                self.name, self.lib = "torch", torch
                torch.backends.cuda.matmul.allow_tf32 = False   # cuBLAS FP32, not TF32
                return
        except ImportError:
            pass
        try:
            import cupy
            self.name, self.lib = "cupy", cupy
        except ImportError:
            pass

    def to_device(self, a: np.ndarray):
        """Copy ``a`` to the device.

        Args:
            a: host array.
        """
        if self.name == "torch":
            return self.lib.from_numpy(np.ascontiguousarray(a)).cuda()
        return self.lib.asarray(a)

    def to_host(self, d) -> np.ndarray:
        """Copy a device array back.

        Args:
            d: device array.
        """
        return d.cpu().numpy() if self.name == "torch" else self.lib.asnumpy(d)

    def ptr(self, d) -> int:
        """Device address of ``d``.

        Args:
            d: device array.
        """
        return d.data_ptr() if self.name == "torch" else d.data.ptr

    def empty(self, shape):
        """An uninitialised float32 device array.

        Args:
            shape: its shape.
        """
        if self.name == "torch":
            return self.lib.empty(shape, dtype=self.lib.float32, device="cuda")
        return self.lib.empty(shape, dtype=self.lib.float32)

    def randn(self, shape):
        """A float32 device array of standard normal values.

        Args:
            shape: its shape.
        """
        if self.name == "torch":
            return self.lib.randn(shape, dtype=self.lib.float32, device="cuda")
        return self.lib.random.standard_normal(shape, dtype=self.lib.float32)

    def matmul(self, a, b):
        """cuBLAS FP32 through the library.

        Args:
            a: left device matrix.
            b: right device matrix.
        """
        return a @ b

    def median_ms(self, fn, repeats: int = 5, warmup: int = 1, inner: int = 1) -> float:
        """Median milliseconds of one ``fn()`` by CUDA events; each timed run enqueues
        ``inner`` calls back to back, so short kernels are not timed as launch gaps.

        Args:
            fn: the work.
            repeats: timed runs.
            warmup: untimed runs first.
            inner: calls per timed run.
        """
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeats):
            if self.name == "torch":
                start, end = self.lib.cuda.Event(enable_timing=True), self.lib.cuda.Event(enable_timing=True)
            else:
                start, end = self.lib.cuda.Event(), self.lib.cuda.Event()
            start.record()
            for _ in range(inner):
                fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end) if self.name == "torch" else self.lib.cuda.get_elapsed_time(start, end)
            times.append(ms / inner)
        return statistics.median(times)


class Check:
    """Collects parity results and measurement rows, and renders the markdown."""

    def __init__(self):
        self.parity, self.rows, self.notes = [], [], []

    def parity_result(self, name: str, err: float, tol: float) -> None:
        """Record one parity test.

        Args:
            name: what was compared.
            err: max abs error scaled as compared.
            tol: the tolerance.
        """
        ok = bool(np.isfinite(err) and err <= tol)
        self.parity.append((name, f"{err:.2e}", f"{tol:.0e}", "pass" if ok else "FAIL"))
        print(f"  parity {name}: {'pass' if ok else 'FAIL'} (err {err:.2e}, tol {tol:.0e})", flush=True)

    def row(self, *cells) -> None:
        """Record one measurement row.

        Args:
            cells: measurement, size, time, rate, versus anchor.
        """
        self.rows.append(cells)
        print("  " + " | ".join(str(c) for c in cells), flush=True)

    @property
    def failed(self) -> bool:
        """True when some parity test failed."""
        return any(p[3] != "pass" for p in self.parity)


def _rel_err(out, ref) -> float:
    ref = np.asarray(ref, np.float64)
    return float(np.max(np.abs(np.asarray(out, np.float64) - ref) / (1.0 + np.abs(ref)))) if ref.size else 0.0


def check_triton(dev: Device, check: Check, quick: bool) -> None:
    """Parity and bandwidth of the Triton fused GELU.

    Args:
        dev: the device-array library.
        check: where results go.
        quick: smaller sizes.
    """
    from tinytorch.backends.numpy_fallback import bias_gelu, bias_gelu_backward
    from tinytorch.backends.triton import gelu as triton_gelu_arrays
    from tinytorch.backends.triton.buffers import CupyBuffer
    from tinytorch.extensions import triton_gelu as tg
    if not tg.has_triton_support() or tg.triton_build_info()["mode"] != "gpu":
        check.notes.append("Triton fused GELU not run: " + tg.triton_build_info()["detail"])
        return
    rng = np.random.default_rng(0)
    for shape in ((1, 1), (7, 13), (257, 1031), (3, 5, 4099)):
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        b = rng.standard_normal(shape[-1]).astype(np.float32)
        g = rng.standard_normal(shape).astype(np.float32)
        ry = bias_gelu(x.astype(np.float64), b.astype(np.float64))
        rgx, rgb = bias_gelu_backward(x.astype(np.float64), b.astype(np.float64), g.astype(np.float64))
        check.parity_result(f"triton gelu fwd host {shape}", _rel_err(tg.triton_fused_gelu(x, b), ry), 1e-5)
        gx, gb = tg.triton_fused_gelu_backward(x, b, g)
        check.parity_result(f"triton gelu bwd host {shape}", max(_rel_err(gx, rgx), _rel_err(gb, rgb) / 10), 1e-5)
        if dev.name is not None:
            dx, db, dg = dev.to_device(x), dev.to_device(b), dev.to_device(g)
            check.parity_result(f"triton gelu fwd device {shape}",
                                _rel_err(dev.to_host(tg.triton_fused_gelu(dx, db)), ry), 1e-5)
            dgx, dgb = tg.triton_fused_gelu_backward(dx, db, dg)
            check.parity_result(f"triton gelu bwd device {shape}",
                                max(_rel_err(dev.to_host(dgx), rgx), _rel_err(dev.to_host(dgb), rgb) / 10), 1e-5)
    from tinytorch.backends.attention_reference import attention_forward_reference
    from tinytorch.extensions.triton_attention import triton_flash_attention
    for (heads, L, S, d), causal in (((2, 77, 131, 64), False), ((3, 200, 96, 40), "bottom_right")):
        q = rng.standard_normal((heads, L, d)).astype(np.float32)
        k = rng.standard_normal((heads, S, d)).astype(np.float32)
        v = rng.standard_normal((heads, S, d)).astype(np.float32)
        ref, _ = attention_forward_reference(*(a.astype(np.float64) for a in (q, k, v)), causal=causal)
        check.parity_result(f"triton flash attention fwd {heads}x{L}x{S}x{d} causal={causal}",
                            _rel_err(triton_flash_attention(q, k, v, causal=causal), ref), 1e-5)
    if dev.name is None:
        check.notes.append("GELU bandwidth not measured: neither PyTorch (CUDA) nor CuPy is installed")
        return
    n_copy = COPY_ELEMENTS[1 if quick else 0]
    src, dst = dev.randn((n_copy,)), dev.empty((n_copy,))
    copy = (lambda: dst.copy_(src)) if dev.name == "torch" else (lambda: dst.__setitem__(slice(None), src))
    copy_ms = dev.median_ms(copy, repeats=5, inner=10)
    copy_gbs = 2 * n_copy * 4 / copy_ms / 1e6
    check.row("device copy (d2d)", _elements(n_copy), f"{copy_ms:.3f}", f"{copy_gbs:.0f} GB/s", "100% (the roofline)")
    kernels = triton_gelu_arrays.kernels()
    wrap = (lambda d: d) if dev.name == "torch" else CupyBuffer
    for rows, cols in (GELU_SIZES[:1] if quick else GELU_SIZES):
        x, b, g, y = dev.randn((rows, cols)), dev.randn((cols,)), dev.randn((rows, cols)), dev.empty((rows, cols))
        bm, bd, warps = triton_gelu_arrays.blocks(rows, cols, "gpu")
        partial, gb = dev.empty((-(-rows // bm), cols)), dev.empty((cols,))
        n = rows * cols
        # the launchers on preallocated buffers: the kernels' own time, not the wrapper's
        forward = (lambda: kernels.launch_forward(wrap(x), wrap(b), wrap(y), rows, cols, cols, cols, bm, bd, warps))
        backward = (lambda: kernels.launch_backward(wrap(x), wrap(b), wrap(g), wrap(y), wrap(partial), wrap(gb),
                                                    rows, cols, cols, cols, cols, bm, bd, warps))
        for direction, fn in (("forward", forward), ("backward", backward)):
            ms = dev.median_ms(fn, repeats=5, warmup=2, inner=10)
            gbs = gelu_bytes(n, direction) / ms / 1e6
            check.row(f"triton fused GELU {direction}", _elements(n), f"{ms:.3f}", f"{gbs:.0f} GB/s",
                      f"{100 * gbs / copy_gbs:.0f}% of copy (target 80%)")
        host = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
        hb = np.zeros(cols, np.float32)
        tg.triton_fused_gelu(host, hb)
        tg.triton_fused_gelu(host, hb)
        run = tg.triton_last_run()
        copies = 1e3 * (run["copy_in_s"] + run["copy_out_s"])
        check.row("offload: GELU from host", _elements(n), f"copy {copies:.2f} + kernel {1e3 * run['kernel_s']:.2f}",
                  "", f"copies are {copies / max(1e3 * run['kernel_s'], 1e-9):.0f}x the kernel")


def check_cuda(dev: Device, check: Check, quick: bool) -> None:
    """Parity of every SGEMM stage, the ladder vs cuBLAS, and the offload arithmetic.

    Args:
        dev: the device-array library.
        check: where results go.
        quick: smaller sizes.
    """
    import ctypes

    from tinytorch import _native
    from tinytorch.core import acceleration
    from tinytorch.extensions import cuda_ops
    if not cuda_ops.has_cuda_support():
        check.notes.append("CUDA SGEMM stages not run: " + cuda_ops.cuda_build_info()["detail"])
        return
    lib = _native.load_cuda()[0]
    rng = np.random.default_rng(2)
    for m, k, n in ((1, 1, 1), (7, 13, 5), (129, 65, 33), (300, 257, 131), (1024, 1024, 1024)):
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        for stage in cuda_ops.STAGES:
            out = cuda_ops.cuda_matmul(a, b, stage=stage)
            err = float(np.max(np.abs(out - ref))) / np.sqrt(k)
            check.parity_result(f"cuda sgemm {stage} {m}x{k}x{n}", err, 1e-5)
    sizes = GEMM_SIZES[:2] if quick else GEMM_SIZES
    cublas = {}
    if dev.name is not None:
        for size in sizes:
            a, b = dev.randn((size, size)), dev.randn((size, size))
            ms = dev.median_ms(lambda: dev.matmul(a, b), repeats=5, inner=3 if size <= 4096 else 1)
            cublas[size] = ms
            check.row("cuBLAS FP32 (anchor)", size, f"{ms:.2f}", f"{gemm_flops(size) / ms / 1e9:.3g} TFLOP/s", "100%")
        for stage_index, stage in enumerate(cuda_ops.STAGES):
            last = None
            for size in sizes:
                if last is not None and projected_seconds(last[0], last[1], size) > STAGE_BUDGET_S:
                    check.row(f"sgemm {stage}", size, "skipped", "", f"projected {projected_seconds(last[0], last[1], size):.0f} s")
                    continue
                a, b, c = dev.randn((size, size)), dev.randn((size, size)), dev.empty((size, size))
                kernel = ctypes.c_float(0)
                times = []
                for _ in range(3 if size <= 4096 else 1):
                    _native.check(lib.tt_cuda_sgemm_device(stage_index, size, size, size, dev.ptr(a), dev.ptr(b),
                                                        dev.ptr(c), ctypes.byref(kernel)), "sgemm", lib)
                    times.append(kernel.value)
                ms = statistics.median(times)
                last = (size, ms / 1e3)
                pct = f"{100 * cublas[size] / ms:.0f}% of cuBLAS" + (" (target 50%)" if stage == "register" and size == 4096 else "")
                check.row(f"sgemm {stage}", size, f"{ms:.2f}", f"{gemm_flops(size) / ms / 1e9:.3g} TFLOP/s", pct)
    else:
        check.notes.append("ladder vs cuBLAS not measured: neither PyTorch (CUDA) nor CuPy is installed")
    # offload arithmetic: host arrays, copies in and out vs the kernel vs the CPU GEMM
    cpu_ms, offload_ms, used = [], [], []
    for size in (OFFLOAD_SIZES[:4] if quick else OFFLOAD_SIZES):
        a = rng.standard_normal((size, size)).astype(np.float32)
        b = rng.standard_normal((size, size)).astype(np.float32)
        c = np.empty((size, size), np.float32)
        times = (ctypes.c_float * 3)()
        runs = []
        for _ in range(3):
            _native.check(lib.tt_cuda_sgemm(3, size, size, size, a.ctypes.data, b.ctypes.data,
                                         c.ctypes.data, times), "sgemm", lib)
            runs.append(tuple(times))
        h2d, kern, d2h = (statistics.median(r[i] for r in runs) for i in range(3))
        acceleration.matmul(a, b)
        t = []
        for _ in range(3):
            t0 = time.perf_counter()
            acceleration.matmul(a, b)
            t.append(1e3 * (time.perf_counter() - t0))
        cpu = statistics.median(t)
        cpu_ms.append(cpu)
        offload_ms.append(h2d + kern + d2h)
        used.append(size)
        check.row("offload: sgemm register from host", size,
                  f"copy {h2d + d2h:.2f} + kernel {kern:.2f} = {h2d + kern + d2h:.2f}",
                  f"CPU {acceleration.last_path()} {cpu:.2f} ms",
                  f"{cpu / (h2d + kern + d2h):.2f}x; N/6 = {size / 6:.0f} FLOP/byte")
    even = break_even(used, cpu_ms, offload_ms)
    check.row("offload break-even N", "", "", "", f"N = {even}" if even else f"not reached up to N = {used[-1]}")


def machine_description() -> str:
    """One paragraph: GPU, CPU, logical CPUs, versions."""
    import ctypes

    from tinytorch import _native
    gpu = "unknown GPU"
    lib = _native.load_cuda()[0]
    if lib is not None:
        buf = ctypes.create_string_buffer(256)
        if lib.tt_cuda_device_name(buf, 256) == 0:
            gpu = buf.value.decode()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = [f"Python {platform.python_version()}", f"NumPy {np.__version__}"]
    for name in ("torch", "cupy", "triton"):
        try:
            versions.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            versions.append(f"{name} not installed")
    return f"GPU: {gpu}. CPU: {cpu}, {os.cpu_count()} logical CPUs. " + ", ".join(versions) + "."


def main(argv=None) -> int:
    """Run the check; see the module docstring for the exit status.

    Args:
        argv: command-line arguments (default sys.argv[1:]).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the results as markdown to this path")
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("device_check: TRITON_INTERPRET=1 is set; this check measures a real GPU. Unset it. "
              "Nothing was measured.", file=sys.stderr)
        return EXIT_NO_GPU
    from tinytorch.backends import devices
    gpu, why = devices.nvidia_gpu()
    if not gpu:
        print(f"device_check: no NVIDIA GPU on this machine ({why}). Nothing was measured"
              + (f" and {args.out} was not written." if args.out else "."), file=sys.stderr)
        return EXIT_NO_GPU
    started = time.perf_counter()
    dev, check = Device(), Check()
    print(f"device_check: {why}; device arrays through {dev.name or 'nothing (host paths only)'}", flush=True)
    check_triton(dev, check, args.quick)
    check_cuda(dev, check, args.quick)
    machine = machine_description()
    text = "\n\n".join([
        "# Device check (benchmarks/device_check.py)",
        machine + f" Run took {time.perf_counter() - started:.0f} s"
        + (" (--quick)." if args.quick else "."),
        "## Parity against float64",
        markdown_table(("test", "max error", "tolerance", "result"), check.parity) if check.parity else "(none ran)",
        "## Measurements",
        markdown_table(("measurement", "size", "time (ms)", "rate", "versus anchor"), check.rows)
        if check.rows else "(none)",
    ] + (["## Not run", "\n".join("- " + n for n in check.notes)] if check.notes else [])) + "\n"
    print("\n" + text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    return EXIT_PARITY_FAILED if check.failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
