/*
 * test_rownorm.c -- correctness of the row-wise layer norm and (log-)softmax kernels,
 * forward and backward, for every ISA this CPU runs, on 1 and 2 threads, against this
 * file's own double-precision two-pass loops; awkward shapes (cols 0, 1, 7, 17, 127, 1000;
 * rows 0, 1, 3, 67, 300: the last ones split across threads and 64-row chunks), cross-entropy
 * from the log-sum-exp with ignored rows, optional
 * buffers NULL, in-place calls, path reports, and every bad argument (status + message).
 *
 * Tolerances follow float conditioning: each result is compared with a bound of a few
 * 1e-6 relative to the size of the terms that make it (not to the result, which may cancel).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tt_test.h"

static int close_to(double got, double want, double bound) {
    return !isnan(got) && fabs(got - want) <= bound;
}

/* ---------------------------------------------------------------- layer norm */

static void check_layernorm(const char *label, int64_t rows, int64_t cols, int affine) {
    const int64_t n = rows * cols;
    const float offset = tt_test_uniform(-4.0f, 4.0f), eps = 1e-5f;
    float *x = tt_test_filled(n, offset - 2.0f, offset + 2.0f);
    float *gamma = affine ? tt_test_filled(cols, 0.5f, 1.5f) : NULL;
    float *beta = affine ? tt_test_filled(cols, -1.0f, 1.0f) : NULL;
    float *gy = tt_test_filled(n, -1.0f, 1.0f);
    float *y = tt_test_filled(n, 0, 0), *gx = tt_test_filled(n, 0, 0);
    float *mean = tt_test_filled(rows, 0, 0), *rstd = tt_test_filled(rows, 0, 0);
    float *dg = tt_test_filled(cols, 9, 9), *db = tt_test_filled(cols, 9, 9);
    double *xh = (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    double *rdg = (double *)calloc((size_t)(cols > 0 ? cols : 1), sizeof(double));
    double *rdb = (double *)calloc((size_t)(cols > 0 ? cols : 1), sizeof(double));
    double *bdg = (double *)calloc((size_t)(cols > 0 ? cols : 1), sizeof(double));
    int bad = 0;

    CHECK_OK(tt_layernorm_forward(x, gamma, beta, y, mean, rstd, rows, cols, eps));
    for (int64_t i = 0; i < rows; ++i) {
        double m = 0, v = 0;
        for (int64_t j = 0; j < cols; ++j) m += x[i * cols + j];
        m = cols ? m / cols : 0.0;
        for (int64_t j = 0; j < cols; ++j) v += (x[i * cols + j] - m) * (x[i * cols + j] - m);
        v = cols ? v / cols : 0.0;
        const double r = 1.0 / sqrt(v + eps);
        if (!close_to(mean[i], m, 1e-6 * (fabs(m) + 1.0 / r))) bad++;
        if (!close_to(rstd[i], r, 4e-6 * r)) bad++;
        for (int64_t j = 0; j < cols; ++j) {
            const double h = (x[i * cols + j] - m) * r, g = gamma ? gamma[j] : 1.0;
            xh[i * cols + j] = h;
            const double want = h * g + (beta ? beta[j] : 0.0);
            const double bound = 4e-6 * (fabs(h) + 1.0 + fabs(m) * r) * fabs(g) + 1e-6 * fabs(want);
            if (!close_to(y[i * cols + j], want, bound)) {
                if (bad < 5) fprintf(stderr, "%s ln fwd [%lld,%lld]: %.9g want %.9g\n", label,
                                     (long long)i, (long long)j, y[i * cols + j], want);
                bad++;
            }
        }
    }
    CHECK_OK(tt_layernorm_backward(x, gamma, mean, rstd, gy, gx, affine ? dg : NULL,
                                   affine ? db : NULL, rows, cols));
    for (int64_t i = 0; i < rows; ++i) {
        double a = 0, b = 0, aa = 0, bb = 0;
        const double r = rstd[i];
        for (int64_t j = 0; j < cols; ++j) {
            const double g = (double)gy[i * cols + j] * (gamma ? gamma[j] : 1.0);
            a += g;
            b += g * xh[i * cols + j];
            aa += fabs(g);
            bb += fabs(g * xh[i * cols + j]);
            rdg[j] += gy[i * cols + j] * xh[i * cols + j];
            rdb[j] += gy[i * cols + j];
            bdg[j] += fabs(gy[i * cols + j] * xh[i * cols + j]) + fabs(gy[i * cols + j]);
        }
        a /= cols;
        b /= cols;
        aa /= cols;
        bb /= cols;
        for (int64_t j = 0; j < cols; ++j) {
            const double g = (double)gy[i * cols + j] * (gamma ? gamma[j] : 1.0);
            const double h = xh[i * cols + j];
            const double want = r * (g - a - h * b);
            const double bound = 1e-5 * r * (fabs(g) + aa + fabs(h) * bb) + 1e-30;
            if (!close_to(gx[i * cols + j], want, bound)) {
                if (bad < 5) fprintf(stderr, "%s ln bwd [%lld,%lld]: %.9g want %.9g\n", label,
                                     (long long)i, (long long)j, gx[i * cols + j], want);
                bad++;
            }
        }
    }
    if (affine)
        for (int64_t j = 0; j < cols; ++j) {
            if (!close_to(dg[j], rdg[j], 1e-5 * bdg[j] + 1e-30)) bad++;
            if (!close_to(db[j], rdb[j], 1e-5 * bdg[j] + 1e-30)) bad++;
        }
    /* in place (y == x, grad_x == grad_y), no statistics wanted, column sums only */
    if (n > 0) {
        float *x2 = tt_test_filled(n, 0, 0), *g2 = tt_test_filled(n, 0, 0), *dg2 = tt_test_filled(cols, 0, 0);
        memcpy(x2, x, (size_t)n * sizeof(float));
        CHECK_OK(tt_layernorm_forward(x2, gamma, beta, x2, NULL, NULL, rows, cols, eps));
        CHECK(memcmp(x2, y, (size_t)n * sizeof(float)) == 0);
        memcpy(g2, gy, (size_t)n * sizeof(float));
        CHECK_OK(tt_layernorm_backward(x, gamma, mean, rstd, g2, g2, NULL, NULL, rows, cols));
        CHECK(memcmp(g2, gx, (size_t)n * sizeof(float)) == 0);
        if (affine) {
            CHECK_OK(tt_layernorm_backward(x, gamma, mean, rstd, gy, NULL, dg2, NULL, rows, cols));
            CHECK(memcmp(dg2, dg, (size_t)cols * sizeof(float)) == 0);
        }
        free(x2);
        free(g2);
        free(dg2);
    }
    if (rows == 0 && affine)
        for (int64_t j = 0; j < cols; ++j) CHECK(dg[j] == 0.0f && db[j] == 0.0f);
    if (bad) fprintf(stderr, "%s: layer norm %lld x %lld (affine %d): %d bad\n", label,
                     (long long)rows, (long long)cols, affine, bad);
    CHECK(bad == 0);
    free(x); free(gamma); free(beta); free(gy); free(y); free(gx); free(mean); free(rstd);
    free(dg); free(db); free(xh); free(rdg); free(rdb); free(bdg);
}

/* ---------------------------------------------------------------- softmax */

static void check_softmax(const char *label, int64_t rows, int64_t cols, int is_log) {
    const int64_t n = rows * cols;
    float *x = tt_test_filled(n, -12.0f, 12.0f), *gy = tt_test_filled(n, -1.0f, 1.0f);
    float *y = tt_test_filled(n, 0, 0), *gx = tt_test_filled(n, 0, 0), *lse = tt_test_filled(rows, 0, 0);
    double *p = (double *)calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    int bad = 0;
    CHECK_OK((is_log ? tt_log_softmax_forward : tt_softmax_forward)(x, y, lse, rows, cols));
    for (int64_t i = 0; i < rows; ++i) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < cols; ++j) m = fmax(m, x[i * cols + j]);
        for (int64_t j = 0; j < cols; ++j) s += exp(x[i * cols + j] - m);
        const double l = m + log(s);
        if (cols == 0) CHECK(lse[i] == -INFINITY);
        else if (!close_to(lse[i], l, 1e-6 * (fabs(m) + 1))) bad++;
        for (int64_t j = 0; j < cols; ++j) {
            const double lp = x[i * cols + j] - l;
            p[i * cols + j] = exp(lp);
            const double got = y[i * cols + j];
            const int ok = is_log ? close_to(got, lp, 2e-6 * (fabs(x[i * cols + j]) + fabs(l) + 1))
                               : close_to(got, exp(lp), 4e-6 * (1 + fabs(x[i * cols + j]) + fabs(m)) * exp(lp) + 1e-38);
            if (!ok) {
                if (bad < 5) fprintf(stderr, "%s %s fwd [%lld,%lld]: %.9g want %.9g\n", label,
                                     is_log ? "log_softmax" : "softmax", (long long)i, (long long)j,
                                     got, is_log ? lp : exp(lp));
                bad++;
            }
        }
    }
    CHECK_OK((is_log ? tt_log_softmax_backward : tt_softmax_backward)(y, gy, gx, rows, cols));
    for (int64_t i = 0; i < rows; ++i) {
        double s = 0, sa = 0;
        for (int64_t j = 0; j < cols; ++j) {
            const double w = is_log ? 1.0 : p[i * cols + j];
            s += gy[i * cols + j] * w;
            sa += fabs(gy[i * cols + j] * w);
        }
        for (int64_t j = 0; j < cols; ++j) {
            const double pj = p[i * cols + j], g = gy[i * cols + j];
            const double want = is_log ? g - pj * s : pj * (g - s);
            const double bound = is_log ? 1e-5 * (fabs(g) + pj * sa) : 1e-5 * pj * (fabs(g) + sa) + 1e-38;
            if (!close_to(gx[i * cols + j], want, bound)) {
                if (bad < 5) fprintf(stderr, "%s %s bwd [%lld,%lld]: %.9g want %.9g\n", label,
                                     is_log ? "log_softmax" : "softmax", (long long)i, (long long)j,
                                     gx[i * cols + j], want);
                bad++;
            }
        }
    }
    if (n > 0) { /* in place, no lse */
        float *x2 = tt_test_filled(n, 0, 0);
        memcpy(x2, x, (size_t)n * sizeof(float));
        CHECK_OK((is_log ? tt_log_softmax_forward : tt_softmax_forward)(x2, x2, NULL, rows, cols));
        CHECK(memcmp(x2, y, (size_t)n * sizeof(float)) == 0);
        CHECK_OK((is_log ? tt_log_softmax_backward : tt_softmax_backward)(x2, gy, x2, rows, cols));
        CHECK(memcmp(x2, gx, (size_t)n * sizeof(float)) == 0);
        free(x2);
    }
    if (bad) fprintf(stderr, "%s: %s %lld x %lld: %d bad\n", label, is_log ? "log_softmax" : "softmax",
                     (long long)rows, (long long)cols, bad);
    CHECK(bad == 0);
    free(x); free(gy); free(y); free(gx); free(lse); free(p);
}

