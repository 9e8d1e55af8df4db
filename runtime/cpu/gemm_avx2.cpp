/*
 * gemm_avx2.cpp -- GEMM micro-kernel for x86-64 AVX2 + FMA (TT_ISA_AVX2).
 *
 * Compiled with -mavx2 -mfma (runtime/cpu/sources.cmake) and called only when the CPU
 * reports both. Contract: gemm_kernels.h.
 *
 * Register tile 6 x 16: twelve ymm accumulators (6 rows x 2 vectors of 8 columns),
 * two ymm for the B row of the current k, two for broadcast A values: all 16 ymm
 * registers. Per k it issues 12 FMAs against 2 loads + 6 broadcasts, which keeps
 * both FMA pipes busy (12 independent chains cover the 4-5 cycle FMA latency of two
 * pipes) without spilling. The k loop is unrolled by 4; the B sliver is L1-resident
 * (the driver's blocking), A slivers come from L2 and are prefetched a few k ahead.
 *
 * gemm_narrow_avx2 serves results only a few columns wide (N = 10 classes), where a
 * 16-wide tile would mostly compute padding and packing A would cost as much as the
 * arithmetic: each C element is a dot product of a row of A with a row of B^T, both
 * contiguous in k, two rows x four columns at a time (8 accumulators, 6 loads per 8 FMAs).
 */
#include <immintrin.h>

#include <algorithm>

#include "cpu/gemm_kernels.h"
#include "cpu/gemm_rowvec.h"

