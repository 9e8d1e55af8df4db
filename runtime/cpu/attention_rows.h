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
 *   s_j  = scale * (q . k_j)       8 lane sums over d, one fixed tree; four keys at a time
 *                                  share each load of q (a key's bits do not depend on that)
 *   per block of kAttnBlockK keys, the block kernels' online softmax:
 *     mx = max(m, max_j s_j) (NaN wins),  ms = mx == -inf ? 0 : mx,  alpha = exp(m - ms),
 *     p_j = exp(s_j - ms),  l = l alpha + sum_j p_j,  acc = acc alpha + sum_j p_j v_j,  m = mx
 *   o = acc / l (0 when no key was seen),  lse = m + log l (-inf when none).
 * P V runs in column strips of 32 (then 8, then 1) whose sums stay in registers over the
 * block's keys. The scores' exp is the ISA's own vector exp (its table's exp_sub, the one the
 * block kernels use: exp(-inf) = 0, NaN stays NaN) over the block's scores padded to whole
 * vectors, not a libm call per score; the block's rescale alpha stays one std::exp. One query
 * over 150 keys x 12 heads x d 64 takes about 1.5x the time of reading K and V once from
 * cache. Every query row is one item with its own sums, so how rows are split across threads
 * changes no bit.
 *
 * Style 3 of docs/native-layout.md (plain loops per ISA) despite the reduction: the partial
 * sums are spelled out, so nothing needs reassociating; the exp is the one vector call.
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

/* The dot products q . k_j of a query with `n` (1 or 4) key rows `stride` floats apart: per
 * key 8 lane sums over d in steps of 8, then one fixed tree and the tail. A key's score has
 * the same bits whether it went in a group of four or alone; four keys at a time share each
 * load of q and keep four independent FMA chains in flight. */
template <int n>
inline void rows_dots(const float *q, const float *k, int64_t stride, int64_t d, float scale,
                      float *out) {
    float p[n][8] = {};
    int64_t c = 0;
    for (; c + 8 <= d; c += 8)
        for (int l = 0; l < 8; ++l) {
            const float x = q[c + l];
            for (int r = 0; r < n; ++r) p[r][l] += x * k[r * stride + c + l];
        }
    for (int r = 0; r < n; ++r) {
        float tail = 0.0f;
        for (int64_t t = c; t < d; ++t) tail += q[t] * k[r * stride + t];
        const float *a = p[r];
        out[r] = scale * ((((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))) + tail);
    }
}

/* acc[0..w) = acc * alpha + sum_j s[j] v_j (rows of v `v_stride` apart, j in order) for a
 * column strip of constant width W: the strip's sums stay in registers over the keys. */
template <int W>
inline void rows_pv_strip(float *acc, float alpha, const float *s, int64_t nc, const float *v,
                          int64_t v_stride) {
    float a[W];
    for (int l = 0; l < W; ++l) a[l] = acc[l] * alpha;
    for (int64_t j = 0; j < nc; ++j) {
        const float p = s[j], *vj = v + j * v_stride;
        for (int l = 0; l < W; ++l) a[l] += p * vj[l];
    }
    for (int l = 0; l < W; ++l) acc[l] = a[l];
}

/* One query row q (d floats) over keys 0..keys-1 (rows of k and v, k_stride / v_stride
 * floats apart): o (d floats) and *lse (when lse is not NULL). ws: kAttnRowsWorkspace(d)
 * floats. ExpSub is the ISA's exp_sub (s[c] = exp(s[c] - sub[c]), c < a multiple of `Lanes`). */
template <AttnExpSubFn ExpSub, int Lanes>
void attention_rows_body(const float *q, const float *k, int64_t k_stride, const float *v,
                         int64_t v_stride, int64_t keys, int64_t d, float scale, float *o,
                         float *lse, float *ws) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    float *s = ws, *sub = ws + kAttnBlockK, *acc = ws + 2 * kAttnBlockK;
    for (int64_t c = 0; c < d; ++c) acc[c] = 0.0f;
    float m = kNegInf, l = 0.0f;
    for (int64_t j0 = 0; j0 < keys; j0 += kAttnBlockK) {
        const int64_t nc = std::min(kAttnBlockK, keys - j0);
        const float *kb = k + j0 * k_stride;
        int64_t j = 0;
        for (; j + 4 <= nc; j += 4) rows_dots<4>(q, kb + j * k_stride, k_stride, d, scale, s + j);
        for (; j < nc; ++j) rows_dots<1>(q, kb + j * k_stride, k_stride, d, scale, s + j);
        float mx = m;
        for (j = 0; j < nc; ++j) mx = (s[j] > mx || std::isnan(s[j])) ? s[j] : mx;
        const float ms = mx == kNegInf ? 0.0f : mx;
        const float alpha = std::exp(m - ms);
        const int64_t padded = (nc + Lanes - 1) / Lanes * Lanes; /* <= kAttnBlockK */
        for (j = nc; j < padded; ++j) s[j] = ms;                 /* exp(0): read, never summed */
        for (j = 0; j < padded; ++j) sub[j] = ms;
        ExpSub(s, 1, padded, padded, sub);
        float sum = 0.0f;
        for (j = 0; j < nc; ++j) sum += s[j];
        l = l * alpha + sum;
        m = mx;
        const float *vb = v + j0 * v_stride;
        int64_t c = 0;
        for (; c + 32 <= d; c += 32) rows_pv_strip<32>(acc + c, alpha, s, nc, vb + c, v_stride);
        for (; c + 8 <= d; c += 8) rows_pv_strip<8>(acc + c, alpha, s, nc, vb + c, v_stride);
        for (; c < d; ++c) rows_pv_strip<1>(acc + c, alpha, s, nc, vb + c, v_stride);
    }
    const float inv = l == 0.0f ? 0.0f : 1.0f / l; /* no key: O = 0; NaN stays NaN */
    for (int64_t c = 0; c < d; ++c) o[c] = acc[c] * inv;
    if (lse) *lse = l == 0.0f ? kNegInf : m + std::log(l);
}

}  // namespace
}  // namespace tt
