/*
 * test_qgemm.c -- the INT8 GEMM (tt_qgemm_*) against naive loops, on every kernel this
 * machine can run (each under its ISA, proven by tt_last_kernel_path), 1, 2 and 3 threads,
 * on 8-bit packs and on TT_QGEMM_REDUCE_RANGE (7-bit) packs, avx2_u7 included:
 *   - int32 results equal an int64 reference exactly, on awkward shapes (0, 1, odd, prime,
 *     K not a multiple of 4 or 64) and at the extremes (a = 255 with w = -128 or 127, and
 *     K = TT_QGEMM_MAX_K, where the sum is -2147483520: one step from int32's limit; on
 *     7-bit packs a = 127, which would saturate vpmaddubsw's pair sums at a = 255);
 *   - the row quantization (qmax 255 and 127) equals the header's formula evaluated here;
 *   - the float path equals the reference epilogue (GELU: tt_bias_gelu_forward of pre);
 *   - bad input gets an error status and a message, never an abort.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tt_test.h"

static uint32_t rnd(void) { return (uint32_t)(tt_test_rand_u64() >> 11); }

static void *aligned(int64_t bytes) { return aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64 + 64)); }

/* Pack w for kernel with flags (0 or TT_QGEMM_REDUCE_RANGE). */
static void *pack(int kernel, int flags, int64_t K, int64_t N, const int8_t *w, int64_t *bytes) {
    CHECK_OK(tt_qgemm_pack_size_ex(K, N, kernel, flags, bytes));
    void *p = aligned(*bytes);
    CHECK_OK(tt_qgemm_pack_ex(kernel, flags, K, N, w, N, p, *bytes));
    return p;
}

/* The largest activation of a pack with these flags. */
static int qmax_of(int flags) { return flags & TT_QGEMM_REDUCE_RANGE ? 127 : 255; }

static void test_exact_int32(int kernel, int flags, int64_t M, int64_t N, int64_t K, int extreme) {
    uint8_t *a = malloc((size_t)(M * K + 1));
    int8_t *w = malloc((size_t)(K * N + 1));
    int32_t *c = malloc((size_t)(M * N + 1) * 4);
    const int qmax = qmax_of(flags);
    for (int64_t i = 0; i < M * K; ++i) a[i] = (uint8_t)(extreme ? qmax : (int)(rnd() % (qmax + 1)));
    for (int64_t i = 0; i < K * N; ++i)
        w[i] = extreme ? (int8_t)((i % N) % 2 ? 127 : -128) : (int8_t)rnd();
    int64_t bytes = 0;
    void *p = pack(kernel, flags, K, N, w, &bytes);
    for (int threads = 1; threads <= 3; ++threads) {
        tt_set_num_threads(threads);
        for (int64_t i = 0; i < M * N; ++i) c[i] = 0x5a5a5a5a;
        CHECK_OK(tt_qgemm_u8s8s32(M, N, K, a, K, p, bytes, c, N));
        char want[64];
        snprintf(want, sizeof want, "qgemm:%s", tt_qgemm_kernel_name(kernel));
        CHECK(strcmp(tt_last_kernel_path(), want) == 0);
        int64_t wrong = 0;
        for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
                int64_t ref = 0;
                for (int64_t k = 0; k < K; ++k) ref += (int64_t)a[i * K + k] * w[k * N + j];
                wrong += (int64_t)c[i * N + j] != ref;
            }
        if (wrong)
            fprintf(stderr, "kernel %s flags=%d M=%lld N=%lld K=%lld threads=%d: %lld wrong\n",
                    tt_qgemm_kernel_name(kernel), flags, (long long)M, (long long)N, (long long)K,
                    threads, (long long)wrong);
        CHECK(wrong == 0);
    }
    free(p);
    free(a);
    free(w);
    free(c);
}

