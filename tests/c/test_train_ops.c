/*
 * test_train_ops.c -- the training-step kernels from C: tt_adam_step (several tensors, per
 * tensor step counts, Adam and AdamW) against this file's double-precision rule,
 * tt_embedding_forward / _backward against naive loops (repeated ids, refused ids leave
 * the output untouched), tt_relu_forward / _backward (NaN, in place), and the convolution
 * helpers tt_im2col / tt_col2im / tt_maxpool2d_forward / _backward against naive loops over
 * awkward geometries (1x1, odd sizes, stride 2 and 3, padding, a plane stride for a
 * (C, N, H, W) input). Every ISA this CPU runs, 1 and 2 threads; the sanitizer build runs
 * it too, so an out-of-bounds index in the window arithmetic is caught here.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tt_test.h"

static void check_adam(int decoupled) {
    enum { T = 4 };
    const int64_t numel[T] = {0, 1, 37, 1031};
    const int64_t steps[T] = {1, 2, 3, 10};
    float *p[T], *g[T], *m[T], *v[T];
    double *wp[T], *wm[T], *wv[T], *wmag[T];
    const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.05;
    for (int t = 0; t < T; ++t) {
        p[t] = tt_test_filled(numel[t], -1, 1);
        g[t] = tt_test_filled(numel[t], -1, 1);
        m[t] = tt_test_filled(numel[t], -0.1f, 0.1f);
        v[t] = tt_test_filled(numel[t], 0, 0.01f);
        wp[t] = malloc((size_t)(numel[t] + 1) * sizeof(double));
        wm[t] = malloc((size_t)(numel[t] + 1) * sizeof(double));
        wv[t] = malloc((size_t)(numel[t] + 1) * sizeof(double));
        wmag[t] = malloc((size_t)(numel[t] + 1) * sizeof(double));
        for (int64_t i = 0; i < numel[t]; ++i) {
            double pi = p[t][i], gi = g[t][i];
            if (decoupled) pi *= 1 - lr * wd;
            else gi += wd * pi;
            const double mi = b1 * m[t][i] + (1 - b1) * gi, vi = b2 * v[t][i] + (1 - b2) * gi * gi;
            const double denom = sqrt(vi) / sqrt(1 - pow(b2, (double)steps[t])) + eps;
            wp[t][i] = pi - lr / (1 - pow(b1, (double)steps[t])) * mi / denom;
            wm[t][i] = mi;
            wmag[t][i] = fabs(b1 * m[t][i]) + fabs((1 - b1) * gi); /* m's terms: its rounding scale */
            wv[t][i] = vi;
        }
    }
    CHECK_OK(tt_adam_step(T, p, (const float *const *)g, m, v, numel, steps, lr, b1, b2, eps, wd,
                          decoupled));
    CHECK(strncmp(tt_last_kernel_path(), "adam:", 5) == 0);
    for (int t = 0; t < T; ++t) {
        for (int64_t i = 0; i < numel[t]; ++i) {
            CHECK(fabs(m[t][i] - wm[t][i]) <= 1e-6 * wmag[t][i] + 1e-12);
            CHECK(fabs(v[t][i] - wv[t][i]) <= 2e-6 * fabs(wv[t][i]) + 1e-12);
            CHECK(fabs(p[t][i] - wp[t][i]) <= 1e-5 * (fabs(wp[t][i]) + 1e-2));
        }
        free(p[t]); free(g[t]); free(m[t]); free(v[t]); free(wp[t]); free(wm[t]); free(wv[t]); free(wmag[t]);
    }
}

