/*
 * rownorm_kernels.h -- private: the per-row contract between the row-normalisation
 * driver (rownorm.cpp: checks, threads, column sums, dispatch) and its per-ISA row
 * kernels (rownorm.cpp's scalar ones, rownorm_avx2.cpp, rownorm_avx512.cpp,
 * rownorm_neon.cpp).
 *
 * Layer norm of one row of n = cols >= 1 floats (formulas in tinytorch.h):
 *   statistics in one pass: d = x - x[0] (the shift keeps E[d^2] - E[d]^2 well
 *   conditioned when |mean| >> std), sum d and sum d^2 accumulated in double;
 *   var = max(S2/n - (S1/n)^2, 0) (NaN kept), mean = x[0] + S1/n, rstd = 1/sqrt(var + eps);
 *   then y = ((x - x[0]) - S1/n) rstd gamma + beta in float: x - x[0] is exact for values
 *   within 2x of x[0] (Sterbenz), so a row like 1.7e9 + small spread keeps its spread,
 *   where x - float(mean) would lose it to mean's rounding (half an ulp of |mean|).
 *   The saved mean is float(x[0] + S1/n): the backward's xhat = (x - mean) rstd still
 *   loses such a row's spread (known limit, see tinytorch.h).
 * Backward of one row: pass 1 sums g = grad_y gamma and g xhat (double) and adds
 * grad_y xhat and grad_y into the caller's column sums; pass 2 writes
 *   grad_x = rstd g - rstd mean(g) - rstd mean(g xhat) xhat.
 * Softmax of one row: pass 1 the maximum m, pass 2 e = exp(x - m) (softmax stores e in y)
 * and its sum (float lanes), pass 3 y = e / sum or y = x - lse. exp in the vector kernels
 * is the bias-GELU one (constants in bias_gelu_kernels.h), relative error ~1e-7.
 * Cross-entropy rows use logsumexp (passes 1 and 2, nothing stored) forward and the
 * softmax backward (grad = g softmax(x), shifted by the row max, not g exp(x - lse), which
 * rounds log(sum) away for large logits; the driver then subtracts g at the target).
 */
#pragma once

#include <cstdint>

#include "tinytorch/tinytorch.h"

namespace tt {

/* One row: y (may equal x); *mean and *rstd receive the row's statistics (never NULL). */
using LayerNormForwardRowFn = void (*)(const float *x, const float *gamma, const float *beta,
                                       float *y, int64_t cols, float eps, float *mean,
                                       float *rstd);

/* One row: gx may be NULL (only the column sums) and may equal gy or x; dgamma / dbeta
 * (NULL: skipped) accumulate grad_y xhat and grad_y. */
using LayerNormBackwardRowFn = void (*)(const float *x, const float *gamma, float mean,
                                        float rstd, const float *gy, float *gx, float *dgamma,
                                        float *dbeta, int64_t cols);

/* One row (cols >= 1): y (may equal x) = softmax or log-softmax of x; returns the row's
 * log-sum-exp. */
using SoftmaxForwardRowFn = float (*)(const float *x, float *y, int64_t cols);

/* One row (cols >= 1): its log-sum-exp, nothing stored. */
using LogSumExpRowFn = float (*)(const float *x, int64_t cols);

/* One row: gx (may equal gy or y) from the forward's y and gy. */
using SoftmaxBackwardRowFn = void (*)(const float *y, const float *gy, float *gx, int64_t cols);

struct RowNormKernels {
    const char *isa; /* the name in the path reports: "scalar", "avx2", "avx512" */
    LayerNormForwardRowFn layernorm_forward;
    LayerNormBackwardRowFn layernorm_backward;
    SoftmaxForwardRowFn softmax_forward;
    SoftmaxForwardRowFn log_softmax_forward;
    SoftmaxBackwardRowFn softmax_backward;
    SoftmaxBackwardRowFn log_softmax_backward;
    LogSumExpRowFn logsumexp;
};

extern const RowNormKernels kRowNormScalar;
#if defined(TT_HAVE_AVX2_KERNELS)
extern const RowNormKernels kRowNormAvx2;
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
extern const RowNormKernels kRowNormAvx512;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
extern const RowNormKernels kRowNormNeon;
#endif

}  // namespace tt
