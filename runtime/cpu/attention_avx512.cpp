/*
 * attention_avx512.cpp -- FlashAttention kernels for x86-64 AVX-512F (TT_ISA_AVX512).
 *
 * Compiled with -mavx512f (+vl/bw/dq, fma) in runtime/cpu/sources.cmake; called only when
 * run-time detection reports AVX-512F with OS support for zmm state. Contract and layout:
 * attention_kernels.h.
 *
 * Block product: register tiles of R rows x NV vectors of 16 columns, R * NV <= 24
 * accumulators (6 x 4 when the block is 64 wide, 12 x 2 or 12 x 1 for narrow ones), plus
 * NV zmm for the current row of B and one broadcast of A: at most 29 of the 32 zmm. Per
 * k: NV loads + R broadcasts against R * NV FMAs. The last vector of a tile uses a lane
 * mask (loads and stores), so any number of columns is exact and nothing past the last
 * column is read. Tiles of fewer rows use the instantiation with that R.
 *
 * exp: the range reduction and minimax polynomial of bias_gelu_kernels.h (degree 5,
 * Estrin's scheme), with the 2^n scaling done by vscalefps, which also rounds results
 * below the float range to 0 (so exp(-inf) = exp(kAttnExpLo) = 0) and keeps NaN.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <utility>

#include "cpu/attention_kernels.h"
#include "cpu/attention_rows.h"
#include "cpu/bias_gelu_kernels.h"
#include "cpu/simd_exp.h"

namespace {

constexpr int kLanes = 16;

inline __m512 exp_ps(__m512 t) {
    /* max/min return their second operand when either is NaN: NaN passes through. */
    t = _mm512_max_ps(_mm512_set1_ps(tt::kAttnExpLo), t);
    t = _mm512_min_ps(_mm512_set1_ps(tt::kAttnExpHi), t);
    return tt::exp_avx512(t);  /* the runtime's one vector exp (simd_exp.h) */
}

inline __mmask16 lane_mask(int64_t n) { /* lanes [0, n), 1 <= n <= 16 */
    return (__mmask16)(n >= 16 ? 0xFFFFu : ((1u << n) - 1u));
}

inline void store_vec(float *c, __m512 x, __mmask16 m, int mode, const float *cs) {
    if (mode == tt::kProductAccumulate)
        x = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c), x);
    else if (mode == tt::kProductScaleColumns)
        x = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, c), _mm512_maskz_loadu_ps(m, cs), x);
    _mm512_mask_storeu_ps(c, m, x);
}

/* The accumulators are named variables, not an array: GCC keeps a 24-zmm array in memory
 * (it is too large for its scalar replacement) and the loop would then store all of it
 * every k. Unused rows and vectors are removed by `if constexpr`. */
#define TT_ATTN_ACC(r) \
    [[maybe_unused]] __m512 c##r##_0 = z, c##r##_1 = z, c##r##_2 = z, c##r##_3 = z;
#define TT_ATTN_ROW(r)                                                                      \
    if constexpr (R > r) {                                                                  \
        const __m512 ar = _mm512_set1_ps(kTransA ? a[r] : a[r * lda]);                      \
        c##r##_0 = _mm512_fmadd_ps(ar, b0, c##r##_0);                                       \
        if constexpr (NV > 1) c##r##_1 = _mm512_fmadd_ps(ar, b1, c##r##_1);                 \
        if constexpr (NV > 2) c##r##_2 = _mm512_fmadd_ps(ar, b2, c##r##_2);                 \
        if constexpr (NV > 3) c##r##_3 = _mm512_fmadd_ps(ar, b3, c##r##_3);                 \
    }
