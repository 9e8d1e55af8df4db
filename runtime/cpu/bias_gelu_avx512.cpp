/*
 * bias_gelu_avx512.cpp -- fused bias + GELU row kernels for AVX-512F (TT_ISA_AVX512).
 *
 * Compiled with -mavx512f (+vl/bw/dq); called only when the CPU and OS support zmm
 * state. It is bias_gelu_avx2.cpp widened to 16 lanes, with mask registers in place of
 * vector blends and compare masks; the arithmetic is the same step for step (see that
 * file for the exp evaluation and why the forward and backward differ in shape). The
 * formula and edge rules are in bias_gelu_kernels.h. The last cols % 16 columns use
 * masked loads and stores with the same arithmetic.
 */
/* GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_* is a self-initialised
 * value); the warning is about the header, not this code. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "cpu/bias_gelu_kernels.h"
#include "cpu/simd_exp.h"

namespace {

struct Consts {
    __m512 a = _mm512_set1_ps(tt::kGeluA);
    __m512 b = _mm512_set1_ps(tt::kGeluB);
    __m512 neg_a = _mm512_set1_ps(-tt::kGeluA);
    __m512 neg_b = _mm512_set1_ps(-tt::kGeluB);
    __m512 b3 = _mm512_set1_ps(tt::kGeluB3);
    __m512 one = _mm512_set1_ps(1.0f);
    __m512 zero = _mm512_setzero_ps();
    __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 lowest = _mm512_set1_ps(-3.40282347e38f);
    __m512 exp_lo = _mm512_set1_ps(tt::kExpLo);
    __m512 exp_hi = _mm512_set1_ps(tt::kExpHi);
};

/* Forward: y = u / (1 + exp(-z)). exp(-z) may be huge or inf (u very negative): then the
 * quotient is 0 and y = -0, which is the limit; no branch or blend is needed. u = -inf is
 * first raised to the lowest finite float so that y = -FLT_MAX * 0 = -0 rather than NaN
 * (max(lowest, NaN) keeps NaN, so NaN still propagates). */
inline __m512 gelu(__m512 u, const Consts &k) {
    u = _mm512_max_ps(k.lowest, u);
    const __m512 neg_z = _mm512_mul_ps(u, _mm512_fmadd_ps(k.neg_b, _mm512_mul_ps(u, u), k.neg_a));
    const __m512 t = _mm512_min_ps(k.exp_hi, _mm512_max_ps(k.exp_lo, neg_z)); /* NaN kept */
    return _mm512_div_ps(u, _mm512_add_ps(k.one, tt::exp_avx512(t)));
}

/* Backward needs s (1 - s) too, so it uses e = exp(-|z|) in [0, 1] (symmetric, no inf):
 *   s = 1/(1+e) for z >= 0, e/(1+e) otherwise;  s (1 - s) = e / (1+e)^2. */
inline __m512 gelu_grad(__m512 u, const Consts &k) {
    const __m512 z = _mm512_mul_ps(u, _mm512_fmadd_ps(k.b, _mm512_mul_ps(u, u), k.a));
    const __m512 e = tt::exp_avx512(_mm512_max_ps(k.exp_lo, _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(z), _mm512_castps_si512(k.sign))))); /* exp(-|z|) */
    const __m512 r = _mm512_div_ps(k.one, _mm512_add_ps(k.one, e));
    const __m512 s = _mm512_mask_mul_ps(r, _mm512_cmp_ps_mask(z, k.zero, _CMP_LT_OQ), e, r);
    const __m512 dz = _mm512_fmadd_ps(k.b3, _mm512_mul_ps(u, u), k.a);
    __m512 slope = _mm512_mul_ps(_mm512_mul_ps(u, dz), _mm512_mul_ps(e, _mm512_mul_ps(r, r)));
    /* e == 0: the slope term is exactly 0 (it would be inf * 0 for huge |u|). */
    slope = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(e, k.zero, _CMP_NEQ_UQ), slope);
    return _mm512_add_ps(s, slope);
}

inline __mmask16 tail_mask(int64_t n) { /* lanes [0, n) set, 0 < n < 16 */
    return (__mmask16)((1u << n) - 1u);
}

template <bool kHasBias>
void forward_row(const float *x, const float *bias, float *y, int64_t cols) {
    const Consts k;
    int64_t j = 0;
    for (; j + 32 <= cols; j += 32) { /* two independent chains per iteration */
        __m512 u0 = _mm512_loadu_ps(x + j), u1 = _mm512_loadu_ps(x + j + 16);
        if (kHasBias) {
            u0 = _mm512_add_ps(u0, _mm512_loadu_ps(bias + j));
            u1 = _mm512_add_ps(u1, _mm512_loadu_ps(bias + j + 16));
        }
        _mm512_storeu_ps(y + j, gelu(u0, k));
        _mm512_storeu_ps(y + j + 16, gelu(u1, k));
    }
    for (; j + 16 <= cols; j += 16) {
        __m512 u = _mm512_loadu_ps(x + j);
        if (kHasBias) u = _mm512_add_ps(u, _mm512_loadu_ps(bias + j));
        _mm512_storeu_ps(y + j, gelu(u, k));
    }
    if (j < cols) {
        const __mmask16 m = tail_mask(cols - j);
        __m512 u = _mm512_maskz_loadu_ps(m, x + j);
        if (kHasBias) u = _mm512_add_ps(u, _mm512_maskz_loadu_ps(m, bias + j));
        _mm512_mask_storeu_ps(y + j, m, gelu(u, k));
    }
}

template <bool kHasBias>
void backward_row(const float *x, const float *bias, const float *gy, float *gx, float *colsum,
                  int64_t cols) {
    const Consts k;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) {
        __m512 u = _mm512_loadu_ps(x + j);
        if (kHasBias) u = _mm512_add_ps(u, _mm512_loadu_ps(bias + j));
        const __m512 g = _mm512_mul_ps(_mm512_loadu_ps(gy + j), gelu_grad(u, k));
        _mm512_storeu_ps(gx + j, g);
        if (colsum) _mm512_storeu_ps(colsum + j, _mm512_add_ps(_mm512_loadu_ps(colsum + j), g));
    }
    if (j < cols) {
        const __mmask16 m = tail_mask(cols - j);
        __m512 u = _mm512_maskz_loadu_ps(m, x + j);
        if (kHasBias) u = _mm512_add_ps(u, _mm512_maskz_loadu_ps(m, bias + j));
        const __m512 g = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, gy + j), gelu_grad(u, k));
        _mm512_mask_storeu_ps(gx + j, m, g);
        if (colsum)
            _mm512_mask_storeu_ps(colsum + j, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, colsum + j), g));
    }
}

void forward_row_avx512(const float *x, const float *bias, float *y, int64_t cols) {
    if (bias) forward_row<true>(x, bias, y, cols);
    else forward_row<false>(x, nullptr, y, cols);
}

void backward_row_avx512(const float *x, const float *bias, const float *gy, float *gx,
                       float *colsum, int64_t cols) {
    if (bias) backward_row<true>(x, bias, gy, gx, colsum, cols);
    else backward_row<false>(x, nullptr, gy, gx, colsum, cols);
}

}  // namespace

namespace tt {
const GeluRowKernels kGeluAvx512 = {"bias_gelu_forward:avx512", "bias_gelu_backward:avx512",
                                    forward_row_avx512, backward_row_avx512};
}  // namespace tt
