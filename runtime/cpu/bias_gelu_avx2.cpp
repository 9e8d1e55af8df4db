/*
 * bias_gelu_avx2.cpp -- fused bias + GELU row kernels for AVX2 + FMA (TT_ISA_AVX2).
 *
 * Compiled with -mavx2 -mfma; called only when the CPU has both. The formula and edge
 * rules are in bias_gelu_kernels.h. Eight columns per step; the last cols % 8 go
 * through masked loads and stores with the same arithmetic, so every column of a row
 * gets bit-identical treatment whatever its position.
 *
 * exp(t): t is clamped to [-104, 104] (beyond, exp is 0 or inf in float), split as
 * t = n ln2 + f with |f| <= ln2/2, exp(f) = 1 + f + f^2 P(f) with a degree-5 minimax P
 * (relative error ~1e-7) evaluated by Estrin's scheme, and 2^n applied as 2^(n/2) twice
 * so results from the float denormals up to inf come out right without integer exponent
 * overflow. The clamps keep NaN, so NaN inputs propagate.
 *
 * Why this shape: the kernel is bound by the latency of its dependency chain (the CPU's
 * out-of-order window holds only ~3 iterations of ~35 vector ops), so the forward skips
 * the |z| / blend form of the sigmoid and the polynomial uses Estrin, not Horner.
 */
#include <immintrin.h>

#include "cpu/bias_gelu_kernels.h"
#include "cpu/simd_exp.h"

