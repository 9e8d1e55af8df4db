/*
 * bias_gelu_avx2.cpp -- fused bias + GELU row kernels for AVX2 + FMA (TT_ISA_AVX2).
 *
 * Compiled with -mavx2 -mfma; called only when the CPU has both. The formula and edge
 * rules are in bias_gelu_kernels.h. Eight columns per step; the last cols % 8 go
 * through masked loads and stores with the same arithmetic, so every column of a row
 * gets bit-identical treatment whatever its position.
 *
 * exp(t) for t = -|z| in [-inf, 0]: t is clamped to [-104, 0] (below -104, exp is 0 in
 * float), split as t = n ln2 + f with |f| <= ln2/2 (Cody-Waite, two-part ln2),
 * exp(f) = 1 + f + f^2 P(f) with a degree-5 minimax P (relative error ~1e-7), and 2^n
 * applied as 2^(n/2) twice so results down to the float denormals come out right
 * without integer exponent overflow.
 * A NaN t stays NaN (the clamp keeps NaN), so NaN inputs propagate.
 */
#include <immintrin.h>

#include "cpu/bias_gelu_kernels.h"

namespace {

struct Consts {
    __m256 a = _mm256_set1_ps(tt::kGeluA);
    __m256 b = _mm256_set1_ps(tt::kGeluB);
    __m256 b3 = _mm256_set1_ps(tt::kGeluB3);
    __m256 one = _mm256_set1_ps(1.0f);
    __m256 zero = _mm256_setzero_ps();
    __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
    __m256 exp_lo = _mm256_set1_ps(-104.0f);
    __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
    __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    /* exp(f) ~ 1 + f + f^2 P(f) on |f| <= ln2/2, minimax P of degree 5. */
    __m256 p0 = _mm256_set1_ps(1.9875691500e-4f);
    __m256 p1 = _mm256_set1_ps(1.3981999507e-3f);
    __m256 p2 = _mm256_set1_ps(8.3334519073e-3f);
    __m256 p3 = _mm256_set1_ps(4.1665795894e-2f);
    __m256 p4 = _mm256_set1_ps(1.6666665459e-1f);
    __m256 p5 = _mm256_set1_ps(5.0000001201e-1f);
    __m256i bias127 = _mm256_set1_epi32(127);
};

/* exp(t) for t <= 0 (see the file comment). */
inline __m256 exp_nonpositive(__m256 t, const Consts &k) {
    t = _mm256_max_ps(k.exp_lo, t); /* max(lo, NaN) = NaN: NaN survives */
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(t, k.log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_fnmadd_ps(n, k.ln2_hi, t);
    f = _mm256_fnmadd_ps(n, k.ln2_lo, f);
    __m256 p = _mm256_fmadd_ps(k.p0, f, k.p1);
    p = _mm256_fmadd_ps(p, f, k.p2);
    p = _mm256_fmadd_ps(p, f, k.p3);
    p = _mm256_fmadd_ps(p, f, k.p4);
    p = _mm256_fmadd_ps(p, f, k.p5);
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(f, f), _mm256_add_ps(f, k.one)); /* 1 + f + f^2 P(f) */
    const __m256i ni = _mm256_cvtps_epi32(n);                            /* in [-150, 0] */
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, k.bias127), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, k.bias127), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

struct Sigmoid {
    __m256 z, e, r, s; /* z, exp(-|z|), 1/(1+e), sigmoid(z) */
};

inline Sigmoid sigmoid_of(__m256 u, const Consts &k) {
    Sigmoid q;
    q.z = _mm256_mul_ps(u, _mm256_fmadd_ps(k.b, _mm256_mul_ps(u, u), k.a));
    q.e = exp_nonpositive(_mm256_or_ps(q.z, k.sign), k); /* -|z| */
    q.r = _mm256_div_ps(k.one, _mm256_add_ps(k.one, q.e));
    const __m256 neg = _mm256_cmp_ps(q.z, k.zero, _CMP_LT_OQ);
    q.s = _mm256_blendv_ps(q.r, _mm256_mul_ps(q.e, q.r), neg);
    return q;
}

inline __m256 gelu(__m256 u, const Consts &k) {
    const Sigmoid q = sigmoid_of(u, k);
    const __m256 y = _mm256_mul_ps(u, q.s);
    /* u = -inf: the limit -0, not -inf * 0 = NaN. */
    return _mm256_blendv_ps(y, k.sign, _mm256_cmp_ps(u, k.neg_inf, _CMP_EQ_OQ));
}

inline __m256 gelu_grad(__m256 u, const Consts &k) {
    const Sigmoid q = sigmoid_of(u, k);
    const __m256 dz = _mm256_fmadd_ps(k.b3, _mm256_mul_ps(u, u), k.a);
    const __m256 s1s = _mm256_mul_ps(q.e, _mm256_mul_ps(q.r, q.r)); /* s (1 - s) */
    __m256 slope = _mm256_mul_ps(_mm256_mul_ps(u, dz), s1s);
    /* e == 0: the slope term is exactly 0 (it would be inf * 0 for huge |u|). */
    slope = _mm256_andnot_ps(_mm256_cmp_ps(q.e, k.zero, _CMP_EQ_OQ), slope);
    return _mm256_add_ps(q.s, slope);
}

inline __m256i tail_mask(int64_t n) { /* lanes [0, n) set, 0 < n < 8 */
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

template <bool kHasBias>
void forward_row(const float *x, const float *bias, float *y, int64_t cols) {
    const Consts k;
    int64_t j = 0;
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
