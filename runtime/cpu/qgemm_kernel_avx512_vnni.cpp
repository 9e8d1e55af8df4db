/*
 * qgemm_kernel_avx512_vnni.cpp -- INT8 GEMM kernel for AVX-512 VNNI (TT_QGEMM_AVX512_VNNI).
 *
 * Built with -mavx512vnni on top of the AVX-512 flags (sources.cmake) and run only when
 * the CPU reports AVX512_VNNI (qgemm.cpp checks before it accepts a pack for it).
 *
 * Scheme (exact): vpdpbusd adds, per int32 lane, the four products of unsigned bytes
 * of A and signed bytes of B to the lane, without saturation (that is vpdpbusds) and
 * without intermediate rounding: each product fits 16 bits signed, the sum of four 18
 * bits, and the lane's running sum is bounded by K * 255 * 128 < 2^31 (qgemm_kernels.h).
 *
 * Tile 6 x 64: 24 zmm accumulators (6 rows x 4 vectors of 16 columns), 4 for the B group
 * (64 columns x 4 k = 256 bytes) and one broadcast of a row's 4 activation bytes.
 */
#include <immintrin.h>

#include <cstring>

#include "cpu/qgemm_rows.h"

namespace {

constexpr int MR = 6;
constexpr int NR = 64;
constexpr int G = 4;

/* Named accumulators, not an array: GCC keeps an array of __m512i in memory and copies it
 * through the stack every k group (measured: 3x slower). Rows past R are never touched. */
#define TT_ACC_ROW(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = c##i##0, c##i##2 = c##i##0, \
                              c##i##3 = c##i##0
#define TT_DOT_ROW(i)                                                                         \
    if constexpr (R > i) {                                                                    \
        int32_t word;                                                                         \
        std::memcpy(&word, a + i * a_stride + g * G, sizeof word);                           \
        const __m512i av = _mm512_set1_epi32(word);                                           \
        c##i##0 = _mm512_dpbusd_epi32(c##i##0, av, b0);                                       \
        c##i##1 = _mm512_dpbusd_epi32(c##i##1, av, b1);                                       \
        c##i##2 = _mm512_dpbusd_epi32(c##i##2, av, b2);                                       \
        c##i##3 = _mm512_dpbusd_epi32(c##i##3, av, b3);                                       \
    }
#define TT_STORE_ROW(i)                                                                       \
    if constexpr (R > i) {                                                                    \
        _mm512_storeu_si512(acc + i * NR, c##i##0);                                           \
        _mm512_storeu_si512(acc + i * NR + 16, c##i##1);                                      \
        _mm512_storeu_si512(acc + i * NR + 32, c##i##2);                                      \
        _mm512_storeu_si512(acc + i * NR + 48, c##i##3);                                      \
    }

template <int R>
void tile(int64_t kgroups, const uint8_t *a, int64_t a_stride, const int8_t *b, int32_t *acc) {
    TT_ACC_ROW(0); TT_ACC_ROW(1); TT_ACC_ROW(2); TT_ACC_ROW(3); TT_ACC_ROW(4); TT_ACC_ROW(5);
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * NR * G;
        const __m512i b0 = _mm512_load_si512(bg), b1 = _mm512_load_si512(bg + 64);
        const __m512i b2 = _mm512_load_si512(bg + 128), b3 = _mm512_load_si512(bg + 192);
        TT_DOT_ROW(0) TT_DOT_ROW(1) TT_DOT_ROW(2) TT_DOT_ROW(3) TT_DOT_ROW(4) TT_DOT_ROW(5)
    }
    TT_STORE_ROW(0) TT_STORE_ROW(1) TT_STORE_ROW(2) TT_STORE_ROW(3) TT_STORE_ROW(4) TT_STORE_ROW(5)
}
#undef TT_ACC_ROW
#undef TT_DOT_ROW
#undef TT_STORE_ROW

void qgemm_ukernel_avx512_vnni(int64_t kgroups, const uint8_t *a, int64_t a_stride, int rows,
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
const QgemmKernel kQgemmAvx512Vnni = {
    TT_QGEMM_AVX512_VNNI, "avx512_vnni", "qgemm:avx512_vnni", TT_ISA_AVX512, MR, NR, G, 0,
    qgemm_ukernel_avx512_vnni,
    qrows::quantize_row_fn<qrows::ALayout::U8, G>,
    qrows::epilogue_f32<&kGeluAvx512>,
    qrows::epilogue_i32};
}  // namespace tt
