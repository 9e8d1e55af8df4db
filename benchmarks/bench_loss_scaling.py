"""Loss-scaling and float16 training scorecard, through real float16 backprop.

1. Underflow table: a float16 Linear whose float32 loss is ``g * sum(x W)`` with x = 1, so
   the exact weight gradient is g, for g = 1e-3, 1e-7, 2e-9. Backprop runs in float16 (the
   loss-to-logits cast, the float16 GEMM of the weight gradient); shown: the raw float16
   gradient, the float16 gradient with S = 65536, the float32 gradient after unscaling, and
   the errors.
2. Training demo on the 8x8 digits (MLP 64-128-10, SGD momentum 0.9, batch 128): float32,
   float16 with float32 master weights but no scaling, and float16 with DynamicLossScaler.
   The loss is multiplied by w = 1e-8 and the learning rate divided by w (the same run as the
   unweighted one in exact arithmetic, since SGD is linear in the gradient), which puts the
   gradients near 1e-10, the regime float16 flushes to zero.
3. Induced overflow: float16 + DynamicLossScaler started at S = 2^24 (gradients times S
   exceed 65504), plus a one-step loss spike (x 1e5) later: the log shows skipped steps, the
   scale backing off and growing back after ``growth_interval`` clean steps.
4. Time split of one float16 and one float32 training step (MLP 64-512-512-10, batch 256): the
   share spent in the GEMM dispatch point (``core.acceleration``), which is what a native
   float16 GEMM would speed up.

Single-threaded by default (--threads): on a shared 2-core machine, spinning BLAS/OpenMP
threads distort the timings.

Usage: python benchmarks/bench_loss_scaling.py [--steps 150] [--threads 1] [--quick] [--out PATH]
Writes build/benchmarks/bench_loss_scaling.md (benchmarks/results/ with --save, or --out).
"""
from __future__ import annotations

import time
import warnings

import numpy as np

import _common as C

from tinytorch.core import acceleration  # noqa: E402  (path set up by _common)
from tinytorch.core import random as tt_random  # noqa: E402
from tinytorch.core.activations import ReLU  # noqa: E402
from tinytorch.core.autograd import no_grad  # noqa: E402
from tinytorch.core.layers import Linear, Sequential  # noqa: E402
from tinytorch.core.losses import cross_entropy  # noqa: E402
from tinytorch.core.optimizers import SGD, AdamW  # noqa: E402
from tinytorch.core.tensor import Tensor  # noqa: E402
from tinytorch.data import digits_split  # noqa: E402
from tinytorch.extensions import DynamicLossScaler, MixedPrecisionOptimizer, to_half  # noqa: E402
from tinytorch.perf.benchmarking import precise_timer  # noqa: E402
from tinytorch.scorecard.loss_scaling import half_weight_grad, underflow_status  # noqa: E402

warnings.filterwarnings("ignore", category=RuntimeWarning)  # overflow is induced on purpose


# ----------------------------------------------------------------------------- 1. underflow table

def underflow_table(scale=65536.0):
    lines = ["| True gradient | Raw float16 backprop | Status | Scaled float16 (S = 65536) | "
             "Unscaled (float32) | Error raw | Error scaled |", "|---:|---:|---|---:|---:|---:|---:|"]
    path = ""
    for g in (1e-3, 1e-7, 2e-9):
        raw, _, _ = half_weight_grad(g)
        scaled16, unscaled, path = half_weight_grad(g, scale)
        status = underflow_status(raw)
        lines.append(f"| {g:.1e} | {raw:.4e} | {status} | {scaled16:.6g} | {unscaled:.4e} | "
                     f"{100 * abs(raw - g) / g:.2f} % | {100 * abs(unscaled - g) / g:.3f} % |")
    return "\n".join(lines), path


# ----------------------------------------------------------------------------- 2./3. training

def digits():
    x_tr, y_tr, x_te, y_te = digits_split(0.2, seed=0)
    return x_tr.reshape(len(x_tr), -1), y_tr, x_te.reshape(len(x_te), -1), y_te


def mlp(hidden=(128,), seed=0):
    tt_random.manual_seed(seed)
    sizes = (64,) + tuple(hidden) + (10,)
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(ReLU())
    return Sequential(layers)


def accuracy(model, x, y, half):
    with no_grad():
        logits = model(Tensor(x.astype(np.float16 if half else np.float32))).data
    return float((logits.argmax(-1) == y).mean())


