/*
 * attention_kernels.h -- private: the contract between the FlashAttention driver
 * (attention.cpp: checks, blocking, causal skipping, threads, packing, workspace) and
 * the per-ISA kernels (attention_<isa>.cpp: block products, softmax and exp in SIMD).
 *
 * The layout trick that makes every step vertical: the driver keeps score blocks
 * TRANSPOSED, S^T[key][query], with the queries of a block along the SIMD lanes. Then
 *   - the online-softmax statistics m_i, l_i, alpha_i are vectors over lanes (no
 *     horizontal max or sum anywhere: a row max over keys is a max of rows of S^T);
 *   - the forward accumulator is O^T[c][query], rescaled by alpha lane by lane;
 *   - each block product is "broadcast one value of A, FMA a contiguous row of B": Q is
 *     packed once per block as Q^T (d x queries), K, V, dO and Q rows are used in place.
 *
 * Block product (one function per ISA, any sizes, reads only the elements it names):
 *   C[r][c] = base(r, c) + sum_{k < kc} a(r, k) * B[k * ldb + c]     r < rows, c < cols
 *   a(r, k) = trans_a ? A[k * lda + r] : A[r * lda + k]
 *   base    = 0 (kProductOverwrite: C is never read, NaN in it cannot leak)
 *           | C[r][c] (kProductAccumulate)
 *           | C[r][c] * colscale[c] (kProductScaleColumns: the forward's O^T * alpha)
 * Forward:  S^T = K Q^T (a = K rows), O^T = O^T * alpha + V^T P^T (a = V, transposed).
 * Backward: S^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q, dQ += dS K (a = dS^T, transposed).
 *
 * Softmax step (forward), S is rows x n with row stride ld, n a multiple of `lanes`:
 *   mx[c]    = max(m[c], max_r S[r][c])            (masked scores are -inf)
 *   ms[c]    = mx[c] == -inf ? 0 : mx[c]           (no key seen yet: exp(-inf - 0) = 0)
 *   alpha[c] = exp(m[c] - ms[c])
 *   S[r][c]  = exp(S[r][c] - ms[c])                (P, in place)
 *   l[c]     = l[c] * alpha[c] + sum_r S[r][c];    m[c] = mx[c]
 * exp_sub (backward):  S[r][c] = exp(S[r][c] - sub[c])   (sub = lse, +inf for a query that
 *   sees no key, so that its P is exactly 0)
 * ds (backward):       dP[r][c] = P[r][c] * (dP[r][c] - D[c]) * scale
 *
 * Few queries (2 sq <= lanes: decoding) take the table's `rows` forward instead, one query
 * row at a time along d (attention_rows.h), so no lane holds padding.
 *
 * exp is the vectorised exp of bias_gelu_kernels.h (same range reduction and degree-5
 * minimax polynomial, kExpP0..kExpP5); inputs below kAttnExpLo give exactly 0, so -inf
 * (a masked score) contributes nothing, and NaN propagates.
 */
#pragma once

#include <cstdint>

#include "tinytorch/tinytorch.h"

namespace tt {

/* Block sizes (the driver's blocking; every ISA uses the same so results do not depend
 * on the split). A 64 x 64 float block is 16 KiB: Q^T, S^T and O^T of one query block
 * (48 KiB) stay in L1/L2 while the K and V blocks stream past. */
constexpr int64_t kAttnBlockQ = 64; /* queries per block (a multiple of every ISA's lanes) */
constexpr int64_t kAttnBlockK = 64; /* keys per block                                     */
/* Floats of workspace one query row of the rows forward needs: scores, exp's operand, o. */
constexpr int64_t kAttnRowsWorkspace(int64_t d) { return 2 * kAttnBlockK + d; }

/* exp(t) for t < kAttnExpLo is 0 in float (e^-110 ~ 1.7e-48 < the smallest denormal);
 * the clamp makes exp(-inf) exactly 0 without a branch. */
constexpr float kAttnExpLo = -110.0f;
constexpr float kAttnExpHi = 88.5f;

enum AttnProductMode { kProductOverwrite = 0, kProductAccumulate = 1, kProductScaleColumns = 2 };

using AttnProductFn = void (*)(int64_t rows, int64_t cols, int64_t kc, const float *A,
                               int64_t lda, bool trans_a, const float *B, int64_t ldb, float *C,
                               int64_t ldc, int mode, const float *colscale);
using AttnSoftmaxFn = void (*)(float *S, int64_t rows, int64_t n, int64_t ld, float *m,
                               float *l, float *alpha);
using AttnExpSubFn = void (*)(float *S, int64_t rows, int64_t n, int64_t ld, const float *sub);
using AttnDsFn = void (*)(const float *P, float *dP, int64_t rows, int64_t n, int64_t ld,
                          const float *D, float scale);
/* One query row over its first `keys` keys (attention_rows.h): o and *lse (lse may be NULL);
 * ws holds kAttnRowsWorkspace(d) floats. */
using AttnRowsFn = void (*)(const float *q, const float *k, int64_t k_stride, const float *v,
                            int64_t v_stride, int64_t keys, int64_t d, float scale, float *o,
                            float *lse, float *ws);

/* One ISA's entry of the attention table (the GEMM's table pattern, gemm_kernels.h). */
struct AttentionKernels {
    const char *forward_path;  /* "attention_forward:<isa>"  */
    const char *backward_path; /* "attention_backward:<isa>" */
    int lanes;                 /* floats per vector: the padding unit of a query block */
    AttnProductFn product;
    AttnSoftmaxFn softmax;
    AttnExpSubFn exp_sub;
    AttnDsFn ds;
    AttnRowsFn rows;           /* or NULL: the forward of few queries (2 sq <= lanes) */
    const char *rows_path;     /* "attention_forward:<isa>:rows", or NULL            */
};

extern const AttentionKernels kAttentionScalar;
#if defined(TT_HAVE_AVX2_KERNELS)
extern const AttentionKernels kAttentionAvx2;
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
extern const AttentionKernels kAttentionAvx512;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
extern const AttentionKernels kAttentionNeon;
#endif

/* The portable block product (the scalar entry's); vector kernels without masked loads
 * (NEON) hand it the columns that do not fill a vector. */
void attention_product_scalar(int64_t rows, int64_t cols, int64_t kc, const float *A,
                              int64_t lda, bool trans_a, const float *B, int64_t ldb, float *C,
                              int64_t ldc, int mode, const float *colscale);

}  // namespace tt
