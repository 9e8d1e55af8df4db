/*
 * bias_gelu_reference.cpp -- the float64 oracle of the fused bias + GELU kernels.
 *
 * tt_bias_gelu_forward_reference / tt_bias_gelu_backward_reference: one thread, plain
 * loops, every step after the float bias add done in double (u = x + bias is rounded
 * to float first, exactly as the fast kernels and as a float32 framework would add).
 *
 *   y       = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
 *           = u sigmoid(z),  z = 2 sqrt(2/pi) (u + 0.044715 u^3)
 *   dy/du   = s + u z' s (1 - s),  s = sigmoid(z),  z' = 2 sqrt(2/pi) (1 + 3 * 0.044715 u^2)
 *
 * The sigmoid form is used because it is stable in double for every float u (1 + tanh
 * cancels for u below about -5). Edge rules match bias_gelu_kernels.h: u = -inf gives
 * y = -0 and dy/du = 0, u = +inf gives inf and 1, NaN propagates. grad_bias is the
 * float64 column sum of grad_x before rounding.
 */
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "cpu/bias_gelu_kernels.h"

namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kCoef = 0.044715;

struct GeluPoint {
    double y, dy;
};

GeluPoint gelu_double(double u) {
    const double z = 2.0 * kSqrt2OverPi * (u + kCoef * u * u * u);
    const double e = std::exp(-std::fabs(z));
    const double s = z >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    GeluPoint p;
    p.y = (u == -std::numeric_limits<double>::infinity()) ? -0.0 : u * s;
    const double dz = 2.0 * kSqrt2OverPi * (1.0 + 3.0 * kCoef * u * u);
    p.dy = (e == 0.0) ? s : s + u * dz * (e / ((1.0 + e) * (1.0 + e)));
    return p;
}

inline double bias_add(const float *x, const float *bias, int64_t j) {
    return bias ? (double)(float)(x[j] + bias[j]) : (double)x[j];
}

}  // namespace

extern "C" TT_API tt_status tt_bias_gelu_forward_reference(const float *x, const float *bias,
                                                           float *y, int64_t rows, int64_t cols) {
    tt_status st = tt::bias_gelu_check("tt_bias_gelu_forward_reference",
                                       {x, bias, nullptr, y, nullptr, false}, rows, cols);
    if (st != TT_OK) return st;
    tt::set_kernel_path("bias_gelu_forward:reference");
    if (cols == 0) return TT_OK;  // rows may be huge: do not loop over nothing
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * cols;
        float *yr = y + r * cols;
        for (int64_t j = 0; j < cols; ++j) yr[j] = (float)gelu_double(bias_add(xr, bias, j)).y;
    }
    return TT_OK;
}

extern "C" TT_API tt_status tt_bias_gelu_backward_reference(const float *x, const float *bias,
                                                            const float *grad_y, float *grad_x,
                                                            float *grad_bias, int64_t rows,
                                                            int64_t cols) {
    static const char *kFn = "tt_bias_gelu_backward_reference";
    tt_status st = tt::bias_gelu_check(kFn, {x, bias, grad_y, grad_x, grad_bias, true}, rows, cols);
    if (st != TT_OK) return st;
    tt::set_kernel_path("bias_gelu_backward:reference");
    if (cols == 0) return TT_OK;  // rows may be huge: do not loop over nothing
    /* Column sums first, in double, from the unrounded products: grad_x may alias grad_y. */
    if (grad_bias) {
        for (int64_t j = 0; j < cols; ++j) {
            double sum = 0.0;
            for (int64_t r = 0; r < rows; ++r)
                sum += (double)grad_y[r * cols + j] * gelu_double(bias_add(x + r * cols, bias, j)).dy;
            grad_bias[j] = (float)sum;
        }
    }
    for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * cols;
        for (int64_t j = 0; j < cols; ++j)
            grad_x[r * cols + j] =
                (float)((double)grad_y[r * cols + j] * gelu_double(bias_add(xr, bias, j)).dy);
    }
    return TT_OK;
}
