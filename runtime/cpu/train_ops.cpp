/*
 * train_ops.cpp -- the rest of a training step in the runtime: tt_adam_step (Adam / AdamW
 * over every parameter in one call), the embedding lookup, tt_embedding_forward
 * (gather rows) and tt_embedding_backward (scatter-add rows into the weight gradient), and
 * ReLU, tt_relu_forward / tt_relu_backward (one pass each: the backward reads the saved
 * output, so the forward stores no mask).
 *
 * What it owns: argument checks (ids out of range, NULL buffers, negative sizes, size
 * overflow, bad hyper-parameters), the choice of loops for the active ISA
 * (train_ops_kernels.h) and the split across threads:
 *   - Adam: all parameters' elements form one range cut into near-equal runs, one per
 *     thread, so a step over forty small tensors is one parallel region, not forty;
 *   - gather: rows split across threads;
 *   - scatter-add: one id may appear many times, so threads split the *columns* of the
 *     embedding and every thread walks all ids in order: no two threads touch one
 *     element, and each element sums its rows in id order (the same order, hence the same
 *     result, as NumPy's np.add.at).
 */
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "cpu/train_ops_kernels.h"

namespace tt {

namespace {

void adam_scalar(float *p, const float *g, float *m, float *v, int64_t n, const AdamScalars &s) {
    adam_loop(p, g, m, v, n, s);
}
void add_row_scalar(float *dst, const float *src, int64_t n) { add_row_loop(dst, src, n); }
void relu_scalar(const float *x, float *y, int64_t n) { relu_loop(x, y, n); }
void relu_backward_scalar(const float *y, const float *g, float *gx, int64_t n) {
    relu_backward_loop(y, g, gx, n);
}

}  // namespace

const TrainKernels kTrainScalar = {"adam:scalar", "embedding:scalar", "embedding_backward:scalar",
                                   "relu:scalar", "relu_backward:scalar", adam_scalar,
                                   add_row_scalar, relu_scalar, relu_backward_scalar};

namespace {

const TrainKernels &train_kernels(tt_isa isa) {
    switch (isa) {
#if defined(TT_HAVE_AVX512_KERNELS)
        case TT_ISA_AVX512: return kTrainAvx512;
#endif
#if defined(TT_HAVE_AVX2_KERNELS)
        case TT_ISA_AVX2: return kTrainAvx2;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_ISA_NEON: return kTrainNeon;
#endif
        default: return kTrainScalar;
    }
}

bool finite_in(double x, double lo, double hi) { return std::isfinite(x) && x >= lo && x < hi; }

tt_status check_ids(const char *fn, const int64_t *ids, int64_t n, int64_t vocab) {
    for (int64_t i = 0; i < n; ++i)
        if (ids[i] < 0 || ids[i] >= vocab)
            return fail(TT_ERR_INVALID_ARGUMENT, "%s: ids[%lld]=%lld is outside [0, %lld)", fn,
                        (long long)i, (long long)ids[i], (long long)vocab);
    return TT_OK;
}

tt_status check_embedding_sizes(const char *fn, int64_t vocab, int64_t dim, int64_t n) {
    if (vocab < 0 || dim < 0 || n < 0)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: vocab=%lld, dim=%lld, n=%lld must be >= 0", fn,
                    (long long)vocab, (long long)dim, (long long)n);
    int64_t elems = 0, bytes = 0;
    if (mul_overflows(std::max(vocab, n), dim, &elems) || mul_overflows(elems, 4, &bytes))
        return fail(TT_ERR_OVERFLOW, "%s: %lld rows x dim=%lld floats overflow int64 bytes", fn,
                    (long long)std::max(vocab, n), (long long)dim);
    return TT_OK;
}

}  // namespace
}  // namespace tt

