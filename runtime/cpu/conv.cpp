/*
 * conv.cpp -- the data movement of a convolution and of max pooling, NCHW float32:
 * tt_im2col / tt_col2im (the unfold a convolution's one GEMM reads, and its adjoint) and
 * tt_maxpool2d_forward / _backward (window maxima with the index of each maximum, and
 * the gradient routed back through those indices).
 *
 * The layouts are those of core/spatial.py: cols is (C*KH*KW) x (N*OH*OW), row
 * (c, i, j) holding, for every output pixel (n, oh, ow), the input pixel that kernel offset
 * (i, j) touches, x[n, c, oh*sh + i - ph, ow*sw + j - pw], zero outside the image. Nothing
 * here is arithmetic-bound: every loop streams whole output rows (OW pixels), and with
 * stride 1 each row is one contiguous copy.
 *
 * The pooling input, and the gradient the backward writes, may be any arrangement of
 * contiguous H x W planes (plane (n, c) at n * stride_n + c * stride_c): a convolution's
 * output, computed as (C, N, H, W) and seen as NCHW, is pooled where it lies, and its
 * gradient comes back in the same layout (so the ReLU before it and the convolution's
 * backward read it without a copy).
 *
 * Threads: im2col splits the rows of cols; col2im and both pooling kernels split the
 * (n, c) planes, whose outputs are disjoint, so no two threads ever write one element and
 * every sum adds in a fixed order (results do not depend on the thread count).
 */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"

namespace tt {
namespace {

struct Geometry {
    int64_t n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
};

/* Checks and output sizes; OH = (H + 2 ph - KH) / sh + 1 like PyTorch (floor). */
tt_status make_geometry(const char *fn, int64_t n, int64_t c, int64_t h, int64_t w, int64_t kh,
                        int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw, Geometry *g) {
    if (n < 0 || c < 0 || h < 0 || w < 0)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: N=%lld C=%lld H=%lld W=%lld must be >= 0", fn,
                    (long long)n, (long long)c, (long long)h, (long long)w);
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || ph < 0 || pw < 0)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: kernel %lldx%lld, stride %lldx%lld must be >= 1 and padding %lldx%lld >= 0",
                    fn, (long long)kh, (long long)kw, (long long)sh, (long long)sw, (long long)ph,
                    (long long)pw);
    const int64_t limit = std::numeric_limits<int32_t>::max();
    if (h > limit || w > limit || kh > limit || kw > limit || ph > limit || pw > limit)
        return fail(TT_ERR_OVERFLOW, "%s: image or kernel dimensions beyond 2^31", fn);
    if (h + 2 * ph < kh || w + 2 * pw < kw)
        return fail(TT_ERR_SHAPE_MISMATCH, "%s: padded input %lldx%lld is smaller than the kernel %lldx%lld",
                    fn, (long long)(h + 2 * ph), (long long)(w + 2 * pw), (long long)kh, (long long)kw);
    *g = {n, c, h, w, kh, kw, sh, sw, ph, pw, (h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1};
    int64_t planes = 0, pix = 0, npix = 0, in = 0, out = 0, taps = 0, cols = 0, bytes = 0;
    if (mul_overflows(n, c, &planes) || mul_overflows(planes, h * w, &in) ||
        mul_overflows(g->oh, g->ow, &pix) || mul_overflows(planes, pix, &out) ||
        mul_overflows(n, pix, &npix) || /* n * pix alone: planes is 0 when c is */
        mul_overflows(c, kh * kw, &taps) || mul_overflows(taps, npix, &cols) ||
        mul_overflows(std::max({in, out, cols}), 8, &bytes))
        return fail(TT_ERR_OVERFLOW, "%s: the tensor sizes overflow int64 bytes", fn);
    return TT_OK;
}

