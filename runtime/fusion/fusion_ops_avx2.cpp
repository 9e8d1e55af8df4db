/*
 * fusion_ops_avx2.cpp -- the float32 fusion op table for AVX2 + FMA (TT_ISA_AVX2): the
 * vector template fusion_ops_vec.h over 8-lane ymm registers (compares give lane masks,
 * selects are blendv). Compiled with the AVX2 flags; called only on CPUs that have them.
 */
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/simd_exp.h"
#include "fusion/fusion_ops_vec.h"

namespace {

struct Avx2 {
    using R = __m256;
    using M = __m256;
    static constexpr int W = 8;
    static R load(const float *p) { return _mm256_loadu_ps(p); }
    static void store(float *p, R v) { _mm256_storeu_ps(p, v); }
    static R set1(float v) { return _mm256_set1_ps(v); }
    static R add(R a, R b) { return _mm256_add_ps(a, b); }
    static R sub(R a, R b) { return _mm256_sub_ps(a, b); }
    static R mul(R a, R b) { return _mm256_mul_ps(a, b); }
    static R div(R a, R b) { return _mm256_div_ps(a, b); }
    static R sqrt(R a) { return _mm256_sqrt_ps(a); }
    static R abs(R a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
    static R neg(R a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
    static R exp(R t) { return tt::exp_avx2(t); }
    static R max_raw(R a, R b) { return _mm256_max_ps(a, b); }
    static R min_raw(R a, R b) { return _mm256_min_ps(a, b); }
    static M lt(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
    static M le(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_LE_OQ); }
    static M gt(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
    static M ge(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_GE_OQ); }
    static M eq(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
    static M ne(R a, R b) { return _mm256_cmp_ps(a, b, _CMP_NEQ_UQ); }
    static M isnan(R a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
    static R select(M m, R t, R f) { return _mm256_blendv_ps(f, t, m); }
};

using Ops = tt::fusion::VecOps<Avx2>;

/* Non-temporal stores of whole aligned 32-byte chunks; the unaligned head and tail go
 * through memcpy. */
void stream_copy(void *dst, const void *src, int64_t bytes) {
    char *d = static_cast<char *>(dst);
    const char *s = static_cast<const char *>(src);
    const int64_t head = std::min<int64_t>(bytes, (int64_t)((32 - ((uintptr_t)d & 31)) & 31));
    std::memcpy(d, s, (size_t)head);
    int64_t k = head;
    for (; k + 32 <= bytes; k += 32)
        _mm256_stream_si256(reinterpret_cast<__m256i *>(d + k),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(s + k)));
    std::memcpy(d + k, s + k, (size_t)(bytes - k));
}
void fence() { _mm_sfence(); }

}  // namespace

namespace tt {
namespace fusion {
const F32Kernels kF32Avx2 = {"avx2", Ops::unary, Ops::binary, Ops::where, Ops::sum, Ops::max,
                             stream_copy, fence};
}  // namespace fusion
}  // namespace tt
