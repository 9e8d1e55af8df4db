/*
 * attention_avx2.cpp -- FlashAttention kernels for x86-64 AVX2 + FMA (TT_ISA_AVX2).
 *
 * Compiled with -mavx2 -mfma; called only when the CPU has both. Contract and layout:
 * attention_kernels.h. attention_avx512.cpp on 16 ymm registers of 8 floats:
 *
 * Block product: register tiles of R rows x NV vectors of 8 columns with 12 accumulators
 * (6 x 2 or 12 x 1), NV ymm for the row of B and one broadcast: at most 15 of the 16 ymm.
 * A tile whose last vector is partial is a separate instantiation that loads and stores
 * that vector through vmaskmov (lanes past the last column are neither read nor written);
 * full tiles never pay for the mask.
 *
 * exp: the range reduction, polynomial and split 2^n scaling of bias_gelu_avx2.cpp
 * (constants in bias_gelu_kernels.h). With t clamped to [kAttnExpLo, kAttnExpHi], n is in
 * [-159, 128], so both halves of 2^n are normal floats and results below the float range
 * round to 0 (exp(-inf) = 0). The clamps keep NaN.
 */
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "cpu/attention_kernels.h"
#include "cpu/attention_rows.h"
#include "cpu/bias_gelu_kernels.h"
#include "cpu/simd_exp.h"

namespace {

constexpr int kLanes = 8;

inline __m256 exp_ps(__m256 t) {
    t = _mm256_max_ps(_mm256_set1_ps(tt::kAttnExpLo), t); /* second operand kept: NaN stays */
    t = _mm256_min_ps(_mm256_set1_ps(tt::kAttnExpHi), t);
    return tt::exp_avx2(t);  /* the runtime's one vector exp (simd_exp.h) */
}

inline __m256i lane_mask(int64_t n) { /* lanes [0, n), 1 <= n <= 8 */
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

template <bool kMask>
inline __m256 load_last(const float *p, __m256i m) {
    return kMask ? _mm256_maskload_ps(p, m) : _mm256_loadu_ps(p);
}

template <bool kMasked>
inline void store_vec(float *c, __m256 x, __m256i m, int mode, const float *cs) {
    if (mode == tt::kProductAccumulate)
        x = _mm256_add_ps(kMasked ? _mm256_maskload_ps(c, m) : _mm256_loadu_ps(c), x);
    else if (mode == tt::kProductScaleColumns)
        x = _mm256_fmadd_ps(kMasked ? _mm256_maskload_ps(c, m) : _mm256_loadu_ps(c),
                            kMasked ? _mm256_maskload_ps(cs, m) : _mm256_loadu_ps(cs), x);
    if (kMasked)
        _mm256_maskstore_ps(c, m, x);
    else
        _mm256_storeu_ps(c, x);
}

/* Named accumulators (an array would live in memory, see attention_avx512.cpp). */
#define TT_ATTN_ACC(r) [[maybe_unused]] __m256 c##r##_0 = z, c##r##_1 = z;
#define TT_ATTN_ROW(r)                                                                      \
    if constexpr (R > r) {                                                                  \
        const __m256 ar = _mm256_broadcast_ss(kTransA ? a + r : a + r * lda);               \
        c##r##_0 = _mm256_fmadd_ps(ar, b0, c##r##_0);                                       \
        if constexpr (NV > 1) c##r##_1 = _mm256_fmadd_ps(ar, b1, c##r##_1);                 \
    }
#define TT_ATTN_CS(off) (colscale ? colscale + (off) : nullptr)
#define TT_ATTN_STORE(r)                                                                    \
    if constexpr (R > r) {                                                                  \
        float *c = C + r * ldc;                                                             \
        if constexpr (NV == 1) {                                                            \
            store_vec<kMask>(c, c##r##_0, last, mode, colscale);                            \
        } else {                                                                            \
            store_vec<false>(c, c##r##_0, last, mode, colscale);                            \
            store_vec<kMask>(c + 8, c##r##_1, last, mode, TT_ATTN_CS(8));                   \
        }                                                                                   \
    }

/* One R x (NV * 8) tile (R <= 12, NV <= 2, R * NV <= 12); with kMask the last vector's
 * lanes are `last`. a(r, k) = A[k * lda + r] (kTransA) or A[r * lda + k]. */
template <int R, int NV, bool kTransA, bool kMask>
void tile(int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
          int64_t ldc, int mode, const float *colscale, __m256i last) {
    static_assert(R >= 1 && R <= 12 && NV >= 1 && NV <= 2 && R * NV <= 12, "tile shape");
    const __m256 z = _mm256_setzero_ps();
    TT_ATTN_ACC(0) TT_ATTN_ACC(1) TT_ATTN_ACC(2) TT_ATTN_ACC(3) TT_ATTN_ACC(4) TT_ATTN_ACC(5)
    TT_ATTN_ACC(6) TT_ATTN_ACC(7) TT_ATTN_ACC(8) TT_ATTN_ACC(9) TT_ATTN_ACC(10) TT_ATTN_ACC(11)
    const float *a = A;
    for (int64_t k = 0; k < kc; ++k) {
        const __m256 b0 = NV == 1 ? load_last<kMask>(B, last) : _mm256_loadu_ps(B);
        const __m256 b1 = NV == 2 ? load_last<kMask>(B + 8, last) : z;
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
                        int64_t, int, const float *, __m256i);

constexpr int mr_for(int nv) { return nv == 2 ? 6 : 12; }

template <int NV, bool kTransA, bool kMask, int... Rs>
TileFn pick(int rows, std::integer_sequence<int, Rs...>) {
    static constexpr TileFn table[] = {tile<Rs + 1, NV, kTransA, kMask>...};
    return table[rows - 1];
}

template <int NV, bool kTransA>
TileFn pick_rows(int rows, bool masked) {
    return masked ? pick<NV, kTransA, true>(rows, std::make_integer_sequence<int, mr_for(NV)>{})
                  : pick<NV, kTransA, false>(rows, std::make_integer_sequence<int, mr_for(NV)>{});
}

void product_avx2(int64_t rows, int64_t cols, int64_t kc, const float *A, int64_t lda,
                  bool trans_a, const float *B, int64_t ldb, float *C, int64_t ldc, int mode,
                  const float *colscale) {
    constexpr int64_t kMaxCols = 2 * kLanes;
    for (int64_t c0 = 0; c0 < cols; c0 += kMaxCols) {
        const int64_t nc = std::min(kMaxCols, cols - c0);
        const int nv = (int)((nc + kLanes - 1) / kLanes);
        const int64_t in_last = nc - (int64_t)(nv - 1) * kLanes;
        const bool masked = in_last < kLanes;
        const __m256i last = lane_mask(in_last);
        const int mr = mr_for(nv);
        const float *cs = colscale ? colscale + c0 : nullptr;
        for (int64_t r0 = 0; r0 < rows; r0 += mr) {
            const int nr = (int)std::min<int64_t>(mr, rows - r0);
            const float *a = trans_a ? A + r0 : A + r0 * lda;
            TileFn fn;
            if (nv == 2)
                fn = trans_a ? pick_rows<2, true>(nr, masked) : pick_rows<2, false>(nr, masked);
            else
                fn = trans_a ? pick_rows<1, true>(nr, masked) : pick_rows<1, false>(nr, masked);
            fn(kc, a, lda, B + c0, ldb, C + r0 * ldc + c0, ldc, mode, cs, last);
        }
    }
}

void softmax_avx2(float *S, int64_t rows, int64_t n, int64_t ld, float *m, float *l,
                  float *alpha) {
    const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
    for (int64_t c = 0; c < n; c += kLanes) {
        const __m256 m_old = _mm256_loadu_ps(m + c);
        __m256 mx0 = m_old, mx1 = neg_inf;
        int64_t r = 0;
        for (; r + 2 <= rows; r += 2) {
            mx0 = _mm256_max_ps(mx0, _mm256_loadu_ps(S + r * ld + c));
            mx1 = _mm256_max_ps(mx1, _mm256_loadu_ps(S + (r + 1) * ld + c));
        }
        if (r < rows) mx0 = _mm256_max_ps(mx0, _mm256_loadu_ps(S + r * ld + c));
        const __m256 mx = _mm256_max_ps(mx0, mx1);
        const __m256 ms = _mm256_andnot_ps(_mm256_cmp_ps(mx, neg_inf, _CMP_EQ_OQ), mx);
        const __m256 a = exp_ps(_mm256_sub_ps(m_old, ms));
        __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
        r = 0;
        for (; r + 2 <= rows; r += 2) {
            float *p0 = S + r * ld + c, *p1 = p0 + ld;
            const __m256 e0 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p0), ms));
            const __m256 e1 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p1), ms));
            _mm256_storeu_ps(p0, e0);
            _mm256_storeu_ps(p1, e1);
            s0 = _mm256_add_ps(s0, e0);
            s1 = _mm256_add_ps(s1, e1);
        }
        if (r < rows) {
            float *p0 = S + r * ld + c;
            const __m256 e0 = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p0), ms));
            _mm256_storeu_ps(p0, e0);
            s0 = _mm256_add_ps(s0, e0);
        }
        _mm256_storeu_ps(alpha + c, a);
        _mm256_storeu_ps(l + c, _mm256_fmadd_ps(_mm256_loadu_ps(l + c), a, _mm256_add_ps(s0, s1)));
        _mm256_storeu_ps(m + c, mx);
    }
}

