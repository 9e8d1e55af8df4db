/*
 * test_hgemm.c -- float16 conversions (exact cases, F16C path bit-identical to the
 * scalar reference) and the half-precision GEMM against a double-precision loop over
 * every transpose, alpha/beta, padded leading dimensions and awkward shapes; bad input.
 */
#include "tt_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static uint16_t to_half(float f) {
    uint16_t h;
    tt_f32_to_f16(&f, &h, 1);
    return h;
}

static float to_float(uint16_t h) {
    float f;
    tt_f16_to_f32(&h, &f, 1);
    return f;
}

static void test_exact_conversions(void) {
    struct { float in; uint16_t out; } cases[] = {
        {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff}, {65519.0f, 0x7bff}, {65520.0f, 0x7c00},
        {1e30f, 0x7c00}, {INFINITY, 0x7c00}, {-INFINITY, 0xfc00}, {-0.0f, 0x8000}, {0.0f, 0x0000},
        {5.9604645e-8f /* 2^-24 */, 0x0001}, {2.9802322e-8f /* 2^-25: tie to even */, 0x0000},
        {4.4703484e-8f /* 1.5 * 2^-25 */, 0x0001}, {6.1035156e-5f /* 2^-14 */, 0x0400},
        {1.00048828125f /* 1 + 2^-11: tie to even */, 0x3c00},
        {1.00146484375f /* 1 + 3 * 2^-11: tie to even */, 0x3c02}, {1e-10f, 0x0000},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        uint16_t got = to_half(cases[i].in);
        if (got != cases[i].out) {
            fprintf(stderr, "f32->f16(%g) = 0x%04x, want 0x%04x\n", cases[i].in, got, cases[i].out);
            tt_test_failures++;
        }
    }
    uint16_t nan_bits = to_half(NAN);
    CHECK((nan_bits & 0x7c00) == 0x7c00 && (nan_bits & 0x3ff) != 0);
    CHECK(isnan(to_float(0x7e00)));
    CHECK(to_float(0x0001) == 5.9604645e-8f);
    /* every non-NaN half survives a round trip through float32 exactly */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;
        if (to_half(to_float((uint16_t)h)) != h) bad++;
    }
    CHECK(bad == 0);
}

/* The F16C loop must agree bit for bit with the scalar converter. */
static void test_simd_matches_scalar(void) {
    if (!tt_isa_supported(TT_ISA_AVX2) || !tt_isa_compiled(TT_ISA_AVX2)) return;
    enum { n = 4099 };
    static float src[n];
    static uint16_t fast[n], slow[n], halves[n];
    static float wide_fast[n], wide_slow[n];
    for (int i = 0; i < n; ++i) {
        float scale = powf(2.0f, (float)(i % 60) - 40.0f); /* subnormal to overflow */
        src[i] = tt_test_uniform(-1.0f, 1.0f) * scale;
        halves[i] = (uint16_t)(tt_test_rand_u64() >> 48); /* any bit pattern, NaNs included */
    }
    tt_isa original = tt_isa_active();
    CHECK_OK(tt_set_isa(TT_ISA_AVX2));
    CHECK_OK(tt_f32_to_f16(src, fast, n));
    CHECK_OK(tt_f16_to_f32(halves, wide_fast, n));
    CHECK_OK(tt_set_isa(TT_ISA_SCALAR));
    CHECK_OK(tt_f32_to_f16(src, slow, n));
    CHECK_OK(tt_f16_to_f32(halves, wide_slow, n));
    CHECK_OK(tt_set_isa(original));
    CHECK(memcmp(fast, slow, sizeof fast) == 0);
    int same = 1;
    for (int i = 0; i < n; ++i) {
        uint32_t a, b;
        memcpy(&a, &wide_fast[i], 4);
        memcpy(&b, &wide_slow[i], 4);
        same &= a == b || (isnan(wide_fast[i]) && isnan(wide_slow[i]));
    }
    CHECK(same);
}

