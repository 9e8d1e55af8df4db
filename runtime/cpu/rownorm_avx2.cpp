/*
 * rownorm_avx2.cpp -- layer-norm and softmax row kernels for AVX2 + FMA (TT_ISA_AVX2).
 *
 * Compiled with -mavx2 -mfma; called only when the CPU has both. The row contract is in
 * rownorm_kernels.h. Eight columns per step; the last cols % 8 go through masked loads
 * and stores (masked-off lanes are zeroed before any sum). Layer-norm row sums are kept
 * in double (two 4-lane accumulators per sum); softmax sums of exp (positive terms) in
 * float lanes. exp(t) is bias_gelu_avx2.cpp's: clamp to [-104, 104], t = n ln2 + f,
 * degree-5 minimax polynomial by Estrin, 2^n applied in two halves (same constants,
 * bias_gelu_kernels.h); NaN propagates.
 */
#include <immintrin.h>

#include <cmath>

#include "cpu/bias_gelu_kernels.h"
#include "cpu/rownorm_kernels.h"
#include "cpu/simd_exp.h"

namespace {

inline __m256 exp_core(__m256 t) {
    t = _mm256_min_ps(_mm256_set1_ps(tt::kExpHi), _mm256_max_ps(_mm256_set1_ps(tt::kExpLo), t));
    return tt::exp_avx2(t);  /* the runtime's one vector exp (simd_exp.h) */
}

inline __m256i tail_mask(int64_t n) { /* lanes [0, n) set, 0 < n < 8 */
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), idx);
}

inline double hsum_pd(__m256d v) {
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

inline float hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

/* acc_lo/hi += d (as double), sq_lo/hi += d^2 */
inline void add_d(__m256 d, __m256d &s_lo, __m256d &s_hi, __m256d &q_lo, __m256d &q_hi) {
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(d));
    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(d, 1));
    s_lo = _mm256_add_pd(s_lo, lo);
    s_hi = _mm256_add_pd(s_hi, hi);
    q_lo = _mm256_fmadd_pd(lo, lo, q_lo);
    q_hi = _mm256_fmadd_pd(hi, hi, q_hi);
}

/* acc += a * b in double */
inline void add_prod(__m256 a, __m256 b, __m256d &lo, __m256d &hi) {
    lo = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                         _mm256_cvtps_pd(_mm256_castps256_ps128(b)), lo);
    hi = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)),
                         _mm256_cvtps_pd(_mm256_extractf128_ps(b, 1)), hi);
}

inline void add_one(__m256 a, __m256d &lo, __m256d &hi) {
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(a)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)));
}

template <bool kGamma, bool kBeta>
void ln_forward(const float *x, const float *gamma, const float *beta, float *y, int64_t cols,
                float eps, float *mean_out, float *rstd_out) {
    const __m256 x0 = _mm256_set1_ps(x[0]);
    __m256d s_lo = _mm256_setzero_pd(), s_hi = s_lo, q_lo = s_lo, q_hi = s_lo;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) add_d(_mm256_sub_ps(_mm256_loadu_ps(x + j), x0), s_lo, s_hi, q_lo, q_hi);
    __m256i m = _mm256_setzero_si256();
    if (j < cols) {
        m = tail_mask(cols - j);
        const __m256 d = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(x + j, m), x0),
                                       _mm256_castsi256_ps(m));
        add_d(d, s_lo, s_hi, q_lo, q_hi);
    }
    const double md = hsum_pd(_mm256_add_pd(s_lo, s_hi)) / (double)cols;
    double var = hsum_pd(_mm256_add_pd(q_lo, q_hi)) / (double)cols - md * md;
    if (var < 0.0) var = 0.0;
    const float rstd = (float)(1.0 / std::sqrt(var + (double)eps));
    *mean_out = (float)((double)x[0] + md);
    *rstd_out = rstd;
    const __m256 vm = _mm256_set1_ps((float)md), vr = _mm256_set1_ps(rstd);
    auto out = [&](__m256 xv, int64_t at, bool tail) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_sub_ps(xv, x0), vm), vr);
        if (kGamma) v = _mm256_mul_ps(v, tail ? _mm256_maskload_ps(gamma + at, m) : _mm256_loadu_ps(gamma + at));
        if (kBeta) v = _mm256_add_ps(v, tail ? _mm256_maskload_ps(beta + at, m) : _mm256_loadu_ps(beta + at));
        return v;
    };
    for (j = 0; j + 8 <= cols; j += 8) _mm256_storeu_ps(y + j, out(_mm256_loadu_ps(x + j), j, false));
    if (j < cols) _mm256_maskstore_ps(y + j, m, out(_mm256_maskload_ps(x + j, m), j, true));
}

