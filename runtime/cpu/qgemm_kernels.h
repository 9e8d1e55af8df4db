/*
 * qgemm_kernels.h -- private: the contract between the INT8 GEMM driver (qgemm.cpp) and
 * its per-ISA kernels (qgemm_<isa>.cpp). Public contract: tinytorch.h, tt_qgemm_*.
 *
 * The product is C[i][j] = sum_k a[i][k] * w[k][j] with a in u8 [0, 255] (activations)
 * and w in s8 [-128, 127] (weights), accumulated exactly in int32. Exactness holds for
 * K <= TT_QGEMM_MAX_K: every term is at most 255 * 128 = 32640 in magnitude, and so is
 * every term of the zero-point-corrected sum sum_k (a - z) w with z in [-128, 255]
 * (|a - z| <= 255), so |result| <= K * 32640 < 2^31. Each kernel's scheme for one group
 * of k (docs/int8.md has the proofs):
 *
 *   avx512_vnni  vpdpbusd: 4 u8 x 4 s8 products and their sum added to an int32 lane in one
 *                instruction, no intermediate rounding or saturation (k_group 4).
 *   avx512bw,    u8 widened to u16, s8 sign-extended to s16 (vpmovsxbw), then vpmaddwd:
 *   avx2         two 16 x 16-bit products summed into an int32 lane. Each product fits in
 *                17 bits and the pair in 18, so nothing saturates (vpmaddubsw, whose u8 x s8
 *                pair sum saturates at 16 bits, 2 * 255 * 127 = 64770 > 32767, is not used
 *                for 8-bit activations).
 *   avx2_u7      TT_QGEMM_REDUCE_RANGE packs only, so a <= 127: vpmaddubsw forms u8 x s8
 *                products and adds pairs into s16 with saturation, but |a * w| <= 127 * 128
 *                = 16256 and a pair <= 32512 < 32767, so it never saturates; vpmaddwd by
 *                ones then sums the two pairs of a lane into int32 (exact) and vpaddd
 *                accumulates (K bound: 127 * 128 < 255 * 128). The driver refuses a > 127
 *                on such packs and the pack call refuses this kernel without the flag.
 *   neon_dot     sdot: 4 s8 x s8 products summed into an int32 lane; activations are stored
 *                shifted (a - 128 in s8) and the driver adds 128 * colsum[j] back.
 *   neon         u8 and s8 widened to s16, vmlal_s16 into int32 lanes.
 *   scalar       int32 loops (the reference of the tests).
 *
 * Layouts (all chosen by the kernel's entry, so the driver knows no ISA by name):
 *   A  prepared activations, one row per output row, kgroups groups of 4 bytes each:
 *      k_group 4, a_u16 0: 4 bytes a[k..k+3] (u8; s8 a - 128 when a_shift is 128)
 *      k_group 2, a_u16 1: 2 u16 a[k], a[k+1]
 *      so a group is one 32-bit broadcast for every kernel; k past K is 0.
 *   B  one panel per nr columns: kgroups x nr x k_group bytes, w[g*k_group + t][j] at
 *      (g * nr + j) * k_group + t; columns past N and k past K are 0.
 * A micro-kernel computes a rows x nr int32 tile (1 <= rows <= mr) over all kgroups and
 * stores it row-major with row stride nr into acc; it never reads acc. It has no edge
 * code: padded panels make every tile nr wide, and the driver writes only valid columns.
 */
#pragma once

#include <cstdint>
#include <type_traits>

#include "cpu/bias_gelu_kernels.h"
#include "tinytorch/tinytorch.h"

