"""Teaching kernels against the fast path (tinytorch.core.acceleration), NumPy loops and PyTorch."""
import numpy as np
import pytest

from tinytorch.core import acceleration
from tinytorch.core.teaching import col2im, conv2d_im2col, im2col, tiled_matmul

RNG = np.random.default_rng(1234)

SHAPES = [(1, 1, 1), (0, 3, 4), (3, 0, 4), (3, 4, 0), (7, 13, 5), (17, 3, 29), (33, 31, 37), (64, 64, 64), (2, 1, 97)]


@pytest.mark.parametrize("m,k,n", SHAPES)
@pytest.mark.parametrize("tile", [1, 4, 16, 100])
def test_tiled_matmul_matches_acceleration_and_float64(m, k, n, tile):
    a = RNG.standard_normal((m, k)).astype(np.float32)
    b = RNG.standard_normal((k, n)).astype(np.float32)
    got = tiled_matmul(a, b, tile=tile)
    ref64 = a.astype(np.float64) @ b.astype(np.float64)
    fast = acceleration.matmul(a, b)
    assert got.shape == (m, n) and got.dtype == np.float32
    np.testing.assert_allclose(got, ref64, rtol=1e-5, atol=1e-5 * max(1, k))
    np.testing.assert_allclose(got, fast, rtol=1e-5, atol=1e-5 * max(1, k))


def test_tiled_matmul_non_contiguous_and_float64():
    base = RNG.standard_normal((20, 30))
    a = base[::2, ::3]          # 10 x 10, strided view
    b = base.T[:10, 1:8]        # transposed view
    np.testing.assert_allclose(tiled_matmul(a, b, tile=3), a @ b, rtol=1e-12, atol=1e-12)
    assert tiled_matmul(a, b).dtype == np.float64


def test_tiled_matmul_bad_input():
    with pytest.raises(ValueError, match=r"Incompatible matrix dimensions: \(2, 3\) x \(4, 5\)"):
        tiled_matmul(np.ones((2, 3)), np.ones((4, 5)))
    with pytest.raises(ValueError, match="2-D"):
        tiled_matmul(np.ones(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match="tile"):
        tiled_matmul(np.ones((2, 2)), np.ones((2, 2)), tile=0)


def _conv_loops(x, w, b, stride, padding):
    """Direct float64 convolution with explicit loops over every output element."""
    sh, sw = stride
    ph, pw = padding
    n, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - kh) // sh + 1
    ow = (wd + 2 * pw - kw) // sw + 1
    out = np.zeros((n, oc, oh, ow))
    for bi in range(n):
        for o in range(oc):
            for i in range(oh):
                for j in range(ow):
                    out[bi, o, i, j] = np.sum(xp[bi, :, i * sh:i * sh + kh, j * sw:j * sw + kw] * w[o])
            if b is not None:
                out[bi, o] += b[o]
    return out


CONV_CASES = [
    # (N, C, H, W), OC, kernel, stride, padding
    ((1, 1, 5, 5), 1, (3, 3), (1, 1), (0, 0)),
    ((2, 3, 7, 6), 4, (3, 2), (2, 1), (1, 0)),
    ((3, 2, 5, 5), 5, (5, 5), (1, 1), (2, 2)),
    ((1, 1, 4, 4), 2, (1, 1), (3, 3), (0, 0)),
    ((2, 1, 3, 11), 3, (2, 3), (1, 2), (1, 1)),
    ((0, 2, 5, 5), 3, (3, 3), (1, 1), (1, 1)),
]


@pytest.mark.parametrize("xshape,oc,kernel,stride,padding", CONV_CASES)
def test_conv2d_im2col_matches_direct_loops(xshape, oc, kernel, stride, padding):
    x = RNG.standard_normal(xshape)
    w = RNG.standard_normal((oc, xshape[1]) + kernel)
    b = RNG.standard_normal(oc)
    got = conv2d_im2col(x, w, b, stride, padding)
    np.testing.assert_allclose(got, _conv_loops(x, w, b, stride, padding), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("xshape,oc,kernel,stride,padding", CONV_CASES)
def test_col2im_is_adjoint_of_im2col(xshape, oc, kernel, stride, padding):
    x = RNG.standard_normal(xshape)
    cols = im2col(x, kernel, stride, padding)
    y = RNG.standard_normal(cols.shape)
    # <im2col(x), y> == <x, col2im(y)> for every x, y: the defining property of an adjoint.
    np.testing.assert_allclose(np.sum(cols * y), np.sum(x * col2im(y, x.shape, kernel, stride, padding)),
                               rtol=1e-10, atol=1e-10)


def test_im2col_layout_by_hand():
    x = np.arange(2 * 3 * 3, dtype=np.float64).reshape(1, 2, 3, 3)
    cols = im2col(x, 2, 1, 0)
    assert cols.shape == (1, 2 * 2 * 2, 4)
    # Row c*KH*KW + i*KW + j, column oy*OW + ox holds x[c, oy + i, ox + j].
    for c in range(2):
        for i in range(2):
            for j in range(2):
                for oy in range(2):
                    for ox in range(2):
                        assert cols[0, c * 4 + i * 2 + j, oy * 2 + ox] == x[0, c, oy + i, ox + j]


def test_im2col_non_contiguous_input():
    base = RNG.standard_normal((2, 6, 9, 9))
    x = base[:, ::2, ::2, 1::2]  # strided view, shape (2, 3, 5, 4)
    np.testing.assert_array_equal(im2col(x, 3, 1, 1), im2col(np.ascontiguousarray(x), 3, 1, 1))


@pytest.mark.parametrize("xshape,oc,kernel,stride,padding", CONV_CASES[:5])
def test_im2col_matches_torch_unfold(xshape, oc, kernel, stride, padding):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal(xshape)
    ref = torch.nn.functional.unfold(torch.from_numpy(x), kernel, padding=padding, stride=stride).numpy()
    np.testing.assert_allclose(im2col(x, kernel, stride, padding), ref, rtol=0, atol=0)


def test_conv_matches_core_spatial_conv2d():
    spatial = pytest.importorskip("tinytorch.core.spatial")
    from tinytorch.core.tensor import Tensor
    conv = spatial.Conv2d(3, 4, kernel_size=3, stride=2, padding=1)
    x = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)
    ref = conv(Tensor(x)).data
    bias = None if conv.bias is None else conv.bias.data
    got = conv2d_im2col(x, conv.weight.data, bias, 2, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_im2col_bad_input():
    with pytest.raises(ValueError, match="NCHW"):
        im2col(np.ones((3, 3)), 2)
    with pytest.raises(ValueError, match="larger than the padded input"):
        im2col(np.ones((1, 1, 2, 2)), 3)
    with pytest.raises(ValueError, match="stride"):
        im2col(np.ones((1, 1, 4, 4)), 2, stride=0)
    with pytest.raises(TypeError, match="kernel"):
        im2col(np.ones((1, 1, 4, 4)), "3")
    with pytest.raises(ValueError, match="col2im expects columns"):
        col2im(np.ones((1, 4, 5)), (1, 1, 3, 3), 2)
    with pytest.raises(ValueError, match="channels"):
        conv2d_im2col(np.ones((1, 2, 4, 4)), np.ones((3, 1, 2, 2)))
