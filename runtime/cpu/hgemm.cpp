/*
 * hgemm.cpp -- half-precision GEMM: float16 in memory, float32 arithmetic.
 *
 *   C = alpha * op(A) @ op(B) + beta * C      A, B, C: IEEE binary16 (uint16_t bits)
 *
 * NumPy has no BLAS for float16 and multiplies it at well under 1 GFLOP/s, which
 * makes float16 training a GEMM problem. This file converts op(A), op(B) (and C when
 * beta != 0) to float32 once -- O(MK + KN + MN) work, with F16C when the CPU has it --
 * runs the float32 GEMM driver (packing, micro-kernels, threads) on them, and rounds
 * the result to float16 (nearest even). Products and sums are float32: the usual
 * "f16 storage, f32 accumulation" contract of mixed precision. The extra memory is
 * one float32 copy of each operand.
 *
 * tt_hgemm_reference does the same arithmetic with the scalar converters and the
 * triple-loop reference GEMM; the conversion functions are exported for tests.
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/isa.h"
#include "cpu/gemm_kernels.h"
#include "cpu/half_kernels.h"

namespace tt {

#if defined(TT_HAVE_AVX2_KERNELS)
void convert_f16_to_f32_f16c(const uint16_t *src, float *dst, int64_t n);
void convert_f32_to_f16_f16c(const float *src, uint16_t *dst, int64_t n);
#endif

namespace {

void widen_row(const uint16_t *src, float *dst, int64_t n, bool fast) {
#if defined(TT_HAVE_AVX2_KERNELS)
    if (fast) return convert_f16_to_f32_f16c(src, dst, n);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void narrow_row(const float *src, uint16_t *dst, int64_t n, bool fast) {
#if defined(TT_HAVE_AVX2_KERNELS)
    if (fast) return convert_f32_to_f16_f16c(src, dst, n);
#endif
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

bool use_f16c() {
#if defined(TT_HAVE_AVX2_KERNELS)
    // F16C is a separate CPUID bit; every AVX2 CPU we know has it, but check anyway.
    return active_isa() != TT_ISA_SCALAR && cpu_has_f16c();
#else
    return false;
#endif
}

struct FreeDeleter {
    void operator()(float *p) const { std::free(p); }
};
using FloatBuffer = std::unique_ptr<float, FreeDeleter>;

/* rows x cols half matrix with leading dimension ld -> contiguous float (ld = cols). */
bool widen(const uint16_t *src, int64_t rows, int64_t cols, int64_t ld, bool fast, FloatBuffer *out) {
    size_t n = (size_t)(rows * cols);
    out->reset(static_cast<float *>(std::malloc((n ? n : 1) * sizeof(float))));
    if (!*out) return false;
    if (n == 0) return true;  // src may be NULL and ld anything: never index it
    for (int64_t r = 0; r < rows; ++r) widen_row(src + r * ld, out->get() + r * cols, cols, fast);
    return true;
}

using SgemmFn = tt_status (*)(int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                              const float *, int64_t, float, float *, int64_t);

tt_status hgemm(const char *fn, bool fast, SgemmFn sgemm, const char *path, int transA, int transB,
                int64_t M, int64_t N, int64_t K, float alpha, const uint16_t *A, int64_t lda,
                const uint16_t *B, int64_t ldb, float beta, uint16_t *C, int64_t ldc) {
    // Same argument rules as tt_sgemm (the float-sized overflow check is the stricter one).
    const GemmArgs g{transA != 0, transB != 0, M, N, K, alpha, (const float *)A, lda,
                     (const float *)B, ldb, beta, (float *)C, ldc};
    tt_status st = gemm_check_args(fn, g);
    if (st != TT_OK) return st;
    set_kernel_path(path);
    if (M == 0 || N == 0) return TT_OK;
    const int64_t a_rows = transA ? K : M, a_cols = transA ? M : K;
    const int64_t b_rows = transB ? N : K, b_cols = transB ? K : N;
    FloatBuffer a32, b32, c32;
    if (!widen(A, a_rows, a_cols, lda, fast, &a32) || !widen(B, b_rows, b_cols, ldb, fast, &b32))
        return fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate float32 copies of A and B", fn);
    if (beta != 0.0f) {
        if (!widen(C, M, N, ldc, fast, &c32))
            return fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate a float32 copy of C", fn);
    } else {
        c32.reset(static_cast<float *>(std::malloc((size_t)(M * N) * sizeof(float))));
        if (!c32) return fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate a float32 C", fn);
    }
    st = sgemm(transA, transB, M, N, K, alpha, a32.get(), a_cols ? a_cols : 1, b32.get(),
               b_cols ? b_cols : 1, beta, c32.get(), N);
    set_kernel_path(path);  // the float32 call recorded its own path
    if (st != TT_OK) return st;
    for (int64_t r = 0; r < M; ++r) narrow_row(c32.get() + r * N, C + r * ldc, N, fast);
    return TT_OK;
}

}  // namespace

void convert_f16_to_f32(const uint16_t *src, float *dst, int64_t n) { widen_row(src, dst, n, use_f16c()); }

void convert_f32_to_f16(const float *src, uint16_t *dst, int64_t n) { narrow_row(src, dst, n, use_f16c()); }

}  // namespace tt

extern "C" {

TT_API tt_status tt_hgemm(int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha,
                          const uint16_t *A, int64_t lda, const uint16_t *B, int64_t ldb, float beta,
                          uint16_t *C, int64_t ldc) {
    const bool fast = tt::use_f16c();
    // The path names the float32 micro-kernel that does the arithmetic.
    static thread_local char path[48];
    std::snprintf(path, sizeof path, "hgemm:%s%s", tt_isa_name(tt::active_isa()), fast ? "+f16c" : "");
    return tt::hgemm("tt_hgemm", fast, tt_sgemm, path, transA, transB, M, N, K, alpha, A, lda, B, ldb,
                     beta, C, ldc);
}

TT_API tt_status tt_hgemm_reference(int transA, int transB, int64_t M, int64_t N, int64_t K,
                                    float alpha, const uint16_t *A, int64_t lda, const uint16_t *B,
                                    int64_t ldb, float beta, uint16_t *C, int64_t ldc) {
    return tt::hgemm("tt_hgemm_reference", false, tt_sgemm_reference, "hgemm:reference", transA,
                     transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

TT_API tt_status tt_f16_to_f32(const uint16_t *src, float *dst, int64_t n) {
    if (n < 0) return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_f16_to_f32: n=%lld is negative", (long long)n);
    if (n > 0) {
        TT_CHECK_NOT_NULL("tt_f16_to_f32", src);
        TT_CHECK_NOT_NULL("tt_f16_to_f32", dst);
        tt::convert_f16_to_f32(src, dst, n);
    }
    return TT_OK;
}

TT_API tt_status tt_f32_to_f16(const float *src, uint16_t *dst, int64_t n) {
    if (n < 0) return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_f32_to_f16: n=%lld is negative", (long long)n);
    if (n > 0) {
        TT_CHECK_NOT_NULL("tt_f32_to_f16", src);
        TT_CHECK_NOT_NULL("tt_f32_to_f16", dst);
        tt::convert_f32_to_f16(src, dst, n);
    }
    return TT_OK;
}

}  // extern "C"
