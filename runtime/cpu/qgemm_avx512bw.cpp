/*
 * qgemm_avx512bw.cpp -- INT8 GEMM kernel for AVX-512BW without VNNI
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
 * Tile 6 x 64 (qgemm_tile_avx512.h, shared with the VNNI kernel): 24 zmm accumulators, 4
 * for the sign-extended B group (64 columns x 2 k), one broadcast, one product.
 */
#include <immintrin.h>

#include "cpu/qgemm_rows.h"
#include "cpu/qgemm_tile_avx512.h"

namespace {

/* One k group: two u16 activations x two s8 weights sign-extended to s16, the pair summed
 * into each int32 lane by vpmaddwd, then vpaddd. */
struct MaddStep {
    static constexpr int G = 2;
    static constexpr int kLoadBytes = 32;
    static __m512i load_b(const int8_t *p) {
        return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i *>(p)));
    }
    static __m512i madd(__m512i c, __m512i a, __m512i b) {
        return _mm512_add_epi32(c, _mm512_madd_epi16(a, b));
    }
};

}  // namespace

namespace tt {
const QgemmKernel kQgemmAvx512bw = {
    TT_QGEMM_AVX512BW, "avx512bw", "qgemm:avx512bw", TT_ISA_AVX512, kQtileMR, kQtileNR,
    MaddStep::G, 0, 255, qtile_ukernel<MaddStep>,
    qrows::quantize_row_fn<qrows::ALayout::U16, MaddStep::G>,
    qrows::epilogue_f32<&kGeluAvx512>,
    qrows::epilogue_i32};
}  // namespace tt
