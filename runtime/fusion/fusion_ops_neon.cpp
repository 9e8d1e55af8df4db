/*
 * fusion_ops_neon.cpp -- the float32 fusion op table for AArch64 Advanced SIMD
 * (TT_ISA_NEON): the vector template fusion_ops_vec.h over 4-lane q registers. NEON's
 * max/min return NaN when either lane is NaN, which every use in the template allows.
 */
#include <arm_neon.h>

#include "cpu/simd_exp.h"
#include "fusion/fusion_ops_vec.h"

namespace {

struct Neon {
    using R = float32x4_t;
    using M = uint32x4_t;
    static constexpr int W = 4;
    static R load(const float *p) { return vld1q_f32(p); }
    static void store(float *p, R v) { vst1q_f32(p, v); }
    static R set1(float v) { return vdupq_n_f32(v); }
    static R add(R a, R b) { return vaddq_f32(a, b); }
    static R sub(R a, R b) { return vsubq_f32(a, b); }
    static R mul(R a, R b) { return vmulq_f32(a, b); }
    static R div(R a, R b) { return vdivq_f32(a, b); }
    static R sqrt(R a) { return vsqrtq_f32(a); }
    static R abs(R a) { return vabsq_f32(a); }
    static R neg(R a) { return vnegq_f32(a); }
    static R exp(R t) { return tt::exp_neon(t); }
    static R max_raw(R a, R b) { return vmaxq_f32(a, b); }
    static R min_raw(R a, R b) { return vminq_f32(a, b); }
    static M lt(R a, R b) { return vcltq_f32(a, b); }
    static M le(R a, R b) { return vcleq_f32(a, b); }
    static M gt(R a, R b) { return vcgtq_f32(a, b); }
    static M ge(R a, R b) { return vcgeq_f32(a, b); }
    static M eq(R a, R b) { return vceqq_f32(a, b); }
    static M ne(R a, R b) { return vmvnq_u32(vceqq_f32(a, b)); }
    static M isnan(R a) { return vmvnq_u32(vceqq_f32(a, a)); }
    static R select(M m, R t, R f) { return vbslq_f32(m, t, f); }
};

using Ops = tt::fusion::VecOps<Neon>;

}  // namespace

namespace tt {
namespace fusion {
const F32Kernels kF32Neon = {"neon", Ops::unary, Ops::binary, Ops::where, Ops::sum, Ops::max,
                             plain_copy, no_fence};
}  // namespace fusion
}  // namespace tt