def train(mode, steps, loss_weight, init_scale=2.0 ** 16, growth_interval=50, spike_at=None, log_every=None):
    x_tr, y_tr, x_te, y_te = digits()
    model = mlp()
    half = mode != "fp32"
    # SGD is linear in the gradient: loss * w with lr / w is the same run as the unweighted loss
    # in exact arithmetic, so float32 is the reference trajectory for every w.
    lr = 0.05 / loss_weight
    if half:
        to_half(model)
        opt = MixedPrecisionOptimizer(model.parameters(), SGD, lr=lr, momentum=0.9)
    else:
        opt = SGD(model.parameters(), lr=lr, momentum=0.9)
    scaler = DynamicLossScaler(init_scale, growth_interval=growth_interval) if mode == "fp16+dynamic" else None
    rng = np.random.default_rng(1)
    losses, log = [], []
    for step in range(steps):
        idx = rng.integers(0, len(x_tr), 128)
        xb = Tensor(x_tr[idx].astype(np.float16 if half else np.float32))
        opt.zero_grad()
        loss = cross_entropy(model(xb).astype(np.float32), y_tr[idx])
        losses.append(loss.item())
        weight = loss_weight * (1e5 if step == spike_at else 1.0)
        weighted = loss * weight
        if scaler is None:
            weighted.backward()
            opt.step()
        else:
            scale_before = scaler.get_scale()
            scaler.scale(weighted).backward()
            scaler.step(opt)
            skipped = scaler.history[-1]["skipped"]
            scaler.update()
            if log_every and (skipped or scaler.get_scale() != scale_before or step % log_every == 0):
                event = ("overflow: step skipped, scale halved" if skipped else
                         "scale grown after clean interval" if scaler.get_scale() > scale_before else "")
                if step == spike_at:
                    event += " (loss spike x1e5 injected)"
                log.append(f"step {step:4d}  loss {losses[-1]:.4f}  scale {scale_before:>12,.0f} -> "
                           f"{scaler.get_scale():>12,.0f}  {event}")
    return np.array(losses), accuracy(model, x_te, y_te, half), scaler, log


# ----------------------------------------------------------------------------- 4. time split

class GemmTimer:
    """Wraps the GEMM entry points of core.acceleration and sums their wall time."""

    def __init__(self):
        self.total = 0.0
        self.calls = 0
        self._depth = 0

    def _wrap(self, fn):
        def timed(*args, **kwargs):
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.total += time.perf_counter() - t0
                self.calls += 1
                self._depth -= 1
        return timed

    def __enter__(self):
        self.saved = {name: getattr(acceleration, name) for name in ("gemm", "matmul")}
        for name, fn in self.saved.items():
            setattr(acceleration, name, self._wrap(fn))
        return self

    def __exit__(self, *exc):
        for name, fn in self.saved.items():
            setattr(acceleration, name, fn)
        return False


def time_split(repeats=5):
    x_tr, y_tr, _, _ = digits()
    rows = []
    for mode in ("fp32", "fp16"):
        model = mlp(hidden=(512, 512), seed=3)
        if mode == "fp16":
            to_half(model)
            opt = MixedPrecisionOptimizer(model.parameters(), AdamW, lr=1e-3)
            scaler = DynamicLossScaler()
        else:
            opt = AdamW(model.parameters(), lr=1e-3)
            scaler = None
        xb = Tensor(x_tr[:256].astype(np.float16 if mode == "fp16" else np.float32))
        yb = y_tr[:256]

        def step():
            opt.zero_grad()
            loss = cross_entropy(model(xb).astype(np.float32), yb)
            if scaler is None:
                loss.backward()
                opt.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
        step()  # warm-up
        totals, gemms = [], []
        for _ in range(repeats):
            with GemmTimer() as gt, precise_timer() as t:
                step()
            totals.append(t.elapsed)
            gemms.append(gt.total)
        path = acceleration.last_path()
        rows.append((mode, float(np.median(totals)), float(np.median(gemms)), path))
    # raw NumPy GEMM throughput for the same shape in both dtypes
    a32 = np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32)
    b32 = np.random.default_rng(1).standard_normal((512, 512)).astype(np.float32)
    rates = {}
    for dt in (np.float32, np.float16):
        a, b = a32.astype(dt), b32.astype(dt)
        a @ b
        with precise_timer() as t:
            for _ in range(3):
                a @ b
        rates[np.dtype(dt).name] = 3 * 2 * 256 * 512 * 512 / t.elapsed / 1e9
    return rows, rates


def main():
    ap = C.arguments(__doc__, "bench_loss_scaling.md", threads=1, quick=dict(steps=30))
    ap.add_argument("--steps", type=int, default=150)
    args = C.parse(ap)
    with C.Threads(args.threads):
        run_and_report(args)


