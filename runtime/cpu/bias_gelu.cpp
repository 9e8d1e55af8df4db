/*
 * bias_gelu.cpp -- tt_bias_gelu_forward / tt_bias_gelu_backward: fused bias + GELU
 * (tanh approximation) in one pass over the data.
 *
 * What it owns: argument checks, the choice of row kernel for the active ISA, the
 * split of rows across threads, the column sums of grad_x (grad_bias), and the
 * portable float row kernels used for TT_ISA_SCALAR. The formula and its edge rules
 * are in bias_gelu_kernels.h; the float64 oracle is bias_gelu_reference.cpp.
 *
 * Loops go rows, then columns (no index arithmetic or % per element). Above
 * TT_ELEMENTWISE_PARALLEL_MIN elements the rows go to threads in chunks (core/parallel.h).
 * grad_bias is summed in float over blocks of 64 rows, then into a float64 partial per
 * chunk, and the partials are added in chunk order, so the result is the same on any
 * thread count and accurate for tall inputs.
 */
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "cpu/bias_gelu_kernels.h"
#include "cpu/row_checks.h"

namespace tt {

/* ------------------------------------------------------------------------ */
/* Portable float row kernels (TT_ISA_SCALAR)                               */
/* ------------------------------------------------------------------------ */

namespace {

inline float gelu_scalar(float u) {
    const float z = u * (kGeluA + kGeluB * u * u);
    const float e = std::exp(-std::fabs(z));
    const float r = 1.0f / (1.0f + e);
    const float s = z >= 0.0f ? r : e * r;
    return u == -std::numeric_limits<float>::infinity() ? -0.0f : u * s;
}

inline float gelu_grad_scalar(float u) {
    const float z = u * (kGeluA + kGeluB * u * u);
    const float e = std::exp(-std::fabs(z));
    const float r = 1.0f / (1.0f + e);
    const float s = z >= 0.0f ? r : e * r;
    const float slope = (e == 0.0f) ? 0.0f : (u * (kGeluA + kGeluB3 * u * u)) * (e * r * r);
    return s + slope;
}

void forward_row_scalar(const float *x, const float *bias, float *y, int64_t cols) {
    if (bias) {
        for (int64_t j = 0; j < cols; ++j) y[j] = gelu_scalar(x[j] + bias[j]);
    } else {
        for (int64_t j = 0; j < cols; ++j) y[j] = gelu_scalar(x[j]);
    }
}

void backward_row_scalar(const float *x, const float *bias, const float *gy, float *gx,
                         float *colsum, int64_t cols) {
    for (int64_t j = 0; j < cols; ++j) {
        const float u = bias ? x[j] + bias[j] : x[j];
        const float g = gy[j] * gelu_grad_scalar(u);
        gx[j] = g;
        if (colsum) colsum[j] += g;
    }
}

}  // namespace

const GeluRowKernels kGeluScalar = {"bias_gelu_forward:scalar", "bias_gelu_backward:scalar",
                                    forward_row_scalar, backward_row_scalar};

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

tt_status bias_gelu_check(const char *fn, const GeluBuffers &b, int64_t rows, int64_t cols) {
    const char *out_name = b.backward ? "grad_x" : "y";
    int64_t n = 0;
    const tt_status sizes = check_rows_cols(fn, rows, cols, &n);
    if (sizes != TT_OK) return sizes;
    /* grad_bias is written (zeroed) even when rows == 0, so it must not overlap bias then. */
    if (b.grad_bias && b.bias && cols > 0 && float_ranges_overlap(b.grad_bias, cols, b.bias, cols))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: grad_bias overlaps bias", fn);
    if (n == 0) return TT_OK;
    if (b.x == nullptr)
        return fail(TT_ERR_NULL_POINTER, "%s: x is NULL but rows x cols = %lld x %lld", fn,
                    (long long)rows, (long long)cols);
    if (b.out == nullptr)
        return fail(TT_ERR_NULL_POINTER, "%s: %s is NULL but rows x cols = %lld x %lld", fn,
                    out_name, (long long)rows, (long long)cols);
    if (b.backward && b.grad_y == nullptr)
        return fail(TT_ERR_NULL_POINTER, "%s: grad_y is NULL but rows x cols = %lld x %lld", fn,
                    (long long)rows, (long long)cols);
    /* The output may alias an input it reads element by element, nothing else. */
    if (b.backward && b.out != b.grad_y && float_ranges_overlap(b.out, n, b.grad_y, n))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: grad_x partly overlaps grad_y (it may only equal it)",
                    fn);
    if (b.out != b.x && float_ranges_overlap(b.out, n, b.x, n))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s partly overlaps x (it may only equal it)", fn,
                    out_name);
    if (b.bias && float_ranges_overlap(b.out, n, b.bias, cols))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s overlaps bias (later rows still read bias)", fn,
                    out_name);
    if (b.grad_bias) {
        const struct { const float *p; int64_t len; const char *name; } others[] = {
            {b.x, n, "x"}, {b.bias, cols, "bias"}, {b.grad_y, n, "grad_y"}, {b.out, n, "grad_x"}};
        for (const auto &o : others)
            if (o.p && float_ranges_overlap(b.grad_bias, cols, o.p, o.len))
                return fail(TT_ERR_INVALID_ARGUMENT, "%s: grad_bias overlaps %s", fn, o.name);
    }
    return TT_OK;
}