/* The header's quantization formula onto [0, qmax], step by step in float32. */
static float rne(float v) { return (v + 12582912.0f) - 12582912.0f; }
static void quantize_ref(const float *x, int64_t K, int qmax, uint8_t *q, float *scale,
                         int32_t *zp) {
    const float top = (float)qmax;
    float lo = 0.0f, hi = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
        lo = x[k] < lo ? x[k] : lo;
        hi = x[k] > hi ? x[k] : hi;
    }
    volatile float s = hi / top - lo / top;
    if (!(s > 0.0f)) s = 1.0f;
    const float inv = 1.0f / s;
    float z = rne(-lo * inv);
    z = z < 0 ? 0 : (z > top ? top : z);
    for (int64_t k = 0; k < K; ++k) {
        float v = rne(x[k] * inv) + z;
        q[k] = (uint8_t)(v < 0 ? 0 : (v > top ? top : v));
    }
    *scale = s;
    *zp = (int32_t)z;
}

static void test_float_path(int kernel, int flags, int64_t M, int64_t N, int64_t K,
                            int activation) {
    float *x = malloc((size_t)(M * K + 1) * 4), *y = malloc((size_t)(M * N + 1) * 4);
    float *pre = malloc((size_t)(M * N + 1) * 4), *ref = malloc((size_t)(M * N + 1) * 4);
    float *ws = malloc((size_t)(N + 1) * 4), *bias = malloc((size_t)(N + 1) * 4);
    int8_t *w = malloc((size_t)(K * N + 1));
    uint8_t *q = malloc((size_t)(M * K + 1)), *q2 = malloc((size_t)(M * K + 1));
    float *sx = malloc((size_t)(M + 1) * 4), *sx2 = malloc((size_t)(M + 1) * 4);
    int32_t *zx = malloc((size_t)(M + 1) * 4), *zx2 = malloc((size_t)(M + 1) * 4);
    for (int64_t i = 0; i < M * K; ++i) x[i] = ((float)(rnd() % 20001) - 8000.0f) / 3000.0f;
    if (M > 1) /* an all-positive row and an all-zero row */
        for (int64_t k = 0; k < K; ++k) x[k] = fabsf(x[k]), x[K + k] = 0.0f;
    for (int64_t i = 0; i < K * N; ++i) w[i] = (int8_t)(rnd() % 255 - 127);
    for (int64_t j = 0; j < N; ++j) ws[j] = 0.001f + (float)(rnd() % 1000) * 1e-5f, bias[j] = (float)(rnd() % 200) / 100.0f - 1.0f;
    int64_t bytes = 0;
    void *p = pack(kernel, flags, K, N, w, &bytes);

    CHECK_OK(tt_qgemm_quantize_rows_ex(M, K, x, K, q, K, sx, zx, flags));
    int64_t bad_q = 0;
    for (int64_t i = 0; i < M; ++i) {
        quantize_ref(x + i * K, K, qmax_of(flags), q2 + i * K, sx2 + i, zx2 + i);
        bad_q += sx[i] != sx2[i] || zx[i] != zx2[i] || memcmp(q + i * K, q2 + i * K, (size_t)K) != 0;
    }
    CHECK(bad_q == 0);
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += ((int64_t)q[i * K + k] - zx[i]) * w[k * N + j];
            pre[i * N + j] = (float)(int32_t)acc * (sx[i] * ws[j]);
            const float u = pre[i * N + j] + bias[j];
            ref[i * N + j] = activation == TT_QGEMM_ACT_RELU ? (u < 0 ? 0 : u) : u;
        }
    if (activation == TT_QGEMM_ACT_GELU && M * N > 0)
        CHECK_OK(tt_bias_gelu_forward(pre, bias, ref, M, N));
    for (int threads = 1; threads <= 3; ++threads) {
        tt_set_num_threads(threads);
        CHECK_OK(tt_qgemm_f32(M, N, K, x, K, p, bytes, ws, bias, activation, y, N));
        if (M > 0 && N > 0) {
            char want[64];
            snprintf(want, sizeof want, "qgemm:%s", tt_qgemm_kernel_name(kernel));
            CHECK(strcmp(tt_last_kernel_path(), want) == 0);
        }
        int64_t bad = 0;
        for (int64_t i = 0; i < M * N; ++i) {
            const float d = fabsf(y[i] - ref[i]), tol = 1e-6f * fabsf(ref[i]) + 1e-30f;
            bad += !(d <= tol);
        }
        if (bad)
            fprintf(stderr, "float path %s flags=%d M=%lld N=%lld K=%lld act=%d threads=%d: %lld off\n",
                    tt_qgemm_kernel_name(kernel), flags, (long long)M, (long long)N, (long long)K,
                    activation, threads, (long long)bad);
        CHECK(bad == 0);
    }
    free(p), free(x), free(y), free(pre), free(ref), free(ws), free(bias), free(w);
    free(q), free(q2), free(sx), free(sx2), free(zx), free(zx2);
}

