/*
 * qgemm_avx512_vnni.cpp -- INT8 GEMM kernel for AVX-512 VNNI (TT_QGEMM_AVX512_VNNI).
 *
 * Built with -mavx512vnni on top of the AVX-512 flags (sources.cmake) and run only when
 * the CPU reports AVX512_VNNI (qgemm.cpp checks before it accepts a pack for it).
 *
 * Scheme (exact): vpdpbusd adds, per int32 lane, the four products of unsigned bytes
 * of A and signed bytes of B to the lane, without saturation (that is vpdpbusds) and
 * without intermediate rounding: each product fits 16 bits signed, the sum of four 18
 * bits, and the lane's running sum is bounded by K * 255 * 128 < 2^31 (qgemm_kernels.h).
 *
 * Tile 6 x 64 (qgemm_tile_avx512.h, shared with the AVX-512BW kernel): 24 zmm accumulators,
 * 4 for the B group (64 columns x 4 k = 256 bytes) and one broadcast of a row's 4 bytes.
 */
#include <immintrin.h>

#include "cpu/qgemm_rows.h"
#include "cpu/qgemm_tile_avx512.h"

namespace {

/* One k group: 4 u8 x 4 s8 products summed into each int32 lane by vpdpbusd. */
struct VnniStep {
    static constexpr int G = 4;
    static constexpr int kLoadBytes = 64;
    static __m512i load_b(const int8_t *p) { return _mm512_load_si512(p); }
    static __m512i madd(__m512i c, __m512i a, __m512i b) { return _mm512_dpbusd_epi32(c, a, b); }
};

}  // namespace

namespace tt {
const QgemmKernel kQgemmAvx512Vnni = {
    TT_QGEMM_AVX512_VNNI, "avx512_vnni", "qgemm:avx512_vnni", TT_ISA_AVX512, kQtileMR, kQtileNR,
    VnniStep::G, 0, 255, qtile_ukernel<VnniStep>,
    qrows::quantize_row_fn<qrows::ALayout::U8, VnniStep::G>,
    qrows::epilogue_f32<&kGeluAvx512>,
    qrows::epilogue_i32};
}  // namespace tt
