/*
 * fusion_ops_vec.h -- private: the float32 op loops of the fusion interpreter, written once
 * over a vector type V and instantiated by fusion_ops_avx2.cpp, fusion_ops_avx512.cpp and
 * fusion_ops_neon.cpp (each compiled with its ISA's flags). V supplies W lanes and
 *
 *   load store set1 add sub mul div sqrt abs neg exp (clamped argument, cpu/simd_exp.h)
 *   max_raw min_raw   the hardware max/min: x86 returns the second operand when either is
 *                     NaN, NEON returns NaN; every use below is written to be right for both
 *   lt le gt ge eq (ordered) ne (unordered) isnan -> mask M;  select(m, if_true, if_false)
 *
 * Each op is one inlined lambda mapped over the tile (two vectors per iteration, then one;
 * the last n % W elements go through a zero-padded stack vector, so every element of a
 * tile takes the same arithmetic and nothing is read or written past n).
 *
 * Formulas (float; exact rules in fusion_kernels.h):
 *   exp      exp(clamp(a, -104, 104)) (NaN passes; overflows to inf above 88.7)
 *   sigmoid  e = exp(-|a|): a >= 0 ? 1/(1+e) : e/(1+e)
 *   gelu     u / (1 + exp(-z)), z = u (A + B u^2), u = -inf raised to -FLT_MAX so that the
 *            result is -0 (the bias-GELU kernel's forward, cpu/bias_gelu_avx512.cpp)
 *   tanh     |a| < 0.625: a + a^3 P(a^2) (Cephes' tanhf minimax, no cancellation near 0);
 *            else sign(a) (1 - e)/(1 + e), e = exp(-2|a|)
 */
#pragma once
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/bias_gelu_kernels.h"
#include "fusion/fusion_kernels.h"
#include "fusion/fusion_scalar.h"

namespace tt {
namespace fusion {

template <class V>
struct VecOps {
    using R = typename V::R;
    static constexpr int W = V::W;

    template <class F> static inline void map1(const float *a, float *y, int64_t n, F f) {
        int64_t j = 0;
        for (; j + 2 * W <= n; j += 2 * W) {
            const R u0 = V::load(a + j), u1 = V::load(a + j + W);
            V::store(y + j, f(u0));
            V::store(y + j + W, f(u1));
        }
        for (; j + W <= n; j += W) V::store(y + j, f(V::load(a + j)));
        if (j < n) {
            alignas(64) float ta[W] = {}, ty[W];
            const size_t bytes = (size_t)(n - j) * sizeof(float);
            std::memcpy(ta, a + j, bytes);
            V::store(ty, f(V::load(ta)));
            std::memcpy(y + j, ty, bytes);
        }
    }

    template <class F> static inline void map2(const float *a, const float *b, float *y, int64_t n, F f) {
        int64_t j = 0;
        for (; j + 2 * W <= n; j += 2 * W) {
            const R a0 = V::load(a + j), a1 = V::load(a + j + W);
            const R b0 = V::load(b + j), b1 = V::load(b + j + W);
            V::store(y + j, f(a0, b0));
            V::store(y + j + W, f(a1, b1));
        }
        for (; j + W <= n; j += W) V::store(y + j, f(V::load(a + j), V::load(b + j)));
        if (j < n) {
            alignas(64) float ta[W] = {}, tb[W] = {}, ty[W];
            const size_t bytes = (size_t)(n - j) * sizeof(float);
            std::memcpy(ta, a + j, bytes);
            std::memcpy(tb, b + j, bytes);
            V::store(ty, f(V::load(ta), V::load(tb)));
            std::memcpy(y + j, ty, bytes);
        }
    }

    static inline R exp_clamped(R t) {
        return V::exp(V::min_raw(V::set1(kExpHi), V::max_raw(V::set1(kExpLo), t)));  // NaN kept
    }

    static inline R sigmoid(R a) {
        const R e = exp_clamped(V::neg(V::abs(a)));
        const R r = V::div(V::set1(1.0f), V::add(V::set1(1.0f), e));
        return V::select(V::ge(a, V::set1(0.0f)), r, V::mul(e, r));
    }

    static inline R gelu(R u) {
        u = V::max_raw(V::set1(-std::numeric_limits<float>::max()), u);  // NaN kept
        const R neg_z = V::mul(u, V::sub(V::set1(-kGeluA), V::mul(V::set1(kGeluB), V::mul(u, u))));
        return V::div(u, V::add(V::set1(1.0f), exp_clamped(neg_z)));
    }

    static inline R tanh(R a) {
        const R ax = V::abs(a);
        const R z = V::mul(a, a);
        R p = V::set1(-5.70498872745e-3f);
        p = V::add(V::mul(p, z), V::set1(2.06390887954e-2f));
        p = V::add(V::mul(p, z), V::set1(-5.37397155531e-2f));
        p = V::add(V::mul(p, z), V::set1(1.33314422036e-1f));
        p = V::add(V::mul(p, z), V::set1(-3.33332819422e-1f));
        const R small = V::add(V::mul(V::mul(p, z), a), a);
        const R e = exp_clamped(V::mul(V::set1(-2.0f), ax));
        const R mag = V::div(V::sub(V::set1(1.0f), e), V::add(V::set1(1.0f), e));
        const R big = V::select(V::lt(a, V::set1(0.0f)), V::neg(mag), mag);
        return V::select(V::lt(ax, V::set1(0.625f)), small, big);
    }

