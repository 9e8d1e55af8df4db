/*
 * attention_neon.cpp -- FlashAttention kernels for AArch64 NEON (TT_ISA_NEON).
 *
 * attention_avx512.cpp on 32 q registers of 4 floats (NEON is part of the AArch64
 * baseline: no extra flags). Contract and layout: attention_kernels.h.
 *
 * Block product: register tiles of R rows x NV vectors of 4 columns, R * NV <= 24
 * accumulators (6 x 4 or 12 x 2, 12 x 1), NV q registers for the row of B and one
 * broadcast. NEON has no masked loads, so the columns past the last multiple of 4 go
 * through the portable product (attention_product_scalar); query blocks are padded to a
 * multiple of 4 by the driver, so only head dimensions d % 4 != 0 take that path.
 *
 * exp: bias_gelu_neon.cpp's evaluation (range reduction, Estrin polynomial, split 2^n
 * scaling; constants in bias_gelu_kernels.h) with the attention clamp [kAttnExpLo,
 * kAttnExpHi]: n stays in [-159, 128], results below the float range are 0, and
 * FMAX/FMIN keep NaN.
 */
#if defined(__aarch64__) || defined(_M_ARM64)
#include <arm_neon.h>

#include <algorithm>
#include <utility>

#include "cpu/attention_kernels.h"
#include "cpu/attention_rows.h"
#include "cpu/bias_gelu_kernels.h"
#include "cpu/simd_exp.h"