void ln_forward_avx2(const float *x, const float *gamma, const float *beta, float *y,
                     int64_t cols, float eps, float *mean, float *rstd) {
    if (gamma && beta) ln_forward<true, true>(x, gamma, beta, y, cols, eps, mean, rstd);
    else if (gamma) ln_forward<true, false>(x, gamma, nullptr, y, cols, eps, mean, rstd);
    else if (beta) ln_forward<false, true>(x, nullptr, beta, y, cols, eps, mean, rstd);
    else ln_forward<false, false>(x, nullptr, nullptr, y, cols, eps, mean, rstd);
}

template <bool kGamma>
void ln_backward(const float *x, const float *gamma, float mean, float rstd, const float *gy,
                 float *gx, float *dgamma, float *dbeta, int64_t cols) {
    const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
    __m256d g_lo = _mm256_setzero_pd(), g_hi = g_lo, h_lo = g_lo, h_hi = g_lo;
    int64_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm), vr);
        const __m256 dy = _mm256_loadu_ps(gy + j);
        const __m256 g = kGamma ? _mm256_mul_ps(dy, _mm256_loadu_ps(gamma + j)) : dy;
        add_one(g, g_lo, g_hi);
        add_prod(g, xh, h_lo, h_hi);
        if (dgamma) _mm256_storeu_ps(dgamma + j, _mm256_fmadd_ps(dy, xh, _mm256_loadu_ps(dgamma + j)));
        if (dbeta) _mm256_storeu_ps(dbeta + j, _mm256_add_ps(_mm256_loadu_ps(dbeta + j), dy));
    }
    __m256i m = _mm256_setzero_si256();
    if (j < cols) {
        m = tail_mask(cols - j);
        const __m256 fm = _mm256_castsi256_ps(m);
        const __m256 xh = _mm256_and_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + j, m), vm), vr), fm);
        const __m256 dy = _mm256_maskload_ps(gy + j, m);
        const __m256 g = kGamma ? _mm256_mul_ps(dy, _mm256_maskload_ps(gamma + j, m)) : dy;
        add_one(g, g_lo, g_hi);
        add_prod(g, xh, h_lo, h_hi);
        if (dgamma) _mm256_maskstore_ps(dgamma + j, m, _mm256_fmadd_ps(dy, xh, _mm256_maskload_ps(dgamma + j, m)));
        if (dbeta) _mm256_maskstore_ps(dbeta + j, m, _mm256_add_ps(_mm256_maskload_ps(dbeta + j, m), dy));
    }
    if (gx == nullptr) return;
    const double sg = hsum_pd(_mm256_add_pd(g_lo, g_hi)), sgx = hsum_pd(_mm256_add_pd(h_lo, h_hi));
    const __m256 c2 = _mm256_set1_ps((float)(-(double)rstd * sg / (double)cols));
    const __m256 c3 = _mm256_set1_ps((float)(-(double)rstd * sgx / (double)cols));
    for (j = 0; j + 8 <= cols; j += 8) {
        const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm), vr);
        const __m256 dy = _mm256_loadu_ps(gy + j);
        const __m256 g = kGamma ? _mm256_mul_ps(dy, _mm256_loadu_ps(gamma + j)) : dy;
        _mm256_storeu_ps(gx + j, _mm256_fmadd_ps(vr, g, _mm256_fmadd_ps(c3, xh, c2)));
    }
    if (j < cols) {
        const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + j, m), vm), vr);
        const __m256 dy = _mm256_maskload_ps(gy + j, m);
        const __m256 g = kGamma ? _mm256_mul_ps(dy, _mm256_maskload_ps(gamma + j, m)) : dy;
        _mm256_maskstore_ps(gx + j, m, _mm256_fmadd_ps(vr, g, _mm256_fmadd_ps(c3, xh, c2)));
    }
}

void ln_backward_avx2(const float *x, const float *gamma, float mean, float rstd,
                      const float *gy, float *gx, float *dgamma, float *dbeta, int64_t cols) {
    if (gamma) ln_backward<true>(x, gamma, mean, rstd, gy, gx, dgamma, dbeta, cols);
    else ln_backward<false>(x, nullptr, mean, rstd, gy, gx, dgamma, dbeta, cols);
}

