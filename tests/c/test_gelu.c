/*
 * test_gelu.c -- correctness of the fused bias + GELU kernels (forward and backward,
 * fast and reference), for every ISA this CPU runs, on 1 and 2 threads.
 *
 * The oracle is this file's own long-double loop: the tanh form
 * 0.5 u (1 + tanh(sqrt(2/pi)(u + 0.044715 u^3))) where it is well conditioned (u >= -3)
 * and the equivalent u * sigmoid(2 sqrt(2/pi)(...)) through expl below that, where
 * 1 + tanh cancels. Tolerances follow float conditioning: the argument z is rounded to
 * float (relative error ~1e-7), which moves exp(-|z|) by ~|z| * 1e-7 relative, so the
 * bound is 5e-7 (2 + |z|) relative to the size of the terms, plus a tiny absolute part.
 * Extreme inputs (+-1e30, +-inf, NaN, FLT_MAX, denormals) have exact expectations.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tt_test.h"

static const long double kS = 0.797884560802865355879892119868763737L; /* sqrt(2/pi) */
static const long double kC = 0.044715L;

/* y, dy/du and |z| of gelu_tanh at u (finite u only). */
static void oracle(long double u, long double *y, long double *dy, long double *abs_z,
                   long double *dy_terms) {
    const long double inner = kS * (u + kC * u * u * u); /* z / 2 */
    const long double z = 2 * inner;
    long double s;
    if (u >= -3) {
        const long double t = tanhl(inner);
        *y = 0.5L * u * (1 + t);
        s = 0.5L * (1 + t);
    } else {
        const long double e = expl(z); /* z < 0 here */
        s = e / (1 + e);
        *y = u * s;
    }
    const long double dz = 2 * kS * (1 + 3 * kC * u * u);
    const long double slope = u * dz * s * (1 - s);
    *dy = s + slope;
    *dy_terms = fabsl(s) + fabsl(slope);
    *abs_z = fabsl(z);
}

static float gelu_input(const float *x, const float *bias, int64_t i, int64_t j, int64_t cols) {
    return bias ? x[i * cols + j] + bias[j] : x[i * cols + j];
}

/* Checks y = gelu(x + bias) elementwise; returns the number of bad elements. */
static int judge_forward(const char *label, const float *x, const float *bias, const float *y,
                         int64_t rows, int64_t cols) {
    int bad = 0;
    for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
            const float u = gelu_input(x, bias, i, j, cols);
            const float got = y[i * cols + j];
            int ok;
            if (isnan(u)) ok = isnan(got);
            else if (u == INFINITY) ok = got == INFINITY;
            else if (u == -INFINITY) ok = got == 0.0f;
            else {
                long double want, dy, az, terms;
                oracle(u, &want, &dy, &az, &terms);
                if (u > 1e6f) want = u; /* (long double) u^3 is fine, but keep it exact */
                const long double bound = 5e-7L * (2 + az) * fabsl(want) + 1e-37L;
                ok = !isnan(got) && fabsl((long double)got - want) <= bound;
                if (!ok && bad < 5)
                    fprintf(stderr, "%s: y(%.9g) = %.9g, want %.9Lg\n", label, u, got, want);
            }
            if (!ok && (isnan(u) || isinf(u)) && bad < 5)
                fprintf(stderr, "%s: y(%g) = %g\n", label, u, got);
            bad += !ok;
        }
    return bad;
}

static int judge_backward(const char *label, const float *x, const float *bias, const float *gy,
                          const float *gx, const float *gb, int64_t rows, int64_t cols) {
    int bad = 0;
    for (int64_t j = 0; j < cols; ++j) {
        long double sum = 0, sum_abs = 0, sum_bound = 0;
        int any_nan = 0;
        for (int64_t i = 0; i < rows; ++i) {
            const float u = gelu_input(x, bias, i, j, cols);
            const float g = gy[i * cols + j], got = gx[i * cols + j];
            long double want, bound;
            int ok;
            if (isnan(u)) {
                ok = isnan(got);
                any_nan = 1;
                want = 0, bound = 0;
            } else if (isinf(u) || fabsf(u) > 1e6f) {
                want = (u > 0) ? g : 0.0L; /* gelu' is exactly 1 / 0 in float out there */
                bound = 1e-7L * fabsl((long double)g);
                ok = fabsl(got - want) <= bound;
            } else {
                long double y, dy, az, terms;
                oracle(u, &y, &dy, &az, &terms);
                want = g * dy;
                bound = 5e-7L * (2 + az) * fabsl((long double)g) * terms + 1e-37L;
                ok = !isnan(got) && fabsl(got - want) <= bound;
            }
            if (!ok && bad < 5)
                fprintf(stderr, "%s: grad_x at u=%.9g, g=%.9g: %.9g, want %.9Lg\n", label, u, g, got,
                        want);
            bad += !ok;
            sum += want;
            sum_abs += fabsl(want);
            sum_bound += bound;
        }
        if (gb) {
            const int ok = any_nan ? isnan(gb[j]) : fabsl(gb[j] - sum) <= sum_bound + 2e-6L * sum_abs + 1e-30L;
            if (!ok && bad < 5)
                fprintf(stderr, "%s: grad_bias[%lld] = %.9g, want %.9Lg\n", label, (long long)j, gb[j],
                        sum);
            bad += !ok;
        }
    }
    return bad;
}