/* The range [lo, hi) of output columns ow whose input column ow*s + j - p lies in [0, w). */
void valid_range(int64_t j, int64_t s, int64_t p, int64_t w, int64_t ow, int64_t *lo, int64_t *hi) {
    /* ow*s + j - p >= 0  <=>  ow >= ceil((p - j) / s);   ow*s + j - p < w  <=>  ow <= (w - 1 + p - j) / s */
    const int64_t first = p - j > 0 ? (p - j + s - 1) / s : 0;
    const int64_t last = w - 1 + p - j >= 0 ? (w - 1 + p - j) / s : -1;
    *lo = std::min(first, ow);
    *hi = std::max(*lo, std::min(last + 1, ow));
}

/* b replaces (a, ia) when take != 0: a select by bit masks, not a branch (which candidate
 * wins is random data, and a mispredicted branch per comparison cost 4-6x the time). */
inline void select_if(int take, float b, int64_t ib, float *a, int64_t *ia) {
    const uint32_t m32 = 0u - (uint32_t)take;
    const uint64_t m64 = 0ull - (uint64_t)take;
    uint32_t ua, ub;
    std::memcpy(&ua, a, 4);
    std::memcpy(&ub, &b, 4);
    const uint32_t uv = (ub & m32) | (ua & ~m32);
    std::memcpy(a, &uv, 4);
    *ia = (int64_t)(((uint64_t)ib & m64) | ((uint64_t)*ia & ~m64));
}

/* Does candidate b win over the running maximum a? Strictly greater, or a NaN over a number. */
inline int wins(float b, float a) { return (int)(b > a) | ((int)(b != b) & (int)(a == a)); }

/* The common window (2 x 2, stride 2, no padding): the four candidates of each output in
 * window order, compared pairwise (first maximum wins; a NaN wins and stays). */
inline void pool2x2(const float *plane, int64_t w, int64_t oh, int64_t ow, float *y, int64_t *argmax) {
    auto pick = [](float a, int64_t ia, float b, int64_t ib, float *v, int64_t *i) {
        *v = a;
        *i = ia;
        select_if(wins(b, a), b, ib, v, i);
    };
    for (int64_t oy = 0; oy < oh; ++oy) {
        const float *r0 = plane + 2 * oy * w, *r1 = r0 + w;
        const int64_t base = 2 * oy * w;
        for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t c = 2 * ox;
            float v0, v1, v;
            int64_t i0, i1, i;
            pick(r0[c], base + c, r0[c + 1], base + c + 1, &v0, &i0);
            pick(r1[c], base + w + c, r1[c + 1], base + w + c + 1, &v1, &i1);
            pick(v0, i0, v1, i1, &v, &i);
            y[oy * ow + ox] = v;
            argmax[oy * ow + ox] = i;
        }
    }
}

}  // namespace
}  // namespace tt