namespace tt {

using QgemmMicroKernelFn = void (*)(int64_t kgroups, const uint8_t *a, int64_t a_stride,
                                    int rows, const int8_t *b_panel, int32_t *acc);

/* Prepares one activation row for the kernel: quantizes the float row x[0..K) onto
 * [0, qmax] (255, or 127 for a TT_QGEMM_REDUCE_RANGE pack; see tt_qgemm_quantize_rows_ex
 * for the formula) into dst (kgroups * 4 bytes, in the kernel's A layout) and returns its
 * scale and zero point; false when x holds inf or NaN. */
using QgemmQuantizeRowFn = bool (*)(const float *x, int64_t K, int64_t kgroups, int qmax,
                                    uint8_t *dst, float *scale, int32_t *zero_point);

/* The float epilogue of one tile (rows x cols of acc, row stride nr), per row i and
 * column j < cols:
 *   pre = float(acc[i][j] - z[i] * colsum[j]) * (sx[i] * ws[j])
 *   y   = pre + bias[j]  (NONE),  max-with-0 of that (RELU),  gelu(pre + bias[j]) (GELU)
 * bias may be NULL (0). */
using QgemmEpilogueF32Fn = void (*)(const int32_t *acc, int nr, int rows, int cols,
                                    const int32_t *z, const float *sx, const int32_t *colsum,
                                    const float *ws, const float *bias, int activation,
                                    float *y, int64_t ldy);

/* The int32 epilogue: c[i][j] = acc[i][j] - z[i] * colsum[j]. */
using QgemmEpilogueI32Fn = void (*)(const int32_t *acc, int nr, int rows, int cols,
                                    const int32_t *z, const int32_t *colsum, int32_t *c,
                                    int64_t ldc);

/* One entry of the kernel table. */
struct QgemmKernel {
    int id;               /* a tt_qgemm_kernel value                            */
    const char *name;     /* "avx512_vnni", ... (tt_qgemm_kernel_name)          */
    const char *path;     /* "qgemm:<name>" (tt_last_kernel_path)               */
    tt_isa isa;           /* the active ISA under which packs for it run        */
    int mr, nr;           /* the register tile                                  */
    int k_group;          /* k per group: 4 (u8 / s8 A) or 2 (u16 A)            */
    int a_shift;          /* 128: A stored as a - 128 (s8), else 0              */
    int qmax;             /* 127: 7-bit activations only (reduce_range packs);
                             255: any u8                                        */
    QgemmMicroKernelFn fn;
    QgemmQuantizeRowFn quantize_row;
    QgemmEpilogueF32Fn epilogue_f32;
    QgemmEpilogueI32Fn epilogue_i32;
};

/* f(std::integral_constant<int, R>{}) with R = rows clamped to [1, MR]: micro-kernels are
 * templates over their row count (so every row loop unrolls), and this is the one place
 * that turns the driver's run-time row count into one of them. */
template <int MR, class F>
inline void with_tile_rows(int rows, F &&f) {
    if constexpr (MR > 1) {
        if (rows < MR) return with_tile_rows<MR - 1>(rows, static_cast<F &&>(f));
    }
    f(std::integral_constant<int, MR>{});
}

/* The largest tile any kernel uses (sizes the driver's scratch tile). */
/* How far ahead (bytes) the AVX2 kernels prefetch their weight panel. A panel is read once
 * per row block, so at M = 1 (decoding) every weight byte comes from DRAM once; without the
 * prefetch the loads and the arithmetic took turns (768 x 3072, weights out of cache, 1 thread,
 * EPYC Zen 3, two interleaved A/B runs: 160-185 -> 138-146 us and 179-182 -> 158-161 us; with
 * the weights in cache no change, 75-85 us). */
constexpr int kQgemmPrefetchBytes = 1024;
constexpr int kQgemmMaxMR = 8;
constexpr int kQgemmMaxNR = 64;

extern const QgemmKernel kQgemmScalar;
#if defined(TT_HAVE_AVX2_KERNELS)
extern const QgemmKernel kQgemmAvx2;
extern const QgemmKernel kQgemmAvx2U7;
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
extern const QgemmKernel kQgemmAvx512bw;
extern const QgemmKernel kQgemmAvx512Vnni;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
extern const QgemmKernel kQgemmNeon;
#endif

}  // namespace tt
