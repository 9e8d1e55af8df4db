/*
 * test_gemm.c -- correctness of tt_sgemm, tt_sgemm_reference and
 * tt_sgemm_strided_batched, for every ISA this CPU runs, on 1 and 2 threads.
 *
 * How results are judged: small products are compared element by element with a
 * float64 product; large ones by a residual check, C t against alpha A (B t) + beta C0 t
 * for a random vector t, computed in double. The tolerance is the classic error bound
 * of float accumulation, (K + 4) * 2^-23 times the same expression computed on absolute
 * values, so it grows with K but a wrong element (an error of the size of |A||B|) fails.
 * Also covered: all four transposes, alpha/beta (beta = 0 on a NaN-filled C must not
 * propagate NaN), leading dimensions larger than needed, empty and awkward shapes, the
 * kernel path report, and every bad-argument case (status + message).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tt_test.h"

/* op(X)[r][c] of a stored matrix with leading dimension ld. */
static double op_at(const float *X, int64_t ld, int trans, int64_t r, int64_t c) {
    return trans ? X[c * ld + r] : X[r * ld + c];
}

typedef int (*gemm_fn)(int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                       const float *, int64_t, float, float *, int64_t);

/* Runs one GEMM through `fn` and judges it; returns 1 on success. */
static int check_gemm(const char *label, gemm_fn fn, int ta, int tb, int64_t M, int64_t N,
                      int64_t K, float alpha, float beta, int64_t pad) {
    const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
    const int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
    const int64_t lda = (a_cols > 0 ? a_cols : 1) + pad, ldb = (b_cols > 0 ? b_cols : 1) + pad;
    const int64_t ldc = (N > 0 ? N : 1) + pad;
    float *A = tt_test_filled(a_rows * lda, -1, 1), *B = tt_test_filled(b_rows * ldb, -1, 1);
    float *C = tt_test_filled(M * ldc, -1, 1);
    float *C0 = (float *)malloc((size_t)(M * ldc + 1) * sizeof(float));
    if (beta == 0.0f)
        for (int64_t i = 0; i < M * ldc; ++i) C[i] = NAN; /* must not leak into the result */
    for (int64_t i = 0; i < M * ldc; ++i) C0[i] = C[i];

    int ok = 1;
    tt_status st = (tt_status)fn(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st != TT_OK) {
        fprintf(stderr, "%s: status %s: %s\n", label, tt_status_string(st), tt_last_error());
        ok = 0;
    }
    const double eps = (double)(K + 4) * 1.1920929e-7;
    const int elementwise = (double)M * N * K <= 300000.0;
    double *t = (double *)malloc((size_t)(N > 0 ? N : 1) * sizeof(double));
    double *bt = (double *)malloc((size_t)(K > 0 ? K : 1) * sizeof(double));
    double *abs_bt = (double *)malloc((size_t)(K > 0 ? K : 1) * sizeof(double));
    for (int64_t j = 0; j < N; ++j) t[j] = tt_test_uniform(-1.0f, 1.0f);

    if (!elementwise) { /* bt = op(B) t, abs_bt = |op(B)| |t| */
        for (int64_t k = 0; k < K; ++k) {
            double s = 0, sa = 0;
            for (int64_t j = 0; j < N; ++j) {
                const double b = op_at(B, ldb, tb, k, j);
                s += b * t[j];
                sa += fabs(b) * fabs(t[j]);
            }
            bt[k] = s;
            abs_bt[k] = sa;
        }
    }
    for (int64_t i = 0; i < M && ok; ++i) {
        if (elementwise) {
            for (int64_t j = 0; j < N && ok; ++j) {
                double s = 0, sa = 0;
                for (int64_t k = 0; k < K; ++k) {
                    const double p = op_at(A, lda, ta, i, k) * op_at(B, ldb, tb, k, j);
                    s += p;
                    sa += fabs(p);
                }
                const double c0 = beta == 0.0f ? 0.0 : C0[i * ldc + j];
                const double want = alpha * s + beta * c0;
                const double bound = eps * (fabs(alpha) * sa + fabs(beta * c0)) + 1e-30;
                const double got = C[i * ldc + j];
                if (!(fabs(got - want) <= bound)) {
                    fprintf(stderr, "%s: C[%lld][%lld] = %.9g, want %.9g (bound %.3g)\n", label,
                            (long long)i, (long long)j, got, want, bound);
                    ok = 0;
                }
            }
        } else {
            double ct = 0, want = 0, bound_sum = 0;
            for (int64_t j = 0; j < N; ++j) {
                ct += C[i * ldc + j] * t[j];
                if (beta != 0.0f) {
                    want += beta * (double)C0[i * ldc + j] * t[j];
                    bound_sum += fabs(beta * (double)C0[i * ldc + j] * t[j]);
                }
            }
            for (int64_t k = 0; k < K; ++k) {
                const double a = op_at(A, lda, ta, i, k);
                want += alpha * a * bt[k];
                bound_sum += fabs(alpha * a) * abs_bt[k];
            }
            const double bound = eps * bound_sum * 2 + 1e-30;
            if (!(fabs(ct - want) <= bound)) {
                fprintf(stderr, "%s: residual of row %lld is %.3g (bound %.3g)\n", label,
                        (long long)i, fabs(ct - want), bound);
                ok = 0;
            }
        }
    }
    /* Padding columns of C (j >= N) must be untouched. */
    for (int64_t i = 0; i < M && ok; ++i)
        for (int64_t j = N; j < ldc; ++j)
            if (memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof(float)) != 0) {
                fprintf(stderr, "%s: padding C[%lld][%lld] was written\n", label, (long long)i,
                        (long long)j);
                ok = 0;
                break;
            }
    if (!ok)
        fprintf(stderr, "  in %s ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g pad=%lld\n", label,
                ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, (long long)pad);
    free(A), free(B), free(C), free(C0), free(t), free(bt), free(abs_bt);
    return ok;
}

