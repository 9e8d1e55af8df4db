/*
 * rownorm_avx512.cpp -- layer-norm and softmax row kernels for AVX-512F (TT_ISA_AVX512).
 *
 * rownorm_avx2.cpp widened to 16 lanes, step for step, with mask registers for the last
 * cols % 16 columns (masked loads give 0 in the lanes off; sums use masked adds). Row
 * contract: rownorm_kernels.h; exp: bias_gelu's (constants in bias_gelu_kernels.h).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cmath>

#include "cpu/bias_gelu_kernels.h"
#include "cpu/rownorm_kernels.h"
#include "cpu/simd_exp.h"

namespace {

inline __m512 exp_core(__m512 t) {
    t = _mm512_min_ps(_mm512_set1_ps(tt::kExpHi), _mm512_max_ps(_mm512_set1_ps(tt::kExpLo), t));
    return tt::exp_avx512(t);  /* the runtime's one vector exp (simd_exp.h) */
}

inline __mmask16 tail_mask(int64_t n) { return (__mmask16)((1u << n) - 1u); } /* 0 < n < 16 */

inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
inline __m512d hi_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }

template <bool kGamma, bool kBeta>
void ln_forward(const float *x, const float *gamma, const float *beta, float *y, int64_t cols,
                float eps, float *mean_out, float *rstd_out) {
    const __m512 x0 = _mm512_set1_ps(x[0]);
    __m512d s_lo = _mm512_setzero_pd(), s_hi = s_lo, q_lo = s_lo, q_hi = s_lo;
    auto add = [&](__m512 d) {
        const __m512d lo = lo_pd(d), hi = hi_pd(d);
        s_lo = _mm512_add_pd(s_lo, lo);
        s_hi = _mm512_add_pd(s_hi, hi);
        q_lo = _mm512_fmadd_pd(lo, lo, q_lo);
        q_hi = _mm512_fmadd_pd(hi, hi, q_hi);
    };
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) add(_mm512_sub_ps(_mm512_loadu_ps(x + j), x0));
    __mmask16 m = 0;
    if (j < cols) {
        m = tail_mask(cols - j);
        add(_mm512_maskz_sub_ps(m, _mm512_maskz_loadu_ps(m, x + j), x0));
    }
    const double md = _mm512_reduce_add_pd(_mm512_add_pd(s_lo, s_hi)) / (double)cols;
    double var = _mm512_reduce_add_pd(_mm512_add_pd(q_lo, q_hi)) / (double)cols - md * md;
    if (var < 0.0) var = 0.0;
    const float rstd = (float)(1.0 / std::sqrt(var + (double)eps));
    *mean_out = (float)((double)x[0] + md);
    *rstd_out = rstd;
    const __m512 vm = _mm512_set1_ps((float)md), vr = _mm512_set1_ps(rstd);
    auto out = [&](__m512 xv, int64_t at, __mmask16 k) {
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(xv, x0), vm), vr);
        if (kGamma) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, gamma + at));
        if (kBeta) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, beta + at));
        return v;
    };
    for (j = 0; j + 16 <= cols; j += 16) _mm512_storeu_ps(y + j, out(_mm512_loadu_ps(x + j), j, 0xFFFF));
    if (j < cols) _mm512_mask_storeu_ps(y + j, m, out(_mm512_maskz_loadu_ps(m, x + j), j, m));
}

void ln_forward_avx512(const float *x, const float *gamma, const float *beta, float *y,
                       int64_t cols, float eps, float *mean, float *rstd) {
    if (gamma && beta) ln_forward<true, true>(x, gamma, beta, y, cols, eps, mean, rstd);
    else if (gamma) ln_forward<true, false>(x, gamma, nullptr, y, cols, eps, mean, rstd);
    else if (beta) ln_forward<false, true>(x, nullptr, beta, y, cols, eps, mean, rstd);
    else ln_forward<false, false>(x, nullptr, nullptr, y, cols, eps, mean, rstd);
}