namespace {

struct Consts {
    __m256 a = _mm256_set1_ps(tt::kGeluA);
    __m256 b = _mm256_set1_ps(tt::kGeluB);
    __m256 neg_a = _mm256_set1_ps(-tt::kGeluA);
    __m256 neg_b = _mm256_set1_ps(-tt::kGeluB);
    __m256 b3 = _mm256_set1_ps(tt::kGeluB3);
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 zero = _mm256_setzero_ps();
    __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 lowest = _mm256_set1_ps(-3.40282347e38f);
    __m256 exp_lo = _mm256_set1_ps(tt::kExpLo);
    __m256 exp_hi = _mm256_set1_ps(tt::kExpHi);
};

/* Forward: y = u / (1 + exp(-z)). exp(-z) may be huge or inf (u very negative): then the
 * quotient is 0 and y = -0, which is the limit; no branch or blend is needed. u = -inf is
 * first raised to the lowest finite float so that y = -FLT_MAX * 0 = -0 rather than NaN
 * (max(lowest, NaN) keeps NaN, so NaN still propagates). */
inline __m256 gelu(__m256 u, const Consts &k) {
    u = _mm256_max_ps(k.lowest, u);
    const __m256 neg_z = _mm256_mul_ps(u, _mm256_fmadd_ps(k.neg_b, _mm256_mul_ps(u, u), k.neg_a));
    const __m256 t = _mm256_min_ps(k.exp_hi, _mm256_max_ps(k.exp_lo, neg_z)); /* NaN kept */
    return _mm256_div_ps(u, _mm256_add_ps(k.one, tt::exp_avx2(t)));
}

/* Backward needs s (1 - s) too, so it uses e = exp(-|z|) in [0, 1] (symmetric, no inf):
 *   s = 1/(1+e) for z >= 0, e/(1+e) otherwise;  s (1 - s) = e / (1+e)^2. */
inline __m256 gelu_grad(__m256 u, const Consts &k) {
    const __m256 z = _mm256_mul_ps(u, _mm256_fmadd_ps(k.b, _mm256_mul_ps(u, u), k.a));
    const __m256 e = tt::exp_avx2(_mm256_max_ps(k.exp_lo, _mm256_or_ps(z, k.sign))); /* exp(-|z|) */
    const __m256 r = _mm256_div_ps(k.one, _mm256_add_ps(k.one, e));
    const __m256 s = _mm256_blendv_ps(r, _mm256_mul_ps(e, r), _mm256_cmp_ps(z, k.zero, _CMP_LT_OQ));
    const __m256 dz = _mm256_fmadd_ps(k.b3, _mm256_mul_ps(u, u), k.a);
    __m256 slope = _mm256_mul_ps(_mm256_mul_ps(u, dz), _mm256_mul_ps(e, _mm256_mul_ps(r, r)));
    /* e == 0: the slope term is exactly 0 (it would be inf * 0 for huge |u|). */
    slope = _mm256_andnot_ps(_mm256_cmp_ps(e, k.zero, _CMP_EQ_OQ), slope);
    return _mm256_add_ps(s, slope);
}

inline __m256i tail_mask(int64_t n) { /* lanes [0, n) set, 0 < n < 8 */
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

template <bool kHasBias>
void forward_row(const float *x, const float *bias, float *y, int64_t cols) {
    const Consts k;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) { /* two independent chains per iteration */
        __m256 u0 = _mm256_loadu_ps(x + j), u1 = _mm256_loadu_ps(x + j + 8);
        if (kHasBias) {
            u0 = _mm256_add_ps(u0, _mm256_loadu_ps(bias + j));
            u1 = _mm256_add_ps(u1, _mm256_loadu_ps(bias + j + 8));
        }
        _mm256_storeu_ps(y + j, gelu(u0, k));
        _mm256_storeu_ps(y + j + 8, gelu(u1, k));
    }
    for (; j + 8 <= cols; j += 8) {
        __m256 u = _mm256_loadu_ps(x + j);
        if (kHasBias) u = _mm256_add_ps(u, _mm256_loadu_ps(bias + j));
        _mm256_storeu_ps(y + j, gelu(u, k));
    }
    if (j < cols) {
        const __m256i m = tail_mask(cols - j);
        __m256 u = _mm256_maskload_ps(x + j, m);
        if (kHasBias) u = _mm256_add_ps(u, _mm256_maskload_ps(bias + j, m));
        _mm256_maskstore_ps(y + j, m, gelu(u, k));
    }
}

template <bool kHasBias>
void backward_row(const float *x, const float *bias, const float *gy, float *gx, float *colsum,
                  int64_t cols) {
    const Consts k;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        __m256 u = _mm256_loadu_ps(x + j);
        if (kHasBias) u = _mm256_add_ps(u, _mm256_loadu_ps(bias + j));
        const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gy + j), gelu_grad(u, k));
        _mm256_storeu_ps(gx + j, g);
        if (colsum) _mm256_storeu_ps(colsum + j, _mm256_add_ps(_mm256_loadu_ps(colsum + j), g));
    }
    if (j < cols) {
        const __m256i m = tail_mask(cols - j);
        __m256 u = _mm256_maskload_ps(x + j, m);
        if (kHasBias) u = _mm256_add_ps(u, _mm256_maskload_ps(bias + j, m));
        const __m256 g = _mm256_mul_ps(_mm256_maskload_ps(gy + j, m), gelu_grad(u, k));
        _mm256_maskstore_ps(gx + j, m, g);
        if (colsum)
            _mm256_maskstore_ps(colsum + j, m, _mm256_add_ps(_mm256_maskload_ps(colsum + j, m), g));
    }
}

void forward_row_avx2(const float *x, const float *bias, float *y, int64_t cols) {
    if (bias) forward_row<true>(x, bias, y, cols);
    else forward_row<false>(x, nullptr, y, cols);
}

void backward_row_avx2(const float *x, const float *bias, const float *gy, float *gx,
                       float *colsum, int64_t cols) {
    if (bias) backward_row<true>(x, bias, gy, gx, colsum, cols);
    else backward_row<false>(x, nullptr, gy, gx, colsum, cols);
}

}  // namespace

namespace tt {
const GeluRowKernels kGeluAvx2 = {"bias_gelu_forward:avx2", "bias_gelu_backward:avx2",
                                  forward_row_avx2, backward_row_avx2};
}  // namespace tt