static void check_adam_refusals(void) {
    float x[4] = {1, 2, 3, 4};
    float *ptrs[1] = {x};
    const int64_t n[1] = {4}, zero[1] = {0}, one[1] = {1};
    CHECK_FAILS(tt_adam_step(1, ptrs, (const float *const *)ptrs, ptrs, ptrs, n, zero, 1e-3, 0.9, 0.99, 1e-8, 0, 1),
                TT_ERR_INVALID_ARGUMENT, "steps[0]");
    CHECK_FAILS(tt_adam_step(1, ptrs, (const float *const *)ptrs, ptrs, ptrs, n, one, 1e-3, 1.0, 0.99, 1e-8, 0, 1),
                TT_ERR_INVALID_ARGUMENT, "betas");
    CHECK_FAILS(tt_adam_step(1, ptrs, (const float *const *)ptrs, ptrs, ptrs, n, one, NAN, 0.9, 0.99, 1e-8, 0, 1),
                TT_ERR_INVALID_ARGUMENT, "lr");
    CHECK_FAILS(tt_adam_step(1, NULL, NULL, NULL, NULL, n, one, 1e-3, 0.9, 0.99, 1e-8, 0, 1),
                TT_ERR_NULL_POINTER, "NULL");
    CHECK(x[0] == 1 && x[3] == 4); /* nothing written */
}

/* ---------------------------------------------------------------- embedding */

static void check_embedding(int64_t vocab, int64_t dim, int64_t n) {
    float *w = tt_test_filled(vocab * dim, -1, 1), *out = tt_test_filled(n * dim, 0, 0), *g = tt_test_filled(n * dim, -1, 1);
    float *gw = tt_test_filled(vocab * dim, 5, 5), *want = calloc((size_t)(vocab * dim + 1), sizeof(float));
    int64_t *ids = malloc((size_t)(n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < n; ++i) ids[i] = (int64_t)(tt_test_uniform(0, 1) * vocab) % vocab;
    CHECK_OK(tt_embedding_forward(w, vocab, dim, ids, n, out));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < dim; ++j) CHECK(out[i * dim + j] == w[ids[i] * dim + j]);
    CHECK_OK(tt_embedding_backward(g, ids, n, dim, gw, vocab, 0));
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < dim; ++j) want[ids[i] * dim + j] += g[i * dim + j]; /* id order */
    for (int64_t q = 0; q < vocab * dim; ++q) CHECK(gw[q] == want[q]);
    free(w); free(out); free(g); free(gw); free(want); free(ids);
}

static void check_embedding_refusals(void) {
    float w[6] = {0}, out[6] = {7, 7, 7, 7, 7, 7};
    int64_t ids[2] = {1, 3};
    CHECK_FAILS(tt_embedding_forward(w, 3, 2, ids, 2, out), TT_ERR_INVALID_ARGUMENT, "ids[1]=3");
    CHECK(out[0] == 7 && out[5] == 7);
    CHECK_FAILS(tt_embedding_backward(out, ids, 2, 2, w, 3, 0), TT_ERR_INVALID_ARGUMENT, "outside");
    CHECK_FAILS(tt_embedding_forward(w, -1, 2, ids, 2, out), TT_ERR_INVALID_ARGUMENT, "vocab=-1");
}

/* ---------------------------------------------------------------- ReLU */

static void check_relu(int64_t n) {
    float *x = tt_test_filled(n, -1, 1), *y = tt_test_filled(n, 0, 0), *g = tt_test_filled(n, -1, 1), *gx = tt_test_filled(n, 0, 0);
    if (n > 2) {
        x[0] = NAN;
        x[1] = 0.0f;
    }
    CHECK_OK(tt_relu_forward(x, y, n));
    for (int64_t i = 0; i < n; ++i) CHECK(isnan(x[i]) ? isnan(y[i]) : y[i] == (x[i] > 0 ? x[i] : 0.0f));
    CHECK_OK(tt_relu_backward(y, g, gx, n));
    for (int64_t i = 0; i < n; ++i) CHECK(gx[i] == (y[i] <= 0 ? 0.0f : g[i]));
    CHECK_OK(tt_relu_forward(x, x, n)); /* in place */
    for (int64_t i = 0; i < n; ++i) CHECK(isnan(y[i]) ? isnan(x[i]) : x[i] == y[i]);
    free(x); free(y); free(g); free(gx);
}

