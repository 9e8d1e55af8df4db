/*
 * rownorm_neon.cpp -- layer-norm and softmax row kernels for AArch64 NEON (TT_ISA_NEON).
 *
 * rownorm_avx2.cpp on 4-lane q registers, kept simple: the same formulas and accumulation
 * types (layer-norm sums in float64x2 pairs, softmax sums in float lanes), the bias-GELU
 * exp (constants in bias_gelu_kernels.h). The last cols % 4 columns are copied into a
 * zero-padded 4-lane buffer and run through the same vector code; lanes past the row are
 * masked out of every sum. Row contract: rownorm_kernels.h.
 */
#if defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "cpu/bias_gelu_kernels.h"
#include "cpu/rownorm_kernels.h"
#include "cpu/simd_exp.h"

namespace {

inline float32x4_t exp_core(float32x4_t t) {
    t = vminq_f32(vmaxq_f32(t, vdupq_n_f32(tt::kExpLo)), vdupq_n_f32(tt::kExpHi));
    return tt::exp_neon(t);  /* the runtime's one vector exp (simd_exp.h) */
}

/* lanes [0, n) all ones, the rest 0 (0 < n < 4) */
inline uint32x4_t lane_mask(int64_t n) {
    const uint32_t idx[4] = {0, 1, 2, 3};
    return vcltq_u32(vld1q_u32(idx), vdupq_n_u32((uint32_t)n));
}

inline float32x4_t zero_off(float32x4_t v, uint32x4_t m) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), m));
}

/* A zero-padded copy of p[0, n) (0 < n < 4). */
inline float32x4_t load_tail(const float *p, int64_t n) {
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    std::memcpy(buf, p, (size_t)n * sizeof(float));
    return vld1q_f32(buf);
}

inline void store_tail(float *p, float32x4_t v, int64_t n) {
    float buf[4];
    vst1q_f32(buf, v);
    std::memcpy(p, buf, (size_t)n * sizeof(float));
}

inline void add_pd(float32x4_t a, float64x2_t &lo, float64x2_t &hi) {
    lo = vaddq_f64(lo, vcvt_f64_f32(vget_low_f32(a)));
    hi = vaddq_f64(hi, vcvt_high_f64_f32(a));
}

inline void fma_pd(float32x4_t a, float32x4_t b, float64x2_t &lo, float64x2_t &hi) {
    lo = vfmaq_f64(lo, vcvt_f64_f32(vget_low_f32(a)), vcvt_f64_f32(vget_low_f32(b)));
    hi = vfmaq_f64(hi, vcvt_high_f64_f32(a), vcvt_high_f64_f32(b));
}

inline double hsum_pd(float64x2_t lo, float64x2_t hi) { return vaddvq_f64(vaddq_f64(lo, hi)); }

void ln_forward_neon(const float *x, const float *gamma, const float *beta, float *y,
                     int64_t cols, float eps, float *mean_out, float *rstd_out) {
    const float32x4_t x0 = vdupq_n_f32(x[0]);
    float64x2_t s_lo = vdupq_n_f64(0.0), s_hi = s_lo, q_lo = s_lo, q_hi = s_lo;
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4) {
        const float32x4_t d = vsubq_f32(vld1q_f32(x + j), x0);
        add_pd(d, s_lo, s_hi);
        fma_pd(d, d, q_lo, q_hi);
    }
    const int64_t tail = cols - j;
    const uint32x4_t m = tail ? lane_mask(tail) : vdupq_n_u32(0);
    if (tail) {
        const float32x4_t d = zero_off(vsubq_f32(load_tail(x + j, tail), x0), m);
        add_pd(d, s_lo, s_hi);
        fma_pd(d, d, q_lo, q_hi);
    }
    const double md = hsum_pd(s_lo, s_hi) / (double)cols;
    double var = hsum_pd(q_lo, q_hi) / (double)cols - md * md;
    if (var < 0.0) var = 0.0;
    const float rstd = (float)(1.0 / std::sqrt(var + (double)eps));
    *mean_out = (float)((double)x[0] + md);
    *rstd_out = rstd;
    const float32x4_t vm = vdupq_n_f32((float)md), vr = vdupq_n_f32(rstd);
    auto out = [&](float32x4_t xv, float32x4_t gv, float32x4_t bv) {
        float32x4_t v = vmulq_f32(vsubq_f32(vsubq_f32(xv, x0), vm), vr);
        if (gamma) v = vmulq_f32(v, gv);
        if (beta) v = vaddq_f32(v, bv);
        return v;
    };
    const float32x4_t zero = vdupq_n_f32(0.0f);
    for (j = 0; j + 4 <= cols; j += 4)
        vst1q_f32(y + j, out(vld1q_f32(x + j), gamma ? vld1q_f32(gamma + j) : zero,
                             beta ? vld1q_f32(beta + j) : zero));
    if (tail)
        store_tail(y + j, out(load_tail(x + j, tail), gamma ? load_tail(gamma + j, tail) : zero,
                              beta ? load_tail(beta + j, tail) : zero), tail);
}

