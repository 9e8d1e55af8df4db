/*
 * qgemm_rows.h -- private: the row-wise parts of the INT8 GEMM, written once and compiled
 * by every qgemm_<isa>.cpp with that ISA's flags: dynamic quantization of an activation
 * row and the epilogues of a tile. The quantization's vector loops (a min / max / x * 0
 * reduction, then the rounding and the narrowing store) are one body over a lane type
 * (style 2 of docs/native-layout.md): RowLanes, picked by the including file's flags
 * (AVX-512 or AVX2; other ISAs have none and run the scalar loops), defined here rather than
 * in each kernel file because the two AVX-512 kernels share one; the epilogues are plain
 * loops the compiler vectorizes under each ISA's flags (style 3: elementwise, no reduction).
 *
 * Every instance computes the same float32 operations in the same order, so the
 * quantized activations are identical on every ISA (and in the NumPy fallback,
 * backends/reference quantize_rows, which mirrors them step by step). With qmax = 255
 * (8-bit activations) or 127 (7-bit: TT_QGEMM_REDUCE_RANGE packs), one formula:
 *
 *   lo = min(0, min_k x),  hi = max(0, max_k x)
 *   scale = hi / qmax - lo / qmax      (never overflows; 1 when the row is all zero)
 *   inv = 1 / scale
 *   zp = clamp(rne(-lo * inv), 0, qmax)
 *   q[k] = clamp(rne(x[k] * inv) + zp, 0, qmax)
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

/* clamp(rne(v * inv) + zf, 0, top) on one value. */
inline float quantize_value(float v, float inv, float zf, float top) {
    float q = rne(v * inv) + zf;
    q = q < 0.0f ? 0.0f : q;
    return q > top ? top : q;
}

template <ALayout L>
inline void store_q(uint8_t *dst, int64_t j, int32_t qi) {
    if (L == ALayout::U8) dst[j] = (uint8_t)qi;
    if (L == ALayout::S8Shifted) dst[j] = (uint8_t)(qi ^ 0x80); /* qi - 128 as s8 */
    if (L == ALayout::U16) reinterpret_cast<uint16_t *>(dst)[j] = (uint16_t)qi;
}

/* The vector loops of quantize_row, written once over a lane type V and instantiated with
 * the lane type of the including file's ISA (RowLanes below); the scalar loops of
 * quantize_row finish the row (the same float operations, so every ISA quantizes to the
 * same bytes). V supplies W float lanes R, an int32 vector I and
 *
 *   load store zero set1 add sub mul   float32 lane operations
 *   min(v, l) max(v, h)                the hardware min / max (x86: the second operand when
 *                                      either is NaN; NaN is caught by the x * 0 sum anyway)
 *   to_i32 (truncating) xor_i32        float -> int32 (the values are whole, 0..qmax), qi ^ c
 *   store_u8 store_u16                 W int32 lanes in 0..255 stored as W bytes / W u16
 *
 * Each loop returns how many elements it did (a multiple of W; 0 where there is no V). */
template <class V>
inline int64_t minmax_vec(const float *x, int64_t K, float *lo, float *hi, float *bad) {
    using R = typename V::R;
    constexpr int64_t W = V::W;
    R l = V::zero(), h = l, b = l;
    int64_t k = 0;
    for (; k + W <= K; k += W) {
        const R v = V::load(x + k);
        l = V::min(v, l);
        h = V::max(v, h);
        b = V::add(b, V::mul(v, V::zero()));
    }
    alignas(64) float ls[W], hs[W], bs[W];
    V::store(ls, l), V::store(hs, h), V::store(bs, b);
    for (int64_t i = 0; i < W; ++i) {
        *lo = ls[i] < *lo ? ls[i] : *lo;
        *hi = hs[i] > *hi ? hs[i] : *hi;
        *bad += bs[i];
    }
    return k;
}

template <class V, ALayout L>
inline int64_t quantize_vec(const float *x, int64_t K, float inv, float zf, float qmax,
                            uint8_t *dst) {
    using R = typename V::R;
    constexpr int64_t W = V::W;
    const R vinv = V::set1(inv), vz = V::set1(zf), magic = V::set1(kRoundMagic);
    const R zero = V::zero(), top = V::set1(qmax);
    int64_t j = 0;
    for (; j + W <= K; j += W) {
        R q = V::mul(V::load(x + j), vinv);
        q = V::add(V::sub(V::add(q, magic), magic), vz);
        q = V::min(V::max(q, zero), top);
        typename V::I qi = V::to_i32(q);
        if (L == ALayout::U16) {
            V::store_u16(dst + 2 * j, qi);
        } else {
            if (L == ALayout::S8Shifted) qi = V::xor_i32(qi, 0x80); /* qi - 128 as s8 */
            V::store_u8(dst + j, qi);
        }
    }
    return j;
}