/* small: every combination of tiny sizes (single-threaded anyway: below the parallel
 * threshold); big: awkward larger shapes that exercise blocking, edges and threads. */
static void check_many(const char *label, gemm_fn fn, int small_sizes, int big, int threaded) {
    static const int64_t small[] = {0, 1, 2, 7, 31, 33};
    int failures = 0;
    for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
            for (int mi = 0; mi < (small_sizes ? 6 : 0); ++mi)
                for (int ni = 0; ni < 6; ++ni)
                    for (int ki = 0; ki < 6; ++ki) {
                        const int combo = mi * 36 + ni * 6 + ki;
                        const float alpha = (combo % 3 == 0) ? 1.0f : -1.5f;
                        const float beta = (combo % 4 == 0) ? 0.0f : (combo % 4 == 1 ? 1.0f : 0.5f);
                        failures += !check_gemm(label, fn, ta, tb, small[mi], small[ni], small[ki],
                                                alpha, beta, combo % 2 ? 3 : 0);
                    }
            if (!big) continue;
            /* awkward: odd, prime, multiple K blocks, tall-skinny, K = 1, large K */
            static const int64_t shapes[][3] = {
                {127, 127, 127}, {513, 33, 127}, {33, 513, 7}, {127, 1, 513}, {1, 513, 127},
                {101, 103, 107}, {2000, 3, 17}, {3, 2000, 17}, {257, 129, 1}, {65, 70, 600},
                {7, 9, 20000},   {97, 130, 260}, {5, 3000, 40}};
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
                /* the threaded pass only needs shapes above the parallel threshold */
                if (threaded && shapes[s][0] * shapes[s][1] * shapes[s][2] < 64 * 64 * 64) continue;
                const float beta = (s % 3 == 0) ? 0.0f : 0.75f;
                failures += !check_gemm(label, fn, ta, tb, shapes[s][0], shapes[s][1], shapes[s][2],
                                        s % 2 ? 0.5f : 1.0f, beta, (s % 2) ? 5 : 0);
            }
        }
    /* alpha == 0: C = beta C whatever A and B hold */
    failures += !check_gemm(label, fn, 0, 0, 9, 10, 11, 0.0f, 0.5f, 0);
    failures += !check_gemm(label, fn, 1, 1, 9, 10, 11, 0.0f, 0.0f, 2);
    CHECK(failures == 0);
}

