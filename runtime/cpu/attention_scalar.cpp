/*
 * attention_scalar.cpp -- the portable attention kernels (TT_ISA_SCALAR), and the block
 * product the NEON kernels use for columns that do not fill a vector.
 *
 * Plain loops in the contract's order (attention_kernels.h), compiled for the baseline of
 * the architecture; std::exp gives exp(-inf) = 0 and keeps NaN, as the vector exp does.
 * This is the reference the vector kernels are tested against (through the public entry
 * points with tt_set_isa(TT_ISA_SCALAR)).
 */
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/attention_kernels.h"

namespace tt {

void attention_product_scalar(int64_t rows, int64_t cols, int64_t kc, const float *A,
                              int64_t lda, bool trans_a, const float *B, int64_t ldb, float *C,
                              int64_t ldc, int mode, const float *colscale) {
    if (cols <= 0) return;
    for (int64_t r = 0; r < rows; ++r) {
        float *c = C + r * ldc;
        if (mode == kProductOverwrite) {
            std::memset(c, 0, (size_t)cols * sizeof(float)); /* C is not read */
        } else if (mode == kProductScaleColumns) {
            for (int64_t j = 0; j < cols; ++j) c[j] *= colscale[j];
        }
        for (int64_t k = 0; k < kc; ++k) {
            const float a = trans_a ? A[k * lda + r] : A[r * lda + k];
            const float *b = B + k * ldb;
            for (int64_t j = 0; j < cols; ++j) c[j] += a * b[j];
        }
    }
}

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

void softmax_scalar(float *S, int64_t rows, int64_t n, int64_t ld, float *m, float *l,
                    float *alpha) {
    float mx[kAttnBlockQ], ms[kAttnBlockQ], sum[kAttnBlockQ];
    for (int64_t c = 0; c < n; ++c) {
        mx[c] = m[c];
        sum[c] = 0.0f;
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c) {
            const float s = S[r * ld + c];
            /* NaN wins, as in the vector kernels' max: it reaches P either way */
            mx[c] = (s > mx[c] || std::isnan(s)) ? s : mx[c];
        }
    for (int64_t c = 0; c < n; ++c) {
        ms[c] = mx[c] == kNegInf ? 0.0f : mx[c];
        alpha[c] = std::exp(m[c] - ms[c]);
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c) {
            const float p = std::exp(S[r * ld + c] - ms[c]);
            S[r * ld + c] = p;
            sum[c] += p;
        }
    for (int64_t c = 0; c < n; ++c) {
        l[c] = l[c] * alpha[c] + sum[c];
        m[c] = mx[c];
    }
}

void exp_sub_scalar(float *S, int64_t rows, int64_t n, int64_t ld, const float *sub) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c) S[r * ld + c] = std::exp(S[r * ld + c] - sub[c]);
}

void ds_scalar(const float *P, float *dP, int64_t rows, int64_t n, int64_t ld, const float *D,
               float scale) {
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c)
            dP[r * ld + c] = P[r * ld + c] * (dP[r * ld + c] - D[c]) * scale;
}

}  // namespace

const AttentionKernels kAttentionScalar = {"attention_forward:scalar", "attention_backward:scalar",
                                           1, attention_product_scalar, softmax_scalar,
                                           exp_sub_scalar, ds_scalar,
                                           nullptr, nullptr}; /* no padding lanes to save */

}  // namespace tt
