/*
 * qgemm_rows.h -- private: the row-wise parts of the INT8 GEMM, written once and compiled
 * by every qgemm_kernel_<isa>.cpp with that ISA's flags (so the compiler vectorizes them
 * for it): dynamic quantization of an activation row and the epilogues of a tile.
 *
 * Every instance computes the same float32 operations in the same order, so the
 * quantized activations are identical on every ISA (and in the NumPy fallback,
 * backends/numpy_fallback.py quantize_rows, which mirrors them step by step):
 *
 *   lo = min(0, min_k x),  hi = max(0, max_k x)
 *   scale = hi / 255 - lo / 255        (never overflows; 1 when the row is all zero)
 *   inv = 1 / scale
 *   zp = clamp(rne(-lo * inv), 0, 255)
 *   q[k] = clamp(rne(x[k] * inv) + zp, 0, 255)
 *
 * rne (round half to even) is (v + 1.5 * 2^23) - 1.5 * 2^23, exact for |v| < 2^22 (here
 * |v| <= 256): the sum lands where float spacing is 1, so the hardware's round-to-nearest-
 * even of the addition is the rounding. Non-finite input is detected by summing x * 0
 * (NaN for inf and NaN, else 0) in the same pass as the min / max.
 */
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu/qgemm_kernels.h"

namespace tt {
namespace qrows {

/* How a kernel stores one activation value (see the A layouts of qgemm_kernels.h). */
enum class ALayout { U8, S8Shifted, U16 };

constexpr float kRoundMagic = 12582912.0f; /* 1.5 * 2^23 */
constexpr int kLanes = 16;

inline float rne(float v) { return (v + kRoundMagic) - kRoundMagic; }

/* Quantizes x[0..K) into dst (padded elements past K are 0); false when x is not finite. */
template <ALayout L>
inline bool quantize_row(const float *x, int64_t K, int64_t padded, uint8_t *dst, float *scale,
                         int32_t *zero_point) {
    /* Lane-wise min / max / x*0 accumulators: elementwise loops the compiler vectorizes. */
    float lo_l[kLanes], hi_l[kLanes], bad_l[kLanes];
    for (int l = 0; l < kLanes; ++l) lo_l[l] = hi_l[l] = bad_l[l] = 0.0f;
    int64_t k = 0;
    for (; k + kLanes <= K; k += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            const float v = x[k + l];
            lo_l[l] = v < lo_l[l] ? v : lo_l[l];
            hi_l[l] = v > hi_l[l] ? v : hi_l[l];
            bad_l[l] += v * 0.0f;
        }
    }
    float lo = 0.0f, hi = 0.0f, bad = 0.0f;
    for (; k < K; ++k) {
        const float v = x[k];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        bad += v * 0.0f;
    }
    for (int l = 0; l < kLanes; ++l) {
        lo = lo_l[l] < lo ? lo_l[l] : lo;
        hi = hi_l[l] > hi ? hi_l[l] : hi;
        bad += bad_l[l];
    }
    if (bad != 0.0f) return false; /* NaN: some x was inf or NaN */
    float s = hi / 255.0f - lo / 255.0f;
    if (!(s > 0.0f)) s = 1.0f;
    const float inv = 1.0f / s;
    float zf = rne(-lo * inv);
    zf = zf < 0.0f ? 0.0f : (zf > 255.0f ? 255.0f : zf);
    const int32_t zp = (int32_t)zf;
    for (int64_t j = 0; j < K; ++j) {
        float q = rne(x[j] * inv) + zf;
        q = q < 0.0f ? 0.0f : (q > 255.0f ? 255.0f : q);
        const int32_t qi = (int32_t)q;
        if (L == ALayout::U8) dst[j] = (uint8_t)qi;
        if (L == ALayout::S8Shifted) dst[j] = (uint8_t)(int8_t)(qi - 128);
        if (L == ALayout::U16) reinterpret_cast<uint16_t *>(dst)[j] = (uint16_t)qi;
    }
    const int64_t elem = (L == ALayout::U16) ? 2 : 1;
    std::memset(dst + K * elem, 0, (size_t)((padded - K) * elem));
    *scale = s;
    *zero_point = zp;
    return true;
}

/* QgemmQuantizeRowFn for a kernel with k_group G. */
template <ALayout L, int G>
bool quantize_row_fn(const float *x, int64_t K, int64_t kgroups, uint8_t *dst, float *scale,
                     int32_t *zero_point) {
    return quantize_row<L>(x, K, kgroups * G, dst, scale, zero_point);
}

/* QgemmEpilogueF32Fn (contract in qgemm_kernels.h); Gelu is the ISA's GELU row kernel,
 * the runtime's one GELU (bias_gelu_kernels.h), applied in place to pre with the bias. */
template <const GeluRowKernels *Gelu>
void epilogue_f32(const int32_t *acc, int nr, int rows, int cols, const int32_t *z,
                  const float *sx, const int32_t *colsum, const float *ws, const float *bias,
                  int activation, float *y, int64_t ldy) {
    for (int i = 0; i < rows; ++i) {
        const int32_t *ai = acc + (int64_t)i * nr;
        float *yi = y + (int64_t)i * ldy;
        const int32_t zi = z[i];
        const float si = sx[i];
        /* Unsigned arithmetic: wraps where int32 would be undefined; the true value fits
         * (qgemm_kernels.h), so the wrapped result is exact. */
        for (int j = 0; j < cols; ++j) {
            const int32_t corr = (int32_t)((uint32_t)ai[j] - (uint32_t)zi * (uint32_t)colsum[j]);
            yi[j] = (float)corr * (si * ws[j]);
        }
        if (activation == TT_QGEMM_ACT_GELU) {
            Gelu->forward(yi, bias, yi, cols);
            continue;
        }
        if (bias)
            for (int j = 0; j < cols; ++j) yi[j] += bias[j];
        if (activation == TT_QGEMM_ACT_RELU)
            for (int j = 0; j < cols; ++j) yi[j] = yi[j] < 0.0f ? 0.0f : yi[j];
    }
}

/* QgemmEpilogueI32Fn. */
inline void epilogue_i32(const int32_t *acc, int nr, int rows, int cols, const int32_t *z,
                         const int32_t *colsum, int32_t *c, int64_t ldc) {
    for (int i = 0; i < rows; ++i) {
        const int32_t *ai = acc + (int64_t)i * nr;
        int32_t *ci = c + (int64_t)i * ldc;
        const uint32_t zi = (uint32_t)z[i];
        for (int j = 0; j < cols; ++j)
            ci[j] = (int32_t)((uint32_t)ai[j] - zi * (uint32_t)colsum[j]);
    }
}

}  // namespace qrows
}  // namespace tt
