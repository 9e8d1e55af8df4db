"""Scorecard section "loss_scaling": small gradients through real float16 backprop.

Design: a float16 Linear(4, 3) whose float32 loss is ``g * sum(x W)`` with x = 1, so the
exact weight gradient is g. Backprop runs in float16 (the cast back to float16 at the model
output, the float16 GEMM of the weight gradient); the unscaled gradient is read from the
float32 master copy of MixedPrecisionOptimizer. Measured for the guide's g = 1e-3, 1e-7,
2e-9, without scaling and with S = 65536. The guide's "raw float16 result 0.0" for 1e-7 is
not what IEEE float16 does: 1e-7 lies in float16's subnormal range (above 2^-25) and rounds
to 2 x 2^-24 = 1.19e-7; the row says so. benchmarks/bench_loss_scaling.py calls
``half_weight_grad`` for its table 1.

Owns the loss_scaling section; assumes ``MixedPrecisionOptimizer``, ``to_half`` and the
float16 GEMM of the kernel door.
"""
from __future__ import annotations

import numpy as np

from .results import SectionResult

__all__ = ["half_weight_grad", "underflow_status", "run", "GUIDE_ROWS"]

# true gradient -> (raw float16 result, status, scaled float16 value, unscaled, error %)
GUIDE_ROWS = {1e-3: (1.0e-3, "Preserved", 65.536, 1.0e-3, 0.0),
              1e-7: (0.0, "Silent underflow to zero", 0.006554, 1.0e-7, 0.0),
              2e-9: (0.0, "Silent underflow to zero", 0.000131, 2.0e-9, 0.0)}
SCALE = 65536.0


def half_weight_grad(true_grad, scale=None):
    """(float16 weight gradient as backprop left it, float32 master gradient after unscaling,
    the GEMM path that ran) for a loss whose exact weight gradient is ``true_grad``.

    Args:
        true_grad: the exact gradient g.
        scale: the loss scale S (None: no scaling).
    """
    from tinytorch.core import acceleration
    from tinytorch.core.layers import Linear
    from tinytorch.core.optimizers import SGD
    from tinytorch.core.tensor import Tensor
    from tinytorch.extensions import LossScaler, MixedPrecisionOptimizer, to_half

    lin = to_half(Linear(4, 3, bias=False))
    opt = MixedPrecisionOptimizer(lin.parameters(), SGD, lr=0.0)
    loss = lin(Tensor(np.ones((1, 4), np.float16))).astype(np.float32).sum() * true_grad
    if scale is None:
        loss.backward()
        opt.sync_grads()
    else:
        scaler = LossScaler(scale)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
    return float(lin.weight.grad[0, 0]), float(opt.params[0].grad[0, 0]), acceleration.last_path()


def underflow_status(raw: float) -> str:
    """'underflow to zero', 'subnormal (n x 2^-24)' or 'preserved' for a float16 value.

    Args:
        raw: the float16 result.
    """
    if raw == 0:
        return "underflow to zero"
    if abs(raw) < 2.0 ** -14:
        return f"subnormal ({raw / 2.0 ** -24:.0f} x 2^-24)"
    return "preserved"


def run(ctx) -> SectionResult:
    """Measure the three gradients and compare with the guide's table.

    Args:
        ctx: the scorecard Context.
    """
    res = SectionResult("loss_scaling", "")
    bar = ctx.progress(len(GUIDE_ROWS), "loss_scaling")
    path = ""
    errors = {}
    for g, (g_raw, g_status, g_scaled, g_unscaled, g_err) in GUIDE_ROWS.items():
        raw, _, _ = half_weight_grad(g)
        scaled16, unscaled, path = half_weight_grad(g, SCALE)
        status = underflow_status(raw)
        err_raw, err_scaled = abs(raw - g) / g, abs(unscaled - g) / g
        errors[g] = (err_raw, err_scaled)
        raw_ok = (raw == 0) == (g_raw == 0) and (g_raw == 0 or abs(raw - g_raw) / g_raw < 2 ** -10)
        why = "" if raw_ok else (
            f"IEEE float16 has subnormals: {g:.0e} rounds to {raw:.3e} ({status}), a "
            f"{100 * err_raw:.0f} % error, not zero" if raw else "underflowed although the guide says preserved")
        res.claim(f"{g:.1e}: raw float16 backprop", f"{g_raw:.3e} ({g_status})",
                  f"{raw:.4e} ({status})", raw_ok, why)
        # float16 keeps 11 significant bits (2^-11 relative rounding) and the guide prints
        # 3 to 5 significant digits: agreement to 0.5 % is agreement
        scaled_ok = abs(scaled16 - g_scaled) <= 5e-3 * g_scaled
        res.claim(f"{g:.1e}: scaled by S = 65536 in float16", f"{g_scaled:g}", f"{scaled16:.6g}", scaled_ok,
                  "" if scaled_ok else "scaled value differs beyond float16 rounding")
        err_ok = err_scaled <= 2 ** -11
        res.claim(f"{g:.1e}: unscaled gradient (float32) and its error", f"{g_unscaled:.3e}, {g_err:.1f} %",
                  f"{unscaled:.4e}, {100 * err_scaled:.3f} %", err_ok,
                  "" if err_ok else "error above float16's rounding (2^-11)")
        res.numbers[g] = {"raw": raw, "scaled16": scaled16, "unscaled": unscaled, "status": status}
        bar.step(f"g = {g:.0e}")
    bar.close()
    res.tables = [f"The weight-gradient GEMM ran on path `{path}` in float16; unscaling divides the float32 "
                  "master gradient by S. Errors left with scaling are float16 rounding of the scaled value "
                  "(at most 2^-11 relative)."]
    if ctx.plots_enabled:
        from .report import save_bar_plot
        labels, values = [], []
        for g, (er, es) in errors.items():
            labels += [f"g={g:.0e} raw fp16", f"g={g:.0e} scaled"]
            values += [max(er, 1e-7), max(es, 1e-7)]
        res.plots.append(save_bar_plot(ctx.path("loss_scaling_error.png"), labels, [100 * v for v in values],
                                       "Relative gradient error through float16 backprop (floor 1e-5 %)",
                                       "error, % (log scale)"))
    return res