namespace {

constexpr int kLanes = 4;

inline float32x4_t exp_ps(float32x4_t t) {
    t = vmaxq_f32(t, vdupq_n_f32(tt::kAttnExpLo)); /* FMAX/FMIN return NaN if either is */
    t = vminq_f32(t, vdupq_n_f32(tt::kAttnExpHi));
    return tt::exp_neon(t);  /* the runtime's one vector exp (simd_exp.h) */
}

inline void store_vec(float *c, float32x4_t x, int mode, const float *cs) {
    if (mode == tt::kProductAccumulate)
        x = vaddq_f32(vld1q_f32(c), x);
    else if (mode == tt::kProductScaleColumns)
        x = vfmaq_f32(x, vld1q_f32(c), vld1q_f32(cs));
    vst1q_f32(c, x);
}

/* Named accumulators (an array may live in memory, see attention_avx512.cpp). */
#define TT_ATTN_ACC(r) \
    [[maybe_unused]] float32x4_t c##r##_0 = z, c##r##_1 = z, c##r##_2 = z, c##r##_3 = z;
#define TT_ATTN_ROW(r)                                                                      \
    if constexpr (R > r) {                                                                  \
        const float32x4_t ar = vld1q_dup_f32(kTransA ? a + r : a + r * lda);                \
        c##r##_0 = vfmaq_f32(c##r##_0, ar, b0);                                             \
        if constexpr (NV > 1) c##r##_1 = vfmaq_f32(c##r##_1, ar, b1);                       \
        if constexpr (NV > 2) c##r##_2 = vfmaq_f32(c##r##_2, ar, b2);                       \
        if constexpr (NV > 3) c##r##_3 = vfmaq_f32(c##r##_3, ar, b3);                       \
    }
#define TT_ATTN_CS(off) (colscale ? colscale + (off) : nullptr)
#define TT_ATTN_STORE(r)                                                                    \
    if constexpr (R > r) {                                                                  \
        float *c = C + r * ldc;                                                             \
        store_vec(c, c##r##_0, mode, colscale);                                             \
        if constexpr (NV > 1) store_vec(c + 4, c##r##_1, mode, TT_ATTN_CS(4));              \
        if constexpr (NV > 2) store_vec(c + 8, c##r##_2, mode, TT_ATTN_CS(8));              \
        if constexpr (NV > 3) store_vec(c + 12, c##r##_3, mode, TT_ATTN_CS(12));            \
    }

/* One R x (NV * 4) tile of full vectors (R <= 12, NV <= 4, R * NV <= 24).
 * a(r, k) = A[k * lda + r] (kTransA) or A[r * lda + k]. */
template <int R, int NV, bool kTransA>
void tile(int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
          int64_t ldc, int mode, const float *colscale) {
    static_assert(R >= 1 && R <= 12 && NV >= 1 && NV <= 4 && R * NV <= 24, "tile shape");
    const float32x4_t z = vdupq_n_f32(0.0f);
    TT_ATTN_ACC(0) TT_ATTN_ACC(1) TT_ATTN_ACC(2) TT_ATTN_ACC(3) TT_ATTN_ACC(4) TT_ATTN_ACC(5)
    TT_ATTN_ACC(6) TT_ATTN_ACC(7) TT_ATTN_ACC(8) TT_ATTN_ACC(9) TT_ATTN_ACC(10) TT_ATTN_ACC(11)
    const float *a = A;
    for (int64_t k = 0; k < kc; ++k) {
        const float32x4_t b0 = vld1q_f32(B);
        const float32x4_t b1 = NV > 1 ? vld1q_f32(B + 4) : z;
        const float32x4_t b2 = NV > 2 ? vld1q_f32(B + 8) : z;
        const float32x4_t b3 = NV > 3 ? vld1q_f32(B + 12) : z;
        TT_ATTN_ROW(0) TT_ATTN_ROW(1) TT_ATTN_ROW(2) TT_ATTN_ROW(3) TT_ATTN_ROW(4)
        TT_ATTN_ROW(5) TT_ATTN_ROW(6) TT_ATTN_ROW(7) TT_ATTN_ROW(8) TT_ATTN_ROW(9)
        TT_ATTN_ROW(10) TT_ATTN_ROW(11)
        a += kTransA ? lda : 1;
        B += ldb;
    }
    TT_ATTN_STORE(0) TT_ATTN_STORE(1) TT_ATTN_STORE(2) TT_ATTN_STORE(3) TT_ATTN_STORE(4)
    TT_ATTN_STORE(5) TT_ATTN_STORE(6) TT_ATTN_STORE(7) TT_ATTN_STORE(8) TT_ATTN_STORE(9)
    TT_ATTN_STORE(10) TT_ATTN_STORE(11)
}

#undef TT_ATTN_ACC
#undef TT_ATTN_ROW
#undef TT_ATTN_STORE
#undef TT_ATTN_CS

using TileFn = void (*)(int64_t, const float *, int64_t, const float *, int64_t, float *,
                        int64_t, int, const float *);

constexpr int mr_for(int nv) { return nv >= 3 ? 6 : 12; }

template <int NV, bool kTransA, int... Rs>
TileFn pick(int rows, std::integer_sequence<int, Rs...>) {
    static constexpr TileFn table[] = {tile<Rs + 1, NV, kTransA>...};
    return table[rows - 1];
}

template <int NV, bool kTransA>
TileFn pick_rows(int rows) {
    return pick<NV, kTransA>(rows, std::make_integer_sequence<int, mr_for(NV)>{});
}

template <bool kTransA>
TileFn pick_tile(int nv, int rows) {
    switch (nv) {
        case 1: return pick_rows<1, kTransA>(rows);
        case 2: return pick_rows<2, kTransA>(rows);
        case 3: return pick_rows<3, kTransA>(rows);
        default: return pick_rows<4, kTransA>(rows);
    }
}

void product_neon(int64_t rows, int64_t cols, int64_t kc, const float *A, int64_t lda,
                  bool trans_a, const float *B, int64_t ldb, float *C, int64_t ldc, int mode,
                  const float *colscale) {
    constexpr int64_t kMaxCols = 4 * kLanes;
    const int64_t full = cols / kLanes * kLanes;
    for (int64_t c0 = 0; c0 < full; c0 += kMaxCols) {
        const int64_t nc = std::min(kMaxCols, full - c0);
        const int nv = (int)(nc / kLanes);
        const int mr = mr_for(nv);
        const float *cs = colscale ? colscale + c0 : nullptr;
        for (int64_t r0 = 0; r0 < rows; r0 += mr) {
            const int nr = (int)std::min<int64_t>(mr, rows - r0);
            const float *a = trans_a ? A + r0 : A + r0 * lda;
            const TileFn fn = trans_a ? pick_tile<true>(nv, nr) : pick_tile<false>(nv, nr);
            fn(kc, a, lda, B + c0, ldb, C + r0 * ldc + c0, ldc, mode, cs);
        }
    }
    if (full < cols)
        tt::attention_product_scalar(rows, cols - full, kc, A, lda, trans_a, B + full, ldb,
                                     C + full, ldc, mode, colscale ? colscale + full : nullptr);
}

void softmax_neon(float *S, int64_t rows, int64_t n, int64_t ld, float *m, float *l,
                  float *alpha) {
    const float32x4_t neg_inf = vdupq_n_f32(-__builtin_inff());
    for (int64_t c = 0; c < n; c += kLanes) {
        const float32x4_t m_old = vld1q_f32(m + c);
        float32x4_t mx0 = m_old, mx1 = neg_inf;
        int64_t r = 0;
        for (; r + 2 <= rows; r += 2) {
            mx0 = vmaxq_f32(mx0, vld1q_f32(S + r * ld + c));
            mx1 = vmaxq_f32(mx1, vld1q_f32(S + (r + 1) * ld + c));
        }
        if (r < rows) mx0 = vmaxq_f32(mx0, vld1q_f32(S + r * ld + c));
        const float32x4_t mx = vmaxq_f32(mx0, mx1);
        const float32x4_t ms = vbslq_f32(vceqq_f32(mx, neg_inf), vdupq_n_f32(0.0f), mx);
        const float32x4_t a = exp_ps(vsubq_f32(m_old, ms));
        float32x4_t s0 = vdupq_n_f32(0.0f), s1 = vdupq_n_f32(0.0f);
        r = 0;
        for (; r + 2 <= rows; r += 2) {
            float *p0 = S + r * ld + c, *p1 = p0 + ld;
            const float32x4_t e0 = exp_ps(vsubq_f32(vld1q_f32(p0), ms));
            const float32x4_t e1 = exp_ps(vsubq_f32(vld1q_f32(p1), ms));
            vst1q_f32(p0, e0);
            vst1q_f32(p1, e1);
            s0 = vaddq_f32(s0, e0);
            s1 = vaddq_f32(s1, e1);
        }
        if (r < rows) {
            float *p0 = S + r * ld + c;
            const float32x4_t e0 = exp_ps(vsubq_f32(vld1q_f32(p0), ms));
            vst1q_f32(p0, e0);
            s0 = vaddq_f32(s0, e0);
        }
        vst1q_f32(alpha + c, a);
        vst1q_f32(l + c, vfmaq_f32(vaddq_f32(s0, s1), vld1q_f32(l + c), a));
        vst1q_f32(m + c, mx);
    }
}

void exp_sub_neon(float *S, int64_t rows, int64_t n, int64_t ld, const float *sub) {
    for (int64_t r = 0; r < rows; ++r) {
        float *s = S + r * ld;
        for (int64_t c = 0; c < n; c += kLanes)
            vst1q_f32(s + c, exp_ps(vsubq_f32(vld1q_f32(s + c), vld1q_f32(sub + c))));
    }
}

void ds_neon(const float *P, float *dP, int64_t rows, int64_t n, int64_t ld, const float *D,
             float scale) {
    for (int64_t r = 0; r < rows; ++r) {
        const float *p = P + r * ld;
        float *dp = dP + r * ld;
        for (int64_t c = 0; c < n; c += kLanes) {
            const float32x4_t x = vsubq_f32(vld1q_f32(dp + c), vld1q_f32(D + c));
            vst1q_f32(dp + c, vmulq_n_f32(vmulq_f32(vld1q_f32(p + c), x), scale));
        }
    }
}

}  // namespace

namespace tt {
const AttentionKernels kAttentionNeon = {"attention_forward:neon", "attention_backward:neon",
                                         kLanes, product_neon, softmax_neon, exp_sub_neon,
                                         ds_neon,
                                         attention_rows_body<exp_sub_neon, kLanes>, "attention_forward:neon:rows"};
}  // namespace tt
#endif
