/*
 * qgemm_neon.cpp -- INT8 GEMM kernel for AArch64 (TT_QGEMM_NEON / TT_QGEMM_NEON_DOT).
 *
 * Built only for arm64 (sources.cmake). Where the compiler targets the dot-product
 * extension (__ARM_FEATURE_DOTPROD, e.g. -march=armv8.2-a+dotprod) the entry is neon_dot:
 * sdot adds four s8 x s8 products to each int32 lane exactly (each product is at most
 * 128 * 128 = 2^14). sdot has no u8 x s8 form (usdot needs i8mm), so the activations are
 * stored shifted, a - 128 in s8, and the driver adds 128 * colsum[j] back (a_shift = 128).
 * Otherwise the entry is neon: the same layout with int32 loops the compiler widens.
 *
 * Tile 4 x 16: 16 int32x4 accumulators, 4 for the B group (16 columns x 4 k = 64 bytes).
 */
#if defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>

#include <cstring>

#include "cpu/qgemm_rows.h"

namespace {

constexpr int MR = 4;
constexpr int NR = 16;
constexpr int G = 4;

#if defined(__ARM_FEATURE_DOTPROD)
template <int R>
void tile(int64_t kgroups, const uint8_t *a, int64_t a_stride, const int8_t *b, int32_t *acc) {
    int32x4_t c[R][4];
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < 4; ++v) c[i][v] = vdupq_n_s32(0);
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * NR * G;
        const int8x16_t b0 = vld1q_s8(bg), b1 = vld1q_s8(bg + 16);
        const int8x16_t b2 = vld1q_s8(bg + 32), b3 = vld1q_s8(bg + 48);
        for (int i = 0; i < R; ++i) {
            int32_t word;
            std::memcpy(&word, a + i * a_stride + g * G, sizeof word);
            const int8x16_t av = vreinterpretq_s8_s32(vdupq_n_s32(word));
            c[i][0] = vdotq_s32(c[i][0], av, b0);
            c[i][1] = vdotq_s32(c[i][1], av, b1);
            c[i][2] = vdotq_s32(c[i][2], av, b2);
            c[i][3] = vdotq_s32(c[i][3], av, b3);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int v = 0; v < 4; ++v) vst1q_s32(acc + i * NR + v * 4, c[i][v]);
}
constexpr int kId = TT_QGEMM_NEON_DOT;
constexpr const char *kName = "neon_dot";
constexpr const char *kPath = "qgemm:neon_dot";
constexpr int kShift = 128;
constexpr tt::qrows::ALayout kLayout = tt::qrows::ALayout::S8Shifted;
#else
template <int R>
void tile(int64_t kgroups, const uint8_t *a, int64_t a_stride, const int8_t *b, int32_t *acc) {
    int32_t c[R][NR] = {};
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * NR * G;
        for (int i = 0; i < R; ++i) {
            const uint8_t *ag = a + i * a_stride + g * G;
            for (int j = 0; j < NR; ++j) {
                const int8_t *w = bg + j * G;
                c[i][j] += ag[0] * w[0] + ag[1] * w[1] + ag[2] * w[2] + ag[3] * w[3];
            }
        }
    }
    for (int i = 0; i < R; ++i) std::memcpy(acc + i * NR, c[i], sizeof c[i]);
}
constexpr int kId = TT_QGEMM_NEON;
constexpr const char *kName = "neon";
constexpr const char *kPath = "qgemm:neon";
constexpr int kShift = 0;
constexpr tt::qrows::ALayout kLayout = tt::qrows::ALayout::U8;
#endif

void qgemm_ukernel_neon(int64_t kgroups, const uint8_t *a, int64_t a_stride, int rows,
                        const int8_t *b, int32_t *acc) {
    switch (rows) {
        case 1: return tile<1>(kgroups, a, a_stride, b, acc);
        case 2: return tile<2>(kgroups, a, a_stride, b, acc);
        case 3: return tile<3>(kgroups, a, a_stride, b, acc);
        default: return tile<4>(kgroups, a, a_stride, b, acc);
    }
}

}  // namespace

namespace tt {
const QgemmKernel kQgemmNeon = {kId, kName, kPath, TT_ISA_NEON, MR, NR, G, kShift, 255,
                                qgemm_ukernel_neon, qrows::quantize_row_fn<kLayout, G>,
                                qrows::epilogue_f32<&kGeluNeon>, qrows::epilogue_i32};
}  // namespace tt
#endif