/* One kernel on packs with flags (avx2_u7 only with TT_QGEMM_REDUCE_RANGE). */
static void test_kernel(int kernel, int flags) {
    printf("kernel %s flags %d\n", tt_qgemm_kernel_name(kernel), flags);
    const int64_t shapes[][3] = {{0, 5, 7},  {3, 0, 7},   {4, 6, 0},   {1, 1, 1},    {1, 64, 64},
                                 {7, 13, 5}, {13, 67, 31}, {6, 64, 63}, {17, 129, 65}, {50, 97, 131},
                                 {1, 300, 769}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        test_exact_int32(kernel, flags, shapes[s][0], shapes[s][1], shapes[s][2], 0);
        test_exact_int32(kernel, flags, shapes[s][0], shapes[s][1], shapes[s][2], 1);
    }
    /* The extreme at the bound: 255 * -128 * TT_QGEMM_MAX_K = -2147483520 (8-bit packs);
     * 127 * -128 * TT_QGEMM_MAX_K on 7-bit ones, every vpmaddubsw pair at -32512. */
    test_exact_int32(kernel, flags, 2, 3, TT_QGEMM_MAX_K, 1);
    test_exact_int32(kernel, flags, 5, 29, 4099, 1);
    const int64_t fshapes[][3] = {{1, 1, 1}, {2, 5, 3}, {7, 70, 45}, {33, 130, 97}, {0, 4, 4}};
    for (size_t s = 0; s < sizeof fshapes / sizeof fshapes[0]; ++s)
        for (int act = 0; act <= 2; ++act)
            test_float_path(kernel, flags, fshapes[s][0], fshapes[s][1], fshapes[s][2], act);
}

/* The 7-bit promise is kept: an activation above 127 on a reduce_range pack is refused (on
 * every kernel, nothing written), and avx2_u7 is refused without the flag. */
static void test_reduce_range_refusals(void) {
    int8_t w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    uint8_t a[6] = {127, 0, 5, 1, 128, 2};
    float x[6] = {0};
    uint8_t q[6];
    float sx[2];
    int32_t c[8], zx[2];
    int64_t bytes = 0;
    CHECK_FAILS(tt_qgemm_pack_size(3, 4, TT_QGEMM_AVX2_U7, &bytes), TT_ERR_INVALID_ARGUMENT,
                "TT_QGEMM_REDUCE_RANGE");
    CHECK_FAILS(tt_qgemm_pack_size_ex(3, 4, TT_QGEMM_AUTO, 6, &bytes), TT_ERR_INVALID_ARGUMENT,
                "flags=6");
    CHECK_FAILS(tt_qgemm_quantize_rows_ex(2, 3, x, 3, q, 3, sx, zx, 2), TT_ERR_INVALID_ARGUMENT,
                "flags=2");
    CHECK(tt_qgemm_kernel_for(4) == TT_QGEMM_AUTO);
    CHECK(tt_qgemm_kernel_for(0) == tt_qgemm_kernel_active());
    CHECK(strcmp(tt_qgemm_kernel_name(TT_QGEMM_AVX2_U7), "avx2_u7") == 0);
    if (tt_qgemm_pack_size_ex(3, 4, TT_QGEMM_AVX2_U7, TT_QGEMM_REDUCE_RANGE, &bytes) == TT_OK) {
        unsigned char *p = aligned(bytes);
        CHECK_FAILS(tt_qgemm_pack_ex(TT_QGEMM_AVX2_U7, 0, 3, 4, w, 4, p, bytes),
                    TT_ERR_INVALID_ARGUMENT, "TT_QGEMM_REDUCE_RANGE");
        CHECK_FAILS(tt_qgemm_pack(TT_QGEMM_AVX2_U7, 3, 4, w, 4, p, bytes), TT_ERR_INVALID_ARGUMENT,
                    "TT_QGEMM_REDUCE_RANGE");
        free(p);
    }
    for (int kernel = TT_QGEMM_SCALAR; kernel <= TT_QGEMM_AVX2_U7; ++kernel) {
        if (!tt_qgemm_kernel_usable(kernel)) continue;
        unsigned char *p = pack(kernel, TT_QGEMM_REDUCE_RANGE, 3, 4, w, &bytes);
        for (int i = 0; i < 8; ++i) c[i] = 77;
        CHECK_FAILS(tt_qgemm_u8s8s32(2, 4, 3, a, 3, p, bytes, c, 4), TT_ERR_INVALID_ARGUMENT,
                    "a[1][1] = 128");
        CHECK(c[0] == 77 && c[7] == 77);
        a[4] = 127;
        CHECK_OK(tt_qgemm_u8s8s32(2, 4, 3, a, 3, p, bytes, c, 4));
        a[4] = 128;
        free(p);
    }
}

