/*
 * fusion_ops_avx512.cpp -- the float32 fusion op table for AVX-512F (TT_ISA_AVX512): the
 * vector template fusion_ops_vec.h over 16-lane zmm registers with mask-register compares.
 * Compiled with the AVX-512 flags; called only when the CPU and OS support zmm state.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // inside GCC 12's own AVX-512 headers
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/simd_exp.h"
#include "fusion/fusion_ops_vec.h"

namespace {

struct Avx512 {
    using R = __m512;
    using M = __mmask16;
    static constexpr int W = 16;
    static R load(const float *p) { return _mm512_loadu_ps(p); }
    static void store(float *p, R v) { _mm512_storeu_ps(p, v); }
    static R set1(float v) { return _mm512_set1_ps(v); }
    static R add(R a, R b) { return _mm512_add_ps(a, b); }
    static R sub(R a, R b) { return _mm512_sub_ps(a, b); }
    static R mul(R a, R b) { return _mm512_mul_ps(a, b); }
    static R div(R a, R b) { return _mm512_div_ps(a, b); }
    static R sqrt(R a) { return _mm512_sqrt_ps(a); }
    static R abs(R a) {
        return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(0x7fffffff)));
    }
    static R neg(R a) {
        return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32((int)0x80000000u)));
    }
    static R exp(R t) { return tt::exp_avx512(t); }
    static R max_raw(R a, R b) { return _mm512_max_ps(a, b); }
    static R min_raw(R a, R b) { return _mm512_min_ps(a, b); }
    static M lt(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
    static M le(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ); }
    static M gt(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
    static M ge(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ); }
    static M eq(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
    static M ne(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_NEQ_UQ); }
    static M isnan(R a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
    static R select(M m, R t, R f) { return _mm512_mask_blend_ps(m, f, t); }
};

using Ops = tt::fusion::VecOps<Avx512>;

/* Non-temporal stores of whole aligned 64-byte lines; the unaligned head and tail go
 * through memcpy. */
void stream_copy(void *dst, const void *src, int64_t bytes) {
    char *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    const int64_t head = std::min<int64_t>(bytes, (int64_t)((64 - ((uintptr_t)d & 63)) & 63));
    std::memcpy(d, s, (size_t)head);
    int64_t k = head;
    for (; k + 64 <= bytes; k += 64)
        _mm512_stream_si512(reinterpret_cast<__m512i *>(d + k), _mm512_loadu_si512(s + k));
    std::memcpy(d + k, s + k, (size_t)(bytes - k));
}
void fence() { _mm_sfence(); }

}  // namespace

namespace tt {
namespace fusion {
const F32Kernels kF32Avx512 = {"avx512", Ops::unary, Ops::binary, Ops::where, Ops::sum, Ops::max,
                               stream_copy, fence};
}  // namespace fusion
}  // namespace tt
