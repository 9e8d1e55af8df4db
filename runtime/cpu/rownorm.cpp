/*
 * rownorm.cpp -- row-wise normalisations over the last axis: tt_layernorm_forward /
 * _backward, tt_softmax_forward / _backward, tt_log_softmax_forward / _backward,
 * tt_cross_entropy_forward / _backward.
 *
 * What it owns: argument checks, the choice of row kernels for the active ISA, the split of rows
 * across threads (parallel_for chunks of rows, above TT_ELEMENTWISE_PARALLEL_MIN elements),
 * the column sums of the layer-norm backward (grad_gamma, grad_beta: in float over blocks
 * of 64 rows, then in double per chunk of rows, the chunk partials added in chunk order, as
 * bias_gelu.cpp's grad_bias: the same bits on any thread count), cross-entropy from the log-sum-exp (tt_cross_entropy_*),
 * and the portable row kernels used for TT_ISA_SCALAR
 * (double accumulators, std::exp). The row contract is in rownorm_kernels.h.
 */
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "cpu/row_checks.h"
#include "cpu/rownorm_kernels.h"

namespace tt {

/* ------------------------------------------------------------------------ */
/* Portable row kernels (TT_ISA_SCALAR)                                     */
/* ------------------------------------------------------------------------ */

namespace {

void ln_forward_scalar(const float *x, const float *gamma, const float *beta, float *y,
                       int64_t cols, float eps, float *mean_out, float *rstd_out) {
    const double x0 = x[0];
    double s1 = 0.0, s2 = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
        const double d = (double)x[j] - x0;
        s1 += d;
        s2 += d * d;
    }
    const double md = s1 / (double)cols;
    double var = s2 / (double)cols - md * md;
    if (var < 0.0) var = 0.0; /* NaN stays NaN */
    const float x0f = x[0], mdf = (float)md; /* x0f before y (may be x) is written */
    const float rstd = (float)(1.0 / std::sqrt(var + (double)eps));
    *mean_out = (float)(x0 + md);
    *rstd_out = rstd;
    for (int64_t j = 0; j < cols; ++j) {
        float v = ((x[j] - x0f) - mdf) * rstd; /* shifted: see rownorm_kernels.h */
        if (gamma) v *= gamma[j];
        if (beta) v += beta[j];
        y[j] = v;
    }
}

void ln_backward_scalar(const float *x, const float *gamma, float mean, float rstd,
                        const float *gy, float *gx, float *dgamma, float *dbeta, int64_t cols) {
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
        const float xh = (x[j] - mean) * rstd;
        const float g = gamma ? gy[j] * gamma[j] : gy[j];
        sg += g;
        sgx += (double)g * xh;
        if (dgamma) dgamma[j] += gy[j] * xh;
        if (dbeta) dbeta[j] += gy[j];
    }
    if (gx == nullptr) return;
    const float c2 = (float)(-(double)rstd * sg / (double)cols);
    const float c3 = (float)(-(double)rstd * sgx / (double)cols);
    for (int64_t j = 0; j < cols; ++j) {
        const float xh = (x[j] - mean) * rstd;
        const float g = gamma ? gy[j] * gamma[j] : gy[j];
        gx[j] = rstd * g + (c3 * xh + c2);
    }
}

/* kMode 0: softmax into y, 1: log-softmax into y, 2: only the log-sum-exp. */
template <int kMode>
float softmax_forward_scalar(const float *x, float *y, int64_t cols) {
    constexpr bool kLog = kMode != 0;
    float m = x[0];
    for (int64_t j = 1; j < cols; ++j) m = (x[j] > m || std::isnan(x[j])) ? x[j] : m;
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
        const float e = std::exp(x[j] - m);
        if (!kLog) y[j] = e;
        sum += e;
    }
    const float lse = (float)((double)m + std::log(sum));
    if (kMode == 2) return lse;
    if (kLog) {
        for (int64_t j = 0; j < cols; ++j) y[j] = x[j] - lse;
    } else {
        const float inv = (float)(1.0 / sum);
        for (int64_t j = 0; j < cols; ++j) y[j] *= inv;
    }
    return lse;
}

