/*
 * gemm_kernel_avx2.cpp -- GEMM micro-kernel for x86-64 AVX2 + FMA (TT_ISA_AVX2).
 *
 * Compiled with -mavx2 -mfma (runtime/cpu/sources.cmake) and called only when the CPU
 * reports both. Contract: gemm_kernels.h.
 *
 * Register tile 6 x 16: twelve ymm accumulators (6 rows x 2 vectors of 8 columns),
 * two ymm for the B row of the current k, one for the broadcast A value: 15 of the 16
 * ymm registers. Per k it issues 12 FMAs against 2 loads + 6 broadcasts, which keeps
 * both FMA pipes busy (12 independent chains cover the 4-5 cycle FMA latency of two
 * pipes) without spilling. The k loop is unrolled by 4; the B sliver is L1-resident
 * (the driver's blocking), A slivers come from L2 and are prefetched a few k ahead.
 */
#include <immintrin.h>

#include "cpu/gemm_kernels.h"

namespace {

constexpr int MR = 6;
constexpr int NR = 16;

/* Distance (in floats of packed A) the A stream is prefetched ahead: 8 k-steps. */
constexpr int kPrefetchA = 8 * MR;

#define TT_AVX2_ROW(i)                                    \
    do {                                                  \
        const __m256 ai = _mm256_broadcast_ss(a + (i));   \
        c##i##0 = _mm256_fmadd_ps(ai, b0, c##i##0);       \
        c##i##1 = _mm256_fmadd_ps(ai, b1, c##i##1);       \
    } while (0)

#define TT_AVX2_STEP()                                    \
    do {                                                  \
        const __m256 b0 = _mm256_load_ps(b);              \
        const __m256 b1 = _mm256_load_ps(b + 8);          \
        TT_AVX2_ROW(0);                                   \
        TT_AVX2_ROW(1);                                   \
        TT_AVX2_ROW(2);                                   \
        TT_AVX2_ROW(3);                                   \
        TT_AVX2_ROW(4);                                   \
        TT_AVX2_ROW(5);                                   \
        a += MR;                                          \
        b += NR;                                          \
    } while (0)

inline void store_row(float *c, __m256 lo, __m256 hi, __m256 valpha, __m256 vbeta, bool read_c) {
    lo = _mm256_mul_ps(lo, valpha);
    hi = _mm256_mul_ps(hi, valpha);
    if (read_c) {
        lo = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c), lo);
        hi = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c + 8), hi);
    }
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
}

void gemm_ukernel_avx2_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                            float alpha, float beta) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();

    /* Bring the C tile toward L1 while the k loop runs (it is touched only at the end). */
    for (int i = 0; i < MR; ++i) {
        _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + NR - 1), _MM_HINT_T0);
    }

    int64_t k = 0;
    for (; k + 4 <= kc; k += 4) {
        _mm_prefetch(reinterpret_cast<const char *>(a + kPrefetchA), _MM_HINT_T0);
        TT_AVX2_STEP();
        TT_AVX2_STEP();
        _mm_prefetch(reinterpret_cast<const char *>(a + kPrefetchA), _MM_HINT_T0);
        TT_AVX2_STEP();
        TT_AVX2_STEP();
    }
    for (; k < kc; ++k) TT_AVX2_STEP();

    const __m256 valpha = _mm256_set1_ps(alpha);
    const __m256 vbeta = _mm256_set1_ps(beta);
    const bool read_c = beta != 0.0f; /* beta == 0: C is write-only */
    store_row(c + 0 * ldc, c00, c01, valpha, vbeta, read_c);
    store_row(c + 1 * ldc, c10, c11, valpha, vbeta, read_c);
    store_row(c + 2 * ldc, c20, c21, valpha, vbeta, read_c);
    store_row(c + 3 * ldc, c30, c31, valpha, vbeta, read_c);
    store_row(c + 4 * ldc, c40, c41, valpha, vbeta, read_c);
    store_row(c + 5 * ldc, c50, c51, valpha, vbeta, read_c);
}

#undef TT_AVX2_STEP
#undef TT_AVX2_ROW

}  // namespace

namespace tt {
const GemmMicroKernel kGemmKernelAvx2 = {"avx2", MR, NR, gemm_ukernel_avx2_6x16};
}  // namespace tt
