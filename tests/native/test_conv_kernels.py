"""The runtime's convolution unfold and max pooling (tt_im2col / tt_col2im /
tt_maxpool2d_*) through the door: bit-equality with the NumPy back end (the same copies and
the same order of additions), values and gradients against torch.nn.functional (conv2d,
max_pool2d with its indices) on awkward geometries (1x1, odd and prime sizes, stride 2 and
3, padding, a kernel as large as the padded input), NaN propagation, a (C, N, H, W) array
seen as NCHW pooled in place, 1 and 2 threads, the path that ran, and the refusals.
"""
import ctypes

import numpy as np
import pytest
import torch

from tinytorch import _native
from tinytorch.backends import numpy_fallback
from tinytorch.core import acceleration as acc
from tinytorch.core.spatial import Conv2d, MaxPool2d
from tinytorch.core.tensor import Tensor

RNG = np.random.default_rng(7)
# (N, C, H, W), kernel, stride, padding
GEOMETRIES = [((1, 1, 1, 1), (1, 1), (1, 1), (0, 0)), ((2, 3, 7, 5), (3, 3), (1, 1), (1, 1)),
              ((3, 2, 13, 11), (3, 2), (2, 3), (1, 0)), ((1, 4, 5, 5), (5, 5), (1, 1), (0, 0)),
              ((2, 1, 17, 19), (2, 2), (2, 2), (0, 0)), ((1, 2, 4, 6), (3, 3), (3, 2), (1, 1)),
              ((0, 2, 5, 5), (3, 3), (1, 1), (1, 1))]


