/*
 * qgemm_kernel_avx512bw.cpp -- INT8 GEMM kernel for AVX-512BW without VNNI
 * (TT_QGEMM_AVX512BW). Built with the AVX-512 flags (no -mavx512vnni, so the compiler
 * cannot fuse the multiply-add pairs below into VNNI instructions).
 *
 * Scheme (exact): activations are stored widened to u16, weights stay s8 in the pack and
 * are sign-extended to s16 in registers (vpmovsxbw), and vpmaddwd multiplies 16 x 16 bits
 * and adds each pair of products into an int32 lane: a product is at most 255 * 128 =
 * 32640 in magnitude, a pair 65280, so neither the product nor the pair sum can saturate
 * or round, and vpaddd accumulates with the int32 bound of qgemm_kernels.h. vpmaddubsw
 * (u8 x s8 with 16-bit pair sums) would saturate: 2 * 255 * 127 = 64770 > 32767.
 *
 * Tile 6 x 64: 24 zmm accumulators, 4 for the sign-extended B group (64 columns x 2 k),
 * one broadcast of a row's two u16 activations, one product.
 */
#include <immintrin.h>

#include <cstring>

#include "cpu/qgemm_rows.h"

namespace {

constexpr int MR = 6;
constexpr int NR = 64;
constexpr int G = 2;

/* Named accumulators, not an array (see qgemm_kernel_avx512_vnni.cpp: GCC spills arrays of
 * vectors to the stack). Rows past R are never touched. */
#define TT_ACC_ROW(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = c##i##0, c##i##2 = c##i##0, \
                              c##i##3 = c##i##0
#define TT_MADD_ROW(i)                                                                        \
    if constexpr (R > i) {                                                                    \
        int32_t word;                                                                         \
        std::memcpy(&word, a + i * a_stride + g * 4, sizeof word);                           \
        const __m512i av = _mm512_set1_epi32(word);                                           \
        c##i##0 = _mm512_add_epi32(c##i##0, _mm512_madd_epi16(av, b0));                       \
        c##i##1 = _mm512_add_epi32(c##i##1, _mm512_madd_epi16(av, b1));                       \
        c##i##2 = _mm512_add_epi32(c##i##2, _mm512_madd_epi16(av, b2));                       \
        c##i##3 = _mm512_add_epi32(c##i##3, _mm512_madd_epi16(av, b3));                       \
    }
#define TT_STORE_ROW(i)                                                                       \
    if constexpr (R > i) {                                                                    \
        _mm512_storeu_si512(acc + i * NR, c##i##0);                                           \
        _mm512_storeu_si512(acc + i * NR + 16, c##i##1);                                      \
        _mm512_storeu_si512(acc + i * NR + 32, c##i##2);                                      \
        _mm512_storeu_si512(acc + i * NR + 48, c##i##3);                                      \
    }

inline __m512i widen(const int8_t *p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
}

template <int R>
void tile(int64_t kgroups, const uint8_t *a, int64_t a_stride, const int8_t *b, int32_t *acc) {
    TT_ACC_ROW(0); TT_ACC_ROW(1); TT_ACC_ROW(2); TT_ACC_ROW(3); TT_ACC_ROW(4); TT_ACC_ROW(5);
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * NR * G;
        const __m512i b0 = widen(bg), b1 = widen(bg + 32), b2 = widen(bg + 64), b3 = widen(bg + 96);
        TT_MADD_ROW(0) TT_MADD_ROW(1) TT_MADD_ROW(2) TT_MADD_ROW(3) TT_MADD_ROW(4) TT_MADD_ROW(5)
    }
    TT_STORE_ROW(0) TT_STORE_ROW(1) TT_STORE_ROW(2) TT_STORE_ROW(3) TT_STORE_ROW(4) TT_STORE_ROW(5)
}
#undef TT_ACC_ROW
#undef TT_MADD_ROW
#undef TT_STORE_ROW

void qgemm_ukernel_avx512bw(int64_t kgroups, const uint8_t *a, int64_t a_stride, int rows,
                            const int8_t *b, int32_t *acc) {
    switch (rows) {
        case 1: return tile<1>(kgroups, a, a_stride, b, acc);
        case 2: return tile<2>(kgroups, a, a_stride, b, acc);
        case 3: return tile<3>(kgroups, a, a_stride, b, acc);
        case 4: return tile<4>(kgroups, a, a_stride, b, acc);
        case 5: return tile<5>(kgroups, a, a_stride, b, acc);
        default: return tile<6>(kgroups, a, a_stride, b, acc);
    }
}

}  // namespace

namespace tt {
const QgemmKernel kQgemmAvx512bw = {
    TT_QGEMM_AVX512BW, "avx512bw", "qgemm:avx512bw", TT_ISA_AVX512, MR, NR, G, 0,
    qgemm_ukernel_avx512bw,
    qrows::quantize_row_fn<qrows::ALayout::U16, G>,
    qrows::epilogue_f32<&kGeluAvx512>,
    qrows::epilogue_i32};
}  // namespace tt