static void check_softmax_edges(void) {
    /* NaN, +inf and an all -inf row give NaN rows; -inf entries give 0 probability. */
    float x[4 * 5] = {0, 1, NAN, 2, 3,   0, INFINITY, 1, 2, 3,
                      -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                      -INFINITY, 0, -INFINITY, 0, -INFINITY};
    float y[20], l[20];
    CHECK_OK(tt_softmax_forward(x, y, NULL, 4, 5));
    for (int j = 0; j < 15; ++j) CHECK(isnan(y[j]));
    CHECK(y[15] == 0.0f && y[17] == 0.0f && y[19] == 0.0f && y[16] == 0.5f && y[18] == 0.5f);
    CHECK_OK(tt_log_softmax_forward(x, l, NULL, 4, 5));
    for (int j = 0; j < 15; ++j) CHECK(isnan(l[j]));
    CHECK(l[15] == -INFINITY && fabsf(l[16] + 0.6931472f) < 1e-6f);
    /* huge values: shifted by the maximum, nothing overflows */
    float big[3] = {1e30f, 1e30f, -1e30f}, yb[3];
    CHECK_OK(tt_softmax_forward(big, yb, NULL, 1, 3));
    CHECK(yb[0] == 0.5f && yb[1] == 0.5f && yb[2] == 0.0f);
}