void ln_backward_neon(const float *x, const float *gamma, float mean, float rstd,
                      const float *gy, float *gx, float *dgamma, float *dbeta, int64_t cols) {
    const float32x4_t vm = vdupq_n_f32(mean), vr = vdupq_n_f32(rstd);
    float64x2_t g_lo = vdupq_n_f64(0.0), g_hi = g_lo, h_lo = g_lo, h_hi = g_lo;
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4) {
        const float32x4_t xh = vmulq_f32(vsubq_f32(vld1q_f32(x + j), vm), vr);
        const float32x4_t dy = vld1q_f32(gy + j);
        const float32x4_t g = gamma ? vmulq_f32(dy, vld1q_f32(gamma + j)) : dy;
        add_pd(g, g_lo, g_hi);
        fma_pd(g, xh, h_lo, h_hi);
        if (dgamma) vst1q_f32(dgamma + j, vfmaq_f32(vld1q_f32(dgamma + j), dy, xh));
        if (dbeta) vst1q_f32(dbeta + j, vaddq_f32(vld1q_f32(dbeta + j), dy));
    }
    const int64_t tail = cols - j;
    if (tail) {
        const uint32x4_t m = lane_mask(tail);
        const float32x4_t xh = zero_off(vmulq_f32(vsubq_f32(load_tail(x + j, tail), vm), vr), m);
        const float32x4_t dy = load_tail(gy + j, tail);
        const float32x4_t g = gamma ? vmulq_f32(dy, load_tail(gamma + j, tail)) : dy;
        add_pd(g, g_lo, g_hi);
        fma_pd(g, xh, h_lo, h_hi);
        if (dgamma) store_tail(dgamma + j, vfmaq_f32(load_tail(dgamma + j, tail), dy, xh), tail);
        if (dbeta) store_tail(dbeta + j, vaddq_f32(load_tail(dbeta + j, tail), dy), tail);
    }
    if (gx == nullptr) return;
    const double sg = hsum_pd(g_lo, g_hi), sgx = hsum_pd(h_lo, h_hi);
    const float32x4_t c2 = vdupq_n_f32((float)(-(double)rstd * sg / (double)cols));
    const float32x4_t c3 = vdupq_n_f32((float)(-(double)rstd * sgx / (double)cols));
    auto grad = [&](float32x4_t xv, float32x4_t dy, float32x4_t gm) {
        const float32x4_t xh = vmulq_f32(vsubq_f32(xv, vm), vr);
        const float32x4_t g = gamma ? vmulq_f32(dy, gm) : dy;
        return vfmaq_f32(vfmaq_f32(c2, c3, xh), vr, g);
    };
    const float32x4_t one = vdupq_n_f32(1.0f);
    for (j = 0; j + 4 <= cols; j += 4)
        vst1q_f32(gx + j, grad(vld1q_f32(x + j), vld1q_f32(gy + j), gamma ? vld1q_f32(gamma + j) : one));
    if (tail)
        store_tail(gx + j, grad(load_tail(x + j, tail), load_tail(gy + j, tail),
                                gamma ? load_tail(gamma + j, tail) : one), tail);
}

