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
    __m256 log2e = _mm256_set1_ps(tt::kLog2e);
    __m256 ln2 = _mm256_set1_ps(tt::kLn2);
    /* exp(f) ~ 1 + f + f^2 P(f) on |f| <= ln2/2, minimax P of degree 5. */
    __m256 p0 = _mm256_set1_ps(tt::kExpP0);
    __m256 p1 = _mm256_set1_ps(tt::kExpP1);
    __m256 p2 = _mm256_set1_ps(tt::kExpP2);
    __m256 p3 = _mm256_set1_ps(tt::kExpP3);
    __m256 p4 = _mm256_set1_ps(tt::kExpP4);
    __m256 p5 = _mm256_set1_ps(tt::kExpP5);
    __m256i bias127 = _mm256_set1_epi32(127);
};

/* exp(t) for t in [-104, 104] (callers clamp; NaN passes through as NaN). Below -104 the
 * float result is 0, above 88.7 it is inf, both produced by the split 2^n scaling. */
inline __m256 exp_core(__m256 t, const Consts &k) {
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, k.log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* One-constant reduction: the float ln2 is off by ~2e-9, so for |n| <= 150 the error in
     * f is ~3e-7 absolute, below the ~|t| 6e-8 that rounding of t itself already carries. */
    const __m256 f = _mm256_fnmadd_ps(n, k.ln2, t);
    /* P(f) by Estrin's scheme: half the dependent FMAs of Horner's. */
    const __m256 f2 = _mm256_mul_ps(f, f);
    const __m256 p01 = _mm256_fmadd_ps(k.p0, f, k.p1);
    const __m256 p23 = _mm256_fmadd_ps(k.p2, f, k.p3);
    const __m256 p45 = _mm256_fmadd_ps(k.p4, f, k.p5);
    const __m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(p01, f2, p23), f2, p45);
    const __m256 e = _mm256_fmadd_ps(p, f2, _mm256_add_ps(f, k.one)); /* 1 + f + f^2 P(f) */
    const __m256i ni = _mm256_cvtps_epi32(n);                        /* in [-150, 150] */
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, k.bias127), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, k.bias127), 23));
    return _mm256_mul_ps(_mm256_mul_ps(e, s1), s2);
}

/* Forward: y = u / (1 + exp(-z)). exp(-z) may be huge or inf (u very negative): then the
 * quotient is 0 and y = -0, which is the limit; no branch or blend is needed. u = -inf is
 * first raised to the lowest finite float so that y = -FLT_MAX * 0 = -0 rather than NaN
 * (max(lowest, NaN) keeps NaN, so NaN still propagates). */
inline __m256 gelu(__m256 u, const Consts &k) {
    u = _mm256_max_ps(k.lowest, u);
    const __m256 neg_z = _mm256_mul_ps(u, _mm256_fmadd_ps(k.neg_b, _mm256_mul_ps(u, u), k.neg_a));
    const __m256 t = _mm256_min_ps(k.exp_hi, _mm256_max_ps(k.exp_lo, neg_z)); /* NaN kept */
    return _mm256_div_ps(u, _mm256_add_ps(k.one, exp_core(t, k)));
}

/* Backward needs s (1 - s) too, so it uses e = exp(-|z|) in [0, 1] (symmetric, no inf):
 *   s = 1/(1+e) for z >= 0, e/(1+e) otherwise;  s (1 - s) = e / (1+e)^2. */
inline __m256 gelu_grad(__m256 u, const Consts &k) {
    const __m256 z = _mm256_mul_ps(u, _mm256_fmadd_ps(k.b, _mm256_mul_ps(u, u), k.a));
    const __m256 e = exp_core(_mm256_max_ps(k.exp_lo, _mm256_or_ps(z, k.sign)), k); /* exp(-|z|) */
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