static int check_hgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int pad,
                       int reference) {
    int64_t a_rows = ta ? K : M, a_cols = ta ? M : K, b_rows = tb ? N : K, b_cols = tb ? K : N;
    int64_t lda = (a_cols ? a_cols : 1) + pad, ldb = (b_cols ? b_cols : 1) + pad, ldc = (N ? N : 1) + pad;
    uint16_t *A = malloc(sizeof(uint16_t) * (size_t)(a_rows * lda + 1));
    uint16_t *B = malloc(sizeof(uint16_t) * (size_t)(b_rows * ldb + 1));
    uint16_t *C = malloc(sizeof(uint16_t) * (size_t)(M * ldc + 1));
    uint16_t *C0 = malloc(sizeof(uint16_t) * (size_t)(M * ldc + 1));
    for (int64_t i = 0; i < a_rows * lda; ++i) A[i] = to_half(tt_test_uniform(-1.0f, 1.0f));
    for (int64_t i = 0; i < b_rows * ldb; ++i) B[i] = to_half(tt_test_uniform(-1.0f, 1.0f));
    for (int64_t i = 0; i < M * ldc; ++i) C0[i] = C[i] = to_half(tt_test_uniform(-1.0f, 1.0f));
    tt_status st = reference ? tt_hgemm_reference(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
                             : tt_hgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    int failures = 0;
    if (st != TT_OK) {
        fprintf(stderr, "hgemm failed: %s\n", tt_last_error());
        failures++;
    }
    for (int64_t i = 0; i < M && !failures; ++i)
        for (int64_t j = 0; j < N; ++j) {
            double acc = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
                double a = to_float(ta ? A[k * lda + i] : A[i * lda + k]);
                double b = to_float(tb ? B[j * ldb + k] : B[k * ldb + j]);
                acc += a * b;
                mag += fabs(a * b);
            }
            double want = alpha * acc + beta * to_float(C0[i * ldc + j]);
            double got = to_float(C[i * ldc + j]);
            double tol = fabs(want) * 1.0 / 1024 + 1e-5 * (fabs(alpha) * mag + fabs(beta)) + 1e-7;
            if (fabs(got - want) > tol) {
                fprintf(stderr, "hgemm ta=%d tb=%d M=%lld N=%lld K=%lld at (%lld,%lld): %g vs %g\n", ta, tb,
                        (long long)M, (long long)N, (long long)K, (long long)i, (long long)j, got, want);
                failures++;
                break;
            }
        }
    /* padding columns of C are untouched */
    for (int64_t i = 0; i < M && pad; ++i)
        for (int64_t j = N; j < ldc; ++j)
            if (C[i * ldc + j] != C0[i * ldc + j]) failures++;
    free(A);
    free(B);
    free(C);
    free(C0);
    return failures;
}

static void test_hgemm_shapes(void) {
    const int64_t shapes[][3] = {{0, 5, 3}, {4, 0, 3}, {3, 4, 0}, {1, 1, 1}, {7, 5, 3},
                                 {33, 17, 31}, {129, 65, 127}, {2, 300, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int ta = 0; ta < 2; ++ta)
            for (int tb = 0; tb < 2; ++tb) {
                tt_test_failures += check_hgemm(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 0.0f,
                                                0, 0);
                tt_test_failures += check_hgemm(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], -0.5f,
                                                0.75f, 3, 0);
                tt_test_failures += check_hgemm(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], 1.0f, 1.0f,
                                                1, 1);
            }
    CHECK(strncmp(tt_last_kernel_path(), "hgemm:", 6) == 0);
}

static void test_hgemm_bad_arguments(void) {
    uint16_t a[12] = {0}, b[12] = {0}, c[12] = {0};
    CHECK_FAILS(tt_hgemm(0, 0, 3, 4, 4, 1, a, 2, b, 4, 0, c, 4), TT_ERR_INVALID_ARGUMENT, "lda=2");
    CHECK_FAILS(tt_hgemm(0, 0, 3, 4, 4, 1, NULL, 4, b, 4, 0, c, 4), TT_ERR_NULL_POINTER, "A is NULL");
    CHECK_FAILS(tt_hgemm(0, 0, -1, 4, 4, 1, a, 4, b, 4, 0, c, 4), TT_ERR_INVALID_ARGUMENT, "M=-1");
    CHECK_FAILS(tt_hgemm_reference(0, 1, 3, 4, 4, 1, a, 4, b, 3, 0, c, 4), TT_ERR_INVALID_ARGUMENT, "ldb=3");
    CHECK_FAILS(tt_f16_to_f32(a, NULL, 3), TT_ERR_NULL_POINTER, "dst");
    CHECK_FAILS(tt_f32_to_f16(NULL, a, 3), TT_ERR_NULL_POINTER, "src");
    CHECK_FAILS(tt_f32_to_f16((float *)c, a, -2), TT_ERR_INVALID_ARGUMENT, "n=-2");
    CHECK_OK(tt_f16_to_f32(NULL, NULL, 0));
}

int main(void) {
    test_exact_conversions();
    test_simd_matches_scalar();
    test_hgemm_shapes();
    test_hgemm_bad_arguments();
    TT_TEST_MAIN_END;
}
