/*
 * qgemm_rows.h -- private: the row-wise parts of the INT8 GEMM, written once and compiled
 * by every qgemm_<isa>.cpp with that ISA's flags (so the compiler vectorizes them
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
 * even of the addition is the rounding. That needs v * inv rounded before the addition:
 * these files are built with -ffp-contract=off (sources.cmake), so no FMA fuses the two. Non-finite input is detected by summing x * 0
 * (NaN for inf and NaN, else 0) in the same pass as the min / max.
 */
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "cpu/qgemm_kernels.h"

namespace tt {
namespace qrows {
/* Internal linkage: every including file compiles its own copy with its own ISA flags. As
 * ordinary inline functions / templates the copies would share one mangled name, and the
 * linker would keep one of them for every ISA (measured: the SSE2 copy ran in the AVX-512
 * kernel; the other way round would execute AVX-512 on a CPU without it). */
namespace {

/* How a kernel stores one activation value (see the A layouts of qgemm_kernels.h). */
enum class ALayout { U8, S8Shifted, U16 };

constexpr float kRoundMagic = 12582912.0f; /* 1.5 * 2^23 */

inline float rne(float v) { return (v + kRoundMagic) - kRoundMagic; }

/* clamp(rne(v * inv) + zf, 0, 255) on one value. */
inline float quantize_value(float v, float inv, float zf) {
    float q = rne(v * inv) + zf;
    q = q < 0.0f ? 0.0f : q;
    return q > 255.0f ? 255.0f : q;
}

template <ALayout L>
inline void store_q(uint8_t *dst, int64_t j, int32_t qi) {
    if (L == ALayout::U8) dst[j] = (uint8_t)qi;
    if (L == ALayout::S8Shifted) dst[j] = (uint8_t)(qi ^ 0x80); /* qi - 128 as s8 */
    if (L == ALayout::U16) reinterpret_cast<uint16_t *>(dst)[j] = (uint16_t)qi;
}

/* The vector loops of quantize_row, for the ISA of the including file: the same float
 * operations lane by lane (min / max as "v < lo ? v : lo", max(q, 0) then min(q, 255)),
 * so every ISA quantizes to the same bytes; the scalar loops finish the row. Each returns
 * how many elements it did. */
#if defined(__AVX512F__)
constexpr int64_t kVec = 16;
inline int64_t minmax_vec(const float *x, int64_t K, float *lo, float *hi, float *bad) {
    __m512 l = _mm512_setzero_ps(), h = l, b = l;
    int64_t k = 0;
    for (; k + kVec <= K; k += kVec) {
        const __m512 v = _mm512_loadu_ps(x + k);
        l = _mm512_min_ps(v, l);
        h = _mm512_max_ps(v, h);
        b = _mm512_add_ps(b, _mm512_mul_ps(v, _mm512_setzero_ps()));
    }
    alignas(64) float ls[kVec], hs[kVec], bs[kVec];
    _mm512_store_ps(ls, l), _mm512_store_ps(hs, h), _mm512_store_ps(bs, b);
    for (int i = 0; i < kVec; ++i) {
        *lo = ls[i] < *lo ? ls[i] : *lo;
        *hi = hs[i] > *hi ? hs[i] : *hi;
        *bad += bs[i];
    }
    return k;
}
template <ALayout L>
inline int64_t quantize_vec(const float *x, int64_t K, float inv, float zf, uint8_t *dst) {
    const __m512 vinv = _mm512_set1_ps(inv), vz = _mm512_set1_ps(zf), magic = _mm512_set1_ps(kRoundMagic);
    const __m512 zero = _mm512_setzero_ps(), top = _mm512_set1_ps(255.0f);
    int64_t j = 0;
    for (; j + kVec <= K; j += kVec) {
        __m512 q = _mm512_mul_ps(_mm512_loadu_ps(x + j), vinv);
        q = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(q, magic), magic), vz);
        q = _mm512_min_ps(_mm512_max_ps(q, zero), top);
        __m512i qi = _mm512_cvttps_epi32(q);
        if (L == ALayout::U16) {
            _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + 2 * j), _mm512_cvtepi32_epi16(qi));
        } else {
            if (L == ALayout::S8Shifted) qi = _mm512_xor_si512(qi, _mm512_set1_epi32(0x80));
            _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + j), _mm512_cvtepi32_epi8(qi));
        }
    }
    return j;
}
#elif defined(__AVX2__)
constexpr int64_t kVec = 8;
inline int64_t minmax_vec(const float *x, int64_t K, float *lo, float *hi, float *bad) {
    __m256 l = _mm256_setzero_ps(), h = l, b = l;
    int64_t k = 0;
    for (; k + kVec <= K; k += kVec) {
        const __m256 v = _mm256_loadu_ps(x + k);
        l = _mm256_min_ps(v, l);
        h = _mm256_max_ps(v, h);
        b = _mm256_add_ps(b, _mm256_mul_ps(v, _mm256_setzero_ps()));
    }
    alignas(32) float ls[kVec], hs[kVec], bs[kVec];
    _mm256_store_ps(ls, l), _mm256_store_ps(hs, h), _mm256_store_ps(bs, b);
    for (int i = 0; i < kVec; ++i) {
        *lo = ls[i] < *lo ? ls[i] : *lo;
        *hi = hs[i] > *hi ? hs[i] : *hi;
        *bad += bs[i];
    }
    return k;
}
template <ALayout L>
inline int64_t quantize_vec(const float *x, int64_t K, float inv, float zf, uint8_t *dst) {
    const __m256 vinv = _mm256_set1_ps(inv), vz = _mm256_set1_ps(zf), magic = _mm256_set1_ps(kRoundMagic);
    const __m256 zero = _mm256_setzero_ps(), top = _mm256_set1_ps(255.0f);
    int64_t j = 0;
    for (; j + kVec <= K; j += kVec) {
        __m256 q = _mm256_mul_ps(_mm256_loadu_ps(x + j), vinv);
        q = _mm256_add_ps(_mm256_sub_ps(_mm256_add_ps(q, magic), magic), vz);
        q = _mm256_min_ps(_mm256_max_ps(q, zero), top);
        __m256i qi = _mm256_cvttps_epi32(q);
        if (L == ALayout::S8Shifted) qi = _mm256_xor_si256(qi, _mm256_set1_epi32(0x80));
        /* 8 int32 -> 8 u16 (values are 0..255: no saturation), then -> 8 u8 */
        const __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
        if (L == ALayout::U16)
            _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + 2 * j), w16);
        else
            _mm_storel_epi64(reinterpret_cast<__m128i *>(dst + j), _mm_packus_epi16(w16, w16));
    }
    return j;
}
#else
inline int64_t minmax_vec(const float *, int64_t, float *, float *, float *) { return 0; }
template <ALayout L>
inline int64_t quantize_vec(const float *, int64_t, float, float, uint8_t *) { return 0; }
#endif