void exp_sub_avx2(float *S, int64_t rows, int64_t n, int64_t ld, const float *sub) {
    for (int64_t r = 0; r < rows; ++r) {
        float *s = S + r * ld;
        for (int64_t c = 0; c < n; c += kLanes)
            _mm256_storeu_ps(s + c, exp_ps(_mm256_sub_ps(_mm256_loadu_ps(s + c),
                                                         _mm256_loadu_ps(sub + c))));
    }
}

void ds_avx2(const float *P, float *dP, int64_t rows, int64_t n, int64_t ld, const float *D,
             float scale) {
    const __m256 vs = _mm256_set1_ps(scale);
    for (int64_t r = 0; r < rows; ++r) {
        const float *p = P + r * ld;
        float *dp = dP + r * ld;
        for (int64_t c = 0; c < n; c += kLanes) {
            const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(dp + c), _mm256_loadu_ps(D + c));
            _mm256_storeu_ps(dp + c, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + c), x), vs));
        }
    }
}

}  // namespace

namespace tt {
const AttentionKernels kAttentionAvx2 = {"attention_forward:avx2", "attention_backward:avx2",
                                         kLanes, product_avx2, softmax_avx2, exp_sub_avx2,
                                         ds_avx2,
                                         attention_rows_body<exp_sub_avx2, kLanes>, "attention_forward:avx2:rows"};
}  // namespace tt
