/*
 * qgemm_avx2_u7.cpp -- INT8 GEMM kernel for AVX2 on 7-bit activations (TT_QGEMM_AVX2_U7),
 * built with the AVX2 flags (sources.cmake). It runs only on TT_QGEMM_REDUCE_RANGE packs
 * (activations in [0, 127], PyTorch's reduce_range=True); the pack call refuses it without
 * the flag and the driver refuses an activation above 127 on such packs.
 *
 * Scheme (exact), per k group of 4 and 8 columns:
 *   vpmaddubsw  u8 a x s8 w, adjacent pairs summed into s16 with signed saturation.
 *               |a * w| <= 127 * 128 = 16256, so a pair is at most 32512 < 32767: it
 *               never saturates. (With 8-bit activations a pair reaches 2 * 255 * 127 =
 *               64770 and would: that is why the 8-bit avx2 kernel widens to u16 instead.)
 *   vpmaddwd    by a vector of 16-bit ones: the two pairs of a lane summed into int32, exact.
 *   vpaddd      into the int32 accumulator; |sum| <= K * 127 * 128 < K * 255 * 128 < 2^31
 *               for K <= TT_QGEMM_MAX_K (qgemm_kernels.h).
 * 32 products per three instructions (vs 16 per vpmaddwd + vpaddd on widened values): the
 * measured ceiling on a Zen 3 core is 187-189 GOP/s vs 127-147 (int8_peak.c).
 *
 * Layout: the VNNI one (k_group 4, u8 A, s8 B: a group of a column is 4 contiguous bytes, so
 * one 32-byte load of B holds 8 columns and a row's 4 bytes are one 32-bit broadcast).
 *
 * Tile 4 x 24 (measured on Zen 3 against 4 x 16, 5 x 16, 6 x 16, 3 x 24: docs/int8.md):
 * 12 ymm accumulators, the ones vector, one broadcast and one product. GCC keeps B's first
 * vector in a register and reads the other two as memory operands of vpmaddubsw (13 loads per
 * k group against 24 multiply instructions: the load ports have room), so the 16 registers
 * hold the accumulators without spills.
 */
#include <immintrin.h>

#include <cstring>

#include "cpu/qgemm_rows.h"

namespace {

constexpr int MR = 4;
constexpr int NV = 3; /* ymm of 8 columns per row */
constexpr int NR = NV * 8;
constexpr int G = 4;
static_assert(MR <= 6 && NV >= 2 && NV <= 3, "the macros below name 6 rows of 3 vectors");

/* Named accumulators, not an array (see qgemm_tile_avx512.h). */
#define TT_ACC_ROW(i) __m256i c##i##0 = _mm256_setzero_si256(), c##i##1 = c##i##0, c##i##2 = c##i##0
#define TT_MADD(i, v)                                                                         \
    c##i##v = _mm256_add_epi32(c##i##v, _mm256_madd_epi16(_mm256_maddubs_epi16(av, b##v), ones))
#define TT_STEP_ROW(i)                                                                        \
    if constexpr (R > i) {                                                                    \
        int32_t word;                                                                         \
        std::memcpy(&word, a + i * a_stride + g * 4, sizeof word);                           \
        const __m256i av = _mm256_set1_epi32(word);                                           \
        TT_MADD(i, 0);                                                                        \
        TT_MADD(i, 1);                                                                        \
        if constexpr (NV > 2) TT_MADD(i, 2);                                                  \
    }
#define TT_STORE_ROW(i)                                                                       \
    if constexpr (R > i) {                                                                    \
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc + i * NR), c##i##0);              \
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc + i * NR + 8), c##i##1);          \
        if constexpr (NV > 2)                                                                 \
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(acc + i * NR + 16), c##i##2);     \
    }

template <int R>
void tile(int64_t kgroups, const uint8_t *a, int64_t a_stride, const int8_t *b, int32_t *acc) {
    TT_ACC_ROW(0); TT_ACC_ROW(1); TT_ACC_ROW(2); TT_ACC_ROW(3); TT_ACC_ROW(4); TT_ACC_ROW(5);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * NR * G;
        _mm_prefetch(reinterpret_cast<const char *>(bg) + tt::kQgemmPrefetchBytes, _MM_HINT_T0);
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bg));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bg + 32));
        const __m256i b2 = NV > 2 ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(bg + 64))
                                  : _mm256_setzero_si256();
        TT_STEP_ROW(0) TT_STEP_ROW(1) TT_STEP_ROW(2) TT_STEP_ROW(3) TT_STEP_ROW(4) TT_STEP_ROW(5)
    }
    TT_STORE_ROW(0) TT_STORE_ROW(1) TT_STORE_ROW(2) TT_STORE_ROW(3) TT_STORE_ROW(4) TT_STORE_ROW(5)
}
#undef TT_ACC_ROW
#undef TT_MADD
#undef TT_STEP_ROW
#undef TT_STORE_ROW

void qgemm_ukernel_avx2_u7(int64_t kgroups, const uint8_t *a, int64_t a_stride, int rows,
                           const int8_t *b, int32_t *acc) {
    tt::with_tile_rows<MR>(rows, [&](auto r) { tile<decltype(r)::value>(kgroups, a, a_stride, b, acc); });
}

}  // namespace

namespace tt {
const QgemmKernel kQgemmAvx2U7 = {
    TT_QGEMM_AVX2_U7, "avx2_u7", "qgemm:avx2_u7", TT_ISA_AVX2, MR, NR, G, 0, 127,
    qgemm_ukernel_avx2_u7,
    qrows::quantize_row_fn<qrows::ALayout::U8, G>,
    qrows::epilogue_f32<&kGeluAvx2>,
    qrows::epilogue_i32};
}  // namespace tt