#define TT_ATTN_CS(off) (colscale ? colscale + (off) : nullptr)
#define TT_ATTN_STORE(r)                                                                    \
    if constexpr (R > r) {                                                                  \
        float *c = C + r * ldc;                                                             \
        store_vec(c, c##r##_0, NV == 1 ? last : full, mode, colscale);                      \
        if constexpr (NV > 1) store_vec(c + 16, c##r##_1, NV == 2 ? last : full, mode,      \
                                        TT_ATTN_CS(16));                                    \
        if constexpr (NV > 2) store_vec(c + 32, c##r##_2, NV == 3 ? last : full, mode,      \
                                        TT_ATTN_CS(32));                                    \
        if constexpr (NV > 3) store_vec(c + 48, c##r##_3, last, mode, TT_ATTN_CS(48));      \
    }

/* One R x (NV * 16) tile (R <= 12, NV <= 4, R * NV <= 24); the last vector's lanes are
 * `last`. a(r, k) = A[k * lda + r] (kTransA) or A[r * lda + k]. */
template <int R, int NV, bool kTransA>
void tile(int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
          int64_t ldc, int mode, const float *colscale, __mmask16 last) {
    static_assert(R >= 1 && R <= 12 && NV >= 1 && NV <= 4 && R * NV <= 24, "tile shape");
    const __m512 z = _mm512_setzero_ps();
    const __mmask16 full = 0xFFFF;
    TT_ATTN_ACC(0) TT_ATTN_ACC(1) TT_ATTN_ACC(2) TT_ATTN_ACC(3) TT_ATTN_ACC(4) TT_ATTN_ACC(5)
    TT_ATTN_ACC(6) TT_ATTN_ACC(7) TT_ATTN_ACC(8) TT_ATTN_ACC(9) TT_ATTN_ACC(10) TT_ATTN_ACC(11)
    const float *a = A;
    for (int64_t k = 0; k < kc; ++k) {
        const __m512 b0 = _mm512_maskz_loadu_ps(NV == 1 ? last : full, B);
        const __m512 b1 = NV > 1 ? _mm512_maskz_loadu_ps(NV == 2 ? last : full, B + 16) : z;
        const __m512 b2 = NV > 2 ? _mm512_maskz_loadu_ps(NV == 3 ? last : full, B + 32) : z;
        const __m512 b3 = NV > 3 ? _mm512_maskz_loadu_ps(last, B + 48) : z;
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
                        int64_t, int, const float *, __mmask16);

/* Rows per tile for NV vectors: 24 accumulators at most. */
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

void product_avx512(int64_t rows, int64_t cols, int64_t kc, const float *A, int64_t lda,
                    bool trans_a, const float *B, int64_t ldb, float *C, int64_t ldc, int mode,
                    const float *colscale) {
    constexpr int64_t kMaxCols = 4 * kLanes;
    for (int64_t c0 = 0; c0 < cols; c0 += kMaxCols) {
        const int64_t nc = std::min(kMaxCols, cols - c0);
        const int nv = (int)((nc + kLanes - 1) / kLanes);
        const __mmask16 last = lane_mask(nc - (int64_t)(nv - 1) * kLanes);
        const int mr = nv >= 3 ? 6 : 12;
        const float *cs = colscale ? colscale + c0 : nullptr;
        for (int64_t r0 = 0; r0 < rows; r0 += mr) {
            const int nr = (int)std::min<int64_t>(mr, rows - r0);
            const float *a = trans_a ? A + r0 : A + r0 * lda;
            const TileFn fn = trans_a ? pick_tile<true>(nv, nr) : pick_tile<false>(nv, nr);
            fn(kc, a, lda, B + c0, ldb, C + r0 * ldc + c0, ldc, mode, cs, last);
        }
    }
}

void softmax_avx512(float *S, int64_t rows, int64_t n, int64_t ld, float *m, float *l,
                    float *alpha) {
    const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
    for (int64_t c = 0; c < n; c += kLanes) {
        const __m512 m_old = _mm512_loadu_ps(m + c);
        /* Four partial maxima per column vector: independent chains. */
        __m512 mx0 = m_old, mx1 = neg_inf, mx2 = neg_inf, mx3 = neg_inf;
        int64_t r = 0;
        for (; r + 4 <= rows; r += 4) {
            mx0 = _mm512_max_ps(mx0, _mm512_loadu_ps(S + (r + 0) * ld + c));
            mx1 = _mm512_max_ps(mx1, _mm512_loadu_ps(S + (r + 1) * ld + c));
            mx2 = _mm512_max_ps(mx2, _mm512_loadu_ps(S + (r + 2) * ld + c));
            mx3 = _mm512_max_ps(mx3, _mm512_loadu_ps(S + (r + 3) * ld + c));
        }
        for (; r < rows; ++r) mx0 = _mm512_max_ps(mx0, _mm512_loadu_ps(S + r * ld + c));
        const __m512 mx = _mm512_max_ps(_mm512_max_ps(mx0, mx1), _mm512_max_ps(mx2, mx3));
        /* no key seen yet (mx = -inf): subtract 0, so exp(-inf) = 0 rather than NaN */
        const __m512 ms = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mx, neg_inf, _CMP_EQ_OQ), mx,
                                               _mm512_setzero_ps());
        const __m512 a = exp_ps(_mm512_sub_ps(m_old, ms));
        __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
        r = 0;
        for (; r + 2 <= rows; r += 2) {
            float *p0 = S + r * ld + c, *p1 = p0 + ld;
            const __m512 e0 = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(p0), ms));
            const __m512 e1 = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(p1), ms));
            _mm512_storeu_ps(p0, e0);
            _mm512_storeu_ps(p1, e1);
            s0 = _mm512_add_ps(s0, e0);
            s1 = _mm512_add_ps(s1, e1);
        }
        if (r < rows) {
            float *p0 = S + r * ld + c;
            const __m512 e0 = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(p0), ms));
            _mm512_storeu_ps(p0, e0);
            s0 = _mm512_add_ps(s0, e0);
        }
        _mm512_storeu_ps(alpha + c, a);
        _mm512_storeu_ps(l + c, _mm512_fmadd_ps(_mm512_loadu_ps(l + c), a, _mm512_add_ps(s0, s1)));
        _mm512_storeu_ps(m + c, mx);
    }
}

void exp_sub_avx512(float *S, int64_t rows, int64_t n, int64_t ld, const float *sub) {
    for (int64_t r = 0; r < rows; ++r) {
        float *s = S + r * ld;
        for (int64_t c = 0; c < n; c += kLanes)
            _mm512_storeu_ps(s + c, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(s + c),
                                                         _mm512_loadu_ps(sub + c))));
    }
}

void ds_avx512(const float *P, float *dP, int64_t rows, int64_t n, int64_t ld, const float *D,
               float scale) {
    const __m512 vs = _mm512_set1_ps(scale);
    for (int64_t r = 0; r < rows; ++r) {
        const float *p = P + r * ld;
        float *dp = dP + r * ld;
        for (int64_t c = 0; c < n; c += kLanes) {
            const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(dp + c), _mm512_loadu_ps(D + c));
            _mm512_storeu_ps(dp + c, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(p + c), x), vs));
        }
    }
}

}  // namespace

namespace tt {
const AttentionKernels kAttentionAvx512 = {"attention_forward:avx512", "attention_backward:avx512",
                                           kLanes, product_avx512, softmax_avx512,
                                           exp_sub_avx512, ds_avx512,
                                         attention_rows_body<exp_sub_avx512, kLanes>, "attention_forward:avx512:rows"};
}  // namespace tt