template <bool kLog>
void softmax_backward_scalar(const float *y, const float *gy, float *gx, int64_t cols) {
    double s = 0.0;
    for (int64_t j = 0; j < cols; ++j) s += kLog ? (double)gy[j] : (double)gy[j] * y[j];
    const float sf = (float)s;
    for (int64_t j = 0; j < cols; ++j)
        gx[j] = kLog ? gy[j] - std::exp(y[j]) * sf : y[j] * (gy[j] - sf);
}

float logsumexp_scalar(const float *x, int64_t cols) {
    return softmax_forward_scalar<2>(x, nullptr, cols);
}

}  // namespace

const RowNormKernels kRowNormScalar = {"scalar",
                                       ln_forward_scalar,
                                       ln_backward_scalar,
                                       softmax_forward_scalar<0>,
                                       softmax_forward_scalar<1>,
                                       softmax_backward_scalar<false>,
                                       softmax_backward_scalar<true>,
                                       logsumexp_scalar};

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

namespace {

/* A buffer of the call: its name, address, length in floats, and whether it is written. */
struct Buf {
    const char *name;
    const void *p;
    int64_t len;
    bool out;
    bool required;   /* must be non-NULL when len > 0 */
    const void *may_equal[2]; /* inputs an output may equal exactly (element by element) */
};

/* NULL checks of required buffers, then: no output overlaps any other buffer, except
 * that it may equal exactly one of its listed inputs. */
tt_status check_buffers(const char *fn, const Buf *bufs, int count, int64_t rows, int64_t cols) {
    for (int i = 0; i < count; ++i)
        if (bufs[i].required && bufs[i].len > 0 && bufs[i].p == nullptr)
            return fail(TT_ERR_NULL_POINTER, "%s: %s is NULL but rows x cols = %lld x %lld", fn,
                        bufs[i].name, (long long)rows, (long long)cols);
    for (int i = 0; i < count; ++i) {
        if (!bufs[i].out) continue;
        for (int k = 0; k < count; ++k) {
            if (k == i || !float_ranges_overlap(bufs[i].p, bufs[i].len, bufs[k].p, bufs[k].len))
                continue;
            const bool allowed = !bufs[k].out && bufs[i].p == bufs[k].p &&
                                 bufs[i].len == bufs[k].len &&
                                 (bufs[i].may_equal[0] == bufs[k].p || bufs[i].may_equal[1] == bufs[k].p);
            if (!allowed)
                return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s overlaps %s", fn, bufs[i].name,
                            bufs[k].name);
        }
    }
    return TT_OK;
}

const RowNormKernels &kernels_for(tt_isa isa) {
    switch (isa) {
#if defined(TT_HAVE_AVX512_KERNELS)
        case TT_ISA_AVX512: return kRowNormAvx512;
#endif
#if defined(TT_HAVE_AVX2_KERNELS)
        case TT_ISA_AVX2: return kRowNormAvx2;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_ISA_NEON: return kRowNormNeon;
#endif
        default: return kRowNormScalar;
    }
}

void report(const char *what, const RowNormKernels &k) {
    char path[64];
    std::snprintf(path, sizeof path, "%s:%s", what, k.isa);
    set_kernel_path(path);
}