static void check_batched(void) {
    /* 5 matrices 33 x 17 (K = 29), A shared (strideA = 0), C interleaved row by row. */
    const int64_t M = 33, N = 17, K = 29, batch = 5;
    const int64_t lda = K, ldb = N, ldc = batch * N;
    float *A = tt_test_filled(M * K, -1, 1), *B = tt_test_filled(batch * K * N, -1, 1);
    float *C = tt_test_filled(M * ldc, -1, 1);
    for (int64_t i = 0; i < M * ldc; ++i) C[i] = NAN;
    CHECK_OK(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, A, lda, 0, B, ldb, K * N, 0.0f, C, ldc,
                                      N, batch));
    CHECK(strncmp(tt_last_kernel_path(), "sgemm_strided_batched:", 22) == 0);
    int bad = 0;
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                double s = 0, sa = 0;
                for (int64_t k = 0; k < K; ++k) {
                    s += (double)A[i * K + k] * B[b * K * N + k * N + j];
                    sa += fabs((double)A[i * K + k] * B[b * K * N + k * N + j]);
                }
                if (!(fabs(C[i * ldc + b * N + j] - s) <= (K + 4) * 1.2e-7 * sa + 1e-30)) bad++;
            }
    CHECK(bad == 0);
    /* batch = 0 and empty matrices are fine; NULL is allowed when nothing is addressed */
    CHECK_OK(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, A, lda, 0, B, ldb, 0, 0.0f, C, ldc, N, 0));
    CHECK_OK(tt_sgemm_strided_batched(0, 0, 0, 0, 0, 1.0f, NULL, 1, 0, NULL, 1, 0, 0.0f, NULL, 1, 0, 3));
    CHECK_FAILS(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, A, lda, 0, B, ldb, 0, 0.0f, C, ldc, N, -1),
                TT_ERR_INVALID_ARGUMENT, "batch=-1");
    CHECK_FAILS(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, A, lda, -3, B, ldb, 0, 0.0f, C, ldc, N, 2),
                TT_ERR_INVALID_ARGUMENT, "strideA=-3");
    CHECK_FAILS(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, A, lda, 0, B, ldb, 0, 0.0f, C, ldc, 1, 2),
                TT_ERR_INVALID_ARGUMENT, "overlap");
    CHECK_FAILS(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, A, lda, INT64_MAX / 2, B, ldb, 0, 0.0f,
                                         C, ldc, N, 4),
                TT_ERR_OVERFLOW, "strideA");
    CHECK_FAILS(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, A, 3, 0, B, ldb, 0, 0.0f, C, ldc, N, 2),
                TT_ERR_INVALID_ARGUMENT, "lda=3");
    free(A), free(B), free(C);
}

