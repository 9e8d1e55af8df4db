/*
 * attention_rows.h -- private: attention for a few queries at a time (decoding: the new
 * token's query over the KV cache), written once in plain loops and compiled per ISA by each
 * vector attention_<isa>.cpp, whose flags make the compiler vectorise it (the kernel table's
 * `rows` entry), as gemm_rowvec.h is for the GEMM.
 *
 * Why a second forward: the block kernels keep the queries of a block along the SIMD lanes
 * (attention_kernels.h), so one query fills one lane of 8 (AVX2) or 16 (AVX-512) and
 * decoding computed 8-16x the scores it needed: one query over 290 keys x 12 heads took
 * 0.27 ms, NumPy's formula 0.06 ms. Here a query row goes alone, its work along d:
 *   s_j  = scale * (q . k_j)       four chains of 8 partial sums, combined in a fixed order
 *   per block of kAttnBlockK keys, the block kernels' online softmax:
 *     mx = max(m, max_j s_j) (NaN wins),  ms = mx == -inf ? 0 : mx,  alpha = exp(m - ms),
 *     p_j = exp(s_j - ms),  l = l alpha + sum_j p_j,  acc = acc alpha + sum_j p_j v_j,  m = mx
 *   o = acc / l (0 when no key was seen),  lse = m + log l (-inf when none).
 * exp is std::exp: exp(-inf) = 0 and NaN stays NaN, as in the vector exp; a few thousand
 * calls per layer and token, next to the d-wide products. Every query row is one item with
 * its own sums, so how rows are split across threads changes no bit.
 *
 * Style 3 of docs/native-layout.md (plain loops per ISA) despite the reduction and the exp:
 * the partial sums are spelled out, so nothing needs reassociating, and libm's exp runs once
 * per score, d times less often than the products.
 * Internal linkage on purpose: each ISA's file compiles its own copy with its own flags.
 */
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu/attention_kernels.h"

namespace tt {
namespace {

/* A dot product in four chains of 8 partial sums (one chain waits on the FMA latency),
 * combined by a fixed tree: the same bits every time. */
inline float rows_dot(const float *a, const float *b, int64_t d) {
    float p0[8] = {}, p1[8] = {}, p2[8] = {}, p3[8] = {};
    int64_t c = 0;
    for (; c + 32 <= d; c += 32)
        for (int l = 0; l < 8; ++l) {
            p0[l] += a[c + l] * b[c + l];
            p1[l] += a[c + 8 + l] * b[c + 8 + l];
            p2[l] += a[c + 16 + l] * b[c + 16 + l];
            p3[l] += a[c + 24 + l] * b[c + 24 + l];
        }
    for (; c + 8 <= d; c += 8)
        for (int l = 0; l < 8; ++l) p0[l] += a[c + l] * b[c + l];
    float tail = 0.0f;
    for (; c < d; ++c) tail += a[c] * b[c];
    for (int l = 0; l < 8; ++l) p0[l] = (p0[l] + p1[l]) + (p2[l] + p3[l]);
    return (((p0[0] + p0[4]) + (p0[1] + p0[5])) + ((p0[2] + p0[6]) + (p0[3] + p0[7]))) + tail;
}

/* One query row q (d floats) over keys 0..keys-1 (rows of k and v, k_stride / v_stride
 * floats apart): o (d floats) and *lse (when lse is not NULL). ws: kAttnBlockK + d floats. */
void attention_rows_body(const float *q, const float *k, int64_t k_stride, const float *v,
                         int64_t v_stride, int64_t keys, int64_t d, float scale, float *o,
                         float *lse, float *ws) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    float *s = ws, *acc = ws + kAttnBlockK;
    for (int64_t c = 0; c < d; ++c) acc[c] = 0.0f;
    float m = kNegInf, l = 0.0f;
    for (int64_t j0 = 0; j0 < keys; j0 += kAttnBlockK) {
        const int64_t nc = std::min(kAttnBlockK, keys - j0);
        float mx = m;
        for (int64_t j = 0; j < nc; ++j) {
            s[j] = scale * rows_dot(q, k + (j0 + j) * k_stride, d);
            mx = (s[j] > mx || std::isnan(s[j])) ? s[j] : mx;
        }
        const float ms = mx == kNegInf ? 0.0f : mx;
        const float alpha = std::exp(m - ms);
        float sum = 0.0f;
        for (int64_t j = 0; j < nc; ++j) sum += (s[j] = std::exp(s[j] - ms));
        l = l * alpha + sum;
        m = mx;
        for (int64_t c = 0; c < d; ++c) acc[c] *= alpha;
        for (int64_t j = 0; j < nc; ++j) {
            const float p = s[j], *vj = v + (j0 + j) * v_stride;
            for (int64_t c = 0; c < d; ++c) acc[c] += p * vj[c];
        }
    }
    const float inv = l == 0.0f ? 0.0f : 1.0f / l; /* no key: O = 0; NaN stays NaN */
    for (int64_t c = 0; c < d; ++c) o[c] = acc[c] * inv;
    if (lse) *lse = l == 0.0f ? kNegInf : m + std::log(l);
}

}  // namespace
}  // namespace tt