namespace {

constexpr int MR = 6;
constexpr int NR = 16;

/* One k step of the 6 x 16 tile, for step u of the unrolled loop (byte offsets are
 * assembler expressions): B row in ymm0/ymm1, A values broadcast two at a time into
 * ymm2/ymm3, accumulators in ymm4..ymm15 (row i in ymm(4+2i), ymm(5+2i)). */
#define TT_AVX2_FMA_ROWS(u, r0, acc0, acc1, acc2, acc3)                      \
    "vbroadcastss " #u "*24+" #r0 "*4(%[a]), %%ymm2\n\t"                     \
    "vbroadcastss " #u "*24+" #r0 "*4+4(%[a]), %%ymm3\n\t"                   \
    "vfmadd231ps %%ymm0, %%ymm2, %%ymm" #acc0 "\n\t"                         \
    "vfmadd231ps %%ymm1, %%ymm2, %%ymm" #acc1 "\n\t"                         \
    "vfmadd231ps %%ymm0, %%ymm3, %%ymm" #acc2 "\n\t"                         \
    "vfmadd231ps %%ymm1, %%ymm3, %%ymm" #acc3 "\n\t"

#define TT_AVX2_STEP(u)                                                      \
    "vmovaps " #u "*64(%[b]), %%ymm0\n\t"                                    \
    "vmovaps " #u "*64+32(%[b]), %%ymm1\n\t"                                 \
    TT_AVX2_FMA_ROWS(u, 0, 4, 5, 6, 7)                                       \
    TT_AVX2_FMA_ROWS(u, 2, 8, 9, 10, 11)                                     \
    TT_AVX2_FMA_ROWS(u, 4, 12, 13, 14, 15)

/* The k loop is written in assembly because compilers do not keep twelve accumulators,
 * two B vectors and the broadcasts in the sixteen ymm registers without spilling (GCC 12
 * spilled and shuffled registers inside the loop, costing ~40% of peak). The rest is C++. */
void gemm_ukernel_avx2_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
                            float alpha, float beta) {
    alignas(32) float acc[MR * NR];

    /* Bring the C tile toward L1 while the k loop runs (it is touched only at the end). */
    for (int i = 0; i < MR; ++i) {
        _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(c + i * ldc + NR - 1), _MM_HINT_T0);
    }

    int64_t k_blocks = kc / 4, k_left = kc % 4;
    __asm__ volatile(
        "vxorps %%ymm4, %%ymm4, %%ymm4\n\t"
        "vxorps %%ymm5, %%ymm5, %%ymm5\n\t"
        "vxorps %%ymm6, %%ymm6, %%ymm6\n\t"
        "vxorps %%ymm7, %%ymm7, %%ymm7\n\t"
        "vxorps %%ymm8, %%ymm8, %%ymm8\n\t"
        "vxorps %%ymm9, %%ymm9, %%ymm9\n\t"
        "vxorps %%ymm10, %%ymm10, %%ymm10\n\t"
        "vxorps %%ymm11, %%ymm11, %%ymm11\n\t"
        "vxorps %%ymm12, %%ymm12, %%ymm12\n\t"
        "vxorps %%ymm13, %%ymm13, %%ymm13\n\t"
        "vxorps %%ymm14, %%ymm14, %%ymm14\n\t"
        "vxorps %%ymm15, %%ymm15, %%ymm15\n\t"
        "test %[kb], %[kb]\n\t"
        "je 2f\n\t"
        ".p2align 5\n"
        "1:\n\t" /* four k steps; A (from L2) is prefetched 16 steps ahead */
        "prefetcht0 384(%[a])\n\t"
        TT_AVX2_STEP(0)
        TT_AVX2_STEP(1)
        "prefetcht0 448(%[a])\n\t"
        TT_AVX2_STEP(2)
        TT_AVX2_STEP(3)
        "add $96, %[a]\n\t"
        "add $256, %[b]\n\t"
        "dec %[kb]\n\t"
        "jne 1b\n"
        "2:\n\t"
        "test %[kl], %[kl]\n\t"
        "je 4f\n"
        "3:\n\t" /* the remaining kc % 4 steps */
        TT_AVX2_STEP(0)
        "add $24, %[a]\n\t"
        "add $64, %[b]\n\t"
        "dec %[kl]\n\t"
        "jne 3b\n"
        "4:\n\t"
        "vmovaps %%ymm4, 0(%[acc])\n\t"
        "vmovaps %%ymm5, 32(%[acc])\n\t"
        "vmovaps %%ymm6, 64(%[acc])\n\t"
        "vmovaps %%ymm7, 96(%[acc])\n\t"
        "vmovaps %%ymm8, 128(%[acc])\n\t"
        "vmovaps %%ymm9, 160(%[acc])\n\t"
        "vmovaps %%ymm10, 192(%[acc])\n\t"
        "vmovaps %%ymm11, 224(%[acc])\n\t"
        "vmovaps %%ymm12, 256(%[acc])\n\t"
        "vmovaps %%ymm13, 288(%[acc])\n\t"
        "vmovaps %%ymm14, 320(%[acc])\n\t"
        "vmovaps %%ymm15, 352(%[acc])\n\t"
        "vzeroupper\n\t"
        : [a] "+r"(a), [b] "+r"(b), [kb] "+r"(k_blocks), [kl] "+r"(k_left)
        : [acc] "r"(acc)
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");

    const __m256 valpha = _mm256_set1_ps(alpha);
    const __m256 vbeta = _mm256_set1_ps(beta);
    const bool read_c = beta != 0.0f; /* beta == 0: C is write-only */
    for (int i = 0; i < MR; ++i) {
        float *ci = c + i * ldc;
        __m256 lo = _mm256_mul_ps(_mm256_load_ps(acc + i * NR), valpha);
        __m256 hi = _mm256_mul_ps(_mm256_load_ps(acc + i * NR + 8), valpha);
        if (read_c) {
            lo = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(ci), lo);
            hi = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(ci + 8), hi);
        }
        _mm256_storeu_ps(ci, lo);
        _mm256_storeu_ps(ci + 8, hi);
    }
}

#undef TT_AVX2_STEP
#undef TT_AVX2_FMA_ROWS

/* In-register transpose of 8 rows of 8 floats: afterwards r[j] holds column j. */
inline void transpose8x8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* GemmPackRowsFn for width W (a multiple of 8, plus 4 or 6: 6, 12, 16, 32): 8 k at a time,
 * each group of 8 source rows is loaded as 8 vectors, transposed in registers and stored
 * as 8 k-rows of the panel (the last group of a width 6 or 12 panel stores 6 or 4 floats
 * per k-row). Rows past `rows` read as zero. */