static void check_bad_arguments(gemm_fn fn, const char *name) {
    float a[64] = {0}, b[64] = {0}, c[64] = {0};
    const int64_t big = (int64_t)1 << 40;
    CHECK_FAILS(fn(0, 0, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2), TT_ERR_INVALID_ARGUMENT, "M=-1");
    CHECK_FAILS(fn(0, 0, 2, -2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2), TT_ERR_INVALID_ARGUMENT, "N=-2");
    CHECK_FAILS(fn(0, 0, 2, 2, -3, 1.0f, a, 2, b, 2, 0.0f, c, 2), TT_ERR_INVALID_ARGUMENT, "K=-3");
    CHECK_FAILS(fn(0, 0, 2, 2, 4, 1.0f, a, 3, b, 2, 0.0f, c, 2), TT_ERR_INVALID_ARGUMENT, "lda=3");
    CHECK_FAILS(fn(1, 0, 5, 2, 4, 1.0f, a, 4, b, 2, 0.0f, c, 2), TT_ERR_INVALID_ARGUMENT, "lda=4");
    CHECK_FAILS(fn(0, 0, 2, 6, 2, 1.0f, a, 2, b, 5, 0.0f, c, 6), TT_ERR_INVALID_ARGUMENT, "ldb=5");
    CHECK_FAILS(fn(0, 1, 2, 3, 7, 1.0f, a, 7, b, 6, 0.0f, c, 3), TT_ERR_INVALID_ARGUMENT, "ldb=6");
    CHECK_FAILS(fn(0, 0, 2, 6, 2, 1.0f, a, 2, b, 6, 0.0f, c, 4), TT_ERR_INVALID_ARGUMENT, "ldc=4");
    CHECK_FAILS(fn(0, 0, 2, 2, 2, 1.0f, a, 0, b, 2, 0.0f, c, 2), TT_ERR_INVALID_ARGUMENT, "lda=0");
    CHECK_FAILS(fn(0, 0, 2, 2, 2, 1.0f, NULL, 2, b, 2, 0.0f, c, 2), TT_ERR_NULL_POINTER, "A is NULL");
    CHECK_FAILS(fn(0, 0, 2, 2, 2, 1.0f, a, 2, NULL, 2, 0.0f, c, 2), TT_ERR_NULL_POINTER, "B is NULL");
    CHECK_FAILS(fn(0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, NULL, 2), TT_ERR_NULL_POINTER, "C is NULL");
    /* extents that overflow int64 elements or bytes */
    CHECK_FAILS(fn(0, 0, big, 1, big, 1.0f, a, big, b, 1, 0.0f, c, 1), TT_ERR_OVERFLOW, "A spans");
    CHECK_FAILS(fn(0, 0, 1, big, big, 1.0f, a, big, b, big, 0.0f, c, big), TT_ERR_OVERFLOW, "B spans");
    CHECK_FAILS(fn(0, 0, (int64_t)1 << 62, 1, 0, 1.0f, a, 1, b, 1, 0.0f, c, 1), TT_ERR_OVERFLOW,
                "C spans");
    /* NULL is fine for a matrix without elements; K == 0 means C = beta C */
    CHECK_OK(fn(0, 0, 0, 3, 4, 1.0f, NULL, 4, b, 3, 0.0f, NULL, 3));
    c[0] = 2.0f, c[1] = NAN;
    CHECK_OK(fn(0, 0, 1, 1, 0, 1.0f, NULL, 1, NULL, 1, 0.5f, c, 1));
    CHECK(c[0] == 1.0f);
    CHECK_OK(fn(0, 0, 1, 2, 0, 1.0f, NULL, 1, NULL, 2, 0.0f, c, 2));
    CHECK(c[0] == 0.0f && c[1] == 0.0f);
    (void)name;
}

/* tt_sgemm under one ISA and thread count: results, the path it reports, batched calls. */
static void check_fast_path(tt_isa isa, int threads, const char *label) {
    check_many(label, (gemm_fn)tt_sgemm, threads == 1, 1, threads > 1);
    char want_path[64];
    snprintf(want_path, sizeof want_path, "sgemm:%s", tt_isa_name(isa));
    CHECK(strcmp(tt_last_kernel_path(), want_path) == 0);
    check_batched();
}

int main(void) {
    /* The reference: the oracle itself against float64. */
    check_many("reference", (gemm_fn)tt_sgemm_reference, 1, 0, 0);
    CHECK(strcmp(tt_last_kernel_path(), "sgemm:reference") == 0);
    check_bad_arguments((gemm_fn)tt_sgemm_reference, "reference");
    check_bad_arguments((gemm_fn)tt_sgemm, "fast");

    tt_test_each_isa_and_threads("sgemm", 2, check_fast_path);
    TT_TEST_MAIN_END;
}