extern "C" TT_API tt_status tt_im2col(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                      int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                      int64_t pw, float *cols) {
    static const char *kFn = "tt_im2col";
    tt::Geometry g;
    tt_status st = tt::make_geometry(kFn, n, c, h, w, kh, kw, sh, sw, ph, pw, &g);
    if (st != TT_OK) return st;
    const int64_t pix = g.oh * g.ow, rows = c * kh * kw, row_len = n * pix;
    tt::set_kernel_path("im2col:cpu");
    if (rows * row_len == 0) return TT_OK;
    if (x == nullptr || cols == nullptr) return tt::fail(TT_ERR_NULL_POINTER, "%s: x or cols is NULL", kFn);
    const int nt = tt::memory_bound_threads((double)rows * row_len, rows);
    tt::parallel_for(rows, tt::grain_for(rows, (double)rows * row_len), nt, [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t ch = r / (kh * kw), i = (r / kw) % kh, j = r % kw;
            int64_t lo, hi;
            tt::valid_range(j, sw, pw, w, g.ow, &lo, &hi);
            for (int64_t b = 0; b < n; ++b) {
                const float *plane = x + (b * c + ch) * h * w;
                float *dst = cols + r * row_len + b * pix;
                for (int64_t oy = 0; oy < g.oh; ++oy, dst += g.ow) {
                    const int64_t iy = oy * sh + i - ph;
                    if (iy < 0 || iy >= h) {
                        for (int64_t ox = 0; ox < g.ow; ++ox) dst[ox] = 0.0f;
                        continue;
                    }
                    const float *row = plane + iy * w;  /* input column ox*sw + j - pw */
                    for (int64_t ox = 0; ox < lo; ++ox) dst[ox] = 0.0f;
                    if (sw == 1) {  /* a plain loop: rows are short, a memcpy call costs more */
                        for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = row[ox + j - pw];
                    } else {
                        for (int64_t ox = lo; ox < hi; ++ox) dst[ox] = row[ox * sw + j - pw];
                    }
                    for (int64_t ox = hi; ox < g.ow; ++ox) dst[ox] = 0.0f;
                }
            }
        }
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_col2im(const float *cols, int64_t n, int64_t c, int64_t h, int64_t w,
                                      int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                                      int64_t pw, float *gx) {
    static const char *kFn = "tt_col2im";
    tt::Geometry g;
    tt_status st = tt::make_geometry(kFn, n, c, h, w, kh, kw, sh, sw, ph, pw, &g);
    if (st != TT_OK) return st;
    const int64_t pix = g.oh * g.ow, row_len = n * pix, planes = n * c;
    tt::set_kernel_path("col2im:cpu");
    if (planes * h * w == 0) return TT_OK;
    if (gx == nullptr || (pix > 0 && cols == nullptr))
        return tt::fail(TT_ERR_NULL_POINTER, "%s: cols or gx is NULL", kFn);
    const double work = (double)planes * std::max(h * w, kh * kw * pix);
    const int nt = tt::memory_bound_threads(work, planes);
    tt::parallel_for(planes, tt::grain_for(planes, work), nt, [&](int64_t p0, int64_t p1, int) {
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t b = p / c, ch = p % c;
            float *plane = gx + p * h * w;
            std::memset(plane, 0, (size_t)(h * w) * sizeof(float));
            for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                    int64_t lo, hi;
                    tt::valid_range(j, sw, pw, w, g.ow, &lo, &hi);
                    const float *src = cols + ((ch * kh + i) * kw + j) * row_len + b * pix;
                    for (int64_t oy = 0; oy < g.oh; ++oy, src += g.ow) {
                        const int64_t iy = oy * sh + i - ph;
                        if (iy < 0 || iy >= h) continue;
                        float *row = plane + iy * w;
                        for (int64_t ox = lo; ox < hi; ++ox) row[ox * sw + j - pw] += src[ox];
                    }
                }
        }
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_maxpool2d_forward(const float *x, int64_t n, int64_t c, int64_t h,
                                                 int64_t w, int64_t stride_n, int64_t stride_c,
                                                 int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                                 int64_t ph, int64_t pw, float *y,
                                                 int64_t *argmax) {
    static const char *kFn = "tt_maxpool2d_forward";
    tt::Geometry g;
    tt_status st = tt::make_geometry(kFn, n, c, h, w, kh, kw, sh, sw, ph, pw, &g);
    if (st != TT_OK) return st;
    const int64_t planes = n * c, pix = g.oh * g.ow;
    tt::set_kernel_path("maxpool2d_forward:cpu");
    if (planes * pix == 0) return TT_OK;
    if (x == nullptr || y == nullptr || argmax == nullptr)
        return tt::fail(TT_ERR_NULL_POINTER, "%s: x, y or argmax is NULL", kFn);
    if (stride_n < 0 || stride_c < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: plane strides %lld, %lld must be >= 0", kFn,
                        (long long)stride_n, (long long)stride_c);
    const int nt = tt::memory_bound_threads((double)planes * pix * kh * kw, planes);
    tt::parallel_for(planes, tt::grain_for(planes, (double)planes * pix * kh * kw), nt, [&](int64_t p0, int64_t p1, int) {
        for (int64_t p = p0; p < p1; ++p) {
            const float *plane = x + (p / c) * stride_n + (p % c) * stride_c;
            float *yp = y + p * pix;
            int64_t *ap = argmax + p * pix;
            if (kh == 2 && kw == 2 && sh == 2 && sw == 2 && ph == 0 && pw == 0) {
                tt::pool2x2(plane, w, g.oh, g.ow, yp, ap);
                continue;
            }
            /* Output-major: each window is scanned in (i, j) order with its running maximum in
             * registers, and written once. The first maximum wins (strict >); a NaN wins over
             * any number and stays (PyTorch propagates NaN and routes its gradient there).
             * Padding is never a candidate (-inf: it cannot win). */
            for (int64_t oy = 0; oy < g.oh; ++oy) {
                const int64_t y0 = oy * sh - ph;
                const int64_t i_lo = std::max<int64_t>(0, -y0), i_hi = std::min(kh, h - y0);
                for (int64_t ox = 0; ox < g.ow; ++ox) {
                    const int64_t x0 = ox * sw - pw;
                    const int64_t j_lo = std::max<int64_t>(0, -x0), j_hi = std::min(kw, w - x0);
                    float best = -std::numeric_limits<float>::infinity();
                    int64_t arg = -1;
                    for (int64_t i = i_lo; i < i_hi; ++i) {
                        const float *row = plane + (y0 + i) * w + x0;
                        for (int64_t j = j_lo; j < j_hi; ++j) {
                            const float v = row[j];
                            tt::select_if(tt::wins(v, best) | (int)(arg < 0), v, (y0 + i) * w + x0 + j,
                                          &best, &arg);
                        }
                    }
                    yp[oy * g.ow + ox] = best;
                    ap[oy * g.ow + ox] = arg;
                }
            }
        }
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_maxpool2d_backward(const float *grad_y, const int64_t *argmax,
                                                  int64_t n, int64_t c, int64_t h, int64_t w,
                                                  int64_t oh, int64_t ow, float *grad_x,
                                                  int64_t stride_n, int64_t stride_c) {
    static const char *kFn = "tt_maxpool2d_backward";
    if (n < 0 || c < 0 || h < 0 || w < 0 || oh < 0 || ow < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: sizes must be >= 0", kFn);
    if (stride_n < 0 || stride_c < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: plane strides %lld, %lld must be >= 0", kFn,
                        (long long)stride_n, (long long)stride_c);
    int64_t planes = 0, hw = 0, pix = 0, in = 0, out = 0, bytes = 0;
    if (tt::mul_overflows(n, c, &planes) || tt::mul_overflows(h, w, &hw) ||
        tt::mul_overflows(oh, ow, &pix) || tt::mul_overflows(planes, hw, &in) ||
        tt::mul_overflows(planes, pix, &out) || tt::mul_overflows(std::max(in, out), 8, &bytes))
        return tt::fail(TT_ERR_OVERFLOW, "%s: the tensor sizes overflow int64 bytes", kFn);
    tt::set_kernel_path("maxpool2d_backward:cpu");
    if ((in > 0 && grad_x == nullptr) || (out > 0 && (grad_y == nullptr || argmax == nullptr)))
        return tt::fail(TT_ERR_NULL_POINTER, "%s: grad_y, argmax or grad_x is NULL", kFn);
    /* checked even when the planes are empty (H*W = 0): then only -1 is a valid entry */
    for (int64_t q = 0; q < out; ++q)
        if (argmax[q] < -1 || argmax[q] >= hw)
            return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: argmax[%lld]=%lld is outside the %lldx%lld plane",
                            kFn, (long long)q, (long long)argmax[q], (long long)h, (long long)w);
    if (in == 0) return TT_OK;
    const int nt = tt::memory_bound_threads((double)in + out, planes);
    tt::parallel_for(planes, tt::grain_for(planes, (double)in + out), nt, [&](int64_t p0, int64_t p1, int) {
        for (int64_t p = p0; p < p1; ++p) {
            float *gp = grad_x + (p / c) * stride_n + (p % c) * stride_c;
            std::memset(gp, 0, (size_t)hw * sizeof(float));
            const float *g = grad_y + p * pix;
            const int64_t *a = argmax + p * pix;
            for (int64_t q = 0; q < pix; ++q)
                if (a[q] >= 0) gp[a[q]] += g[q];
        }
    });
    return TT_OK;
}