/* kMode 0: softmax into y, 1: log-softmax into y, 2: only the log-sum-exp (y unused). */
template <int kMode>
float softmax_forward(const float *x, float *y, int64_t cols) {
    constexpr bool kStore = kMode == 0;
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 m0 = ninf, m1 = ninf;
    int64_t j = 0;
    /* max(v, m) returns m where v is NaN: the maximum skips NaN, and the NaN reaches the
     * row through exp(NaN - max) in the sum instead. */
    for (; j + 16 <= cols; j += 16) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + j + 8), m1);
    }
    for (; j + 8 <= cols; j += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + j), m0);
    __m256i m = _mm256_setzero_si256();
    const int64_t tail = cols - j, body = j;
    if (tail) {
        m = tail_mask(tail);
        m0 = _mm256_max_ps(_mm256_blendv_ps(ninf, _mm256_maskload_ps(x + j, m), _mm256_castsi256_ps(m)), m0);
    }
    const float mx = hmax_ps(_mm256_max_ps(m0, m1));
    const __m256 vmx = _mm256_set1_ps(mx);
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    for (j = 0; j + 16 <= body; j += 16) {
        const __m256 e0 = exp_core(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx));
        const __m256 e1 = exp_core(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vmx));
        if (kStore) {
            _mm256_storeu_ps(y + j, e0);
            _mm256_storeu_ps(y + j + 8, e1);
        }
        s0 = _mm256_add_ps(s0, e0);
        s1 = _mm256_add_ps(s1, e1);
    }
    for (; j < body; j += 8) {
        const __m256 e0 = exp_core(_mm256_sub_ps(_mm256_loadu_ps(x + j), vmx));
        if (kStore) _mm256_storeu_ps(y + j, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    if (tail) {
        const __m256 e0 = _mm256_and_ps(exp_core(_mm256_sub_ps(_mm256_maskload_ps(x + j, m), vmx)),
                                        _mm256_castsi256_ps(m));
        if (kStore) _mm256_maskstore_ps(y + j, m, e0);
        s0 = _mm256_add_ps(s0, e0);
    }
    const double sum = (double)hsum_ps(_mm256_add_ps(s0, s1));
    const float lse = (float)((double)mx + std::log(sum));
    if (kMode == 1) {
        const __m256 vl = _mm256_set1_ps(lse);
        for (j = 0; j < body; j += 8) _mm256_storeu_ps(y + j, _mm256_sub_ps(_mm256_loadu_ps(x + j), vl));
        if (tail) _mm256_maskstore_ps(y + j, m, _mm256_sub_ps(_mm256_maskload_ps(x + j, m), vl));
    } else if (kMode == 0) {
        const __m256 inv = _mm256_set1_ps((float)(1.0 / sum));
        for (j = 0; j < body; j += 8) _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_loadu_ps(y + j), inv));
        if (tail) _mm256_maskstore_ps(y + j, m, _mm256_mul_ps(_mm256_maskload_ps(y + j, m), inv));
    }
    return lse;
}

template <bool kLog>
void softmax_backward(const float *y, const float *gy, float *gx, int64_t cols) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) {
        const __m256 g0 = _mm256_loadu_ps(gy + j), g1 = _mm256_loadu_ps(gy + j + 8);
        if (kLog) {
            s0 = _mm256_add_ps(s0, g0);
            s1 = _mm256_add_ps(s1, g1);
        } else {
            s0 = _mm256_fmadd_ps(g0, _mm256_loadu_ps(y + j), s0);
            s1 = _mm256_fmadd_ps(g1, _mm256_loadu_ps(y + j + 8), s1);
        }
    }
    for (; j + 8 <= cols; j += 8) {
        const __m256 g0 = _mm256_loadu_ps(gy + j);
        s0 = kLog ? _mm256_add_ps(s0, g0) : _mm256_fmadd_ps(g0, _mm256_loadu_ps(y + j), s0);
    }
    const int64_t body = j, tail = cols - j;
    __m256i m = _mm256_setzero_si256();
    if (tail) {
        m = tail_mask(tail);
        const __m256 g0 = _mm256_maskload_ps(gy + j, m); /* masked lanes load 0 */
        s0 = kLog ? _mm256_add_ps(s0, g0) : _mm256_fmadd_ps(g0, _mm256_maskload_ps(y + j, m), s0);
    }
    const __m256 s = _mm256_set1_ps(hsum_ps(_mm256_add_ps(s0, s1)));
    auto grad = [&](__m256 yv, __m256 gv) {
        return kLog ? _mm256_fnmadd_ps(exp_core(yv), s, gv) : _mm256_mul_ps(yv, _mm256_sub_ps(gv, s));
    };
    for (j = 0; j < body; j += 8)
        _mm256_storeu_ps(gx + j, grad(_mm256_loadu_ps(y + j), _mm256_loadu_ps(gy + j)));
    if (tail)
        _mm256_maskstore_ps(gx + j, m, grad(_mm256_maskload_ps(y + j, m), _mm256_maskload_ps(gy + j, m)));
}


float logsumexp_row(const float *x, int64_t cols) { return softmax_forward<2>(x, nullptr, cols); }

}  // namespace

namespace tt {
const RowNormKernels kRowNormAvx2 = {"avx2",
                                     ln_forward_avx2,
                                     ln_backward_avx2,
                                     softmax_forward<false>,
                                     softmax_forward<true>,
                                     softmax_backward<false>,
                                     softmax_backward<true>,
                                     logsumexp_row};
}  // namespace tt
