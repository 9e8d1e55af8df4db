/*
 * fusion_scalar.h -- private: the element formulas of every fusion op, as one template on
 * the element type (float or double). They are the scalar reference table
 * (fusion_ops_scalar.cpp), the float64 path on every ISA, the evaluation of row values
 * (one element at a time), and the per-element fallback of the vector tables for log,
 * erf and pow. The generated C (codegen.cpp) spells out the same formulas.
 *
 * GELU is the fused CPU kernel's tanh form in its stable sigmoid spelling
 * (cpu/bias_gelu_kernels.h): y = u * sigmoid(z), z = u (A + B u^2), with A = 2 sqrt(2/pi)
 * and B = A * 0.044715; u = -inf gives -0 (the limit). SIGMOID uses e = exp(-|a|) so that
 * neither sign overflows.
 */
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu/bias_gelu_kernels.h"
#include "fusion/fusion_ir.h"

namespace tt {
namespace fusion {

template <class T> struct GeluConsts;
template <> struct GeluConsts<float> {
    static constexpr float A = kGeluA, B = kGeluB;
};
template <> struct GeluConsts<double> {
    static constexpr double A = 2.0 * 0.79788456080286535588;
    static constexpr double B = 2.0 * 0.79788456080286535588 * 0.044715;
};

template <class T> inline T sigmoid_of(T a) {
    const T e = std::exp(-std::fabs(a));
    const T r = T(1) / (T(1) + e);
    return a >= T(0) ? r : e * r;
}

template <class T> inline T gelu_of(T u) {
    if (u == -std::numeric_limits<T>::infinity()) return T(-0.0);
    const T z = u * (GeluConsts<T>::A + GeluConsts<T>::B * u * u);
    return u * sigmoid_of(z);
}

/* NumPy maximum / minimum: NaN if either is NaN. */
template <class T> inline T max_of(T a, T b) { return (a != a || a > b) ? a : b; }
template <class T> inline T min_of(T a, T b) { return (a != a || a < b) ? a : b; }

template <class T> inline T powi_of(T a, double imm) {
    return imm == 2.0 ? a * a : (T)std::pow(a, (T)imm);
}

template <class T> inline T unary_of(int op, T a, double imm) {
    switch (op) {
        case OP_NEG: return -a;
        case OP_ABS: return std::fabs(a);
        case OP_EXP: return std::exp(a);
        case OP_LOG: return std::log(a);
        case OP_SQRT: return std::sqrt(a);
        case OP_RSQRT: return T(1) / std::sqrt(a);
        case OP_TANH: return std::tanh(a);
        case OP_SIGMOID: return sigmoid_of(a);
        case OP_RELU: return a < T(0) ? T(0) : a;  // NaN < 0 is false: NaN stays
        case OP_GELU: return gelu_of(a);
        case OP_ERF: return std::erf(a);
        case OP_POWI: return powi_of(a, imm);
        case OP_RECIP: return T(1) / a;
        default: return a;  // CAST within one dtype
    }
}

template <class T> inline T binary_of(int op, T a, T b) {
    switch (op) {
        case OP_ADD: return a + b;
        case OP_SUB: return a - b;
        case OP_MUL: return a * b;
        case OP_DIV: return a / b;
        case OP_MAX: return max_of(a, b);
        case OP_MIN: return min_of(a, b);
        case OP_POW: return std::pow(a, b);
        case OP_LT: return a < b ? T(1) : T(0);
        case OP_LE: return a <= b ? T(1) : T(0);
        case OP_GT: return a > b ? T(1) : T(0);
        case OP_GE: return a >= b ? T(1) : T(0);
        case OP_EQ: return a == b ? T(1) : T(0);
        case OP_NE: return a != b ? T(1) : T(0);
        default: return a;
    }
}

template <class T> void unary_loop(int op, const T *a, T *y, int64_t n, double imm) {
    switch (op) {  // the hot cases get their own loop so the compiler can vectorise them
        case OP_NEG: for (int64_t j = 0; j < n; ++j) y[j] = -a[j]; return;
        case OP_ABS: for (int64_t j = 0; j < n; ++j) y[j] = std::fabs(a[j]); return;
        case OP_SQRT: for (int64_t j = 0; j < n; ++j) y[j] = std::sqrt(a[j]); return;
        case OP_RELU: for (int64_t j = 0; j < n; ++j) y[j] = a[j] < T(0) ? T(0) : a[j]; return;
        default: for (int64_t j = 0; j < n; ++j) y[j] = unary_of(op, a[j], imm); return;
    }
}

template <class T> void binary_loop(int op, const T *a, const T *b, T *y, int64_t n) {
    switch (op) {
        case OP_ADD: for (int64_t j = 0; j < n; ++j) y[j] = a[j] + b[j]; return;
        case OP_SUB: for (int64_t j = 0; j < n; ++j) y[j] = a[j] - b[j]; return;
        case OP_MUL: for (int64_t j = 0; j < n; ++j) y[j] = a[j] * b[j]; return;
        case OP_DIV: for (int64_t j = 0; j < n; ++j) y[j] = a[j] / b[j]; return;
        default: for (int64_t j = 0; j < n; ++j) y[j] = binary_of(op, a[j], b[j]); return;
    }
}

template <class T> void where_loop(const T *cond, const T *b, const T *c, T *y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = cond[j] != T(0) ? b[j] : c[j];
}

template <class T> double sum_loop(const T *a, int64_t n) {
    double s = 0.0;
    for (int64_t j = 0; j < n; ++j) s += (double)a[j];
    return s;
}

template <class T> T max_loop(const T *a, int64_t n) {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < n; ++j) m = max_of(m, a[j]);
    return m;
}

}  // namespace fusion
}  // namespace tt