/* ------------------------------------------------------------------------ */
/* Driver                                                                   */
/* ------------------------------------------------------------------------ */

namespace {

const GeluRowKernels &kernels_for(tt_isa isa) {
    switch (isa) {
#if defined(TT_HAVE_AVX512_KERNELS)
        case TT_ISA_AVX512: return kGeluAvx512;
#endif
#if defined(TT_HAVE_AVX2_KERNELS)
        case TT_ISA_AVX2: return kGeluAvx2;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_ISA_NEON: return kGeluNeon;
#endif
        default: return kGeluScalar;
    }
}



}  // namespace
}  // namespace tt

extern "C" TT_API tt_status tt_bias_gelu_forward(const float *x, const float *bias, float *y,
                                                 int64_t rows, int64_t cols) {
    static const char *kFn = "tt_bias_gelu_forward";
    tt_status st = tt::bias_gelu_check(kFn, {x, bias, nullptr, y, nullptr, false}, rows, cols);
    if (st != TT_OK) return st;
    const tt::GeluRowKernels &k = tt::kernels_for(tt::active_isa());
    tt::set_kernel_path(k.forward_path);
    if (rows == 0 || cols == 0) return TT_OK;

    tt::parallel_for(rows, tt::row_grain(cols),
                     tt::elementwise_threads(rows, cols, tt::solo_cost::kBiasGeluNs),
                     [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) k.forward(x + r * cols, bias, y + r * cols, cols);
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_bias_gelu_backward(const float *x, const float *bias,
                                                  const float *grad_y, float *grad_x,
                                                  float *grad_bias, int64_t rows, int64_t cols) {
    static const char *kFn = "tt_bias_gelu_backward";
    tt_status st = tt::bias_gelu_check(kFn, {x, bias, grad_y, grad_x, grad_bias, true}, rows, cols);
    if (st != TT_OK) return st;
    const tt::GeluRowKernels &k = tt::kernels_for(tt::active_isa());
    tt::set_kernel_path(k.backward_path);
    if (cols == 0) return TT_OK;
    if (rows == 0) {
        if (grad_bias) std::memset(grad_bias, 0, (size_t)cols * sizeof(float));
        return TT_OK;
    }

    const int nt = tt::elementwise_threads(rows, cols, tt::solo_cost::kBiasGeluNs);
    if (grad_bias == nullptr) {
        tt::parallel_for(rows, tt::row_grain(cols), nt, [&](int64_t r0, int64_t r1, int) {
            for (int64_t r = r0; r < r1; ++r)
                k.backward(x + r * cols, bias, grad_y + r * cols, grad_x + r * cols, nullptr, cols);
        });
        return TT_OK;
    }

    /* Per chunk of rows a float64 partial sum per column, added in chunk order at the end
     * (the same bits on any thread count); per slot a float sum of kColsumChunkRows rows.
     * Partials first, so every double is 8-byte aligned whatever cols is. */
    const int64_t grain = tt::colsum_grain(rows, cols), chunks = tt::chunk_count(rows, grain);
    const size_t partial_bytes = (size_t)chunks * (size_t)cols * sizeof(double);
    const size_t bytes = partial_bytes + (size_t)nt * (size_t)cols * sizeof(float);
    char *scratch = static_cast<char *>(std::calloc(1, bytes));
    if (scratch == nullptr)
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: could not allocate %lld bytes for grad_bias sums",
                        kFn, (long long)bytes);
    double *partials = reinterpret_cast<double *>(scratch);
    float *blocks = reinterpret_cast<float *>(scratch + partial_bytes);
    tt::parallel_for(rows, grain, nt, [&](int64_t r0, int64_t r1, int slot) {
        double *partial = partials + (size_t)(r0 / grain) * (size_t)cols;
        float *block = blocks + (size_t)slot * (size_t)cols;
        for (int64_t c0 = r0; c0 < r1; c0 += tt::kColsumChunkRows) {
            const int64_t c1 = std::min(r1, c0 + tt::kColsumChunkRows);
            std::memset(block, 0, (size_t)cols * sizeof(float));
            for (int64_t r = c0; r < c1; ++r)
                k.backward(x + r * cols, bias, grad_y + r * cols, grad_x + r * cols, block, cols);
            for (int64_t j = 0; j < cols; ++j) partial[j] += block[j];
        }
    });
    for (int64_t j = 0; j < cols; ++j) {
        double sum = 0.0;
        for (int64_t c = 0; c < chunks; ++c) sum += partials[(size_t)c * (size_t)cols + j];
        grad_bias[j] = (float)sum;
    }
    std::free(scratch);
    return TT_OK;
}