@pytest.mark.parametrize("shape,kernel,stride,padding", GEOMETRIES)
def test_im2col_col2im_equal_numpy_and_match_torch(shape, kernel, stride, padding, threads):
    x = RNG.standard_normal(shape).astype(np.float32)
    cols, oh, ow = acc.im2col(x, kernel, stride, padding)
    assert acc.last_path() == "native:im2col:cpu"
    geom = (*kernel, *stride, *padding, oh, ow)
    np.testing.assert_array_equal(cols, numpy_fallback.im2col(x, *geom))
    g = RNG.standard_normal(cols.shape).astype(np.float32)
    gx = acc.col2im(g, shape, kernel, stride, padding)
    assert acc.last_path() == "native:col2im:cpu"
    np.testing.assert_allclose(gx, numpy_fallback.col2im(g, shape, *geom), rtol=1e-6, atol=1e-6)
    # a convolution through cols equals torch's, and col2im is the adjoint (torch's input grad)
    oc = 3
    wt = RNG.standard_normal((oc, shape[1]) + kernel).astype(np.float32)
    out = (wt.reshape(oc, -1).astype(np.float64) @ cols).reshape(oc, shape[0], oh, ow).transpose(1, 0, 2, 3)
    tx = torch.from_numpy(x.astype(np.float64)).requires_grad_()
    ty = torch.nn.functional.conv2d(tx, torch.from_numpy(wt.astype(np.float64)), stride=stride, padding=padding)
    np.testing.assert_allclose(out, ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    gy = RNG.standard_normal(ty.shape)
    ty.backward(torch.from_numpy(gy))
    gcols = wt.reshape(oc, -1).T.astype(np.float32) @ gy.transpose(1, 0, 2, 3).reshape(oc, -1).astype(np.float32)
    np.testing.assert_allclose(acc.col2im(gcols, shape, kernel, stride, padding), tx.grad.numpy(),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,kernel,stride,padding", [g for g in GEOMETRIES if g[3][0] <= g[1][0] // 2
                                                         and g[3][1] <= g[1][1] // 2])
def test_max_pool_matches_torch_and_numpy(shape, kernel, stride, padding, threads):
    x = RNG.standard_normal(shape).astype(np.float32)
    y, argmax = acc.max_pool2d(x, kernel, stride, padding)
    assert acc.last_path() == "native:maxpool2d_forward:cpu"
    ny, na = numpy_fallback.max_pool2d(x, *kernel, *stride, *padding, *y.shape[2:])
    np.testing.assert_array_equal(y, ny)
    np.testing.assert_array_equal(argmax, na)
    ty, ti = torch.nn.functional.max_pool2d(torch.from_numpy(x), kernel, stride, padding, return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())
    np.testing.assert_array_equal(argmax, ti.numpy())
    g = RNG.standard_normal(y.shape).astype(np.float32)
    gx = acc.max_pool2d_backward(g, argmax, shape)
    assert acc.last_path() == "native:maxpool2d_backward:cpu"
    tx = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.max_pool2d(tx, kernel, stride, padding).backward(torch.from_numpy(g))
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gx, numpy_fallback.max_pool2d_backward(g, na, shape), rtol=1e-6, atol=1e-6)


def test_max_pool_reads_a_cnhw_view_in_place_and_propagates_nan():
    base = RNG.standard_normal((4, 3, 6, 6)).astype(np.float32)  # (C, N, H, W)
    base[1, 2, 0, 1] = np.nan
    view = base.transpose(1, 0, 2, 3)                              # NCHW view, not contiguous
    y, argmax = acc.max_pool2d(view, (2, 2), (2, 2))
    ty, ti = torch.nn.functional.max_pool2d(torch.from_numpy(np.ascontiguousarray(view)), 2, 2,
                                            return_indices=True)
    np.testing.assert_array_equal(y, ty.numpy())                  # NaN compares equal here
    assert np.isnan(y[2, 1, 0, 0]) and argmax[2, 1, 0, 0] == 1
    np.testing.assert_array_equal(argmax, ti.numpy())
    g = RNG.standard_normal(y.shape).astype(np.float32)
    gx = acc.max_pool2d_backward(g, argmax, view.shape, view.strides)
    assert gx.strides == view.strides  # the gradient comes back in the input's layout
    tx = torch.from_numpy(np.ascontiguousarray(view)).requires_grad_()
    torch.nn.functional.max_pool2d(tx, 2, 2).backward(torch.from_numpy(g))
    np.testing.assert_allclose(gx, tx.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_layers_run_the_native_kernels_and_match_torch():
    conv, pool = Conv2d(2, 4, 3, padding=1), MaxPool2d(2)
    x = Tensor(RNG.standard_normal((3, 2, 9, 8)).astype(np.float32), requires_grad=True)
    out = pool(conv(x))
    out.backward(np.ones(out.shape, np.float32))
    tconv = torch.nn.Conv2d(2, 4, 3, padding=1)
    with torch.no_grad():
        tconv.weight.copy_(torch.from_numpy(conv.weight.data))
        tconv.bias.copy_(torch.from_numpy(conv.bias.data))
    tx = torch.from_numpy(x.data.copy()).requires_grad_()
    tout = torch.nn.functional.max_pool2d(tconv(tx), 2)
    tout.backward(torch.ones_like(tout))
    np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(conv.weight.grad, tconv.weight.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_float64_takes_numpy_and_refusals():
    x = RNG.standard_normal((1, 1, 4, 4))
    acc.im2col(x, (3, 3))
    assert acc.last_path() == "numpy"
    with pytest.raises(ValueError, match="smaller than the kernel"):
        acc.im2col(x.astype(np.float32), (5, 5))
    with pytest.raises(ValueError, match="NCHW"):
        acc.max_pool2d(np.ones((4, 4), np.float32), (2, 2), (2, 2))
    with pytest.raises(ValueError, match="stride"):
        acc.max_pool2d(np.ones((1, 1, 4, 4), np.float32), (2, 2), (0, 2))
    lib = _native.lib
    y = np.ones((1, 1, 2, 2), np.float32)
    bad = np.array([0, 1, 2, 99], np.int64)
    gx = np.full((1, 1, 4, 4), 3.0, np.float32)
    assert lib.tt_maxpool2d_backward(y.ctypes.data, bad.ctypes.data, 1, 1, 4, 4, 2, 2, gx.ctypes.data, 16, 16) != 0
    assert "argmax[3]=99" in _native.last_error() and (gx == 3.0).all()
    assert lib.tt_im2col(y.ctypes.data, 1, 1, 2, 2, 3, 3, 1, 1, 0, 0, gx.ctypes.data) != 0
    assert "smaller than the kernel" in _native.last_error()
    assert lib.tt_maxpool2d_forward(y.ctypes.data, 1, 1, 2, 2, 4, 4, 1, 1, 0, 1, 0, 0,
                                    gx.ctypes.data, ctypes.c_void_p(0)) != 0
