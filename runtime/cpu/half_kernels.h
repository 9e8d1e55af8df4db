/*
 * half_kernels.h -- private: IEEE 754 binary16 <-> binary32 conversion.
 *
 * The scalar functions are the reference (round to nearest even, NaN kept quiet,
 * overflow to infinity, subnormals exact); convert_f16_to_f32 / convert_f32_to_f16
 * pick the F16C instructions when the CPU has them and the active ISA is not
 * forced to scalar, else loop over the scalar ones.
 */
#pragma once
#include <cstdint>
#include <cstring>

namespace tt {

inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0) {
        if (m == 0) {
            x = sign;
        } else {  // subnormal: m * 2^-24; normalise the mantissa
            uint32_t shift = 0;
            while (!(m & 0x400u)) {
                m <<= 1;
                ++shift;
            }
            x = sign | ((113u - shift) << 23) | ((m & 0x3ffu) << 13);
        }
    } else if (e == 31) {
        x = sign | 0x7f800000u | (m << 13);  // inf, or NaN with its payload
    } else {
        x = sign | ((e + 112u) << 23) | (m << 13);
    }
    float f;
    std::memcpy(&f, &x, sizeof f);
    return f;
}

inline uint16_t float_to_half(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    uint32_t sign = (x >> 16) & 0x8000u, absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u)  // inf stays inf; NaN stays a (quiet) NaN
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // >= 65520 rounds to inf
    if (absx < 0x38800000u) {                                     // below 2^-14: subnormal or 0
        if (absx < 0x33000000u) return (uint16_t)sign;            // below 2^-25: rounds to 0
        uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;  // 14..24
        uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (absx - 0x38000000u) >> 13, rem = absx & 0x1fffu;  // rebias 127 -> 15
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
    return (uint16_t)(sign | r);
}

/* n values; src and dst must not overlap. */
void convert_f16_to_f32(const uint16_t *src, float *dst, int64_t n);
void convert_f32_to_f16(const float *src, uint16_t *dst, int64_t n);

}  // namespace tt