tt_status softmax_forward(const char *fn, bool log, const float *x, float *y, float *lse,
                          int64_t rows, int64_t cols) {
    tt_status st = check_rows_cols(fn, rows, cols);
    if (st != TT_OK) return st;
    const int64_t n = rows * cols;
    const Buf bufs[] = {{"x", x, n, false, true, {nullptr, nullptr}},
                        {"y", y, n, true, true, {x, nullptr}},
                        {"lse", lse, rows, true, false, {nullptr, nullptr}}};
    st = check_buffers(fn, bufs, 3, rows, cols);
    if (st != TT_OK) return st;
    const RowNormKernels &k = kernels_for(active_isa());
    report(log ? "log_softmax_forward" : "softmax_forward", k);
    if (rows == 0) return TT_OK;
    if (cols == 0) { /* log of an empty sum */
        if (lse)
            for (int64_t r = 0; r < rows; ++r) lse[r] = -std::numeric_limits<float>::infinity();
        return TT_OK;
    }
    const SoftmaxForwardRowFn row = log ? k.log_softmax_forward : k.softmax_forward;
    parallel_for(rows, row_grain(cols), elementwise_threads(rows, cols, solo_cost::kSoftmaxNs),
                     [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            const float v = row(x + r * cols, y + r * cols, cols);
            if (lse) lse[r] = v;
        }
    });
    return TT_OK;
}

tt_status softmax_backward(const char *fn, bool log, const float *y, const float *grad_y,
                           float *grad_x, int64_t rows, int64_t cols) {
    tt_status st = check_rows_cols(fn, rows, cols);
    if (st != TT_OK) return st;
    const int64_t n = rows * cols;
    const Buf bufs[] = {{"y", y, n, false, true, {nullptr, nullptr}},
                        {"grad_y", grad_y, n, false, true, {nullptr, nullptr}},
                        {"grad_x", grad_x, n, true, true, {y, grad_y}}};
    st = check_buffers(fn, bufs, 3, rows, cols);
    if (st != TT_OK) return st;
    const RowNormKernels &k = kernels_for(active_isa());
    report(log ? "log_softmax_backward" : "softmax_backward", k);
    if (n == 0) return TT_OK;
    const SoftmaxBackwardRowFn row = log ? k.log_softmax_backward : k.softmax_backward;
    parallel_for(rows, row_grain(cols), elementwise_threads(rows, cols, solo_cost::kSoftmaxNs),
                     [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) row(y + r * cols, grad_y + r * cols, grad_x + r * cols, cols);
    });
    return TT_OK;
}

}  // namespace
}  // namespace tt

/* ------------------------------------------------------------------------ */
/* Entry points                                                             */
/* ------------------------------------------------------------------------ */

