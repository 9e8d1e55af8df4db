/*
 * gemm_rowvec.h -- private: the row-vector GEMM body (decoding: one token per call),
 * written once in plain loops and compiled per ISA by each gemm_<isa>.cpp, whose
 * flags make the compiler vectorise it (the kernel table's `rowvec` entry).
 *
 * What it computes, for i < M <= kGemmRowvecMaxRows and j < N:
 *     C[i][j] = alpha * sum_{k < K} a[i*lda + k] * b[k*ldb + j]  +  beta * C[i][j]
 * with B row-major (transB == 0) read in place: a decode step reads every weight once,
 * so packing B (a copy of the whole weight per call) would double the bytes moved.
 * Rows of B stream by in k order while the accumulators of R rows x kRowvecFloats / R
 * columns (16 KB) stay in L1: at one row a 4096-column block, so a whole row of a
 * GPT-2-sized weight is read as one contiguous run (what the prefetchers follow best).
 * At one row (batch-1 decoding) four rows of B go by per pass, each accumulator loaded and
 * stored once per four k: from DRAM 1.2-1.45x the one-row-a-pass loop on Zen 3 (768 x 768
 * 16 -> 22 GB/s, 3072 x 768 14 -> 21 GB/s), the sum still in k order. More rows keep one
 * row a pass (unrolled they measured slower or no faster). Every element's k sum runs in order, so how the driver splits the columns
 * across threads changes no bit; beta == 0 never reads C.
 *
 * Internal linkage on purpose: each ISA's file compiles its own copy with its own flags
 * (one shared instantiation could be the AVX-512 one, run on an AVX2 machine).
 */
#pragma once
#include <algorithm>
#include <cstdint>

#include "cpu/gemm_kernels.h"

namespace tt {
namespace {

constexpr int64_t kRowvecFloats = 4096;

template <int R>
void rowvec_rows(int64_t N, int64_t K, const float *a, int64_t lda, const float *b, int64_t ldb,
                 float *c, int64_t ldc, float alpha, float beta) {
    constexpr int64_t kRowvecBlock = kRowvecFloats / R;
    alignas(64) float acc[R][kRowvecBlock];
    for (int64_t j0 = 0; j0 < N; j0 += kRowvecBlock) {
        const int64_t w = std::min(kRowvecBlock, N - j0);
        for (int r = 0; r < R; ++r)
            for (int64_t j = 0; j < w; ++j) acc[r][j] = 0.0f;
        int64_t k = 0;
        if (R == 1) /* four rows of B per pass: 4 streams in flight, acc loaded and stored once */
            for (; k + 4 <= K; k += 4) {
                const float *bk = b + k * ldb + j0;
                const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
                for (int64_t j = 0; j < w; ++j) {
                    float s = acc[0][j]; /* the same k order as the loop below: the same bits */
                    s += a0 * bk[j];
                    s += a1 * bk[ldb + j];
                    s += a2 * bk[2 * ldb + j];
                    s += a3 * bk[3 * ldb + j];
                    acc[0][j] = s;
                }
            }
        for (; k < K; ++k) {
            const float *bk = b + k * ldb + j0;
            float ak[R];
            for (int r = 0; r < R; ++r) ak[r] = a[r * lda + k];
            for (int64_t j = 0; j < w; ++j) {
                const float bj = bk[j];
                for (int r = 0; r < R; ++r) acc[r][j] += ak[r] * bj;
            }
        }
        for (int r = 0; r < R; ++r) {
            float *cr = c + r * ldc + j0;
            if (beta == 0.0f) {
                for (int64_t j = 0; j < w; ++j) cr[j] = alpha * acc[r][j];
            } else {
                for (int64_t j = 0; j < w; ++j) cr[j] = alpha * acc[r][j] + beta * cr[j];
            }
        }
    }
}

void gemm_rowvec_body(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                      const float *b, int64_t ldb, float *c, int64_t ldc, float alpha,
                      float beta) {
    switch (M) {
        case 1: return rowvec_rows<1>(N, K, a, lda, b, ldb, c, ldc, alpha, beta);
        case 2: return rowvec_rows<2>(N, K, a, lda, b, ldb, c, ldc, alpha, beta);
        case 3: return rowvec_rows<3>(N, K, a, lda, b, ldb, c, ldc, alpha, beta);
        default: return rowvec_rows<4>(N, K, a, lda, b, ldb, c, ldc, alpha, beta);
    }
}

}  // namespace
}  // namespace tt
