/*
 * qgemm_scalar.cpp -- the portable INT8 GEMM kernel (TT_QGEMM_SCALAR), the
 * reference the tests hold every SIMD kernel to. Plain int32 loops over a 4 x 16 tile,
 * compiled for the architecture baseline; packs for it run under any active ISA.
 * Layout: u8 activations and s8 weights in groups of 4 k (contract: qgemm_kernels.h).
 */
#include <cstring>

#include "cpu/qgemm_rows.h"

namespace {

constexpr int MR = 4;
constexpr int NR = 16;
constexpr int G = 4;

void qgemm_ukernel_scalar(int64_t kgroups, const uint8_t *a, int64_t a_stride, int rows,
                          const int8_t *b, int32_t *acc) {
    /* |partial sums| <= K * 255 * 128 < 2^31 for K <= TT_QGEMM_MAX_K: no int32 overflow. */
    int32_t c[MR][NR] = {};
    for (int64_t g = 0; g < kgroups; ++g) {
        const int8_t *bg = b + g * NR * G;
        for (int i = 0; i < rows; ++i) {
            const uint8_t *ag = a + i * a_stride + g * G;
            for (int j = 0; j < NR; ++j) {
                const int8_t *w = bg + j * G;
                c[i][j] += ag[0] * w[0] + ag[1] * w[1] + ag[2] * w[2] + ag[3] * w[3];
            }
        }
    }
    for (int i = 0; i < rows; ++i) std::memcpy(acc + i * NR, c[i], sizeof c[i]);
}

}  // namespace

namespace tt {
const QgemmKernel kQgemmScalar = {
    TT_QGEMM_SCALAR, "scalar", "qgemm:scalar", TT_ISA_SCALAR, MR, NR, G, 0, 255,
    qgemm_ukernel_scalar,
    qrows::quantize_row_fn<qrows::ALayout::U8, G>,
    qrows::epilogue_f32<&kGeluScalar>,
    qrows::epilogue_i32};
}  // namespace tt
