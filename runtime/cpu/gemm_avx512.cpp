/*
 * gemm_avx512.cpp -- GEMM micro-kernel for x86-64 AVX-512F (TT_ISA_AVX512).
 *
 * Compiled with -mavx512f (+vl/bw/dq, fma) in runtime/cpu/sources.cmake and called only
 * when run-time detection reports AVX-512F with OS support for zmm state. Contract:
 * gemm_kernels.h. It is the AVX2 kernel widened to 32 registers of 16 floats:
 *
 * Register tile 12 x 32: 24 zmm accumulators (12 rows x 2 vectors of 16 columns), two zmm
 * for the B row of the current k, one for the broadcast A value: 27 of the 32 zmm
 * registers. Per k: 24 FMAs against 2 loads + 12 broadcasts, enough independent chains
 * to cover the FMA latency of two 512-bit pipes. MR = 12 divides the default MC (144)
 * and NR = 32 is the "multiple of 16 columns" tile the blocking expects.
 */
/* GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* is a self-initialised
 * value); the warning is about the header, not this code. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "cpu/gemm_kernels.h"
#include "cpu/gemm_rowvec.h"

namespace {

constexpr int MR = 12;
constexpr int NR = 32;

/* Distance (in floats of packed A) the A stream is prefetched ahead: 8 k-steps. */
constexpr int kPrefetchA = 8 * MR;

#define TT_AVX512_ROW(i)                                   \
    do {                                                   \
        const __m512 ai = _mm512_set1_ps(a[(i)]);          \
        c##i##_0 = _mm512_fmadd_ps(ai, b0, c##i##_0);      \
        c##i##_1 = _mm512_fmadd_ps(ai, b1, c##i##_1);      \
    } while (0)

#define TT_AVX512_STEP()                                   \
    do {                                                   \
        const __m512 b0 = _mm512_load_ps(b);               \
        const __m512 b1 = _mm512_load_ps(b + 16);          \
        TT_AVX512_ROW(0);                                  \
        TT_AVX512_ROW(1);                                  \
        TT_AVX512_ROW(2);                                  \
        TT_AVX512_ROW(3);                                  \
        TT_AVX512_ROW(4);                                  \
        TT_AVX512_ROW(5);                                  \
        TT_AVX512_ROW(6);                                  \
        TT_AVX512_ROW(7);                                  \
        TT_AVX512_ROW(8);                                  \
        TT_AVX512_ROW(9);                                  \
        TT_AVX512_ROW(10);                                 \
        TT_AVX512_ROW(11);                                 \
        a += MR;                                           \
        b += NR;                                           \
    } while (0)

inline void store_row(float *c, __m512 lo, __m512 hi, __m512 valpha, __m512 vbeta, bool read_c) {
    lo = _mm512_mul_ps(lo, valpha);
    hi = _mm512_mul_ps(hi, valpha);
    if (read_c) {
        lo = _mm512_fmadd_ps(vbeta, _mm512_loadu_ps(c), lo);
        hi = _mm512_fmadd_ps(vbeta, _mm512_loadu_ps(c + 16), hi);
    }
    _mm512_storeu_ps(c, lo);
    _mm512_storeu_ps(c + 16, hi);
}

void gemm_ukernel_avx512_12x32(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                               float alpha, float beta) {
    __m512 c0_0 = _mm512_setzero_ps(), c0_1 = _mm512_setzero_ps();
    __m512 c1_0 = _mm512_setzero_ps(), c1_1 = _mm512_setzero_ps();
    __m512 c2_0 = _mm512_setzero_ps(), c2_1 = _mm512_setzero_ps();
    __m512 c3_0 = _mm512_setzero_ps(), c3_1 = _mm512_setzero_ps();
    __m512 c4_0 = _mm512_setzero_ps(), c4_1 = _mm512_setzero_ps();
    __m512 c5_0 = _mm512_setzero_ps(), c5_1 = _mm512_setzero_ps();
    __m512 c6_0 = _mm512_setzero_ps(), c6_1 = _mm512_setzero_ps();
    __m512 c7_0 = _mm512_setzero_ps(), c7_1 = _mm512_setzero_ps();
    __m512 c8_0 = _mm512_setzero_ps(), c8_1 = _mm512_setzero_ps();
    __m512 c9_0 = _mm512_setzero_ps(), c9_1 = _mm512_setzero_ps();
    __m512 c10_0 = _mm512_setzero_ps(), c10_1 = _mm512_setzero_ps();
    __m512 c11_0 = _mm512_setzero_ps(), c11_1 = _mm512_setzero_ps();

    /* Bring the C tile toward L1 while the k loop runs (it is touched only at the end). */
    for (int i = 0; i < MR; ++i) {
        _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + NR - 1), _MM_HINT_T0);
    }

    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
        _mm_prefetch(reinterpret_cast<const char *>(a + kPrefetchA), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(a + kPrefetchA + 16), _MM_HINT_T0);
        TT_AVX512_STEP();
        TT_AVX512_STEP();
        _mm_prefetch(reinterpret_cast<const char *>(a + kPrefetchA), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(a + kPrefetchA + 16), _MM_HINT_T0);
        TT_AVX512_STEP();
        TT_AVX512_STEP();
    }
    for (; k < kc; ++k) TT_AVX512_STEP();

    const __m512 valpha = _mm512_set1_ps(alpha);
    const __m512 vbeta = _mm512_set1_ps(beta);
    const bool read_c = beta != 0.0f; /* beta == 0: C is write-only */
    store_row(c + 0 * ldc, c0_0, c0_1, valpha, vbeta, read_c);
    store_row(c + 1 * ldc, c1_0, c1_1, valpha, vbeta, read_c);
    store_row(c + 2 * ldc, c2_0, c2_1, valpha, vbeta, read_c);
    store_row(c + 3 * ldc, c3_0, c3_1, valpha, vbeta, read_c);
    store_row(c + 4 * ldc, c4_0, c4_1, valpha, vbeta, read_c);
    store_row(c + 5 * ldc, c5_0, c5_1, valpha, vbeta, read_c);
    store_row(c + 6 * ldc, c6_0, c6_1, valpha, vbeta, read_c);
    store_row(c + 7 * ldc, c7_0, c7_1, valpha, vbeta, read_c);
    store_row(c + 8 * ldc, c8_0, c8_1, valpha, vbeta, read_c);
    store_row(c + 9 * ldc, c9_0, c9_1, valpha, vbeta, read_c);
    store_row(c + 10 * ldc, c10_0, c10_1, valpha, vbeta, read_c);
    store_row(c + 11 * ldc, c11_0, c11_1, valpha, vbeta, read_c);
}

#undef TT_AVX512_STEP
#undef TT_AVX512_ROW

}  // namespace

namespace tt {
const GemmMicroKernel kGemmKernelAvx512 = {"sgemm:avx512", "sgemm_strided_batched:avx512",
                                           MR, NR, gemm_ukernel_avx512_12x32,
                                           /* packing row-contiguous operands is a transpose:
                                            * the AVX2 in-register 8 x 8 transposes */
                                           gemm_pack_rows12_avx2, gemm_pack_rows32_avx2,
                                           /* narrow results: the AVX2 dot-product kernel beats a
                                            * 12 x 32 tile that would be mostly padding */
                                           gemm_narrow_avx2, kGemmNarrowMaxN, "sgemm:avx512:narrow",
                                           gemm_rowvec_body, "sgemm:avx512:rowvec"};
}  // namespace tt