template <bool kGamma>
void ln_backward(const float *x, const float *gamma, float mean, float rstd, const float *gy,
                 float *gx, float *dgamma, float *dbeta, int64_t cols) {
    const __m512 vm = _mm512_set1_ps(mean), vr = _mm512_set1_ps(rstd);
    __m512d g_lo = _mm512_setzero_pd(), g_hi = g_lo, h_lo = g_lo, h_hi = g_lo;
    auto sums = [&](int64_t at, __mmask16 k) {
        const __m512 xh = _mm512_maskz_mul_ps(k, _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + at), vm), vr);
        const __m512 dy = _mm512_maskz_loadu_ps(k, gy + at);
        const __m512 g = kGamma ? _mm512_mul_ps(dy, _mm512_maskz_loadu_ps(k, gamma + at)) : dy;
        g_lo = _mm512_add_pd(g_lo, lo_pd(g));
        g_hi = _mm512_add_pd(g_hi, hi_pd(g));
        h_lo = _mm512_fmadd_pd(lo_pd(g), lo_pd(xh), h_lo);
        h_hi = _mm512_fmadd_pd(hi_pd(g), hi_pd(xh), h_hi);
        if (dgamma)
            _mm512_mask_storeu_ps(dgamma + at, k, _mm512_fmadd_ps(dy, xh, _mm512_maskz_loadu_ps(k, dgamma + at)));
        if (dbeta)
            _mm512_mask_storeu_ps(dbeta + at, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, dbeta + at), dy));
    };
    int64_t j = 0;
    for (; j + 16 <= cols; j += 16) sums(j, 0xFFFF);
    const __mmask16 m = j < cols ? tail_mask(cols - j) : 0;
    if (m) sums(j, m);
    if (gx == nullptr) return;
    const double sg = _mm512_reduce_add_pd(_mm512_add_pd(g_lo, g_hi));
    const double sgx = _mm512_reduce_add_pd(_mm512_add_pd(h_lo, h_hi));
    const __m512 c2 = _mm512_set1_ps((float)(-(double)rstd * sg / (double)cols));
    const __m512 c3 = _mm512_set1_ps((float)(-(double)rstd * sgx / (double)cols));
    auto grad = [&](int64_t at, __mmask16 k) {
        const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + at), vm), vr);
        const __m512 dy = _mm512_maskz_loadu_ps(k, gy + at);
        const __m512 g = kGamma ? _mm512_mul_ps(dy, _mm512_maskz_loadu_ps(k, gamma + at)) : dy;
        _mm512_mask_storeu_ps(gx + at, k, _mm512_fmadd_ps(vr, g, _mm512_fmadd_ps(c3, xh, c2)));
    };
    for (j = 0; j + 16 <= cols; j += 16) grad(j, 0xFFFF);
    if (m) grad(j, m);
}

void ln_backward_avx512(const float *x, const float *gamma, float mean, float rstd,
                        const float *gy, float *gx, float *dgamma, float *dbeta, int64_t cols) {
    if (gamma) ln_backward<true>(x, gamma, mean, rstd, gy, gx, dgamma, dbeta, cols);
    else ln_backward<false>(x, nullptr, mean, rstd, gy, gx, dgamma, dbeta, cols);
}