extern "C" TT_API tt_status tt_layernorm_forward(const float *x, const float *gamma,
                                                 const float *beta, float *y, float *mean,
                                                 float *rstd, int64_t rows, int64_t cols,
                                                 float eps) {
    static const char *kFn = "tt_layernorm_forward";
    tt_status st = tt::check_rows_cols(kFn, rows, cols);
    if (st != TT_OK) return st;
    if (!(eps >= 0.0f) || !std::isfinite(eps))
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: eps=%g must be finite and >= 0", kFn, (double)eps);
    const int64_t n = rows * cols;
    const tt::Buf bufs[] = {{"x", x, n, false, true, {nullptr, nullptr}},
                            {"gamma", gamma, rows > 0 ? cols : 0, false, false, {nullptr, nullptr}},
                            {"beta", beta, rows > 0 ? cols : 0, false, false, {nullptr, nullptr}},
                            {"y", y, n, true, true, {x, nullptr}},
                            {"mean", mean, rows, true, false, {nullptr, nullptr}},
                            {"rstd", rstd, rows, true, false, {nullptr, nullptr}}};
    st = tt::check_buffers(kFn, bufs, 6, rows, cols);
    if (st != TT_OK) return st;
    const tt::RowNormKernels &k = tt::kernels_for(tt::active_isa());
    tt::report("layernorm_forward", k);
    if (rows == 0 || (cols == 0 && !mean && !rstd)) return TT_OK; /* nothing to write: no loop over rows */
    if (cols == 0) {
        const float r0 = (float)(1.0 / std::sqrt((double)eps));
        for (int64_t r = 0; r < rows; ++r) {
            if (mean) mean[r] = 0.0f;
            if (rstd) rstd[r] = r0;
        }
        return TT_OK;
    }
    tt::parallel_for(rows, tt::row_grain(cols),
                     tt::elementwise_threads(rows, cols, tt::solo_cost::kLayerNormNs),
                     [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            float m, s;
            k.layernorm_forward(x + r * cols, gamma, beta, y + r * cols, cols, eps, &m, &s);
            if (mean) mean[r] = m;
            if (rstd) rstd[r] = s;
        }
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_layernorm_backward(const float *x, const float *gamma,
                                                  const float *mean, const float *rstd,
                                                  const float *grad_y, float *grad_x,
                                                  float *grad_gamma, float *grad_beta,
                                                  int64_t rows, int64_t cols) {
    static const char *kFn = "tt_layernorm_backward";
    tt_status st = tt::check_rows_cols(kFn, rows, cols);
    if (st != TT_OK) return st;
    const int64_t n = rows * cols;
    const tt::Buf bufs[] = {{"x", x, n, false, true, {nullptr, nullptr}},
                            {"gamma", gamma, n > 0 ? cols : 0, false, false, {nullptr, nullptr}},
                            {"mean", mean, n > 0 ? rows : 0, false, true, {nullptr, nullptr}},
                            {"rstd", rstd, n > 0 ? rows : 0, false, true, {nullptr, nullptr}},
                            {"grad_y", grad_y, n, false, true, {nullptr, nullptr}},
                            {"grad_x", grad_x, n, true, false, {x, grad_y}},
                            {"grad_gamma", grad_gamma, cols, true, false, {nullptr, nullptr}},
                            {"grad_beta", grad_beta, cols, true, false, {nullptr, nullptr}}};
    st = tt::check_buffers(kFn, bufs, 8, rows, cols);
    if (st != TT_OK) return st;
    const tt::RowNormKernels &k = tt::kernels_for(tt::active_isa());
    tt::report("layernorm_backward", k);
    if (cols == 0) return TT_OK;
    if (rows == 0) {
        if (grad_gamma) std::memset(grad_gamma, 0, (size_t)cols * sizeof(float));
        if (grad_beta) std::memset(grad_beta, 0, (size_t)cols * sizeof(float));
        return TT_OK;
    }
    const int nt = tt::elementwise_threads(rows, cols, tt::solo_cost::kLayerNormNs);
    if (grad_gamma == nullptr && grad_beta == nullptr) {
        if (grad_x == nullptr) return TT_OK;
        tt::parallel_for(rows, tt::row_grain(cols), nt, [&](int64_t r0, int64_t r1, int) {
            for (int64_t r = r0; r < r1; ++r)
                k.layernorm_backward(x + r * cols, gamma, mean[r], rstd[r], grad_y + r * cols,
                                     grad_x + r * cols, nullptr, nullptr, cols);
        });
        return TT_OK;
    }
    /* Per chunk of rows and per wanted sum a float64 partial per column, added in chunk
     * order at the end (the same bits on any thread count); per slot a float sum of
     * kColsumChunkRows rows (all partials first, so every double is 8-byte aligned). */
    const int64_t grain = tt::colsum_grain(rows, cols), chunks = tt::chunk_count(rows, grain);
    const size_t per = (size_t)chunks * (size_t)cols, per_slot = (size_t)nt * (size_t)cols;
    const size_t bytes = 2 * per * sizeof(double) + 2 * per_slot * sizeof(float);
    char *scratch = static_cast<char *>(std::calloc(1, bytes));
    if (scratch == nullptr)
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: could not allocate %lld bytes for the column sums",
                        kFn, (long long)bytes);
    double *part_g = reinterpret_cast<double *>(scratch);
    double *part_b = part_g + per;
    float *blk_g = reinterpret_cast<float *>(part_b + per);
    float *blk_b = blk_g + per_slot;
    tt::parallel_for(rows, grain, nt, [&](int64_t r0, int64_t r1, int slot) {
        const size_t off = (size_t)(r0 / grain) * (size_t)cols, soff = (size_t)slot * (size_t)cols;
        float *cg = grad_gamma ? blk_g + soff : nullptr;
        float *cb = grad_beta ? blk_b + soff : nullptr;
        for (int64_t c0 = r0; c0 < r1; c0 += tt::kColsumChunkRows) {
            const int64_t c1 = std::min(r1, c0 + tt::kColsumChunkRows);
            if (cg) std::memset(cg, 0, (size_t)cols * sizeof(float));
            if (cb) std::memset(cb, 0, (size_t)cols * sizeof(float));
            for (int64_t r = c0; r < c1; ++r)
                k.layernorm_backward(x + r * cols, gamma, mean[r], rstd[r], grad_y + r * cols,
                                     grad_x ? grad_x + r * cols : nullptr, cg, cb, cols);
            for (int64_t j = 0; j < cols; ++j) {
                if (cg) part_g[off + j] += cg[j];
                if (cb) part_b[off + j] += cb[j];
            }
        }
    });
    for (int64_t j = 0; j < cols; ++j) {
        double sg = 0.0, sb = 0.0;
        for (int64_t c = 0; c < chunks; ++c) {
            sg += part_g[(size_t)c * (size_t)cols + j];
            sb += part_b[(size_t)c * (size_t)cols + j];
        }
        if (grad_gamma) grad_gamma[j] = (float)sg;
        if (grad_beta) grad_beta[j] = (float)sb;
    }
    std::free(scratch);
    return TT_OK;
}

extern "C" TT_API tt_status tt_softmax_forward(const float *x, float *y, float *lse, int64_t rows,
                                               int64_t cols) {
    return tt::softmax_forward("tt_softmax_forward", false, x, y, lse, rows, cols);
}

extern "C" TT_API tt_status tt_log_softmax_forward(const float *x, float *y, float *lse,
                                                   int64_t rows, int64_t cols) {
    return tt::softmax_forward("tt_log_softmax_forward", true, x, y, lse, rows, cols);
}

extern "C" TT_API tt_status tt_softmax_backward(const float *y, const float *grad_y,
                                                float *grad_x, int64_t rows, int64_t cols) {
    return tt::softmax_backward("tt_softmax_backward", false, y, grad_y, grad_x, rows, cols);
}

extern "C" TT_API tt_status tt_log_softmax_backward(const float *y, const float *grad_y,
                                                    float *grad_x, int64_t rows, int64_t cols) {
    return tt::softmax_backward("tt_log_softmax_backward", true, y, grad_y, grad_x, rows, cols);
}

/* ------------------------------------------------------------------------ */
/* Cross-entropy from the log-sum-exp                                       */
/* ------------------------------------------------------------------------ */

namespace tt {
namespace {

/* The sizes, and the target buffer's length in floats (int64: two per entry), before any
 * buffer is described: rows = 2^62 with cols = 0 passes check_rows_cols, 2 * rows does not. */
tt_status cross_entropy_sizes(const char *fn, int64_t rows, int64_t cols, int64_t *target_floats) {
    tt_status st = check_rows_cols(fn, rows, cols);
    if (st != TT_OK) return st;
    if (mul_overflows(rows, 2, target_floats))
        return fail(TT_ERR_OVERFLOW, "%s: rows=%lld int64 targets overflow", fn, (long long)rows);
    return TT_OK;
}

/* Shared checks: the buffers and every target in [0, cols) or ignore_index. */
tt_status cross_entropy_check(const char *fn, const Buf *bufs, int count, const int64_t *target,
                              int64_t rows, int64_t cols, int64_t ignore_index) {
    tt_status st = check_buffers(fn, bufs, count, rows, cols);
    if (st != TT_OK) return st;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t t = target[r];
        if (t != ignore_index && (t < 0 || t >= cols))
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: target[%lld]=%lld is out of range for %lld classes (ignore_index=%lld)",
                        fn, (long long)r, (long long)t, (long long)cols, (long long)ignore_index);
    }
    return TT_OK;
}

}  // namespace
}  // namespace tt

