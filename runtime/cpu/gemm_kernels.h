/*
 * gemm_kernels.h -- private: the fixed micro-kernel contract between the portable
 * GEMM driver (gemm.cpp) and the per-ISA micro-kernels (gemm_<isa>.cpp).
 *
 * The driver owns blocking, packing, edge tiles and threads. A micro-kernel owns
 * one MR x NR tile of C and nothing else:
 *
 *     C[i][j] = alpha * sum_{k < kc} a[k*MR + i] * b[k*NR + j]  +  beta * C[i][j]
 *
 *   a  : kc x MR packed sliver of op(A) (k-major, MR values per k), 64-byte aligned
 *   b  : kc x NR packed sliver of op(B) (k-major, NR values per k), 64-byte aligned
 *   c  : top-left of the tile, row-major with row stride ldc (any alignment)
 *   beta == 0 means C is write-only: it is never read, so NaN in C cannot leak.
 *
 * The tile is always full: the driver zero-pads packed slivers and routes partial
 * tiles through a scratch tile, so kernels have no edge code. kc may be 0.
 * Each ISA file defines one GemmMicroKernel constant; its code is compiled with
 * that ISA's flags and only called after run-time detection (runtime/core/isa.h).
 */
#pragma once

#include <cstdint>

#include "tinytorch/tinytorch.h"

namespace tt {

using GemmMicroKernelFn = void (*)(int64_t kc, const float *a, const float *b, float *c,
                                   int64_t ldc, float alpha, float beta);

/* Optional fast packing of one micro-panel whose source rows are contiguous in k
 * (op(A) with transA == 0, op(B) with transB != 0): a transpose of `rows` source rows
 *     dst[k * width + r] = src[r * ld + k]   for r < rows, k < klen
 *     dst[k * width + r] = 0                 for rows <= r < width
 * with width = mr (pack_a_rows) or nr (pack_b_rows). NULL: the driver's portable loop. */
using GemmPackRowsFn = void (*)(const float *src, int64_t ld, int rows, int64_t klen, float *dst);

/* Optional narrow-result kernel, kept apart from the tiled framework (as BLIS keeps its
 * "sup" kernels): for i < M, j < N (N <= narrow_max_n),
 *     C[i][j] = alpha * sum_{k < K} a[i*lda + k] * bt[j*ldbt + k]  +  beta * C[i][j]
 * i.e. op(A) row-major and op(B) given as its transpose B^T (N x K, rows contiguous in
 * k); beta == 0 never reads C. No packing, no tiles: a 16-wide tile would compute
 * mostly padding when N is 10 classes. */
using GemmNarrowFn = void (*)(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                              const float *bt, int64_t ldbt, float *c, int64_t ldc, float alpha,
                              float beta);

/* Optional row-vector kernel (decoding): for i < M <= kGemmRowvecMaxRows, j < N,
 *     C[i][j] = alpha * sum_{k < K} a[i*lda + k] * b[k*ldb + j]  +  beta * C[i][j]
 * with B row-major read in place (gemm_rowvec.h has the one body every ISA compiles). */
using GemmRowvecFn = void (*)(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                              const float *b, int64_t ldb, float *c, int64_t ldc, float alpha,
                              float beta);
constexpr int kGemmRowvecMaxRows = 4;

/* One ISA's entry of the kernel table. The path strings are what tt_last_kernel_path()
 * reports, so tests can tell which code ran. */
struct GemmMicroKernel {
    const char *path;         /* "sgemm:<isa>"                                 */
    const char *batched_path; /* "sgemm_strided_batched:<isa>"                 */
    int mr;                   /* rows of the register tile                     */
    int nr;                   /* columns of the register tile                  */
    GemmMicroKernelFn fn;
    GemmPackRowsFn pack_a_rows; /* width mr, or NULL                           */
    GemmPackRowsFn pack_b_rows; /* width nr, or NULL                           */
    GemmNarrowFn narrow;        /* or NULL: this ISA has no narrow path          */
    int narrow_max_n;           /* widest result the narrow path takes           */
    const char *narrow_path;    /* "sgemm:<isa>:narrow", or NULL                 */
    GemmRowvecFn rowvec;        /* or NULL: small M goes through the tiles        */
    const char *rowvec_path;    /* "sgemm:<isa>:rowvec", or NULL                 */
};

/* The largest tile any kernel uses (sizes the driver's scratch tile). */
constexpr int kGemmMaxMR = 16;
constexpr int kGemmMaxNR = 32;

extern const GemmMicroKernel kGemmKernelScalar;
#if defined(TT_HAVE_AVX2_KERNELS)
extern const GemmMicroKernel kGemmKernelAvx2;
/* The AVX2 narrow kernel, shared by the AVX2 and AVX-512 entries: results at most
 * kGemmNarrowMaxN columns wide take it. */
constexpr int kGemmNarrowMaxN = 12;
void gemm_narrow_avx2(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                      const float *bt, int64_t ldbt, float *c, int64_t ldc, float alpha,
                      float beta);
/* The AVX2 transposing packers at the AVX-512 tile's widths (12-row A, 32-column B). */
void gemm_pack_rows12_avx2(const float *src, int64_t ld, int rows, int64_t klen, float *dst);
void gemm_pack_rows32_avx2(const float *src, int64_t ld, int rows, int64_t klen, float *dst);
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
extern const GemmMicroKernel kGemmKernelAvx512;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
extern const GemmMicroKernel kGemmKernelNeon;
#endif

/* Shared by tt_sgemm, tt_sgemm_reference and tt_sgemm_strided_batched: validates one
 * GEMM's arguments (signs, leading dimensions, NULL pointers, overflow of the extents)
 * and records a message naming the argument on failure. */
struct GemmArgs {
    bool trans_a, trans_b;
    int64_t M, N, K;
    float alpha;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    float beta;
    float *C;
    int64_t ldc;
};

/* Elements spanned by a rows x cols matrix with leading dimension ld (0 if empty);
 * false on int64 overflow. */
bool gemm_matrix_extent(int64_t rows, int64_t cols, int64_t ld, int64_t *out);

/* TT_OK, or the failing status after tt::fail() recorded "<fn>: <what is wrong>". */
tt_status gemm_check_args(const char *fn, const GemmArgs &g);

/* C = beta * C over M x N (beta == 0 writes zeros without reading C): the whole
 * result when alpha == 0 or K == 0. */
void gemm_scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc);

}  // namespace tt