/* ---------------------------------------------------------------- cross-entropy */

static void check_cross_entropy(const char *label, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols, ignore = -100;
    float *x = tt_test_filled(n, -8.0f, 8.0f), *gl = tt_test_filled(rows, 0.1f, 2.0f);
    float *loss = tt_test_filled(rows, 7, 7), *lse = tt_test_filled(rows, 7, 7), *gx = tt_test_filled(n, 7, 7);
    int64_t *t = (int64_t *)malloc((size_t)(rows > 0 ? rows : 1) * sizeof(int64_t));
    for (int64_t i = 0; i < rows; ++i)
        t[i] = (cols == 0 || i % 5 == 3) ? ignore : (int64_t)(tt_test_uniform(0, 1) * cols) % cols;
    int bad = 0;
    CHECK_OK(tt_cross_entropy_forward(x, t, loss, lse, rows, cols, ignore));
    CHECK_OK(tt_cross_entropy_backward(x, t, lse, gl, gx, rows, cols, ignore));
    for (int64_t i = 0; i < rows; ++i) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < cols; ++j) m = fmax(m, x[i * cols + j]);
        for (int64_t j = 0; j < cols; ++j) s += exp(x[i * cols + j] - m);
        const double l = m + log(s);
        if (cols > 0 && !close_to(lse[i], l, 1e-6 * (fabs(m) + 1))) bad++;
        const double want = t[i] == ignore ? 0.0 : l - x[i * cols + t[i]];
        if (t[i] == ignore ? loss[i] != 0.0f : !close_to(loss[i], want, 2e-6 * (fabs(m) + 8))) bad++;
        for (int64_t j = 0; j < cols; ++j) {
            const double p = exp(x[i * cols + j] - l);
            const double w = t[i] == ignore ? 0.0 : gl[i] * (p - (j == t[i]));
            if (t[i] == ignore ? gx[i * cols + j] != 0.0f
                               : !close_to(gx[i * cols + j], w, 1e-5 * gl[i] * (p + (j == t[i])) + 1e-38)) {
                if (bad < 5) fprintf(stderr, "%s ce bwd [%lld,%lld]: %.9g want %.9g\n", label,
                                     (long long)i, (long long)j, gx[i * cols + j], w);
                bad++;
            }
        }
    }
    if (n > 0) { /* in place, no lse wanted */
        float *x2 = tt_test_filled(n, 0, 0), *l2 = tt_test_filled(rows, 0, 0);
        memcpy(x2, x, (size_t)n * sizeof(float));
        CHECK_OK(tt_cross_entropy_forward(x2, t, l2, NULL, rows, cols, ignore));
        CHECK(memcmp(l2, loss, (size_t)rows * sizeof(float)) == 0);
        CHECK_OK(tt_cross_entropy_backward(x2, t, lse, gl, x2, rows, cols, ignore));
        CHECK(memcmp(x2, gx, (size_t)n * sizeof(float)) == 0);
        free(x2);
        free(l2);
    }
    if (bad) fprintf(stderr, "%s: cross-entropy %lld x %lld: %d bad\n", label, (long long)rows,
                     (long long)cols, bad);
    CHECK(bad == 0);
    free(x); free(gl); free(loss); free(lse); free(gx); free(t);
}

