/*
 * gemm_neon.cpp -- GEMM micro-kernel for AArch64 Advanced SIMD (TT_ISA_NEON).
 *
 * NEON is part of the AArch64 baseline, so this file needs no extra flags; it is built
 * only for arm64 (runtime/cpu/sources.cmake). Contract: gemm_kernels.h.
 *
 * Register tile 8 x 12: 24 q-register accumulators (8 rows x 3 vectors of 4 columns),
 * three for the B row of the current k and two holding the 8 A values, used lane by lane
 * with fused multiply-add by element (29 of the 32 vector registers). MR = 8 divides the
 * default MC (144) and NR = 12 divides the default NC (4080).
 */
#if defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>

#include "cpu/gemm_kernels.h"
#include "cpu/gemm_rowvec.h"

namespace {

constexpr int MR = 8;
constexpr int NR = 12;

void gemm_ukernel_neon_8x12(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                            float alpha, float beta) {
    float32x4_t acc[MR][3];
    for (int i = 0; i < MR; ++i)
        for (int v = 0; v < 3; ++v) acc[i][v] = vdupq_n_f32(0.0f);

    for (int64_t k = 0; k < kc; ++k) {
        const float32x4_t b0 = vld1q_f32(b), b1 = vld1q_f32(b + 4), b2 = vld1q_f32(b + 8);
        const float32x4_t a0 = vld1q_f32(a), a1 = vld1q_f32(a + 4);
#define TT_NEON_ROW(i, areg, lane)                              \
    acc[i][0] = vfmaq_laneq_f32(acc[i][0], b0, areg, lane);     \
    acc[i][1] = vfmaq_laneq_f32(acc[i][1], b1, areg, lane);     \
    acc[i][2] = vfmaq_laneq_f32(acc[i][2], b2, areg, lane);
        TT_NEON_ROW(0, a0, 0)
        TT_NEON_ROW(1, a0, 1)
        TT_NEON_ROW(2, a0, 2)
        TT_NEON_ROW(3, a0, 3)
        TT_NEON_ROW(4, a1, 0)
        TT_NEON_ROW(5, a1, 1)
        TT_NEON_ROW(6, a1, 2)
        TT_NEON_ROW(7, a1, 3)
#undef TT_NEON_ROW
        a += MR;
        b += NR;
    }

    const bool read_c = beta != 0.0f; /* beta == 0: C is write-only */
    for (int i = 0; i < MR; ++i) {
        float *ci = c + i * ldc;
        for (int v = 0; v < 3; ++v) {
            float32x4_t r = vmulq_n_f32(acc[i][v], alpha);
            if (read_c) r = vfmaq_n_f32(r, vld1q_f32(ci + 4 * v), beta);
            vst1q_f32(ci + 4 * v, r);
        }
    }
}

}  // namespace

namespace tt {
const GemmMicroKernel kGemmKernelNeon = {"sgemm:neon", "sgemm_strided_batched:neon", MR, NR,
                                         gemm_ukernel_neon_8x12, nullptr, nullptr,
                                         nullptr, 0, nullptr, gemm_rowvec_body,
                                         "sgemm:neon:rowvec"};
}  // namespace tt
#endif
