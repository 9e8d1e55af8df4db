"""gelu_kernels: the Triton kernels of the fused bias-GELU (forward and backward).

Owns: three @triton.jit kernels, the two device functions the first two share (the tile
load with the bias, the overflow-free sigmoid) and their launchers. It imports triton at its
top, so it is imported only at call time, by ``backends/triton/gelu.py`` once the registry's
probe said Triton may run (the package never imports triton at import time).

The formula is the package's one tanh GELU (``tinytorch.backends.reference``, whose
constants are passed in here as compile-time values), in its overflow-free sigmoid form:

    u = x + bias,  z = 2 sqrt(2/pi) (u + c u^3),  e = exp(-|z|),
    s = sigmoid(z) = 1/(1+e) if z >= 0 else e/(1+e),     y = u s   (y = -0 at u = -inf)
    gelu'(u) = s + u 2 sqrt(2/pi) (1 + 3 c u^2) e/(1+e)^2  (the second term is 0 where e == 0)

Launch shape (row-blocked): the input is viewed as M rows of D columns; program (i, j) owns
rows [i BLOCK_M, (i+1) BLOCK_M) and columns [j BLOCK_D, (j+1) BLOCK_D), loads its BLOCK_D
bias entries once and reuses them for all BLOCK_M rows; sums stay in registers, so x is read
once and y written once. The backward writes grad_x and, with a bias, one partial column sum
per row block (a [row blocks, D] float32 scratch); a second kernel adds the partials up in a
fixed order (deterministic, no atomics). Arithmetic is float32 whatever the storage dtype.

Assumes: rows are contiguous (column stride 1, row strides passed in); pointers are device
addresses on a GPU, or host addresses of wrapped NumPy arrays under TRITON_INTERPRET=1.
``tl`` has no tanh in Triton 3.9 and libdevice fails in the interpreter, hence exp only.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..reference import GELU_C, SQRT_2_OVER_PI

__all__ = ["launch_forward", "launch_backward", "TWO_K", "GELU_C"]

TWO_K = 2.0 * SQRT_2_OVER_PI   # z = TWO_K (u + GELU_C u^3)


# The forward and the backward read the same tile and need the same sigmoid, so both are
# written once here; Triton inlines a @triton.jit function into the kernel that calls it
# (no call cost on the device, the same code under the interpreter).
@triton.jit
def _tile_u(x_ptr, bias_ptr, M, D, stride_xm, HAS_BIAS: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """(u = x + bias over this program's tile in float32, mask, int64 row indices, columns)."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    mask = (rows[:, None] < M) & (cols[None, :] < D)
    rows64 = rows.to(tl.int64)[:, None]
    u = tl.load(x_ptr + rows64 * stride_xm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    if HAS_BIAS:
        b = tl.load(bias_ptr + cols, mask=cols < D, other=0.0).to(tl.float32)  # once per block
        u = u + b[None, :]
    return u, mask, rows64, cols


@triton.jit
def _sigmoid_z(u, TWO_K_: tl.constexpr, C_: tl.constexpr):
    """(s = sigmoid(z), e = exp(-|z|)) for z = TWO_K (u + C u^3), without overflow."""
    z = TWO_K_ * (u + C_ * u * u * u)
    e = tl.exp(-tl.abs(z))
    s = tl.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return s, e


@triton.jit
def _bias_gelu_forward_kernel(x_ptr, bias_ptr, y_ptr, M, D, stride_xm, stride_ym,
                              TWO_K_: tl.constexpr, C_: tl.constexpr, HAS_BIAS: tl.constexpr,
                              BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    u, mask, rows64, cols = _tile_u(x_ptr, bias_ptr, M, D, stride_xm, HAS_BIAS, BLOCK_M, BLOCK_D)
    s, e = _sigmoid_z(u, TWO_K_, C_)
    y = tl.where(u == -float("inf"), -0.0, u * s)
    tl.store(y_ptr + rows64 * stride_ym + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bias_gelu_backward_kernel(x_ptr, bias_ptr, g_ptr, gx_ptr, partial_ptr, M, D,
                               stride_xm, stride_gm, stride_gxm,
                               TWO_K_: tl.constexpr, C_: tl.constexpr, HAS_BIAS: tl.constexpr,
                               BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    u, mask, rows64, cols = _tile_u(x_ptr, bias_ptr, M, D, stride_xm, HAS_BIAS, BLOCK_M, BLOCK_D)
    g = tl.load(g_ptr + rows64 * stride_gm + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    s, e = _sigmoid_z(u, TWO_K_, C_)
    slope = u * (TWO_K_ * (1.0 + 3.0 * C_ * u * u)) * (e / ((1.0 + e) * (1.0 + e)))
    d = s + tl.where(e == 0.0, 0.0, slope)
    gx = tl.where(mask, g * d, 0.0)
    tl.store(gx_ptr + rows64 * stride_gxm + cols[None, :], gx.to(gx_ptr.dtype.element_ty), mask=mask)
    if HAS_BIAS:
        partial = tl.sum(gx, axis=0)  # this row block's share of grad_bias, in float32
        tl.store(partial_ptr + tl.program_id(0).to(tl.int64) * D + cols, partial, mask=cols < D)


@triton.jit
def _column_sum_kernel(partial_ptr, out_ptr, P, D, BLOCK_P: tl.constexpr, BLOCK_D: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        rows = p0 + tl.arange(0, BLOCK_P)
        mask = (rows[:, None] < P) & (cols[None, :] < D)
        block = tl.load(partial_ptr + rows.to(tl.int64)[:, None] * D + cols[None, :], mask=mask, other=0.0)
        acc += tl.sum(block, axis=0)
    tl.store(out_ptr + cols, acc.to(out_ptr.dtype.element_ty), mask=cols < D)


def launch_forward(x, bias, y, M: int, D: int, stride_xm: int, stride_ym: int,
                   block_m: int, block_d: int, num_warps: int = 4) -> None:
    """y = gelu(x + bias) over M x D rows (``bias`` may be None); block sizes are powers of two.

    Args:
        x: input buffer (a device tensor, or a wrapped host array under the interpreter).
        bias: D-entry buffer or None.
        y: output buffer, same layout rules as ``x``.
        M: number of rows.
        D: number of columns (row length).
        stride_xm: elements between rows of ``x``.
        stride_ym: elements between rows of ``y``.
        block_m: rows per program.
        block_d: columns per program.
        num_warps: warps per program on a GPU (the interpreter ignores it).
    """
    grid = (triton.cdiv(M, block_m), triton.cdiv(D, block_d))
    _bias_gelu_forward_kernel[grid](x, x if bias is None else bias, y, M, D, stride_xm, stride_ym,
                                    TWO_K, GELU_C, bias is not None, block_m, block_d,
                                    num_warps=num_warps)


def launch_backward(x, bias, g, gx, partial, grad_bias, M: int, D: int, stride_xm: int,
                    stride_gm: int, stride_gxm: int, block_m: int, block_d: int,
                    num_warps: int = 4) -> None:
    """grad_x = g gelu'(x + bias); with a bias also grad_bias = column sums of grad_x.

    Args:
        x: input buffer of the forward.
        bias: D-entry buffer or None.
        g: upstream gradient, M x D.
        gx: output gradient buffer, M x D.
        partial: float32 scratch of cdiv(M, block_m) x D entries (None without a bias).
        grad_bias: D-entry output buffer (None without a bias).
        M: number of rows.
        D: number of columns.
        stride_xm: elements between rows of ``x``.
        stride_gm: elements between rows of ``g``.
        stride_gxm: elements between rows of ``gx``.
        block_m: rows per program.
        block_d: columns per program.
        num_warps: warps per program on a GPU.
    """
    row_blocks = triton.cdiv(M, block_m)
    has_bias = bias is not None
    _bias_gelu_backward_kernel[(row_blocks, triton.cdiv(D, block_d))](
        x, bias if has_bias else x, g, gx, partial if has_bias else gx, M, D,
        stride_xm, stride_gm, stride_gxm, TWO_K, GELU_C, has_bias, block_m, block_d,
        num_warps=num_warps)
    if has_bias:
        block_p = min(64, triton.next_power_of_2(row_blocks))
        _column_sum_kernel[(triton.cdiv(D, block_d),)](partial, grad_bias, row_blocks, D,
                                                        block_p, block_d, num_warps=num_warps)
