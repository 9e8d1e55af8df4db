/*
 * bias_gelu_kernels.h -- private: the per-row contract between the fused bias-GELU
 * driver (bias_gelu.cpp: checks, threads, dispatch) and its per-ISA row kernels
 * (bias_gelu_<isa>.cpp). Every ISA evaluates the same float formula:
 *
 *   u  = x + bias[j]                       (bias NULL: u = x)
 *   z  = 2 sqrt(2/pi) (u + 0.044715 u^3)   = u (A + B u^2)
 *   e  = exp(-|z|)                         in [0, 1]: never overflows
 *   s  = sigmoid(z) = 1/(1+e) if z >= 0, e/(1+e) otherwise
 *   y  = u s                               (= 0.5 u (1 + tanh(z/2)), the tanh GELU)
 *   dy/du = s + u z' s (1-s),  z' = A (1 + 3 * 0.044715 u^2),  s (1-s) = e/(1+e)^2
 *
 * Edge rules, identical on every path: u = +inf gives y = inf, dy/du = 1; u = -inf
 * gives y = -0, dy/du = 0 (the limits; the naive product would be -inf * 0 = NaN);
 * where e underflows to 0 the u z' s(1-s) term is 0 (it would be inf * 0 for |u| near
 * 1e30); NaN in x or bias propagates to y and grad_x.
 */
#pragma once

#include <cstdint>

#include "tinytorch/tinytorch.h"

namespace tt {

/* z = u * (kGeluA + kGeluB * u^2) */
constexpr float kGeluA = 1.5957691216057308f;               /* 2 sqrt(2/pi)           */
constexpr float kGeluB = 1.5957691216057308f * 0.044715f;   /* 2 sqrt(2/pi) 0.044715  */
constexpr float kGeluB3 = 3.0f * 1.5957691216057308f * 0.044715f;

/* exp(t) in the vector kernels (every ISA uses these, see bias_gelu_avx2.cpp): t is
 * clamped to [kExpLo, kExpHi], split as t = n ln2 + f with |f| <= ln2/2, and
 * exp(f) ~ 1 + f + f^2 P(f) with the degree-5 minimax P = kExpP0 f^5 + ... + kExpP5. */
constexpr float kExpLo = -104.0f;
constexpr float kExpHi = 104.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kExpP0 = 1.9875691500e-4f;
constexpr float kExpP1 = 1.3981999507e-3f;
constexpr float kExpP2 = 8.3334519073e-3f;
constexpr float kExpP3 = 4.1665795894e-2f;
constexpr float kExpP4 = 1.6666665459e-1f;
constexpr float kExpP5 = 5.0000001201e-1f;

/* y[j] = gelu(x[j] + bias[j]) for j < cols (bias may be NULL). */
using GeluForwardRowFn = void (*)(const float *x, const float *bias, float *y, int64_t cols);

/* gx[j] = gy[j] * gelu'(x[j] + bias[j]); if colsum != NULL, colsum[j] += gx[j].
 * gx may equal gy. */
using GeluBackwardRowFn = void (*)(const float *x, const float *bias, const float *gy, float *gx,
                                   float *colsum, int64_t cols);

struct GeluRowKernels {
    const char *forward_path;  /* "bias_gelu_forward:<isa>"  */
    const char *backward_path; /* "bias_gelu_backward:<isa>" */
    GeluForwardRowFn forward;
    GeluBackwardRowFn backward;
};

extern const GeluRowKernels kGeluScalar;
#if defined(TT_HAVE_AVX2_KERNELS)
extern const GeluRowKernels kGeluAvx2;
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
extern const GeluRowKernels kGeluAvx512;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
extern const GeluRowKernels kGeluNeon;
#endif

/* The buffers of one call: out is y (forward) or grad_x (backward). */
struct GeluBuffers {
    const float *x, *bias, *grad_y;
    const float *out;
    const float *grad_bias;
    bool backward;
};

/* Shared argument checks of the fast and reference entry points: rows/cols >= 0, no
 * overflow of rows * cols bytes, non-NULL required buffers when there are elements, and
 * the overlap rules of the header (an output may equal an input it reads element by
 * element; it never overlaps bias; grad_bias overlaps nothing). */
tt_status bias_gelu_check(const char *fn, const GeluBuffers &buffers, int64_t rows, int64_t cols);

}  // namespace tt