extern "C" TT_API tt_status tt_cross_entropy_forward(const float *logits, const int64_t *target,
                                                     float *loss, float *lse, int64_t rows,
                                                     int64_t cols, int64_t ignore_index) {
    static const char *kFn = "tt_cross_entropy_forward";
    int64_t t_len = 0;
    tt_status st = tt::cross_entropy_sizes(kFn, rows, cols, &t_len);
    if (st != TT_OK) return st;
    const int64_t n = rows * cols;
    const tt::Buf bufs[] = {{"logits", logits, n, false, true, {nullptr, nullptr}},
                            {"target", target, t_len, false, true, {nullptr, nullptr}},
                            {"loss", loss, rows, true, true, {nullptr, nullptr}},
                            {"lse", lse, rows, true, false, {nullptr, nullptr}}};
    st = tt::cross_entropy_check(kFn, bufs, 4, target, rows, cols, ignore_index);
    if (st != TT_OK) return st;
    const tt::RowNormKernels &k = tt::kernels_for(tt::active_isa());
    tt::report("cross_entropy_forward", k);
    if (rows == 0) return TT_OK;
    if (cols == 0) { /* every target is ignore_index here (checked) */
        for (int64_t r = 0; r < rows; ++r) {
            loss[r] = 0.0f;
            if (lse) lse[r] = -std::numeric_limits<float>::infinity();
        }
        return TT_OK;
    }
    tt::parallel_for(rows, tt::row_grain(cols),
                     tt::elementwise_threads(rows, cols, tt::solo_cost::kSoftmaxNs),
                     [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            const float *x = logits + r * cols;
            const float v = k.logsumexp(x, cols);
            if (lse) lse[r] = v;
            loss[r] = target[r] == ignore_index ? 0.0f : v - x[target[r]];
        }
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_cross_entropy_backward(const float *logits, const int64_t *target,
                                                      const float *lse, const float *grad_loss,
                                                      float *grad_logits, int64_t rows,
                                                      int64_t cols, int64_t ignore_index) {
    static const char *kFn = "tt_cross_entropy_backward";
    int64_t t_len = 0;
    tt_status st = tt::cross_entropy_sizes(kFn, rows, cols, &t_len);
    if (st != TT_OK) return st;
    const int64_t n = rows * cols;
    const tt::Buf bufs[] = {{"logits", logits, n, false, true, {nullptr, nullptr}},
                            {"target", target, t_len, false, true, {nullptr, nullptr}},
                            {"lse", lse, n > 0 ? rows : 0, false, true, {nullptr, nullptr}},
                            {"grad_loss", grad_loss, n > 0 ? rows : 0, false, true, {nullptr, nullptr}},
                            {"grad_logits", grad_logits, n, true, true, {logits, nullptr}}};
    st = tt::cross_entropy_check(kFn, bufs, 5, target, rows, cols, ignore_index);
    if (st != TT_OK) return st;
    const tt::RowNormKernels &k = tt::kernels_for(tt::active_isa());
    tt::report("cross_entropy_backward", k);
    if (n == 0) return TT_OK;
    tt::parallel_for(rows, tt::row_grain(cols),
                     tt::elementwise_threads(rows, cols, tt::solo_cost::kSoftmaxNs),
                     [&](int64_t r0, int64_t r1, int) {
        for (int64_t r = r0; r < r1; ++r) {
            float *out = grad_logits + r * cols;
            if (target[r] == ignore_index) {
                std::memset(out, 0, (size_t)cols * sizeof(float));
                continue;
            }
            const float g = grad_loss[r];
            /* softmax shifted by the row max, not exp(x - lse): lse = m + log(sum) rounds
             * log(sum) away once |m| >> 1 (tied logits of 1e7 gave p = 1 each) */
            k.softmax_forward(logits + r * cols, out, cols);
            for (int64_t j = 0; j < cols; ++j) out[j] *= g;
            out[target[r]] -= g;
        }
    });
    return TT_OK;
}
