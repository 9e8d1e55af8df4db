/*
 * train_ops_kernels.h -- private: the training-step kernels' inner loops (Adam / AdamW update,
 * embedding row add, ReLU and its gradient), written once as inline templates and compiled once per ISA file
 * (train_ops_<isa>.cpp gets that ISA's flags, so the compiler vectorises the same loop
 * with AVX2, AVX-512 or NEON registers), plus the table the driver (train_ops.cpp)
 * chooses from by the active ISA.
 *
 * The Adam rule is PyTorch's (torch.optim.Adam / AdamW, foreach=False):
 *     decoupled:  p *= 1 - lr * wd            else: g += wd * p
 *     m = lerp(m, g, 1 - b1) ;  v = b2 v + (1 - b2) g^2
 * where lerp(m, g, w) is m + w (g - m) for w < 0.5, else g - (g - m)(1 - w) (PyTorch's
 * lerp, so the moments round as its do, down to betas near 0 or 1), and then
 *     p -= step_size * m / (sqrt(v) * inv_sqrt_bc2 + eps)
 * with step_size = lr / (1 - b1^t) and inv_sqrt_bc2 = 1 / sqrt(1 - b2^t) computed in
 * double by the driver; everything per element in float32, one pass over p, g, m and v.
 */
#pragma once

#include <cmath>
#include <cstdint>

namespace tt {

struct AdamScalars {
    float b1, one_minus_b1, b2, one_minus_b2;
    bool lerp_from_m;   /* 1 - b1 < 0.5: m + w (g - m), else g - (g - m)(1 - w) */
    float decay;        /* 1 - lr * wd (decoupled), else 1 */
    float l2;           /* wd (coupled L2), else 0 */
    float step_size;    /* lr / (1 - b1^t) */
    float inv_sqrt_bc2; /* 1 / sqrt(1 - b2^t) */
    float eps;
};

inline void adam_loop(float *__restrict p, const float *__restrict g, float *__restrict m,
                      float *__restrict v, int64_t n, const AdamScalars &s) {
    for (int64_t i = 0; i < n; ++i) {
        const float pi = p[i] * s.decay;
        const float gi = g[i] + s.l2 * pi;
        const float d = gi - m[i];
        const float mi = s.lerp_from_m ? m[i] + s.one_minus_b1 * d : gi - d * s.b1;
        const float vi = s.b2 * v[i] + s.one_minus_b2 * (gi * gi);
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - s.step_size * (mi / (std::sqrt(vi) * s.inv_sqrt_bc2 + s.eps));
    }
}

/* dst[j] += src[j] for j < n (one embedding row of the scatter-add backward). */
inline void add_row_loop(float *__restrict dst, const float *__restrict src, int64_t n) {
    for (int64_t j = 0; j < n; ++j) dst[j] += src[j];
}

/* ReLU: y = max(x, 0) (NaN stays NaN); its gradient gx = 0 where y <= 0, else g (so a NaN
 * passes its gradient through, as in PyTorch's threshold_backward). */
/* (No __restrict: y may equal x and grad_x may equal grad_y; the compiler then checks
 * overlap at run time before taking the vector loop.) */
inline void relu_loop(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] > 0.0f || x[i] != x[i]) ? x[i] : 0.0f;
}
inline void relu_backward_loop(const float *y, const float *g, float *gx, int64_t n) {
    for (int64_t i = 0; i < n; ++i) gx[i] = y[i] <= 0.0f ? 0.0f : g[i];
}

using AdamFn = void (*)(float *p, const float *g, float *m, float *v, int64_t n,
                        const AdamScalars &s);
using AddRowFn = void (*)(float *dst, const float *src, int64_t n);
using ReluFn = void (*)(const float *x, float *y, int64_t n);
using ReluBackwardFn = void (*)(const float *y, const float *g, float *gx, int64_t n);

struct TrainKernels {
    const char *adam_path;      /* "adam:<isa>" */
    const char *gather_path;    /* "embedding:<isa>" */
    const char *scatter_path;   /* "embedding_backward:<isa>" */
    const char *relu_path;      /* "relu:<isa>" */
    const char *relu_backward_path; /* "relu_backward:<isa>" */
    AdamFn adam;
    AddRowFn add_row;
    ReluFn relu;
    ReluBackwardFn relu_backward;
};

extern const TrainKernels kTrainScalar;
#if defined(TT_HAVE_AVX2_KERNELS)
extern const TrainKernels kTrainAvx2;
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
extern const TrainKernels kTrainAvx512;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
extern const TrainKernels kTrainNeon;
#endif

}  // namespace tt
