/*
 * half_f16c.cpp -- F16C conversion loops (8 values per instruction). Compiled
 * with -mf16c -mavx; called only after run-time detection (half.cpp).
 */
#include <immintrin.h>

#include "cpu/half_kernels.h"

namespace tt {

void convert_f16_to_f32_f16c(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void convert_f32_to_f16_f16c(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}

}  // namespace tt
