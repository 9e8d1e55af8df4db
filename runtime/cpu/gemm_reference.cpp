/*
 * gemm_reference.cpp -- tt_sgemm_reference: the portable triple-loop GEMM.
 *
 * It is the oracle the fast path is compared against and the code a reader checks
 * the BLAS semantics in: C = alpha * op(A) op(B) + beta * C, row-major, float
 * accumulation, one thread, no blocking. Arguments are checked by the same
 * gemm_check_args() as the fast path, so both refuse exactly the same inputs.
 */
#include "core/error.h"
#include "cpu/gemm_kernels.h"

namespace {

inline float load_op(const float *M, int64_t ld, bool trans, int64_t row, int64_t col) {
    /* op(M)[row][col]: M itself is stored transposed when trans is set. */
    return trans ? M[col * ld + row] : M[row * ld + col];
}

}  // namespace

extern "C" TT_API tt_status tt_sgemm_reference(int transA, int transB, int64_t M, int64_t N,
                                               int64_t K, float alpha, const float *A,
                                               int64_t lda, const float *B, int64_t ldb,
                                               float beta, float *C, int64_t ldc) {
    const tt::GemmArgs g{transA != 0, transB != 0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
    tt_status st = tt::gemm_check_args("tt_sgemm_reference", g);
    if (st != TT_OK) return st;
    tt::set_kernel_path("sgemm:reference");
    if (M == 0 || N == 0) return TT_OK;
    if (K == 0 || alpha == 0.0f) {
        tt::gemm_scale_c(M, N, beta, C, ldc);
        return TT_OK;
    }
    for (int64_t i = 0; i < M; ++i) {
        for (int64_t j = 0; j < N; ++j) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += load_op(A, lda, g.trans_a, i, k) * load_op(B, ldb, g.trans_b, k, j);
            float *c = &C[i * ldc + j];
            /* beta == 0: C is write-only (BLAS), so NaN already in C does not propagate. */
            *c = (beta == 0.0f) ? alpha * acc : alpha * acc + beta * *c;
        }
    }
    return TT_OK;
}