template <int W>
void pack_rows_avx2(const float *src, int64_t ld, int rows, int64_t klen, float *dst) {
    int64_t k = 0;
    static_assert(W % 8 == 0 || W % 8 == 4 || W == 6, "pack_rows_avx2: unsupported width");
    for (; k + 8 <= klen; k += 8) {
        for (int g = 0; g < W; g += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; ++i)
                r[i] = (g + i < rows) ? _mm256_loadu_ps(src + (g + i) * ld + k) : _mm256_setzero_ps();
            transpose8x8(r);
            if (W - g >= 8) {
                for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (k + j) * W + g, r[j]);
            } else if (W - g == 4) { /* W == 12: four floats per k-row */
                for (int j = 0; j < 8; ++j) _mm_storeu_ps(dst + (k + j) * W + g, _mm256_castps256_ps128(r[j]));
            } else { /* W == 6: six floats per k-row */
                for (int j = 0; j < 8; ++j) {
                    float *d = dst + (k + j) * W + g;
                    _mm_storeu_ps(d, _mm256_castps256_ps128(r[j]));
                    _mm_storel_pi(reinterpret_cast<__m64 *>(d + 4), _mm256_extractf128_ps(r[j], 1));
                }
            }
        }
    }
    for (; k < klen; ++k) {
        for (int r = 0; r < rows; ++r) dst[k * W + r] = src[r * ld + k];
        for (int r = rows; r < W; ++r) dst[k * W + r] = 0.0f;
    }
}

/* Sum of the eight lanes. */
inline float hsum(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* R rows of A against up to 4 rows of bt (cols of them valid), as dot products over k.
 * The k tail uses masked loads, which never touch memory past the masked-off lanes. */
template <int R>
void narrow_block(int64_t K, const float *a, int64_t lda, const float *bt, int64_t ldbt, int cols,
                  float *c, int64_t ldc, float alpha, float beta) {
    const float *brow[4];
    for (int j = 0; j < 4; ++j) brow[j] = bt + std::min(j, cols - 1) * ldbt; /* pad: reuse */
    __m256 acc[R][4];
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 av[R];
        for (int r = 0; r < R; ++r) av[r] = _mm256_loadu_ps(a + r * lda + k);
        for (int j = 0; j < 4; ++j) {
            const __m256 bv = _mm256_loadu_ps(brow[j] + k);
            for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(av[r], bv, acc[r][j]);
        }
    }
    if (k < K) {
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(K - k)), lane);
        __m256 av[R];
        for (int r = 0; r < R; ++r) av[r] = _mm256_maskload_ps(a + r * lda + k, mask);
        for (int j = 0; j < 4; ++j) {
            const __m256 bv = _mm256_maskload_ps(brow[j] + k, mask);
            for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(av[r], bv, acc[r][j]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int j = 0; j < cols; ++j) {
            const float v = alpha * hsum(acc[r][j]);
            float *cij = c + r * ldc + j;
            *cij = (beta == 0.0f) ? v : v + beta * *cij;
        }
}

}  // namespace

namespace tt {

/* The narrow path (contract of GemmNarrowFn in gemm_kernels.h); the AVX-512 entry uses it
 * too (every CPU with AVX-512 here has AVX2 + FMA: tt_isa_supported requires it). */
void gemm_narrow_avx2(int64_t M, int64_t N, int64_t K, const float *a, int64_t lda,
                      const float *bt, int64_t ldbt, float *c, int64_t ldc, float alpha,
                      float beta) {
    /* Rows outer: two rows of A stay in L1 while all of B^T (small) passes by. */
    int64_t i = 0;
    for (; i + 2 <= M; i += 2)
        for (int64_t j = 0; j < N; j += 4)
            narrow_block<2>(K, a + i * lda, lda, bt + j * ldbt, ldbt,
                            (int)std::min<int64_t>(4, N - j), c + i * ldc + j, ldc, alpha, beta);
    if (i < M)
        for (int64_t j = 0; j < N; j += 4)
            narrow_block<1>(K, a + i * lda, lda, bt + j * ldbt, ldbt,
                            (int)std::min<int64_t>(4, N - j), c + i * ldc + j, ldc, alpha, beta);
}

/* The AVX-512 entry's packers (12-row A panels, 32-column B panels): the same transposes. */
void gemm_pack_rows12_avx2(const float *src, int64_t ld, int rows, int64_t klen, float *dst) {
    pack_rows_avx2<12>(src, ld, rows, klen, dst);
}
void gemm_pack_rows32_avx2(const float *src, int64_t ld, int rows, int64_t klen, float *dst) {
    pack_rows_avx2<32>(src, ld, rows, klen, dst);
}

const GemmMicroKernel kGemmKernelAvx2 = {"sgemm:avx2", "sgemm_strided_batched:avx2", MR, NR,
                                         gemm_ukernel_avx2_6x16, pack_rows_avx2<MR>,
                                         pack_rows_avx2<NR>, gemm_narrow_avx2, kGemmNarrowMaxN,
                                         "sgemm:avx2:narrow", gemm_rowvec_body,
                                         "sgemm:avx2:rowvec"};
}  // namespace tt
