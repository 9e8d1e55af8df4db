/*
 * qgemm_tile_avx512.h -- private: the 6 x 64 int32 register tile of the two AVX-512 INT8
 * kernels, written once over the exact multiply-accumulate of one k group (the Step), and
 * included by qgemm_avx512_vnni.cpp (vpdpbusd) and qgemm_avx512bw.cpp
 * (vpmovsxbw + vpmaddwd), each compiled with its own flags.
 *
 * A Step supplies
 *   G             k per group: 4 (u8 activations) or 2 (u16 activations); a group of A is
 *                 4 bytes either way, one 32-bit broadcast
 *   kLoadBytes    bytes of the packed B group holding 16 columns (64 for s8 x 4 k, 32 for
 *                 s8 x 2 k, widened to s16 in the register)
 *   load_b(p)     those 16 columns of B as one zmm
 *   madd(c, a, b) c + the group's exact products, per int32 lane (qgemm_kernels.h proves
 *                 each scheme exact)
 * The tile keeps 24 zmm accumulators in named variables, not an array: GCC keeps an array
 * of __m512i in memory and copies it through the stack every k group (measured: 3x slower).
 * Rows past R are never touched. Internal linkage: each includer has its own copy.
 */
#pragma once
#include <immintrin.h>

#include <cstring>

#include "cpu/qgemm_kernels.h"

namespace tt {
namespace {

constexpr int kQtileMR = 6;
constexpr int kQtileNR = 64;

#define TT_ACC_ROW(i) __m512i c##i##0 = _mm512_setzero_si512(), c##i##1 = c##i##0, c##i##2 = c##i##0, \
                              c##i##3 = c##i##0
#define TT_STEP_ROW(i)                                                                        \
    if constexpr (R > i) {                                                                    \
        int32_t word;                                                                         \
        std::memcpy(&word, a + i * a_stride + g * 4, sizeof word);                           \
        const __m512i av = _mm512_set1_epi32(word);                                           \
        c##i##0 = Step::madd(c##i##0, av, b0);                                                \
        c##i##1 = Step::madd(c##i##1, av, b1);                                                \
        c##i##2 = Step::madd(c##i##2, av, b2);                                                \
        c##i##3 = Step::madd(c##i##3, av, b3);                                                \
    }
#define TT_STORE_ROW(i)                                                                       \
    if constexpr (R > i) {                                                                    \
        _mm512_storeu_si512(acc + i * kQtileNR, c##i##0);                                     \
        _mm512_storeu_si512(acc + i * kQtileNR + 16, c##i##1);                                \
        _mm512_storeu_si512(acc + i * kQtileNR + 32, c##i##2);                                \
        _mm512_storeu_si512(acc + i * kQtileNR + 48, c##i##3);                                \
    }

template <class Step, int R>
void qtile_6x64(int64_t kgroups, const uint8_t *a, int64_t a_stride, const int8_t *b, int32_t *acc) {
    TT_ACC_ROW(0); TT_ACC_ROW(1); TT_ACC_ROW(2); TT_ACC_ROW(3); TT_ACC_ROW(4); TT_ACC_ROW(5);
    constexpr int L = Step::kLoadBytes;
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * kQtileNR * Step::G;
        const __m512i b0 = Step::load_b(bg), b1 = Step::load_b(bg + L);
        const __m512i b2 = Step::load_b(bg + 2 * L), b3 = Step::load_b(bg + 3 * L);
        TT_STEP_ROW(0) TT_STEP_ROW(1) TT_STEP_ROW(2) TT_STEP_ROW(3) TT_STEP_ROW(4) TT_STEP_ROW(5)
    }
    TT_STORE_ROW(0) TT_STORE_ROW(1) TT_STORE_ROW(2) TT_STORE_ROW(3) TT_STORE_ROW(4) TT_STORE_ROW(5)
}
#undef TT_ACC_ROW
#undef TT_STEP_ROW
#undef TT_STORE_ROW

/* QgemmMicroKernelFn over the tile. */
template <class Step>
void qtile_ukernel(int64_t kgroups, const uint8_t *a, int64_t a_stride, int rows, const int8_t *b,
                   int32_t *acc) {
    with_tile_rows<kQtileMR>(rows, [&](auto r) {
        qtile_6x64<Step, decltype(r)::value>(kgroups, a, a_stride, b, acc);
    });
}

}  // namespace
}  // namespace tt