static void test_errors(void) {
    int8_t w[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    uint8_t a[8] = {0};
    int32_t c[8];
    float x[8] = {0}, y[8], ws[4] = {1, 1, 1, 1};
    int64_t bytes = 0;
    CHECK_FAILS(tt_qgemm_pack_size(TT_QGEMM_MAX_K + 1, 4, TT_QGEMM_AUTO, &bytes),
                TT_ERR_INVALID_ARGUMENT, "TT_QGEMM_MAX_K");
    CHECK_FAILS(tt_qgemm_pack_size(3, 4, 42, &bytes), TT_ERR_INVALID_ARGUMENT, "kernel=42");
    CHECK_OK(tt_qgemm_pack_size(3, 4, TT_QGEMM_AUTO, &bytes));
    unsigned char *buf = aligned(bytes + 64);
    CHECK_FAILS(tt_qgemm_pack(TT_QGEMM_AUTO, 3, 4, w, 4, buf + 1, bytes), TT_ERR_INVALID_ARGUMENT,
                "aligned");
    CHECK_FAILS(tt_qgemm_pack(TT_QGEMM_AUTO, 3, 4, w, 4, buf, bytes - 1), TT_ERR_INVALID_ARGUMENT,
                "smaller");
    CHECK_FAILS(tt_qgemm_pack(TT_QGEMM_AUTO, 3, 4, w, 2, buf, bytes), TT_ERR_INVALID_ARGUMENT, "ldw");
    CHECK_OK(tt_qgemm_pack(TT_QGEMM_AUTO, 3, 4, w, 4, buf, bytes));
    CHECK_OK(tt_qgemm_u8s8s32(2, 4, 3, a, 3, buf, bytes, c, 4));
    CHECK_FAILS(tt_qgemm_u8s8s32(2, 4, 5, a, 5, buf, bytes, c, 4), TT_ERR_SHAPE_MISMATCH, "K=5");
    CHECK_FAILS(tt_qgemm_u8s8s32(2, 4, 3, a, 3, buf, bytes - 1, c, 4), TT_ERR_INVALID_ARGUMENT,
                "packed_bytes");
    CHECK_FAILS(tt_qgemm_u8s8s32(2, 4, TT_QGEMM_MAX_K + 1, a, TT_QGEMM_MAX_K + 1, buf, bytes, c, 4),
                TT_ERR_INVALID_ARGUMENT, "exact");
    /* a pack moved off its alignment, and a corrupted one */
    memmove(buf + 8, buf, (size_t)bytes);
    CHECK_FAILS(tt_qgemm_u8s8s32(2, 4, 3, a, 3, buf + 8, bytes, c, 4), TT_ERR_INVALID_ARGUMENT,
                "aligned");
    memmove(buf, buf + 8, (size_t)bytes);
    buf[20] ^= 1;
    CHECK_FAILS(tt_qgemm_u8s8s32(2, 4, 3, a, 3, buf, bytes, c, 4), TT_ERR_INVALID_ARGUMENT,
                "tt_qgemm_pack result");
    buf[20] ^= 1;
    CHECK_FAILS(tt_qgemm_f32(2, 4, 3, x, 3, buf, bytes, ws, NULL, 7, y, 4), TT_ERR_INVALID_ARGUMENT,
                "activation");
    x[4] = NAN;
    CHECK_FAILS(tt_qgemm_f32(2, 4, 3, x, 3, buf, bytes, ws, NULL, 0, y, 4), TT_ERR_INVALID_ARGUMENT,
                "row 1");
    x[4] = INFINITY;
    CHECK_FAILS(tt_qgemm_quantize_rows(2, 3, x, 3, a, 3, y, c), TT_ERR_INVALID_ARGUMENT, "row 1");
    x[4] = 0;
    CHECK_FAILS(tt_qgemm_f32(2, 4, 3, x, 3, buf, bytes, NULL, NULL, 0, y, 4), TT_ERR_NULL_POINTER,
                "w_scale");
    CHECK_FAILS(tt_qgemm_f32(1, 4, 3, (float *)y, 3, buf, bytes, ws, NULL, 0, y, 4),
                TT_ERR_INVALID_ARGUMENT, "overlaps");
    /* a pack for a kernel of another ISA is refused while it cannot run */
    for (int kernel = TT_QGEMM_AVX2; kernel <= TT_QGEMM_AVX2_U7; ++kernel) {
        int64_t kb = 0;
        const int flags = kernel == TT_QGEMM_AVX2_U7 ? TT_QGEMM_REDUCE_RANGE : 0;
        if (tt_qgemm_pack_size_ex(3, 4, kernel, flags, &kb) != TT_OK) continue; /* not built */
        unsigned char *kp = aligned(kb);
        CHECK_OK(tt_qgemm_pack_ex(kernel, flags, 3, 4, w, 4, kp, kb));
        if (!tt_qgemm_kernel_usable(kernel))
            CHECK_FAILS(tt_qgemm_u8s8s32(2, 4, 3, a, 3, kp, kb, c, 4), TT_ERR_UNSUPPORTED,
                        "cannot run now");
        free(kp);
    }
    free(buf);
    CHECK(strcmp(tt_qgemm_kernel_name(99), "unknown") == 0);
    CHECK(tt_qgemm_kernel_usable(TT_QGEMM_SCALAR) == 1);
}

/* Every INT8 kernel this ISA runs (the scalar one once, under scalar), and the refusals. */
static void check_kernels(tt_isa isa, int threads, const char *label) {
    (void)threads, (void)label;
    for (int kernel = TT_QGEMM_SCALAR; kernel <= TT_QGEMM_AVX2_U7; ++kernel) {
        if (!tt_qgemm_kernel_usable(kernel)) continue;
        if (kernel == TT_QGEMM_SCALAR && isa != TT_ISA_SCALAR) continue;
        if (kernel != TT_QGEMM_AVX2_U7) test_kernel(kernel, 0);
        /* every kernel on 7-bit packs: the same exact int32 as avx2_u7 */
        test_kernel(kernel, TT_QGEMM_REDUCE_RANGE);
    }
    /* AUTO picks avx2_u7 for 7-bit packs under avx2, the 8-bit kernel otherwise */
    CHECK(tt_qgemm_kernel_for(TT_QGEMM_REDUCE_RANGE) ==
          (isa == TT_ISA_AVX2 ? TT_QGEMM_AVX2_U7 : tt_qgemm_kernel_active()));
    test_errors();
    test_reduce_range_refusals();
}

int main(void) {
    tt_test_seed(88172645463325252ull);
    /* one thread count here: the tests set their own (1 and 2) */
    tt_test_each_isa_and_threads("qgemm", 1, check_kernels);
    TT_TEST_MAIN_END;
}
