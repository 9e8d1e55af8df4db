/*
 * qgemm_avx2.cpp -- INT8 GEMM kernel for AVX2 (TT_QGEMM_AVX2), built with the AVX2
 * flags (sources.cmake). The exact scheme of qgemm_avx512bw.cpp on 256-bit
 * registers: u16 activations, s8 weights sign-extended to s16 (vpmovsxbw), vpmaddwd pair
 * sums (at most 2 * 255 * 128 = 65280 in magnitude: no saturation) and vpaddd into int32.
 *
 * Tile 4 x 16: 8 ymm accumulators, 2 for the sign-extended B group (16 columns x 2 k),
 * one broadcast, one product: 12 of the 16 registers.
 */
#include <immintrin.h>

#include <cstring>

#include "cpu/qgemm_rows.h"

namespace {

constexpr int MR = 4;
constexpr int NR = 16;
constexpr int G = 2;

/* Named accumulators, not an array (see qgemm_avx512_vnni.cpp). */
#define TT_ACC_ROW(i) __m256i c##i##0 = _mm256_setzero_si256(), c##i##1 = c##i##0
#define TT_MADD_ROW(i)                                                                        \
    if constexpr (R > i) {                                                                    \
        int32_t word;                                                                         \
        std::memcpy(&word, a + i * a_stride + g * 4, sizeof word);                           \
        const __m256i av = _mm256_set1_epi32(word);                                           \
        c##i##0 = _mm256_add_epi32(c##i##0, _mm256_madd_epi16(av, b0));                       \
        c##i##1 = _mm256_add_epi32(c##i##1, _mm256_madd_epi16(av, b1));                       \
    }
#define TT_STORE_ROW(i)                                                                       \
    if constexpr (R > i) {                                                                    \
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc + i * NR), c##i##0);              \
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc + i * NR + 8), c##i##1);          \
    }

template <int R>
void tile(int64_t kgroups, const uint8_t *a, int64_t a_stride, const int8_t *b, int32_t *acc) {
    TT_ACC_ROW(0); TT_ACC_ROW(1); TT_ACC_ROW(2); TT_ACC_ROW(3);
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * NR * G;
        _mm_prefetch(reinterpret_cast<const char *>(bg) + tt::kQgemmPrefetchBytes, _MM_HINT_T0);
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(bg)));
        const __m256i b1 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i *>(bg + 16)));
        TT_MADD_ROW(0) TT_MADD_ROW(1) TT_MADD_ROW(2) TT_MADD_ROW(3)
    }
    TT_STORE_ROW(0) TT_STORE_ROW(1) TT_STORE_ROW(2) TT_STORE_ROW(3)
}
#undef TT_ACC_ROW
#undef TT_MADD_ROW
#undef TT_STORE_ROW

void qgemm_ukernel_avx2(int64_t kgroups, const uint8_t *a, int64_t a_stride, int rows,
                        const int8_t *b, int32_t *acc) {
    tt::with_tile_rows<MR>(rows, [&](auto r) { tile<decltype(r)::value>(kgroups, a, a_stride, b, acc); });
}

}  // namespace

namespace tt {
const QgemmKernel kQgemmAvx2 = {
    TT_QGEMM_AVX2, "avx2", "qgemm:avx2", TT_ISA_AVX2, MR, NR, G, 0, 255,
    qgemm_ukernel_avx2,
    qrows::quantize_row_fn<qrows::ALayout::U16, G>,
    qrows::epilogue_f32<&kGeluAvx2>,
    qrows::epilogue_i32};
}  // namespace tt