/* ---------------------------------------------------------------- bad arguments */

static void check_bad_arguments(void) {
    float a[64] = {0}, b[64] = {0}, c[64] = {0}, d[8] = {0}, e[8] = {0}, g[8] = {1};
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, b, NULL, NULL, -1, 4, 1e-5f), TT_ERR_INVALID_ARGUMENT, "rows=-1");
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, b, NULL, NULL, 4, -2, 1e-5f), TT_ERR_INVALID_ARGUMENT, "cols=-2");
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, b, NULL, NULL, INT64_MAX / 2, 4, 1e-5f), TT_ERR_OVERFLOW, "overflow");
    CHECK_FAILS(tt_layernorm_forward(NULL, NULL, NULL, b, NULL, NULL, 2, 4, 1e-5f), TT_ERR_NULL_POINTER, "x is NULL");
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, NULL, NULL, NULL, 2, 4, 1e-5f), TT_ERR_NULL_POINTER, "y is NULL");
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, b, NULL, NULL, 2, 4, NAN), TT_ERR_INVALID_ARGUMENT, "eps");
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, b, NULL, NULL, 2, 4, -1.0f), TT_ERR_INVALID_ARGUMENT, "eps");
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, b, NULL, NULL, 2, 4, INFINITY), TT_ERR_INVALID_ARGUMENT, "eps");
    CHECK_FAILS(tt_layernorm_forward(a, NULL, NULL, a + 1, NULL, NULL, 2, 4, 1e-5f), TT_ERR_INVALID_ARGUMENT, "y overlaps x");
    CHECK_FAILS(tt_layernorm_forward(a, a + 4, NULL, a, NULL, NULL, 2, 4, 1e-5f), TT_ERR_INVALID_ARGUMENT, "y overlaps gamma");
    CHECK_FAILS(tt_layernorm_forward(a, g, b + 2, b, NULL, NULL, 2, 4, 1e-5f), TT_ERR_INVALID_ARGUMENT, "y overlaps beta");
    CHECK_FAILS(tt_layernorm_forward(a, g, NULL, b, b + 7, NULL, 2, 4, 1e-5f), TT_ERR_INVALID_ARGUMENT, "overlaps");
    CHECK_FAILS(tt_layernorm_forward(a, g, NULL, b, d, d, 2, 4, 1e-5f), TT_ERR_INVALID_ARGUMENT, "mean overlaps rstd");
    CHECK_OK(tt_layernorm_forward(NULL, NULL, NULL, NULL, NULL, NULL, 0, 4, 1e-5f));
    CHECK_OK(tt_layernorm_forward(NULL, NULL, NULL, NULL, d, e, 3, 0, 0.25f));
    CHECK(d[0] == 0.0f && e[2] == 2.0f);

    CHECK_FAILS(tt_layernorm_backward(a, NULL, d, e, b, c, NULL, NULL, -1, 4), TT_ERR_INVALID_ARGUMENT, "rows=-1");
    CHECK_FAILS(tt_layernorm_backward(NULL, NULL, d, e, b, c, NULL, NULL, 2, 4), TT_ERR_NULL_POINTER, "x is NULL");
    CHECK_FAILS(tt_layernorm_backward(a, NULL, NULL, e, b, c, NULL, NULL, 2, 4), TT_ERR_NULL_POINTER, "mean is NULL");
    CHECK_FAILS(tt_layernorm_backward(a, NULL, d, NULL, b, c, NULL, NULL, 2, 4), TT_ERR_NULL_POINTER, "rstd is NULL");
    CHECK_FAILS(tt_layernorm_backward(a, NULL, d, e, NULL, c, NULL, NULL, 2, 4), TT_ERR_NULL_POINTER, "grad_y is NULL");
    CHECK_FAILS(tt_layernorm_backward(a, NULL, d, e, b, b + 1, NULL, NULL, 2, 4), TT_ERR_INVALID_ARGUMENT, "grad_x overlaps grad_y");
    CHECK_FAILS(tt_layernorm_backward(a, NULL, d, e, b, c, a + 2, NULL, 2, 4), TT_ERR_INVALID_ARGUMENT, "grad_gamma overlaps x");
    CHECK_FAILS(tt_layernorm_backward(a, NULL, d, e, b, c, c + 16, c + 16, 2, 4), TT_ERR_INVALID_ARGUMENT, "grad_gamma overlaps grad_beta");
    CHECK_FAILS(tt_layernorm_backward(a, NULL, d, e, b, c, d, NULL, 2, 4), TT_ERR_INVALID_ARGUMENT, "grad_gamma overlaps mean");
    CHECK_OK(tt_layernorm_backward(a, NULL, d, e, b, a, NULL, NULL, 2, 4)); /* grad_x == x */

    const struct { tt_status (*fwd)(const float *, float *, float *, int64_t, int64_t);
                   tt_status (*bwd)(const float *, const float *, float *, int64_t, int64_t); } sm[] = {
        {tt_softmax_forward, tt_softmax_backward}, {tt_log_softmax_forward, tt_log_softmax_backward}};
    for (int i = 0; i < 2; ++i) {
        CHECK_FAILS(sm[i].fwd(a, b, NULL, 2, -1), TT_ERR_INVALID_ARGUMENT, "cols=-1");
        CHECK_FAILS(sm[i].fwd(NULL, b, NULL, 2, 4), TT_ERR_NULL_POINTER, "x is NULL");
        CHECK_FAILS(sm[i].fwd(a, NULL, NULL, 2, 4), TT_ERR_NULL_POINTER, "y is NULL");
        CHECK_FAILS(sm[i].fwd(a, a + 3, NULL, 2, 4), TT_ERR_INVALID_ARGUMENT, "y overlaps x");
        CHECK_FAILS(sm[i].fwd(a, b, b + 1, 2, 4), TT_ERR_INVALID_ARGUMENT, "overlaps");
        CHECK_FAILS(sm[i].fwd(a, b, NULL, INT64_MAX, 2), TT_ERR_OVERFLOW, "overflow");
        CHECK_FAILS(sm[i].bwd(NULL, b, c, 2, 4), TT_ERR_NULL_POINTER, "y is NULL");
        CHECK_FAILS(sm[i].bwd(a, NULL, c, 2, 4), TT_ERR_NULL_POINTER, "grad_y is NULL");
        CHECK_FAILS(sm[i].bwd(a, b, NULL, 2, 4), TT_ERR_NULL_POINTER, "grad_x is NULL");
        CHECK_FAILS(sm[i].bwd(a, b, b + 4, 2, 4), TT_ERR_INVALID_ARGUMENT, "grad_x overlaps grad_y");
        CHECK_FAILS(sm[i].bwd(a, b, a + 1, 2, 4), TT_ERR_INVALID_ARGUMENT, "grad_x overlaps y");
        CHECK_OK(sm[i].fwd(NULL, NULL, NULL, 0, 4));
        CHECK_OK(sm[i].bwd(NULL, NULL, NULL, 3, 0));
    }

    int64_t t[4] = {0, 1, -100, 3};
    CHECK_FAILS(tt_cross_entropy_forward(a, t, d, e, -1, 4, -100), TT_ERR_INVALID_ARGUMENT, "rows=-1");
    CHECK_FAILS(tt_cross_entropy_forward(NULL, t, d, e, 4, 4, -100), TT_ERR_NULL_POINTER, "logits is NULL");
    CHECK_FAILS(tt_cross_entropy_forward(a, NULL, d, e, 4, 4, -100), TT_ERR_NULL_POINTER, "target is NULL");
    CHECK_FAILS(tt_cross_entropy_forward(a, t, NULL, e, 4, 4, -100), TT_ERR_NULL_POINTER, "loss is NULL");
    CHECK_FAILS(tt_cross_entropy_forward(a, t, a + 2, e, 4, 4, -100), TT_ERR_INVALID_ARGUMENT, "loss overlaps logits");
    CHECK_FAILS(tt_cross_entropy_forward(a, t, d, d + 1, 4, 4, -100), TT_ERR_INVALID_ARGUMENT, "overlaps");
    CHECK_FAILS(tt_cross_entropy_forward(a, t, d, e, 4, 3, -100), TT_ERR_INVALID_ARGUMENT, "target[3]=3 is out of range");
    CHECK_FAILS(tt_cross_entropy_forward(a, t, d, e, 4, 4, 7), TT_ERR_INVALID_ARGUMENT, "target[2]=-100");
    CHECK_FAILS(tt_cross_entropy_backward(a, t, e, d, c, 4, 3, -100), TT_ERR_INVALID_ARGUMENT, "out of range");
    CHECK_FAILS(tt_cross_entropy_backward(a, t, NULL, d, c, 4, 4, -100), TT_ERR_NULL_POINTER, "lse is NULL");
    CHECK_FAILS(tt_cross_entropy_backward(a, t, e, NULL, c, 4, 4, -100), TT_ERR_NULL_POINTER, "grad_loss is NULL");
    CHECK_FAILS(tt_cross_entropy_backward(a, t, e, d, NULL, 4, 4, -100), TT_ERR_NULL_POINTER, "grad_logits is NULL");
    CHECK_FAILS(tt_cross_entropy_backward(a, t, e, d, a + 1, 4, 4, -100), TT_ERR_INVALID_ARGUMENT, "grad_logits overlaps logits");
    CHECK_FAILS(tt_cross_entropy_backward(a, t, e, d, e, 1, 4, -100), TT_ERR_INVALID_ARGUMENT, "grad_logits overlaps lse");
    CHECK_OK(tt_cross_entropy_forward(NULL, NULL, NULL, NULL, 0, 4, -100));
    CHECK_OK(tt_cross_entropy_backward(NULL, NULL, NULL, NULL, NULL, 0, 4, -100));
}

