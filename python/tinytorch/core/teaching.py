"""Teaching kernels: readable versions of the two loops every framework hides.

What this file owns
  tiled_matmul(a, b, tile)       C = A @ B computed tile by tile, the way a cache-blocked GEMM
                                 is organised: three outer loops walk (tile x tile) blocks of C,
                                 A and B; the innermost "micro-kernel" adds rank-1 updates
                                 (outer products) into one C tile, which stays hot in cache.
  im2col(x, kernel, stride, padding)   unfolds every receptive field of an NCHW image into one
                                 column, so a convolution becomes one GEMM:
                                   cols: [N, C*KH*KW, OH*OW]   (PyTorch's ``unfold`` layout)
                                   out[n] = W.reshape(OC, C*KH*KW) @ cols[n]
  col2im(cols, input_shape, kernel, stride, padding)   the adjoint of im2col (overlapping
                                 windows are summed), which is the backward of im2col.
  conv2d_im2col(x, weight, bias, stride, padding)      a convolution built from the two.

What it assumes
  Plain NumPy arrays, float inputs. These are the references a reader can follow line by line;
  the fast path is ``tinytorch.core.acceleration`` and the tests check the two agree. They are
  deliberately not fast: use them to learn, not to train.
"""
from __future__ import annotations

import numpy as np

from . import acceleration

__all__ = ["tiled_matmul", "im2col", "col2im", "conv2d_im2col", "conv_output_size"]