/* kMode 0: softmax into y, 1: log-softmax into y, 2: only the log-sum-exp (y unused). */
template <int kMode>
float softmax_forward(const float *x, float *y, int64_t cols) {
    constexpr bool kStore = kMode == 0;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 m0 = ninf, m1 = ninf;
    int64_t j = 0;
    /* max(v, m) returns m where v is NaN: the maximum skips NaN, and the NaN reaches the
     * row through exp(NaN - max) in the sum instead. */
    for (; j + 32 <= cols; j += 32) {
        m0 = _mm512_max_ps(_mm512_loadu_ps(x + j), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(x + j + 16), m1);
    }
    for (; j + 16 <= cols; j += 16) m0 = _mm512_max_ps(_mm512_loadu_ps(x + j), m0);
    const int64_t body = j, tail = cols - j;
    const __mmask16 m = tail ? tail_mask(tail) : 0;
    if (tail) m0 = _mm512_mask_max_ps(m0, m, _mm512_maskz_loadu_ps(m, x + j), m0);
    const float mx = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
    const __m512 vmx = _mm512_set1_ps(mx);
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    for (j = 0; j + 32 <= body; j += 32) {
        const __m512 e0 = exp_core(_mm512_sub_ps(_mm512_loadu_ps(x + j), vmx));
        const __m512 e1 = exp_core(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vmx));
        if (kStore) {
            _mm512_storeu_ps(y + j, e0);
            _mm512_storeu_ps(y + j + 16, e1);
        }
        s0 = _mm512_add_ps(s0, e0);
        s1 = _mm512_add_ps(s1, e1);
    }
    for (; j < body; j += 16) {
        const __m512 e0 = exp_core(_mm512_sub_ps(_mm512_loadu_ps(x + j), vmx));
        if (kStore) _mm512_storeu_ps(y + j, e0);
        s0 = _mm512_add_ps(s0, e0);
    }
    if (tail) {
        const __m512 e0 = _mm512_maskz_mov_ps(m, exp_core(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vmx)));
        if (kStore) _mm512_mask_storeu_ps(y + j, m, e0);
        s0 = _mm512_add_ps(s0, e0);
    }
    const double sum = (double)_mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    const float lse = (float)((double)mx + std::log(sum));
    if (kMode == 1) {
        const __m512 vl = _mm512_set1_ps(lse);
        for (j = 0; j < body; j += 16) _mm512_storeu_ps(y + j, _mm512_sub_ps(_mm512_loadu_ps(x + j), vl));
        if (tail) _mm512_mask_storeu_ps(y + j, m, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + j), vl));
    } else if (kMode == 0) {
        const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
        for (j = 0; j < body; j += 16) _mm512_storeu_ps(y + j, _mm512_mul_ps(_mm512_loadu_ps(y + j), inv));
        if (tail) _mm512_mask_storeu_ps(y + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + j), inv));
    }
    return lse;
}

template <bool kLog>
void softmax_backward(const float *y, const float *gy, float *gx, int64_t cols) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j + 32 <= cols; j += 32) {
        const __m512 g0 = _mm512_loadu_ps(gy + j), g1 = _mm512_loadu_ps(gy + j + 16);
        if (kLog) {
            s0 = _mm512_add_ps(s0, g0);
            s1 = _mm512_add_ps(s1, g1);
        } else {
            s0 = _mm512_fmadd_ps(g0, _mm512_loadu_ps(y + j), s0);
            s1 = _mm512_fmadd_ps(g1, _mm512_loadu_ps(y + j + 16), s1);
        }
    }
    for (; j + 16 <= cols; j += 16) {
        const __m512 g0 = _mm512_loadu_ps(gy + j);
        s0 = kLog ? _mm512_add_ps(s0, g0) : _mm512_fmadd_ps(g0, _mm512_loadu_ps(y + j), s0);
    }
    const int64_t body = j, tail = cols - j;
    const __mmask16 m = tail ? tail_mask(tail) : 0;
    if (tail) {
        const __m512 g0 = _mm512_maskz_loadu_ps(m, gy + j);
        s0 = kLog ? _mm512_add_ps(s0, g0) : _mm512_fmadd_ps(g0, _mm512_maskz_loadu_ps(m, y + j), s0);
    }
    const __m512 s = _mm512_set1_ps(_mm512_reduce_add_ps(_mm512_add_ps(s0, s1)));
    auto grad = [&](__m512 yv, __m512 gv) {
        return kLog ? _mm512_fnmadd_ps(exp_core(yv), s, gv) : _mm512_mul_ps(yv, _mm512_sub_ps(gv, s));
    };
    for (j = 0; j < body; j += 16)
        _mm512_storeu_ps(gx + j, grad(_mm512_loadu_ps(y + j), _mm512_loadu_ps(gy + j)));
    if (tail)
        _mm512_mask_storeu_ps(gx + j, m, grad(_mm512_maskz_loadu_ps(m, y + j), _mm512_maskz_loadu_ps(m, gy + j)));
}


float logsumexp_row(const float *x, int64_t cols) { return softmax_forward<2>(x, nullptr, cols); }

}  // namespace

namespace tt {
const RowNormKernels kRowNormAvx512 = {"avx512",
                                       ln_forward_avx512,
                                       ln_backward_avx512,
                                       softmax_forward<false>,
                                       softmax_forward<true>,
                                       softmax_backward<false>,
                                       softmax_backward<true>,
                                     logsumexp_row};
}  // namespace tt