static void check_all(const char *label) {
    static const int64_t rows_list[] = {0, 1, 3, 67, 300};
    static const int64_t cols_list[] = {0, 1, 7, 17, 127, 1000};
    for (size_t r = 0; r < sizeof rows_list / sizeof rows_list[0]; ++r)
        for (size_t c = 0; c < sizeof cols_list / sizeof cols_list[0]; ++c) {
            const int64_t rows = rows_list[r], cols = cols_list[c];
            if (rows * cols > 70000) continue;
            check_layernorm(label, rows, cols, 1);
            check_layernorm(label, rows, cols, 0);
            check_softmax(label, rows, cols, 0);
            check_softmax(label, rows, cols, 1);
            check_cross_entropy(label, rows, cols);
        }
    check_layernorm(label, 300, 300, 1); /* > 2^16 elements: threads, several chunks each */
    check_softmax(label, 300, 300, 1);
    check_cross_entropy(label, 300, 300);
    check_softmax_edges();
}

/* Every row kernel under one ISA and thread count, and the path each call reports. */
static void check_fast_path(tt_isa isa, int threads, const char *label) {
    (void)threads;
    check_all(label);
    char want[64];
    static const char *paths[] = {"layernorm_forward", "layernorm_backward",
                                  "softmax_forward", "log_softmax_forward",
                                  "softmax_backward", "log_softmax_backward",
                                  "cross_entropy_forward", "cross_entropy_backward"};
    for (int p = 0; p < 8; ++p) {
        int64_t tg = 0;
        float v = 1.0f, w = 1.0f, o = 0.0f, m = 0.0f, s = 0.0f;
        switch (p) {
            case 0: CHECK_OK(tt_layernorm_forward(&v, NULL, NULL, &o, &m, &s, 1, 1, 1e-5f)); break;
            case 1: CHECK_OK(tt_layernorm_backward(&v, NULL, &m, &s, &w, &o, NULL, NULL, 1, 1)); break;
            case 2: CHECK_OK(tt_softmax_forward(&v, &o, NULL, 1, 1)); break;
            case 3: CHECK_OK(tt_log_softmax_forward(&v, &o, NULL, 1, 1)); break;
            case 4: CHECK_OK(tt_softmax_backward(&v, &w, &o, 1, 1)); break;
            case 5: CHECK_OK(tt_log_softmax_backward(&v, &w, &o, 1, 1)); break;
            case 6: CHECK_OK(tt_cross_entropy_forward(&v, &tg, &o, &m, 1, 1, -100)); break;
            default: CHECK_OK(tt_cross_entropy_backward(&v, &tg, &m, &w, &o, 1, 1, -100)); break;
        }
        snprintf(want, sizeof want, "%s:%s", paths[p], tt_isa_name(isa));
        if (strcmp(tt_last_kernel_path(), want) != 0) {
            fprintf(stderr, "path %s, want %s\n", tt_last_kernel_path(), want);
            tt_test_failures++;
        }
    }
}

int main(void) {
    check_bad_arguments();
    tt_test_each_isa_and_threads("rownorm", 2, check_fast_path);
    TT_TEST_MAIN_END;
}