#if defined(__AVX512F__)
struct RowLanes {
    using R = __m512;
    using I = __m512i;
    static constexpr int64_t W = 16;
    static R load(const float *p) { return _mm512_loadu_ps(p); }
    static void store(float *p, R v) { _mm512_storeu_ps(p, v); }
    static R zero() { return _mm512_setzero_ps(); }
    static R set1(float v) { return _mm512_set1_ps(v); }
    static R add(R a, R b) { return _mm512_add_ps(a, b); }
    static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
    static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
    static R min(R a, R b) { return _mm512_min_ps(a, b); }
    static R max(R a, R b) { return _mm512_max_ps(a, b); }
    static I to_i32(R a) { return _mm512_cvttps_epi32(a); }
    static I xor_i32(I a, int32_t c) { return _mm512_xor_si512(a, _mm512_set1_epi32(c)); }
    static void store_u8(uint8_t *p, I v) {
        _mm_storeu_si128(reinterpret_cast<__m128i *>(p), _mm512_cvtepi32_epi8(v));
    }
    static void store_u16(uint8_t *p, I v) {
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), _mm512_cvtepi32_epi16(v));
    }
};
#elif defined(__AVX2__)
struct RowLanes {
    using R = __m256;
    using I = __m256i;
    static constexpr int64_t W = 8;
    static R load(const float *p) { return _mm256_loadu_ps(p); }
    static void store(float *p, R v) { _mm256_storeu_ps(p, v); }
    static R zero() { return _mm256_setzero_ps(); }
    static R set1(float v) { return _mm256_set1_ps(v); }
    static R add(R a, R b) { return _mm256_add_ps(a, b); }
    static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
    static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
    static R min(R a, R b) { return _mm256_min_ps(a, b); }
    static R max(R a, R b) { return _mm256_max_ps(a, b); }
    static I to_i32(R a) { return _mm256_cvttps_epi32(a); }
    static I xor_i32(I a, int32_t c) { return _mm256_xor_si256(a, _mm256_set1_epi32(c)); }
    /* 8 int32 -> 8 u16 (values are 0..255: no saturation) */
    static __m128i to_u16(I v) {
        return _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    }
    static void store_u8(uint8_t *p, I v) {
        const __m128i w16 = to_u16(v);
        _mm_storel_epi64(reinterpret_cast<__m128i *>(p), _mm_packus_epi16(w16, w16));
    }
    static void store_u16(uint8_t *p, I v) { _mm_storeu_si128(reinterpret_cast<__m128i *>(p), to_u16(v)); }
};
#endif

#if defined(__AVX512F__) || defined(__AVX2__)
inline int64_t minmax_lanes(const float *x, int64_t K, float *lo, float *hi, float *bad) {
    return minmax_vec<RowLanes>(x, K, lo, hi, bad);
}
template <ALayout L>
inline int64_t quantize_lanes(const float *x, int64_t K, float inv, float zf, float qmax,
                              uint8_t *dst) {
    return quantize_vec<RowLanes, L>(x, K, inv, zf, qmax, dst);
}
#else /* no vector type for this ISA: the scalar loops do the whole row */
inline int64_t minmax_lanes(const float *, int64_t, float *, float *, float *) { return 0; }
template <ALayout L>
inline int64_t quantize_lanes(const float *, int64_t, float, float, float, uint8_t *) {
    return 0;
}
#endif

/* Quantizes x[0..K) onto [0, qmax] (255 or 127) into dst (padded elements past K are 0);
 * false when x is not finite. */
template <ALayout L>
inline bool quantize_row(const float *x, int64_t K, int64_t padded, int qmax, uint8_t *dst,
                         float *scale, int32_t *zero_point) {
    const float top = (float)qmax;
    float lo = 0.0f, hi = 0.0f, bad = 0.0f;
    for (int64_t k = minmax_lanes(x, K, &lo, &hi, &bad); k < K; ++k) {
        const float v = x[k];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        bad += v * 0.0f;
    }
    if (bad != 0.0f) return false; /* NaN: some x was inf or NaN */
    float s = hi / top - lo / top;
    if (!(s > 0.0f)) s = 1.0f;
    const float inv = 1.0f / s;
    float zf = rne(-lo * inv);
    zf = zf < 0.0f ? 0.0f : (zf > top ? top : zf);
    for (int64_t j = quantize_lanes<L>(x, K, inv, zf, top, dst); j < K; ++j)
        store_q<L>(dst, j, (int32_t)quantize_value(x[j], inv, zf, top));
    const int64_t elem = (L == ALayout::U16) ? 2 : 1;
    std::memset(dst + K * elem, 0, (size_t)((padded - K) * elem));
    *scale = s;
    *zero_point = (int32_t)zf;
    return true;
}

/* QgemmQuantizeRowFn for a kernel with k_group G. */
template <ALayout L, int G>
bool quantize_row_fn(const float *x, int64_t K, int64_t kgroups, int qmax, uint8_t *dst,
                     float *scale, int32_t *zero_point) {
    return quantize_row<L>(x, K, kgroups * G, qmax, dst, scale, zero_point);
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