def _pair(v, name: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        v = (int(v), int(v))
    if not (isinstance(v, (tuple, list)) and len(v) == 2 and all(isinstance(i, (int, np.integer)) for i in v)):
        raise TypeError(f"{name} must be an int or a pair of ints, got {v!r}")
    return int(v[0]), int(v[1])


def tiled_matmul(a: np.ndarray, b: np.ndarray, tile: int = 32) -> np.ndarray:
    """A @ B for 2-D arrays ``a`` (M, K) and ``b`` (K, N), computed one (``tile`` x ``tile``)
    block at a time; the result is at least float32."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"tiled_matmul takes 2-D arrays, got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"Incompatible matrix dimensions: {a.shape} x {b.shape}")
    if not isinstance(tile, (int, np.integer)) or tile < 1:
        raise ValueError(f"tile must be a positive int, got {tile!r}")
    m, k = a.shape
    n = b.shape[1]
    out_dtype = np.result_type(a.dtype, b.dtype, np.float32)
    c = np.zeros((m, n), dtype=out_dtype)
    for i0 in range(0, m, tile):              # rows of C
        i1 = min(i0 + tile, m)
        for j0 in range(0, n, tile):          # columns of C
            j1 = min(j0 + tile, n)
            c_tile = np.zeros((i1 - i0, j1 - j0), dtype=out_dtype)  # the block kept "in registers"
            for p0 in range(0, k, tile):      # walk the shared dimension
                p1 = min(p0 + tile, k)
                a_tile = a[i0:i1, p0:p1]
                b_tile = b[p0:p1, j0:j1]
                # Micro-kernel: one rank-1 update per step of the shared dimension.
                for p in range(p1 - p0):
                    c_tile += np.multiply.outer(a_tile[:, p], b_tile[p, :])
            c[i0:i1, j0:j1] = c_tile
    return c


def conv_output_size(size: int, kernel: int, stride: int, padding: int) -> int:
    """Output length of a convolution or pooling window along one axis:
    ``(size + 2 * padding - kernel) // stride + 1``."""
    return (size + 2 * padding - kernel) // stride + 1


def _check_conv_args(input_shape, kernel, stride, padding):
    kh, kw = _pair(kernel, "kernel")
    sh, sw = _pair(stride, "stride")
    ph, pw = _pair(padding, "padding")
    if kh < 1 or kw < 1:
        raise ValueError(f"kernel must be positive, got {(kh, kw)}")
    if sh < 1 or sw < 1:
        raise ValueError(f"stride must be positive, got {(sh, sw)}")
    if ph < 0 or pw < 0:
        raise ValueError(f"padding must be non-negative, got {(ph, pw)}")
    if len(input_shape) != 4:
        raise ValueError(f"im2col expects an NCHW array, got shape {tuple(input_shape)}")
    _, _, h, w = input_shape
    if h + 2 * ph < kh or w + 2 * pw < kw:
        raise ValueError(f"kernel {(kh, kw)} is larger than the padded input {(h + 2 * ph, w + 2 * pw)}")
    return kh, kw, sh, sw, ph, pw


def im2col(x: np.ndarray, kernel, stride=1, padding=0) -> np.ndarray:
    """Unfold NCHW ``x`` into columns of shape ``[N, C*KH*KW, OH*OW]``.

    Row ``c*KH*KW + i*KW + j`` of the columns holds pixel (i, j) of every window of channel c.
    ``kernel``, ``stride`` and ``padding`` (zeros) are ints or (height, width) pairs.
    """
    x = np.asarray(x)
    kh, kw, sh, sw, ph, pw = _check_conv_args(x.shape, kernel, stride, padding)
    n, c, h, w = x.shape
    oh = conv_output_size(h, kh, sh, ph)
    ow = conv_output_size(w, kw, sw, pw)
    padded = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
    # For each kernel offset (i, j), the pixels it touches across all windows form a strided
    # slice of the padded image: KH*KW slice copies instead of OH*OW window copies.
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = padded[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw]
    return cols.reshape(n, c * kh * kw, oh * ow)


def col2im(cols: np.ndarray, input_shape, kernel, stride=1, padding=0) -> np.ndarray:
    """Fold columns back into an NCHW array, summing where windows overlap (im2col's adjoint).

    ``cols`` is [N, C*KH*KW, OH*OW] as ``im2col`` makes it, ``input_shape`` the (N, C, H, W)
    to rebuild, and ``kernel``, ``stride``, ``padding`` the values given to ``im2col``."""
    cols = np.asarray(cols)
    kh, kw, sh, sw, ph, pw = _check_conv_args(tuple(input_shape), kernel, stride, padding)
    n, c, h, w = input_shape
    oh = conv_output_size(h, kh, sh, ph)
    ow = conv_output_size(w, kw, sw, pw)
    expected = (n, c * kh * kw, oh * ow)
    if cols.shape != expected:
        raise ValueError(f"col2im expects columns of shape {expected} for input {tuple(input_shape)}, "
                         f"got {cols.shape}")
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    padded = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            padded[:, :, i:i + sh * oh:sh, j:j + sw * ow:sw] += cols[:, :, i, j]
    return padded[:, :, ph:ph + h, pw:pw + w]


def conv2d_im2col(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None,
                  stride=1, padding=0) -> np.ndarray:
    """Convolution (cross-correlation, like PyTorch) as im2col followed by one GEMM per image.

    ``x`` is [N, C, H, W], ``weight`` [OC, C, KH, KW], ``bias`` [OC] or None; ``stride`` and
    ``padding`` are ints or pairs. Returns [N, OC, OH, OW]."""
    x = np.asarray(x)
    weight = np.asarray(weight)
    if weight.ndim != 4:
        raise ValueError(f"weight must be [OC, C, KH, KW], got shape {weight.shape}")
    oc, c, kh, kw = weight.shape
    if x.ndim != 4 or x.shape[1] != c:
        raise ValueError(f"input {x.shape} does not have the {c} channels weight {weight.shape} expects")
    cols = im2col(x, (kh, kw), stride, padding)                 # [N, C*KH*KW, L]
    w2 = np.ascontiguousarray(weight.reshape(oc, c * kh * kw))
    n = x.shape[0]
    oh = conv_output_size(x.shape[2], kh, _pair(stride, "stride")[0], _pair(padding, "padding")[0])
    ow = conv_output_size(x.shape[3], kw, _pair(stride, "stride")[1], _pair(padding, "padding")[1])
    out = np.empty((n, oc, oh * ow), dtype=np.result_type(x.dtype, weight.dtype))
    for b in range(n):
        out[b] = acceleration.gemm(w2, np.ascontiguousarray(cols[b]))
    if bias is not None:
        out += np.asarray(bias).reshape(1, oc, 1)
    return out.reshape(n, oc, oh, ow)
