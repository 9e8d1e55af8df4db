/*
 * simd_exp.h -- private: the runtime's one vector exp, per ISA (GELU and attention use it).
 *
 *   exp(t) for t clamped by the caller (NaN passes through as NaN): GELU clamps to
 *   [kExpLo, kExpHi] = [-104, 104], attention to its own [kAttnExpLo, kAttnExpHi]; the
 *   arithmetic below is exact in range for any |n| <= 150 or so (n = round(t log2 e))
 *
 * t = n ln2 + f with n = round(t log2 e), |f| <= ln2/2 (one-constant reduction: the float ln2
 * is off by ~2e-9, so for |n| <= 150 the error in f is ~3e-7 absolute, below the ~|t| 6e-8
 * that rounding of t itself already carries); exp(f) = 1 + f + f^2 P(f) with the degree-5
 * minimax P of bias_gelu_kernels.h (relative error ~1e-7), evaluated by Estrin's scheme (half
 * the dependent FMAs of Horner's: these kernels are latency-bound); 2^n is applied as 2^(n/2)
 * twice, so results from the float denormals up to inf come out right without integer
 * exponent overflow (below about -104 the result is 0, above 88.7 inf).
 *
 * Each function is compiled only in the files built with its ISA's flags (the sections test
 * the compiler's ISA macros), and inlined there; constants are hoisted out of the callers'
 * loops by the compiler.
 */
#pragma once
#include "cpu/bias_gelu_kernels.h"

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace tt {

#if defined(__AVX2__) && defined(__FMA__)
inline __m256 exp_avx2(__m256 t) {
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, _mm256_set1_ps(kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 f = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2), t);
    const __m256 f2 = _mm256_mul_ps(f, f);
    const __m256 p01 = _mm256_fmadd_ps(_mm256_set1_ps(kExpP0), f, _mm256_set1_ps(kExpP1));
    const __m256 p23 = _mm256_fmadd_ps(_mm256_set1_ps(kExpP2), f, _mm256_set1_ps(kExpP3));
    const __m256 p45 = _mm256_fmadd_ps(_mm256_set1_ps(kExpP4), f, _mm256_set1_ps(kExpP5));
    const __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(p01, f2, p23), f2, p45);
    const __m256 e = _mm256_fmadd_ps(p, f2, _mm256_add_ps(f, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvtps_epi32(n); /* NaN gives garbage here, but e is NaN */
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
}
#endif

#if defined(__AVX512F__)
inline __m512 exp_avx512(__m512 t) {
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(t, _mm512_set1_ps(kLog2e)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 f = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2), t);
    const __m512 f2 = _mm512_mul_ps(f, f);
    const __m512 p01 = _mm512_fmadd_ps(_mm512_set1_ps(kExpP0), f, _mm512_set1_ps(kExpP1));
    const __m512 p23 = _mm512_fmadd_ps(_mm512_set1_ps(kExpP2), f, _mm512_set1_ps(kExpP3));
    const __m512 p45 = _mm512_fmadd_ps(_mm512_set1_ps(kExpP4), f, _mm512_set1_ps(kExpP5));
    const __m512 p = _mm512_fmadd_ps(_mm512_fmadd_ps(p01, f2, p23), f2, p45);
    const __m512 e = _mm512_fmadd_ps(p, f2, _mm512_add_ps(f, _mm512_set1_ps(1.0f)));
    const __m512i ni = _mm512_cvtps_epi32(n);
    const __m512i n1 = _mm512_srai_epi32(ni, 1);
    const __m512i n2 = _mm512_sub_epi32(ni, n1);
    const __m512i bias = _mm512_set1_epi32(127);
    const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
    const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
    return _mm512_mul_ps(_mm512_mul_ps(e, s1), s2);
}
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
inline float32x4_t exp_neon(float32x4_t t) {
    const float32x4_t n = vrndnq_f32(vmulq_n_f32(t, kLog2e));
    const float32x4_t f = vfmsq_f32(t, n, vdupq_n_f32(kLn2));
    const float32x4_t f2 = vmulq_f32(f, f);
    const float32x4_t p01 = vfmaq_f32(vdupq_n_f32(kExpP1), vdupq_n_f32(kExpP0), f);
    const float32x4_t p23 = vfmaq_f32(vdupq_n_f32(kExpP3), vdupq_n_f32(kExpP2), f);
    const float32x4_t p45 = vfmaq_f32(vdupq_n_f32(kExpP5), vdupq_n_f32(kExpP4), f);
    const float32x4_t p = vfmaq_f32(p45, vfmaq_f32(p23, p01, f2), f2);
    const float32x4_t e = vfmaq_f32(vaddq_f32(f, vdupq_n_f32(1.0f)), p, f2);
    const int32x4_t ni = vcvtq_s32_f32(n);
    const int32x4_t n1 = vshrq_n_s32(ni, 1);
    const int32x4_t n2 = vsubq_s32(ni, n1);
    const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
    const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
    return vmulq_f32(vmulq_f32(e, s1), s2);
}
#endif

}  // namespace tt