extern "C" TT_API tt_status tt_adam_step(int64_t count, float *const *params,
                                         const float *const *grads, float *const *exp_avg,
                                         float *const *exp_avg_sq, const int64_t *numel,
                                         const int64_t *steps, double lr, double beta1,
                                         double beta2, double eps, double weight_decay,
                                         int decoupled) {
    static const char *kFn = "tt_adam_step";
    using tt::fail;
    if (count < 0) return fail(TT_ERR_INVALID_ARGUMENT, "%s: count=%lld is negative", kFn, (long long)count);
    if (count > 0 && (params == nullptr || grads == nullptr || exp_avg == nullptr ||
                      exp_avg_sq == nullptr || numel == nullptr || steps == nullptr))
        return fail(TT_ERR_NULL_POINTER, "%s: a pointer array is NULL with count=%lld", kFn,
                    (long long)count);
    if (!(std::isfinite(lr) && lr >= 0.0))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: lr=%g must be finite and >= 0", kFn, (double)lr);
    if (!tt::finite_in(beta1, 0.0, 1.0) || !tt::finite_in(beta2, 0.0, 1.0))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: betas (%g, %g) must be in [0, 1)", kFn,
                    (double)beta1, (double)beta2);
    if (!(std::isfinite(eps) && eps >= 0.0) || !(std::isfinite(weight_decay) && weight_decay >= 0.0))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: eps=%g and weight_decay=%g must be finite and >= 0",
                    kFn, (double)eps, (double)weight_decay);
    int64_t total = 0;
    for (int64_t t = 0; t < count; ++t) {
        if (numel[t] < 0)
            return fail(TT_ERR_INVALID_ARGUMENT, "%s: numel[%lld]=%lld is negative", kFn,
                        (long long)t, (long long)numel[t]);
        if (steps[t] < 1)
            return fail(TT_ERR_INVALID_ARGUMENT, "%s: steps[%lld]=%lld must be >= 1 (the count "
                        "after this update)", kFn, (long long)t, (long long)steps[t]);
        if (numel[t] > 0 && (params[t] == nullptr || grads[t] == nullptr || exp_avg[t] == nullptr ||
                             exp_avg_sq[t] == nullptr))
            return fail(TT_ERR_NULL_POINTER, "%s: a buffer of tensor %lld is NULL", kFn, (long long)t);
        if (__builtin_add_overflow(total, numel[t], &total) || total > INT64_MAX / 4)
            return fail(TT_ERR_OVERFLOW, "%s: the total element count overflows", kFn);
    }
    const tt::TrainKernels &k = tt::train_kernels(tt::active_isa());
    tt::set_kernel_path(k.adam_path);
    if (total == 0) return TT_OK;

    /* Per tensor: its scalars (the step count t may differ between tensors). */
    auto scalars = [&](int64_t t) {
        tt::AdamScalars s;
        s.b1 = (float)(1.0 - (1.0 - beta1)); /* lerp's 1 - w, as PyTorch forms it */
        s.one_minus_b1 = (float)(1.0 - beta1);
        s.lerp_from_m = (1.0 - beta1) < 0.5;
        s.b2 = (float)beta2;
        s.one_minus_b2 = (float)(1.0 - beta2);
        s.decay = decoupled ? (float)(1.0 - lr * weight_decay) : 1.0f;
        s.l2 = decoupled ? 0.0f : (float)weight_decay;
        s.step_size = (float)(lr / (1.0 - std::pow(beta1, (double)steps[t])));
        s.inv_sqrt_bc2 = (float)(1.0 / std::sqrt(1.0 - std::pow(beta2, (double)steps[t])));
        s.eps = (float)eps;
        return s;
    };
    const int nt = tt::memory_bound_threads((double)total, total / 4096 + 1);
    tt::parallel_for(total, TT_PARALLEL_CHUNK_ELEMENTS, nt, [&](int64_t begin, int64_t end, int) {
        int64_t base = 0;
        for (int64_t t = 0; t < count && base < end; base += numel[t], ++t) {
            const int64_t lo = std::max(begin, base), hi = std::min(end, base + numel[t]);
            if (lo >= hi) continue;
            const int64_t off = lo - base;
            const tt::AdamScalars s = scalars(t);
            k.adam(params[t] + off, grads[t] + off, exp_avg[t] + off, exp_avg_sq[t] + off, hi - lo, s);
        }
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_embedding_forward(const float *weight, int64_t vocab, int64_t dim,
                                                 const int64_t *ids, int64_t n, float *out) {
    static const char *kFn = "tt_embedding_forward";
    tt_status st = tt::check_embedding_sizes(kFn, vocab, dim, n);
    if (st != TT_OK) return st;
    if (n > 0 && ids == nullptr) return tt::fail(TT_ERR_NULL_POINTER, "%s: ids is NULL with n=%lld", kFn, (long long)n);
    if (n > 0 && dim > 0 && (weight == nullptr || out == nullptr))
        return tt::fail(TT_ERR_NULL_POINTER, "%s: weight or out is NULL", kFn);
    st = tt::check_ids(kFn, ids, n, vocab);
    if (st != TT_OK) return st;
    const tt::TrainKernels &k = tt::train_kernels(tt::active_isa());
    tt::set_kernel_path(k.gather_path);
    if (n == 0 || dim == 0) return TT_OK;
    const int nt = tt::memory_bound_threads((double)n * dim, n);
    tt::parallel_for(n, tt::row_grain(dim), nt, [&](int64_t r0, int64_t r1, int) {
        for (int64_t i = r0; i < r1; ++i)
            std::memcpy(out + i * dim, weight + ids[i] * dim, (size_t)dim * sizeof(float));
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_embedding_backward(const float *grad_out, const int64_t *ids,
                                                  int64_t n, int64_t dim, float *grad_weight,
                                                  int64_t vocab, int accumulate) {
    static const char *kFn = "tt_embedding_backward";
    tt_status st = tt::check_embedding_sizes(kFn, vocab, dim, n);
    if (st != TT_OK) return st;
    if (n > 0 && ids == nullptr) return tt::fail(TT_ERR_NULL_POINTER, "%s: ids is NULL with n=%lld", kFn, (long long)n);
    if (dim > 0 && ((n > 0 && grad_out == nullptr) || (vocab > 0 && grad_weight == nullptr)))
        return tt::fail(TT_ERR_NULL_POINTER, "%s: grad_out or grad_weight is NULL", kFn);
    st = tt::check_ids(kFn, ids, n, vocab);
    if (st != TT_OK) return st;
    const tt::TrainKernels &k = tt::train_kernels(tt::active_isa());
    tt::set_kernel_path(k.scatter_path);
    if (dim == 0) return TT_OK;
    if (!accumulate && vocab > 0) std::memset(grad_weight, 0, (size_t)(vocab * dim) * sizeof(float));
    if (n == 0) return TT_OK;
    /* Column slices of at least 16 floats (a cache line's worth) per thread. */
    const int nt = tt::memory_bound_threads((double)n * dim, dim / 16);
    /* Each column's sums run over the ids in order, so how columns are cut changes no bit. */
    tt::parallel_for(dim, std::max<int64_t>(16, (dim / 8 + 15) / 16 * 16), nt, [&](int64_t c0, int64_t c1, int) {
        if (c0 >= c1) return;
        for (int64_t i = 0; i < n; ++i)
            k.add_row(grad_weight + ids[i] * dim + c0, grad_out + i * dim + c0, c1 - c0);
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_relu_forward(const float *x, float *y, int64_t n) {
    static const char *kFn = "tt_relu_forward";
    if (n < 0) return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: n=%lld is negative", kFn, (long long)n);
    if (n > INT64_MAX / 4) return tt::fail(TT_ERR_OVERFLOW, "%s: n=%lld floats overflow int64 bytes", kFn, (long long)n);
    if (n > 0 && (x == nullptr || y == nullptr)) return tt::fail(TT_ERR_NULL_POINTER, "%s: x or y is NULL", kFn);
    const tt::TrainKernels &k = tt::train_kernels(tt::active_isa());
    tt::set_kernel_path(k.relu_path);
    const int nt = tt::memory_bound_threads((double)n, n / 4096 + 1, tt::solo_cost::kReluNs);
    tt::parallel_for(n, TT_PARALLEL_CHUNK_ELEMENTS, nt, [&](int64_t b, int64_t e, int) { k.relu(x + b, y + b, e - b); });
    return TT_OK;
}

extern "C" TT_API tt_status tt_relu_backward(const float *y, const float *grad_y, float *grad_x,
                                             int64_t n) {
    static const char *kFn = "tt_relu_backward";
    if (n < 0) return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: n=%lld is negative", kFn, (long long)n);
    if (n > INT64_MAX / 4) return tt::fail(TT_ERR_OVERFLOW, "%s: n=%lld floats overflow int64 bytes", kFn, (long long)n);
    if (n > 0 && (y == nullptr || grad_y == nullptr || grad_x == nullptr))
        return tt::fail(TT_ERR_NULL_POINTER, "%s: y, grad_y or grad_x is NULL", kFn);
    const tt::TrainKernels &k = tt::train_kernels(tt::active_isa());
    tt::set_kernel_path(k.relu_backward_path);
    const int nt = tt::memory_bound_threads((double)n, n / 4096 + 1, tt::solo_cost::kReluNs);
    tt::parallel_for(n, TT_PARALLEL_CHUNK_ELEMENTS, nt, [&](int64_t b, int64_t e, int) {
        k.relu_backward(y + b, grad_y + b, grad_x + b, e - b);
    });
    return TT_OK;
}