typedef tt_status (*fwd_fn)(const float *, const float *, float *, int64_t, int64_t);
typedef tt_status (*bwd_fn)(const float *, const float *, const float *, float *, float *, int64_t,
                            int64_t);

static void check_shape(const char *label, fwd_fn fwd, bwd_fn bwd, int64_t rows, int64_t cols,
                        int extremes) {
    const int64_t n = rows * cols;
    float *x = malloc((size_t)(n + 1) * sizeof(float)), *y = malloc((size_t)(n + 1) * sizeof(float));
    float *gy = malloc((size_t)(n + 1) * sizeof(float)), *gx = malloc((size_t)(n + 1) * sizeof(float));
    float *bias = malloc((size_t)(cols + 1) * sizeof(float)), *gb = malloc((size_t)(cols + 1) * sizeof(float));
    for (int64_t i = 0; i < n; ++i)
        x[i] = tt_test_uniform(-8.0f, 8.0f), gy[i] = tt_test_uniform(-1.0f, 1.0f);
    for (int64_t j = 0; j < cols; ++j) bias[j] = tt_test_uniform(-1.0f, 1.0f);
    if (extremes) {
        static const float specials[] = {0.0f,   -0.0f,   1e30f,  -1e30f,  1e10f,   -1e10f,
                                         1e-30f, -1e-30f, 1e-40f, -1e-40f, FLT_MAX, -FLT_MAX,
                                         -5.0f,  -9.5f,   -12.0f, -60.0f,  3.0f,    100.0f,
                                         -0.7518f, 0.5f};
        const int ns = (int)(sizeof specials / sizeof specials[0]);
        for (int64_t i = 0; i < n && i < 3 * ns; ++i) x[i * 7 % n] = specials[i % ns];
        if (n > 2) x[n - 1] = INFINITY, x[n - 2] = -INFINITY;
        if (n > 3) x[n / 2] = NAN;
    }
    int bad = 0;
    for (int with_bias = 0; with_bias < 2; ++with_bias) {
        const float *b = with_bias ? bias : NULL;
        if (extremes && with_bias) continue; /* x + bias would move the special values */
        CHECK_OK(fwd(x, b, y, rows, cols));
        bad += judge_forward(label, x, b, y, rows, cols);
        for (int64_t j = 0; j < cols; ++j) gb[j] = NAN; /* must be overwritten */
        CHECK_OK(bwd(x, b, gy, gx, gb, rows, cols));
        bad += judge_backward(label, x, b, gy, gx, gb, rows, cols);
        /* in place: y over x, grad_x over grad_y */
        float *xc = malloc((size_t)(n + 1) * sizeof(float)), *gc = malloc((size_t)(n + 1) * sizeof(float));
        for (int64_t i = 0; i < n; ++i) xc[i] = x[i], gc[i] = gy[i];
        CHECK_OK(fwd(xc, b, xc, rows, cols));
        CHECK_OK(bwd(x, b, gc, gc, NULL, rows, cols));
        for (int64_t i = 0; i < n; ++i) {
            bad += memcmp(&xc[i], &y[i], sizeof(float)) != 0 && !(isnan(xc[i]) && isnan(y[i]));
            bad += memcmp(&gc[i], &gx[i], sizeof(float)) != 0 && !(isnan(gc[i]) && isnan(gx[i]));
        }
        free(xc), free(gc);
    }
    if (bad) fprintf(stderr, "  in %s rows=%lld cols=%lld: %d bad\n", label, (long long)rows, (long long)cols, bad);
    CHECK(bad == 0);
    free(x), free(y), free(gy), free(gx), free(bias), free(gb);
}