def run_and_report(args):
    print("1. underflow table", flush=True)
    table1, path = underflow_table()
    print(table1)

    print("2. training demo", flush=True)
    runs = {}
    for mode in ("fp32", "fp16", "fp16+dynamic"):
        losses, acc, scaler, _ = train(mode, args.steps, loss_weight=1e-8, init_scale=2.0 ** 24)
        runs[mode] = (losses, acc, scaler)
    checkpoints = sorted({0, 10, 25, 50, 100, args.steps - 1} & set(range(args.steps)))
    lines = ["| Step | float32 | float16, no scaling | float16 + DynamicLossScaler |", "|---:|---:|---:|---:|"]
    for s in checkpoints:
        lines.append(f"| {s} | " + " | ".join(f"{runs[m][0][s]:.4f}" for m in ("fp32", "fp16", "fp16+dynamic")) + " |")
    lines.append("| test accuracy | " + " | ".join(f"{100 * runs[m][1]:.1f} %" for m in ("fp32", "fp16", "fp16+dynamic"))
                 + " |")
    dyn = runs["fp16+dynamic"][2]
    gap = float(np.max(np.abs(runs["fp16+dynamic"][0] - runs["fp32"][0])))
    table2 = "\n".join(lines)
    print(table2)

    print("3. induced overflow", flush=True)
    losses3, acc3, scaler3, log = train("fp16+dynamic", args.steps, loss_weight=1.0, init_scale=2.0 ** 24,
                                        growth_interval=25, spike_at=args.steps // 2, log_every=25)
    print("\n".join(log))

    print("4. time split", flush=True)
    split, rates = time_split()
    lines4 = ["| Step | Total | In GEMM dispatch (core.acceleration) | Share | GEMM path |", "|---|---:|---:|---:|---|"]
    for mode, total, gemm, p in split:
        lines4.append(f"| {mode} | {total * 1e3:.1f} ms | {gemm * 1e3:.1f} ms | {100 * gemm / total:.0f} % | {p} |")
    table4 = "\n".join(lines4)
    print(table4, rates)
    fp32_total, fp16_total = split[0][1], split[1][1]
    fp16_gemm = split[1][2]
    C.write_report(args.report, "Loss scaling and float16 training scorecard", [
        "## 1. Small gradients through real float16 backprop", "",
        "Float16 `Linear(4, 3)`, loss computed in float32 as `g * sum(x W)` with x = 1 (so dL/dW = g exactly), "
        "cast to float16 at the model output; the weight gradient is a float16 GEMM "
        f"(path: `{path}`); unscaling happens in float32 master gradients (`MixedPrecisionOptimizer`).", "",
        table1, "",
        "Float16 has subnormals, so 1e-7 does not become exactly zero: it rounds to 2 x 2^-24 = 1.19e-7, a 19 % "
        "error (the extension guide's table lists it as zero). 2e-9 is below half the smallest subnormal and "
        "flushes to zero. With S = 65536 all three land in float16's normal range and the only error left is "
        "float16 rounding of the scaled value (at most 2^-11 relative).", "",
        f"## 2. Training on digits with gradients in the underflow range ({args.steps} steps)", "",
        "MLP 64-128-10, SGD (momentum 0.9, lr 0.05 / w), batch 128, loss multiplied by w = 1e-8; the dynamic "
        "scaler starts at 2^24 with growth_interval 50. Cross-entropy (unweighted) per step:", "",
        table2, "",
        f"Float16 without scaling stalls (every gradient flushes to zero, the weights never move). With dynamic "
        f"scaling the float16 run tracks float32: largest per-step loss difference {gap:.2e}; scale at the end "
        f"{dyn.get_scale():,.0f}, {dyn.steps_skipped} steps skipped.", "",
        "## 3. Induced overflow: skipped steps and scale back-off", "",
        f"Float16 + DynamicLossScaler(init_scale=2^24, growth_interval=25), unweighted loss, a x1e5 loss spike at "
        f"step {args.steps // 2}. Log (every overflow and scale change, and every 25th step):", "",
        "```", *log, "```", "",
        f"{scaler3.steps_skipped} steps skipped in all; final loss {losses3[-1]:.4f}, test accuracy {100 * acc3:.1f} %.",
        "",
        "## 4. Where a float16 step spends its time", "",
        "MLP 64-512-512-10, batch 256, AdamW (float16 with master weights + dynamic scaling), median of 5 steps:", "",
        table4, "",
        f"Plain NumPy GEMM throughput for 256x512 @ 512x512: float32 {rates['float32']:.1f} GFLOP/s, "
        f"float16 {rates['float16']:.2f} GFLOP/s (NumPy has no BLAS for float16 and converts element by element).", "",
        f"The float16 step is {fp16_total / fp32_total:.1f}x slower than float32, and "
        f"{100 * fp16_gemm / fp16_total:.0f} % of it is GEMM. A native float16 GEMM (f16 storage, F16C conversion "
        "while packing panels, f32 accumulation in the float32 micro-kernel) would make those GEMMs run at "
        "close to float32 GEMM speed; the step would then cost about "
        f"{(fp16_total - fp16_gemm + split[0][2]) * 1e3:.1f} ms (float16 step minus its GEMM time plus the "
        f"float32 GEMM time). What remains is non-GEMM work: {(fp16_total - fp16_gemm) * 1e3:.1f} ms in float16 "
        f"against {(fp32_total - split[0][2]) * 1e3:.1f} ms in float32, because NumPy's float16 elementwise "
        "ufuncs also convert in software, and the master-weight copies add two passes over the weights. "
        "So after the GEMM, the next float16 bottlenecks are the bias/activation/softmax passes (a native "
        "fused float16 bias+GELU and the f16<->f32 conversions with F16C). Requested from the owner of "
        "`core/acceleration.py` and the runtime: route float16 `gemm`/`matmul` to such a kernel.",
    ], threads=args.threads)


if __name__ == "__main__":
    main()