    static void unary(int op, const float *a, float *y, int64_t n, double imm) {
        const R zero = V::set1(0.0f), one = V::set1(1.0f);
        switch (op) {
            case OP_NEG: return map1(a, y, n, [](R u) { return V::neg(u); });
            case OP_ABS: return map1(a, y, n, [](R u) { return V::abs(u); });
            case OP_EXP: return map1(a, y, n, [](R u) { return exp_clamped(u); });
            case OP_SQRT: return map1(a, y, n, [](R u) { return V::sqrt(u); });
            case OP_RSQRT: return map1(a, y, n, [one](R u) { return V::div(one, V::sqrt(u)); });
            case OP_TANH: return map1(a, y, n, [](R u) { return tanh(u); });
            case OP_SIGMOID: return map1(a, y, n, [](R u) { return sigmoid(u); });
            case OP_RELU: return map1(a, y, n, [zero](R u) { return V::max_raw(zero, u); });
            case OP_GELU: return map1(a, y, n, [](R u) { return gelu(u); });
            case OP_RECIP: return map1(a, y, n, [one](R u) { return V::div(one, u); });
            case OP_POWI:
                if (imm == 2.0) return map1(a, y, n, [](R u) { return V::mul(u, u); });
                return unary_loop(op, a, y, n, imm);
            case OP_CAST: if (y != a) std::memmove(y, a, (size_t)n * sizeof(float)); return;
            default: return unary_loop(op, a, y, n, imm);  // log, erf: the C library per element
        }
    }

    static void binary(int op, const float *a, const float *b, float *y, int64_t n) {
        const R zero = V::set1(0.0f), one = V::set1(1.0f);
        switch (op) {
            case OP_ADD: return map2(a, b, y, n, [](R u, R v) { return V::add(u, v); });
            case OP_SUB: return map2(a, b, y, n, [](R u, R v) { return V::sub(u, v); });
            case OP_MUL: return map2(a, b, y, n, [](R u, R v) { return V::mul(u, v); });
            case OP_DIV: return map2(a, b, y, n, [](R u, R v) { return V::div(u, v); });
            case OP_MAX:
                return map2(a, b, y, n, [](R u, R v) { return V::select(V::isnan(u), u, V::max_raw(u, v)); });
            case OP_MIN:
                return map2(a, b, y, n, [](R u, R v) { return V::select(V::isnan(u), u, V::min_raw(u, v)); });
            case OP_LT: return map2(a, b, y, n, [=](R u, R v) { return V::select(V::lt(u, v), one, zero); });
            case OP_LE: return map2(a, b, y, n, [=](R u, R v) { return V::select(V::le(u, v), one, zero); });
            case OP_GT: return map2(a, b, y, n, [=](R u, R v) { return V::select(V::gt(u, v), one, zero); });
            case OP_GE: return map2(a, b, y, n, [=](R u, R v) { return V::select(V::ge(u, v), one, zero); });
            case OP_EQ: return map2(a, b, y, n, [=](R u, R v) { return V::select(V::eq(u, v), one, zero); });
            case OP_NE: return map2(a, b, y, n, [=](R u, R v) { return V::select(V::ne(u, v), one, zero); });
            default: return binary_loop(op, a, b, y, n);  // pow: the C library per element
        }
    }

    static void where(const float *cond, const float *b, const float *c, float *y, int64_t n) {
        const R zero = V::set1(0.0f);
        int64_t j = 0;
        for (; j + W <= n; j += W)
            V::store(y + j, V::select(V::ne(V::load(cond + j), zero), V::load(b + j), V::load(c + j)));
        for (; j < n; ++j) y[j] = cond[j] != 0.0f ? b[j] : c[j];
    }

    static double sum(const float *a, int64_t n) {
        R s0 = V::set1(0.0f), s1 = V::set1(0.0f);
        int64_t j = 0;
        for (; j + 2 * W <= n; j += 2 * W) {
            s0 = V::add(s0, V::load(a + j));
            s1 = V::add(s1, V::load(a + j + W));
        }
        for (; j + W <= n; j += W) s0 = V::add(s0, V::load(a + j));
        alignas(64) float lanes[W];
        V::store(lanes, V::add(s0, s1));
        double total = 0.0;
        for (int k = 0; k < W; ++k) total += lanes[k];
        for (; j < n; ++j) total += a[j];
        return total;
    }

    static float max(const float *a, int64_t n) {
        const R one = V::set1(1.0f);
        R m = V::set1(-std::numeric_limits<float>::infinity()), nan_seen = V::set1(0.0f);
        int64_t j = 0;
        for (; j + W <= n; j += W) {
            const R x = V::load(a + j);
            m = V::max_raw(m, x);
            nan_seen = V::select(V::isnan(x), one, nan_seen);
        }
        alignas(64) float lanes[W], flags[W];
        V::store(lanes, m);
        V::store(flags, nan_seen);
        float best = -std::numeric_limits<float>::infinity();
        for (int k = 0; k < W; ++k) {
            if (flags[k] != 0.0f) return std::numeric_limits<float>::quiet_NaN();
            best = max_of(best, lanes[k]);
        }
        for (; j < n; ++j) best = max_of(best, a[j]);
        return best;
    }
};

}  // namespace fusion
}  // namespace tt
