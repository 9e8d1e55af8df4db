"""Spatial layers: Conv2d (im2col + GEMM), MaxPool2d, AvgPool2d, all NCHW with gradients.

What this file owns: the three layers, their Functions, the functional ``conv2d`` /
``max_pool2d`` / ``avg_pool2d``, the im2col / col2im helpers, and upstream's ``BatchNorm2d``
(built from Tensor ops) and ``SimpleCNN``.

Convolution as one GEMM: the kernel door's ``im2col`` copies, for each of the KH*KW kernel
offsets, one strided slice of the zero-padded input into ``cols`` of shape
(C*KH*KW, N*OH*OW) (the "channels-first" im2col: every copy moves whole rows of OW
pixels; the runtime's tt_im2col for float32, NumPy slices otherwise). Then ``W2 @ cols``
with W reshaped to (OC, C*KH*KW) gives all outputs at once through ``acceleration.gemm``;
the result (OC, N, OH, OW) is returned as an NCHW view. The backward is two more GEMMs
(``gW = g cols^T``, ``gcols = W2^T g``) and the door's ``col2im``, which adds each kernel
offset's slice back into the input.

Max pooling goes through the door's ``max_pool2d``: each window's first maximum and its
index (argmax, like PyTorch; padding is -inf and never wins, a NaN wins and propagates);
the backward sends each output's gradient to that index (``max_pool2d_backward``). The
runtime's kernels read a convolution's (OC, N, H, W) output in place. Average pooling loops
over the KH*KW kernel offsets with strided NumPy slices and counts padding zeros in the
divisor (PyTorch's default ``count_include_pad=True``).

Weights follow PyTorch: (out_channels, in_channels, KH, KW), uniform +-1/sqrt(fan_in).

What it assumes: NCHW inputs (N, C, H, W), checked (``_check_nchw``); the kernel door
(core/acceleration.py) for ``im2col`` / ``col2im``, the GEMMs (``gemm``, ``matmul_backward``),
``max_pool2d`` and its backward and ``conv_output_size``; padding and window slices from
backends/numpy_fallback.py; weights drawn from the framework generator (core/random.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..backends.numpy_fallback import pad_nchw, window_slice
from . import acceleration as _acc
from .autograd import Function
from .layers import Layer, Parameter
from .random import get_generator
from .tensor import Tensor

__all__ = ["BatchNorm2d", "SimpleCNN", "Conv2D", "MaxPool2D", "AvgPool2D", "Conv2d", "MaxPool2d", "AvgPool2d", "conv2d", "max_pool2d", "avg_pool2d", "im2col", "col2im",
           "DEFAULT_KERNEL_SIZE", "DEFAULT_STRIDE", "DEFAULT_PADDING"]

# Upstream TinyTorch's names: Conv2d's and the pools' default stride/padding, and the kernel
# size SimpleCNN uses.
DEFAULT_KERNEL_SIZE = 3
DEFAULT_STRIDE = 1
DEFAULT_PADDING = 0


def as_pair(v, name):
    """(int, int) of a size argument given as an int or a pair (kernel_size, stride, padding);
    ValueError naming ``name`` for a sequence that is not two long.

    Args:
        v: an int, or a tuple / list of two ints.
        name: the argument's name, for the message.
    """
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{name} must be an int or a pair, got {v}")
        return int(v[0]), int(v[1])
    return int(v), int(v)


_out_size = _acc.conv_output_size


def im2col(x, kh, kw, sh, sw, ph, pw):
    """Unfold the array ``x`` (N, C, H, W) into columns: returns (cols, OH, OW) with cols of
    shape (C*KH*KW, N*OH*OW), so a convolution is ``W.reshape(OC, -1) @ cols`` (the kernel
    door's ``im2col``).

    ``kh``, ``kw``: kernel height and width; ``sh``, ``sw``: strides; ``ph``, ``pw``: zero
    padding on each side of H and W."""
    return _acc.im2col(x, (kh, kw), (sh, sw), (ph, pw))


def col2im(cols, x_shape, kh, kw, sh, sw, ph, pw, oh, ow):
    """Adjoint of im2col: cols (C*KH*KW, N*OH*OW) summed back into an (N, C, H, W) array
    (overlapping windows add up; the door's ``col2im``).

    ``x_shape`` is the (N, C, H, W) of the unpadded input; ``kh``, ``kw``, ``sh``, ``sw``,
    ``ph``, ``pw`` the kernel, stride and padding given to ``im2col``; ``oh``, ``ow`` the
    output size it returned."""
    n, c = x_shape[:2]
    return _acc.col2im(cols.reshape(c * kh * kw, n * oh * ow), x_shape, (kh, kw), (sh, sw), (ph, pw))


class Conv2dFunction(Function):
    def forward(self, x, weight, bias, stride, padding):
        oc, c, kh, kw = weight.shape
        if x.ndim != 4 or x.shape[1] != c:
            got = f"{x.shape[1]} channels" if x.ndim == 4 else f"{x.ndim} dimensions"
            raise ValueError(f"Conv2d: expected input (N, {c}, H, W) with {c} channels, got shape "
                             f"{x.shape} ({got})")
        (sh, sw), (ph, pw) = stride, padding
        cols, oh, ow = im2col(x, kh, kw, sh, sw, ph, pw)
        w2 = weight.reshape(oc, c * kh * kw)
        out = _acc.gemm(w2, cols)                                     # (OC, N*OH*OW)
        if bias is not None:
            out += bias[:, None]
        n = x.shape[0]
        self.cols, self.w2, self.geom = cols, w2, (x.shape, weight.shape, sh, sw, ph, pw, oh, ow)
        return out.reshape(oc, n, oh, ow).transpose(1, 0, 2, 3)

    def backward(self, g):
        x_shape, w_shape, sh, sw, ph, pw, oh, ow = self.geom
        oc, c, kh, kw = w_shape
        n = x_shape[0]
        need = self.needs_input_grad
        g2 = g.transpose(1, 0, 2, 3).reshape(oc, n * oh * ow)
        # out = w2 @ cols: the door's one matmul backward gives both (transpose flags, no copies)
        gw2, gcols = _acc.matmul_backward(self.w2, self.cols, g2, (need[1], need[0]))
        gw = None if gw2 is None else gw2.reshape(w_shape)
        gb = g2.sum(axis=1) if need[2] else None
        gx = None if gcols is None else col2im(gcols, x_shape, kh, kw, sh, sw, ph, pw, oh, ow)
        return gx, gw, gb, None, None


def _pool_geometry(x, kernel, stride, padding, who):
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    n, c, h, w = x.shape
    oh = _out_size(h, kh, sh, ph, who)
    ow = _out_size(w, kw, sw, pw, who)
    return kh, kw, sh, sw, ph, pw, oh, ow


class MaxPool2dFunction(Function):
    def forward(self, x, kernel, stride, padding):
        y, self.argmax = _acc.max_pool2d(x, kernel, stride, padding)
        self.x_shape, self.x_strides = x.shape, x.strides
        return y

    def backward(self, g):
        return _acc.max_pool2d_backward(g, self.argmax, self.x_shape, self.x_strides), None, None, None


class AvgPool2dFunction(Function):
    def forward(self, x, kernel, stride, padding):
        kh, kw, sh, sw, ph, pw, oh, ow = geom = _pool_geometry(x, kernel, stride, padding, "AvgPool2d")
        xp = pad_nchw(x, ph, pw)
        out = np.zeros((x.shape[0], x.shape[1], oh, ow), dtype=x.dtype)
        for i in range(kh):
            for j in range(kw):
                out += xp[window_slice(i, j, oh, ow, sh, sw)]
        out *= np.asarray(1.0 / (kh * kw), dtype=x.dtype)
        self.geom, self.x_shape, self.padded_shape = geom, x.shape, xp.shape
        return out

    def backward(self, g):
        kh, kw, sh, sw, ph, pw, oh, ow = self.geom
        n, c, h, w = self.x_shape
        share = g * np.asarray(1.0 / (kh * kw), dtype=g.dtype)
        gx = np.zeros(self.padded_shape, dtype=g.dtype)
        for i in range(kh):
            for j in range(kw):
                gx[window_slice(i, j, oh, ow, sh, sw)] += share
        return gx[:, :, ph:ph + h, pw:pw + w], None, None, None


def _check_nchw(x, who):
    if not isinstance(x, Tensor):
        x = Tensor(x)
    if x.data.ndim != 4:
        raise ValueError(f"{who}: expected a 4-D input (N, C, H, W), got shape {x.data.shape}")
    return x


def conv2d(x, weight, bias=None, stride=1, padding=0):
    """2-D cross-correlation (PyTorch's ``F.conv2d``), im2col + one GEMM, with gradients.

    Args:
        x: input (N, C, H, W), a Tensor or array.
        weight: Tensor (OC, C, KH, KW).
        bias: optional Tensor (OC,).
        stride: int or (sh, sw).
        padding: zero padding, int or (ph, pw).

    Returns (N, OC, OH, OW) with OH = (H + 2 ph - KH) // sh + 1 (and likewise OW).
    """
    x = _check_nchw(x, "conv2d")
    return Conv2dFunction.apply(x, weight, bias, as_pair(stride, "stride"), as_pair(padding, "padding"))


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """Max over each window of ``x`` (N, C, H, W); the gradient goes to one maximum per
    window (the first, like PyTorch's argmax).

    Args:
        x: input Tensor or array (N, C, H, W).
        kernel_size: window size, int or (kh, kw).
        stride: int or pair; defaults to kernel_size (non-overlapping windows).
        padding: -inf padding, int or pair, at most half the kernel.
    """
    x = _check_nchw(x, "max_pool2d")
    k = as_pair(kernel_size, "kernel_size")
    s = k if stride is None else as_pair(stride, "stride")
    p = as_pair(padding, "padding")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"max_pool2d: padding {p} must be at most half the kernel {k}")
    return MaxPool2dFunction.apply(x, k, s, p)


def avg_pool2d(x, kernel_size, stride=None, padding=0):
    """Mean over each window of ``x`` (N, C, H, W); zero padding counts in the divisor
    (PyTorch's ``count_include_pad=True``).

    Args:
        x: input Tensor or array (N, C, H, W).
        kernel_size: window size, int or (kh, kw).
        stride: int or pair; defaults to kernel_size.
        padding: zero padding, int or pair, at most half the kernel.
    """
    x = _check_nchw(x, "avg_pool2d")
    k = as_pair(kernel_size, "kernel_size")
    s = k if stride is None else as_pair(stride, "stride")
    p = as_pair(padding, "padding")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"avg_pool2d: padding {p} must be at most half the kernel {k}")
    return AvgPool2dFunction.apply(x, k, s, p)


class Conv2d(Layer):
    """2-D convolution over (N, C, H, W) inputs (PyTorch's ``nn.Conv2d`` without dilation
    and groups).

    Args:
        in_channels: C of the input.
        out_channels: OC, the number of filters.
        kernel_size: int or (kh, kw).
        stride: int or (sh, sw), > 0.
        padding: zero padding, int or (ph, pw), >= 0.
        bias: add a learnable bias (OC,).
        dtype: dtype of the parameters (float32).

    Weight (OC, C, kh, kw), uniform +-1/sqrt(C*kh*kw) like PyTorch. Output (N, OC, OH, OW).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=DEFAULT_STRIDE,
                 padding=DEFAULT_PADDING, bias: bool = True, dtype=np.float32):
        kh, kw = as_pair(kernel_size, "kernel_size")
        if min(in_channels, out_channels, kh, kw) <= 0:
            raise ValueError(f"Conv2d: channels and kernel must be positive, got "
                             f"({in_channels}, {out_channels}, {kernel_size})")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride, self.padding = (kh, kw), as_pair(stride, "stride"), as_pair(padding, "padding")
        if min(self.stride) <= 0 or min(self.padding) < 0:
            raise ValueError(f"Conv2d: stride must be positive and padding >= 0, got {stride}, {padding}")
        bound = 1.0 / math.sqrt(in_channels * kh * kw)
        rng = get_generator()
        self.weight = Parameter(rng.uniform(-bound, bound, (out_channels, in_channels, kh, kw)).astype(dtype))
        self.bias = Parameter(rng.uniform(-bound, bound, (out_channels,)).astype(dtype)) if bias else None

    def forward(self, x):
        """Convolve ``x`` (N, C, H, W) -> (N, OC, OH, OW)."""
        x = _check_nchw(x, "Conv2d")
        return Conv2dFunction.apply(x, self.weight, self.bias, self.stride, self.padding)

    def extra_repr(self):
        """Channels, kernel_size, stride and padding for repr()."""
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class MaxPool2d(Layer):
    """``max_pool2d`` as a layer.

    Args:
        kernel_size: window size, int or (kh, kw).
        stride: int or pair; None means kernel_size.
        padding: int or pair, at most half the kernel.
    """

    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        """Max-pool ``x`` (N, C, H, W) -> (N, C, OH, OW)."""
        return max_pool2d(x, self.kernel_size, self.stride, self.padding)


class AvgPool2d(Layer):
    """``avg_pool2d`` as a layer.

    Args:
        kernel_size: window size, int or (kh, kw).
        stride: int or pair; None means kernel_size.
        padding: zero padding, int or pair, at most half the kernel.
    """

    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, x):
        """Average-pool ``x`` (N, C, H, W) -> (N, C, OH, OW)."""
        return avg_pool2d(x, self.kernel_size, self.stride, self.padding)


class BatchNorm2d(Layer):
    """Batch normalization over (N, H, W) for each channel of an [N, C, H, W] input
    (upstream TinyTorch's layer; PyTorch's ``nn.BatchNorm2d`` semantics). Built from
    differentiable Tensor ops (mean, var, sqrt), so gradients reach the input, ``gamma`` and
    ``beta``. Training normalizes with the batch's biased variance and updates
    ``running_mean``/``running_var`` (unbiased variance, as PyTorch) by ``momentum``; eval
    uses the running statistics. The running statistics are plain arrays, not Parameters,
    so ``state_dict`` does not include them.

    Args:
        num_features: channels C.
        eps: added to the variance (default 1e-5).
        momentum: weight of the new batch in the running statistics (default 0.1).
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1):
        if not isinstance(num_features, (int, np.integer)) or num_features < 1:
            raise ValueError(f"BatchNorm2d: num_features must be a positive int, got {num_features!r}")
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), float(momentum)
        self.gamma = Parameter(np.ones(num_features, dtype=np.float32))
        self.beta = Parameter(np.zeros(num_features, dtype=np.float32))
        self.running_mean = np.zeros(num_features, dtype=np.float32)
        self.running_var = np.ones(num_features, dtype=np.float32)

    @property
    def weight(self):
        """``gamma`` (PyTorch's name)."""
        return self.gamma

    @property
    def bias(self):
        """``beta`` (PyTorch's name)."""
        return self.beta

    def forward(self, x):
        """Normalize ``x`` [N, C, H, W] per channel; ValueError for another rank or C."""
        if not isinstance(x, Tensor):
            x = Tensor(x)
        if x.ndim != 4:
            raise ValueError(f"BatchNorm2d: expected 4D input (batch, channels, height, width), got {x.shape}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm2d: expected {self.num_features} channels, got {x.shape[1]}")
        c = self.num_features
        if self.training:
            mean = x.mean(axis=(0, 2, 3), keepdims=True)
            var = x.var(axis=(0, 2, 3), keepdims=True)
            n = x.data.size // c
            m = self.momentum
            batch_mean = mean.data.reshape(c)
            unbiased = var.data.reshape(c) * (n / max(n - 1, 1))
            self.running_mean = ((1 - m) * self.running_mean + m * batch_mean).astype(np.float32)
            self.running_var = ((1 - m) * self.running_var + m * unbiased).astype(np.float32)
        else:
            mean = Tensor(self.running_mean.reshape(1, c, 1, 1))
            var = Tensor(self.running_var.reshape(1, c, 1, 1))
        xhat = (x - mean) / (var + self.eps).sqrt()
        return xhat * self.gamma.reshape(1, c, 1, 1) + self.beta.reshape(1, c, 1, 1)

    def extra_repr(self):
        """``num_features=..., eps=..., momentum=...`` for repr()."""
        return f"num_features={self.num_features}, eps={self.eps}, momentum={self.momentum}"


class SimpleCNN(Layer):
    """Upstream TinyTorch's demo feature extractor for 3-channel 32x32 images:
    conv(3->16, 3x3, pad 1) -> ReLU -> maxpool 2 -> conv(16->32, 3x3, pad 1) -> ReLU ->
    maxpool 2 -> flatten, giving [B, 32 * 8 * 8] features (no classifier head, as upstream;
    add ``Linear(model.flattened_size, num_classes)`` yourself).

    Args:
        num_classes: recorded for the head you add (default 10).
    """

    def __init__(self, num_classes: int = 10):
        self.num_classes = int(num_classes)
        self.conv1 = Conv2d(3, 16, kernel_size=DEFAULT_KERNEL_SIZE, padding=1)
        self.pool1 = MaxPool2d(2, stride=2)
        self.conv2 = Conv2d(16, 32, kernel_size=DEFAULT_KERNEL_SIZE, padding=1)
        self.pool2 = MaxPool2d(2, stride=2)
        self.flattened_size = 32 * 8 * 8

    def forward(self, x):
        """Images ``x`` [B, 3, H, W] -> flattened features [B, 32 * H/4 * W/4]."""
        x = self.pool1(self.conv1(x).relu())
        x = self.pool2(self.conv2(x).relu())
        return x.reshape(x.shape[0], -1)


# Upstream TinyTorch spellings (docs/compat.md): the same classes.
Conv2D = Conv2d
MaxPool2D = MaxPool2d
AvgPool2D = AvgPool2d