/* kMode 0: softmax into y, 1: log-softmax into y, 2: only the log-sum-exp (y unused). */
template <int kMode>
float softmax_forward(const float *x, float *y, int64_t cols) {
    float32x4_t mx4 = vdupq_n_f32(-INFINITY);
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4) mx4 = vmaxq_f32(mx4, vld1q_f32(x + j)); /* FMAX: NaN wins */
    const int64_t body = j, tail = cols - j;
    float mx = vmaxvq_f32(mx4);
    for (int64_t i = body; i < cols; ++i) mx = (x[i] > mx || std::isnan(x[i])) ? x[i] : mx;
    const float32x4_t vmx = vdupq_n_f32(mx);
    float32x4_t s0 = vdupq_n_f32(0.0f);
    for (j = 0; j < body; j += 4) {
        const float32x4_t e = exp_core(vsubq_f32(vld1q_f32(x + j), vmx));
        if (kMode == 0) vst1q_f32(y + j, e);
        s0 = vaddq_f32(s0, e);
    }
    if (tail) {
        const float32x4_t e = zero_off(exp_core(vsubq_f32(load_tail(x + j, tail), vmx)), lane_mask(tail));
        if (kMode == 0) store_tail(y + j, e, tail);
        s0 = vaddq_f32(s0, e);
    }
    const double sum = (double)vaddvq_f32(s0);
    const float lse = (float)((double)mx + std::log(sum));
    if (kMode == 1) {
        const float32x4_t vl = vdupq_n_f32(lse);
        for (j = 0; j < body; j += 4) vst1q_f32(y + j, vsubq_f32(vld1q_f32(x + j), vl));
        if (tail) store_tail(y + j, vsubq_f32(load_tail(x + j, tail), vl), tail);
    } else if (kMode == 0) {
        const float32x4_t inv = vdupq_n_f32((float)(1.0 / sum));
        for (j = 0; j < body; j += 4) vst1q_f32(y + j, vmulq_f32(vld1q_f32(y + j), inv));
        if (tail) store_tail(y + j, vmulq_f32(load_tail(y + j, tail), inv), tail);
    }
    return lse;
}

template <bool kLog>
void softmax_backward(const float *y, const float *gy, float *gx, int64_t cols) {
    float32x4_t s0 = vdupq_n_f32(0.0f);
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4) {
        const float32x4_t g = vld1q_f32(gy + j);
        s0 = kLog ? vaddq_f32(s0, g) : vfmaq_f32(s0, g, vld1q_f32(y + j));
    }
    const int64_t body = j, tail = cols - j;
    if (tail) { /* padded lanes are 0 in g */
        const float32x4_t g = load_tail(gy + j, tail);
        s0 = kLog ? vaddq_f32(s0, g) : vfmaq_f32(s0, g, load_tail(y + j, tail));
    }
    const float32x4_t s = vdupq_n_f32(vaddvq_f32(s0));
    auto grad = [&](float32x4_t yv, float32x4_t gv) {
        return kLog ? vfmsq_f32(gv, exp_core(yv), s) : vmulq_f32(yv, vsubq_f32(gv, s));
    };
    for (j = 0; j < body; j += 4) vst1q_f32(gx + j, grad(vld1q_f32(y + j), vld1q_f32(gy + j)));
    if (tail) store_tail(gx + j, grad(load_tail(y + j, tail), load_tail(gy + j, tail)), tail);
}

float logsumexp_row(const float *x, int64_t cols) { return softmax_forward<2>(x, nullptr, cols); }

}  // namespace

namespace tt {
const RowNormKernels kRowNormNeon = {"neon",
                                     ln_forward_neon,
                                     ln_backward_neon,
                                     softmax_forward<0>,
                                     softmax_forward<1>,
                                     softmax_backward<false>,
                                     softmax_backward<true>,
                                     logsumexp_row};
}  // namespace tt
#endif
