/*
 * fusion_ops_scalar.cpp -- the portable float32 op table (TT_ISA_SCALAR) and the float64
 * loops every ISA uses: the element formulas of fusion_scalar.h in plain loops.
 */
#include <cstring>

#include "fusion/fusion_kernels.h"
#include "fusion/fusion_scalar.h"

namespace tt {
namespace fusion {

namespace {
void f32_unary(int op, const float *a, float *y, int64_t n, double imm) { unary_loop(op, a, y, n, imm); }
void f32_binary(int op, const float *a, const float *b, float *y, int64_t n) { binary_loop(op, a, b, y, n); }
void f32_where(const float *cond, const float *b, const float *c, float *y, int64_t n) { where_loop(cond, b, c, y, n); }
double f32_sum(const float *a, int64_t n) { return sum_loop(a, n); }
float f32_max(const float *a, int64_t n) { return max_loop(a, n); }
}  // namespace

void plain_copy(void *dst, const void *src, int64_t bytes) { std::memcpy(dst, src, (size_t)bytes); }
void no_fence() {}

const F32Kernels kF32Scalar = {"scalar", f32_unary, f32_binary, f32_where, f32_sum, f32_max,
                               plain_copy, no_fence};

void f64_unary(int op, const double *a, double *y, int64_t n, double imm) { unary_loop(op, a, y, n, imm); }
void f64_binary(int op, const double *a, const double *b, double *y, int64_t n) { binary_loop(op, a, b, y, n); }
void f64_where(const double *cond, const double *b, const double *c, double *y, int64_t n) { where_loop(cond, b, c, y, n); }
double f64_sum(const double *a, int64_t n) { return sum_loop(a, n); }
double f64_max(const double *a, int64_t n) { return max_loop(a, n); }

}  // namespace fusion
}  // namespace tt