/* ---------------------------------------------------------------- convolution helpers */

typedef struct { int64_t n, c, h, w, kh, kw, sh, sw, ph, pw; } geom;

static void check_conv(geom s) {
    const int64_t oh = (s.h + 2 * s.ph - s.kh) / s.sh + 1, ow = (s.w + 2 * s.pw - s.kw) / s.sw + 1;
    const int64_t rows = s.c * s.kh * s.kw, cols_len = s.n * oh * ow, in = s.n * s.c * s.h * s.w;
    float *x = tt_test_filled(in, -1, 1), *cols = tt_test_filled(rows * cols_len, 9, 9), *gx = tt_test_filled(in, 9, 9);
    double *want_gx = calloc((size_t)(in + 1), sizeof(double));
    CHECK_OK(tt_im2col(x, s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, cols));
    for (int64_t ch = 0; ch < s.c; ++ch)
        for (int64_t i = 0; i < s.kh; ++i)
            for (int64_t j = 0; j < s.kw; ++j)
                for (int64_t b = 0; b < s.n; ++b)
                    for (int64_t y = 0; y < oh; ++y)
                        for (int64_t z = 0; z < ow; ++z) {
                            const int64_t iy = y * s.sh + i - s.ph, ix = z * s.sw + j - s.pw;
                            const int inside = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w;
                            const int64_t q = ((ch * s.kh + i) * s.kw + j) * cols_len + (b * oh + y) * ow + z;
                            const int64_t src = ((b * s.c + ch) * s.h + iy) * s.w + ix;
                            CHECK(cols[q] == (inside ? x[src] : 0.0f));
                            if (inside) want_gx[src] += cols[q];
                        }
    CHECK_OK(tt_col2im(cols, s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw, gx));
    for (int64_t q = 0; q < in; ++q) CHECK(fabs(gx[q] - want_gx[q]) <= 1e-5 * (1 + fabs(want_gx[q])));

    /* max pooling of the same input, read through (C, N, H, W) storage as NCHW */
    if (2 * s.ph <= s.kh && 2 * s.pw <= s.kw) {
        float *cn = malloc((size_t)(in + 1) * sizeof(float));
        for (int64_t b = 0; b < s.n; ++b)
            for (int64_t ch = 0; ch < s.c; ++ch)
                memcpy(cn + (ch * s.n + b) * s.h * s.w, x + (b * s.c + ch) * s.h * s.w,
                       (size_t)(s.h * s.w) * sizeof(float));
        const int64_t out = s.n * s.c * oh * ow;
        float *y = tt_test_filled(out, 0, 0), *g = tt_test_filled(out, -1, 1), *gp = tt_test_filled(in, 9, 9);
        int64_t *am = malloc((size_t)(out + 1) * sizeof(int64_t));
        double *want_gp = calloc((size_t)(in + 1), sizeof(double));
        CHECK_OK(tt_maxpool2d_forward(cn, s.n, s.c, s.h, s.w, s.h * s.w, s.n * s.h * s.w, s.kh, s.kw,
                                      s.sh, s.sw, s.ph, s.pw, y, am));
        for (int64_t b = 0; b < s.n; ++b)
            for (int64_t ch = 0; ch < s.c; ++ch)
                for (int64_t yy = 0; yy < oh; ++yy)
                    for (int64_t z = 0; z < ow; ++z) {
                        float best = -INFINITY;
                        int64_t arg = -1;
                        for (int64_t i = 0; i < s.kh; ++i)
                            for (int64_t j = 0; j < s.kw; ++j) {
                                const int64_t iy = yy * s.sh + i - s.ph, ix = z * s.sw + j - s.pw;
                                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                                const float v = x[((b * s.c + ch) * s.h + iy) * s.w + ix];
                                if (arg < 0 || v > best) { best = v; arg = iy * s.w + ix; }
                            }
                        const int64_t q = ((b * s.c + ch) * oh + yy) * ow + z;
                        CHECK(y[q] == best && am[q] == arg);
                        want_gp[(b * s.c + ch) * s.h * s.w + arg] += g[q];
                    }
        CHECK_OK(tt_maxpool2d_backward(g, am, s.n, s.c, s.h, s.w, oh, ow, gp, s.c * s.h * s.w, s.h * s.w));
        for (int64_t q = 0; q < in; ++q) CHECK(fabs(gp[q] - want_gp[q]) <= 1e-6 * (1 + fabs(want_gp[q])));
        /* the same gradient written in the input's (C, N, H, W) layout */
        CHECK_OK(tt_maxpool2d_backward(g, am, s.n, s.c, s.h, s.w, oh, ow, gp, s.h * s.w, s.n * s.h * s.w));
        for (int64_t b = 0; b < s.n; ++b)
            for (int64_t ch = 0; ch < s.c; ++ch)
                for (int64_t q = 0; q < s.h * s.w; ++q) {
                    const double want = want_gp[(b * s.c + ch) * s.h * s.w + q];
                    CHECK(fabs(gp[(ch * s.n + b) * s.h * s.w + q] - want) <= 1e-6 * (1 + fabs(want)));
                }
        free(cn); free(y); free(g); free(gp); free(am); free(want_gp);
    }
    free(x); free(cols); free(gx); free(want_gx);
}

