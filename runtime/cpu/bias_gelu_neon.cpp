/*
 * bias_gelu_neon.cpp -- fused bias + GELU row kernels for AArch64 NEON (TT_ISA_NEON).
 *
 * bias_gelu_avx2.cpp on 4-lane q registers, step for step (same exp range reduction,
 * polynomial and split 2^n scaling, same forward/backward shapes; same edge rules from
 * bias_gelu_kernels.h). The last
 * cols % 4 columns are copied into a zero-padded 4-lane buffer and run through the same
 * vector code, so every column gets identical arithmetic.
 */
#if defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>

#include "cpu/bias_gelu_kernels.h"
#include "cpu/simd_exp.h"

namespace {

/* y = u / (1 + exp(-z)); u = -inf raised to the lowest float first (y = -0, not NaN). */
inline float32x4_t gelu(float32x4_t u) {
    u = vmaxq_f32(u, vdupq_n_f32(-3.40282347e38f)); /* FMAX keeps NaN */
    const float32x4_t neg_z = vmulq_f32(
        u, vfmaq_f32(vdupq_n_f32(-tt::kGeluA), vdupq_n_f32(-tt::kGeluB), vmulq_f32(u, u)));
    const float32x4_t t = vminq_f32(vmaxq_f32(neg_z, vdupq_n_f32(tt::kExpLo)), vdupq_n_f32(tt::kExpHi));
    return vdivq_f32(u, vaddq_f32(vdupq_n_f32(1.0f), tt::exp_neon(t)));
}

/* s = sigmoid(z) from e = exp(-|z|) in [0, 1]; s (1 - s) = e / (1+e)^2. */
inline float32x4_t gelu_grad(float32x4_t u) {
    const float32x4_t z = vmulq_f32(u, vfmaq_f32(vdupq_n_f32(tt::kGeluA), vdupq_n_f32(tt::kGeluB), vmulq_f32(u, u)));
    const float32x4_t e = tt::exp_neon(vmaxq_f32(vnegq_f32(vabsq_f32(z)), vdupq_n_f32(tt::kExpLo)));
    const float32x4_t r = vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(vdupq_n_f32(1.0f), e));
    const float32x4_t s = vbslq_f32(vcltq_f32(z, vdupq_n_f32(0.0f)), vmulq_f32(e, r), r);
    const float32x4_t dz = vfmaq_f32(vdupq_n_f32(tt::kGeluA), vdupq_n_f32(tt::kGeluB3), vmulq_f32(u, u));
    float32x4_t slope = vmulq_f32(vmulq_f32(u, dz), vmulq_f32(e, vmulq_f32(r, r)));
    slope = vbslq_f32(vceqq_f32(e, vdupq_n_f32(0.0f)), vdupq_n_f32(0.0f), slope);
    return vaddq_f32(s, slope);
}

void forward_row_neon(const float *x, const float *bias, float *y, int64_t cols) {
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4) {
        float32x4_t u = vld1q_f32(x + j);
        if (bias) u = vaddq_f32(u, vld1q_f32(bias + j));
        vst1q_f32(y + j, gelu(u));
    }
    if (j < cols) {
        float xb[4] = {0, 0, 0, 0}, bb[4] = {0, 0, 0, 0}, yb[4];
        for (int64_t t = 0; t < cols - j; ++t) {
            xb[t] = x[j + t];
            if (bias) bb[t] = bias[j + t];
        }
        vst1q_f32(yb, gelu(bias ? vaddq_f32(vld1q_f32(xb), vld1q_f32(bb)) : vld1q_f32(xb)));
        for (int64_t t = 0; t < cols - j; ++t) y[j + t] = yb[t];
    }
}

void backward_row_neon(const float *x, const float *bias, const float *gy, float *gx,
                       float *colsum, int64_t cols) {
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4) {
        float32x4_t u = vld1q_f32(x + j);
        if (bias) u = vaddq_f32(u, vld1q_f32(bias + j));
        const float32x4_t g = vmulq_f32(vld1q_f32(gy + j), gelu_grad(u));
        vst1q_f32(gx + j, g);
        if (colsum) vst1q_f32(colsum + j, vaddq_f32(vld1q_f32(colsum + j), g));
    }
    if (j < cols) {
        float xb[4] = {0, 0, 0, 0}, bb[4] = {0, 0, 0, 0}, gb[4] = {0, 0, 0, 0}, out[4];
        for (int64_t t = 0; t < cols - j; ++t) {
            xb[t] = x[j + t];
            gb[t] = gy[j + t];
            if (bias) bb[t] = bias[j + t];
        }
        const float32x4_t u = bias ? vaddq_f32(vld1q_f32(xb), vld1q_f32(bb)) : vld1q_f32(xb);
        vst1q_f32(out, vmulq_f32(vld1q_f32(gb), gelu_grad(u)));
        for (int64_t t = 0; t < cols - j; ++t) {
            gx[j + t] = out[t];
            if (colsum) colsum[j + t] += out[t];
        }
    }
}

}  // namespace

namespace tt {
const GeluRowKernels kGeluNeon = {"bias_gelu_forward:neon", "bias_gelu_backward:neon",
                                  forward_row_neon, backward_row_neon};
}  // namespace tt
#endif
