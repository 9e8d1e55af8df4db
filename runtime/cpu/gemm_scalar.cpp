/*
 * gemm_scalar.cpp -- the portable GEMM micro-kernel (TT_ISA_SCALAR).
 *
 * Plain C++ compiled for the architecture baseline: a 4 x 8 register tile held in a
 * local array that the compiler keeps in registers (on x86-64 it may use SSE2, the
 * baseline). It runs inside the same blocked, packed driver as the SIMD kernels, so
 * "scalar" measures what blocking alone buys. Contract: gemm_kernels.h.
 */
#include "cpu/gemm_kernels.h"
#include "cpu/gemm_rowvec.h"

namespace {

constexpr int MR = 4;
constexpr int NR = 8;

void gemm_ukernel_scalar_4x8(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                             float alpha, float beta) {
    float acc[MR][NR] = {};
    for (int64_t k = 0; k < kc; ++k) {
        const float *ak = a + k * MR;
        const float *bk = b + k * NR;
        for (int i = 0; i < MR; ++i)
            for (int j = 0; j < NR; ++j) acc[i][j] += ak[i] * bk[j];
    }
    for (int i = 0; i < MR; ++i) {
        float *ci = c + i * ldc;
        if (beta == 0.0f) {
            for (int j = 0; j < NR; ++j) ci[j] = alpha * acc[i][j];
        } else {
            for (int j = 0; j < NR; ++j) ci[j] = alpha * acc[i][j] + beta * ci[j];
        }
    }
}

}  // namespace

namespace tt {
const GemmMicroKernel kGemmKernelScalar = {"sgemm:scalar", "sgemm_strided_batched:scalar", MR, NR,
                                           gemm_ukernel_scalar_4x8, nullptr, nullptr,
                                           nullptr, 0, nullptr, gemm_rowvec_body,
                                           "sgemm:scalar:rowvec"};
}  // namespace tt