static void check_all_shapes(const char *label, fwd_fn fwd, bwd_fn bwd) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {7, 33}, {2, 17}, {5, 8}, {13, 768}, {300, 257}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        check_shape(label, fwd, bwd, shapes[s][0], shapes[s][1], 0);
    check_shape(label, fwd, bwd, 9, 23, 1);
    check_shape(label, fwd, bwd, 1, 101, 1);
    /* empty: nothing written but grad_bias, which becomes 0 for rows == 0 */
    float gb[3] = {NAN, NAN, NAN};
    CHECK_OK(fwd(NULL, NULL, NULL, 0, 3));
    CHECK_OK(bwd(NULL, NULL, NULL, NULL, gb, 0, 3));
    CHECK(gb[0] == 0.0f && gb[1] == 0.0f && gb[2] == 0.0f);
    CHECK_OK(bwd(NULL, NULL, NULL, NULL, NULL, 4, 0));
}

static void check_bad_arguments(fwd_fn fwd, bwd_fn bwd) {
    float x[16] = {0}, y[16], g[16] = {0}, gx[16], b[4] = {0};
    const int64_t big = (int64_t)1 << 40;
    CHECK_FAILS(fwd(x, b, y, -1, 4), TT_ERR_INVALID_ARGUMENT, "rows=-1");
    CHECK_FAILS(fwd(x, b, y, 4, -2), TT_ERR_INVALID_ARGUMENT, "cols=-2");
    CHECK_FAILS(fwd(x, b, y, big, big), TT_ERR_OVERFLOW, "overflow");
    CHECK_FAILS(fwd(NULL, b, y, 4, 4), TT_ERR_NULL_POINTER, "x is NULL");
    CHECK_FAILS(fwd(x, b, NULL, 4, 4), TT_ERR_NULL_POINTER, "y is NULL");
    CHECK_FAILS(fwd(x, b, x + 1, 3, 4), TT_ERR_INVALID_ARGUMENT, "overlaps");
    CHECK_FAILS(bwd(x, b, g, gx, NULL, -3, 4), TT_ERR_INVALID_ARGUMENT, "rows=-3");
    CHECK_FAILS(bwd(x, b, g, gx, NULL, 4, -1), TT_ERR_INVALID_ARGUMENT, "cols=-1");
    CHECK_FAILS(bwd(x, b, g, gx, NULL, big, big), TT_ERR_OVERFLOW, "overflow");
    CHECK_FAILS(bwd(NULL, b, g, gx, NULL, 4, 4), TT_ERR_NULL_POINTER, "x is NULL");
    CHECK_FAILS(bwd(x, b, NULL, gx, NULL, 4, 4), TT_ERR_NULL_POINTER, "grad_y is NULL");
    CHECK_FAILS(bwd(x, b, g, NULL, NULL, 4, 4), TT_ERR_NULL_POINTER, "grad_x is NULL");
    CHECK_FAILS(bwd(x, b, g, g + 2, NULL, 3, 4), TT_ERR_INVALID_ARGUMENT, "overlaps");
}

/* The dispatched kernels under one ISA and thread count, and the paths they report. */
static void check_fast_path(tt_isa isa, int threads, const char *label) {
    (void)threads;
    check_all_shapes(label, tt_bias_gelu_forward, tt_bias_gelu_backward);
    char want[64];
    snprintf(want, sizeof want, "bias_gelu_backward:%s", tt_isa_name(isa));
    CHECK(strcmp(tt_last_kernel_path(), want) == 0);
    CHECK_OK(tt_bias_gelu_forward(NULL, NULL, NULL, 0, 0));
    snprintf(want, sizeof want, "bias_gelu_forward:%s", tt_isa_name(isa));
    CHECK(strcmp(tt_last_kernel_path(), want) == 0);
}

int main(void) {
    tt_test_seed(0x2545F4914F6CDD1Dull);
    check_all_shapes("reference", tt_bias_gelu_forward_reference, tt_bias_gelu_backward_reference);
    CHECK(strcmp(tt_last_kernel_path(), "bias_gelu_backward:reference") == 0);
    check_bad_arguments(tt_bias_gelu_forward_reference, tt_bias_gelu_backward_reference);
    check_bad_arguments(tt_bias_gelu_forward, tt_bias_gelu_backward);

    tt_test_each_isa_and_threads("gelu", 2, check_fast_path);
    TT_TEST_MAIN_END;
}