/* Quantizes x[0..K) into dst (padded elements past K are 0); false when x is not finite. */
template <ALayout L>
inline bool quantize_row(const float *x, int64_t K, int64_t padded, uint8_t *dst, float *scale,
                         int32_t *zero_point) {
    float lo = 0.0f, hi = 0.0f, bad = 0.0f;
    for (int64_t k = minmax_vec(x, K, &lo, &hi, &bad); k < K; ++k) {
        const float v = x[k];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        bad += v * 0.0f;
    }
    if (bad != 0.0f) return false; /* NaN: some x was inf or NaN */
    float s = hi / 255.0f - lo / 255.0f;
    if (!(s > 0.0f)) s = 1.0f;
    const float inv = 1.0f / s;
    float zf = rne(-lo * inv);
    zf = zf < 0.0f ? 0.0f : (zf > 255.0f ? 255.0f : zf);
    for (int64_t j = quantize_vec<L>(x, K, inv, zf, dst); j < K; ++j)
        store_q<L>(dst, j, (int32_t)quantize_value(x[j], inv, zf));
    const int64_t elem = (L == ALayout::U16) ? 2 : 1;
    std::memset(dst + K * elem, 0, (size_t)((padded - K) * elem));
    *scale = s;
    *zero_point = (int32_t)zf;
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

}  // namespace
}  // namespace qrows
}  // namespace tt