static void check_conv_refusals(void) {
    float x[16] = {0}, out[16];
    int64_t am[4] = {0, 1, 2, 99};
    CHECK_FAILS(tt_im2col(x, 1, 1, 2, 2, 3, 3, 1, 1, 0, 0, out), TT_ERR_SHAPE_MISMATCH, "smaller than the kernel");
    CHECK_FAILS(tt_im2col(x, 1, 1, 4, 4, 2, 2, 0, 1, 0, 0, out), TT_ERR_INVALID_ARGUMENT, "stride");
    CHECK_FAILS(tt_maxpool2d_backward(x, am, 1, 1, 4, 4, 2, 2, out, 16, 16), TT_ERR_INVALID_ARGUMENT, "argmax[3]=99");
    CHECK_FAILS(tt_maxpool2d_forward(x, 1, 1, 4, 4, -1, 16, 2, 2, 2, 2, 0, 0, out, am),
                TT_ERR_INVALID_ARGUMENT, "plane strides");
}

/* Convolution geometries: single pixel, odd sizes, strides, padding, batch 0. */
static const geom shapes[] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 3, 7, 5, 3, 3, 1, 1, 1, 1}, {3, 2, 13, 11, 3, 2, 2, 3, 1, 0},
    {1, 4, 5, 5, 5, 5, 1, 1, 0, 0}, {2, 1, 17, 19, 2, 2, 2, 2, 0, 0}, {1, 2, 4, 6, 3, 3, 3, 2, 1, 1},
    {4, 8, 28, 28, 3, 3, 1, 1, 1, 1}, {0, 2, 5, 5, 3, 3, 1, 1, 1, 1},
};

/* Every training-step kernel under one ISA and thread count. */
static void check_kernels(tt_isa isa, int threads, const char *label) {
    (void)isa, (void)threads, (void)label;
    check_adam(1);
    check_adam(0);
    check_embedding(65, 128, 4096);
    check_embedding(5, 1, 7);
    check_embedding(3, 33, 0);
    check_relu(0);
    check_relu(1);
    check_relu(100003);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) check_conv(shapes[s]);
}

int main(void) {
    tt_test_seed(0x2545F4914F6CDD1Dull);
    tt_test_each_isa_and_threads("train_ops", 2, check_kernels);
    check_adam_refusals();
    check_embedding_refusals();
    check_conv_refusals();
    TT_TEST_MAIN_END;
}
