/*
 * fusion_kernels.h -- private: the per-op tile loops of the fusion interpreter, per ISA.
 *
 * The interpreter (interp.cpp) evaluates one op over one tile of n <= 1024 contiguous
 * elements at a time; every operand and result is a contiguous array (scratch tiles in L1,
 * or an input / output row read or written in place). A kernel may be called with y equal
 * to an operand (element j is read before element j is written), never partly overlapping.
 *
 * float32 has one table per ISA: fusion_ops_scalar.cpp (the portable reference, a template
 * on the element type that float64 always uses too), and fusion_ops_avx2.cpp /
 * fusion_ops_avx512.cpp / fusion_ops_neon.cpp, which instantiate the one vector template
 * fusion_ops_vec.h with their ISA's vector type. exp, tanh, sigmoid and GELU are vectorised
 * there through the runtime's vector exp (cpu/simd_exp.h, the GELU kernel's constants);
 * log, erf and pow call the C library per element on every ISA (exact, and outside the
 * performance targets).
 *
 * Semantics shared by every table (NumPy's): MAX/MIN and MAX_ROW give NaN if an operand is
 * NaN; RELU keeps NaN; comparisons give 1/0 (NaN compares false, NE true); WHERE takes b
 * where the condition is non-zero (NaN counts as non-zero).
 */
#pragma once
#include <cstdint>

namespace tt {
namespace fusion {

struct F32Kernels {
    const char *isa;  // "scalar", "avx2", "avx512", "neon"
    void (*unary)(int op, const float *a, float *y, int64_t n, double imm);
    void (*binary)(int op, const float *a, const float *b, float *y, int64_t n);
    /* y = cond != 0 ? b : c, cond already in the node dtype */
    void (*where)(const float *cond, const float *b, const float *c, float *y, int64_t n);
    double (*sum)(const float *a, int64_t n);
    float (*max)(const float *a, int64_t n);  // NaN if any is NaN; -inf for n == 0
    /* Copy bytes to memory that will not be read soon, bypassing the caches where the ISA
     * has non-temporal stores (no read-for-ownership of the destination lines); call
     * fence() before the data is handed to another thread. memcpy where it has none. */
    void (*stream_copy)(void *dst, const void *src, int64_t bytes);
    void (*fence)();
};

extern const F32Kernels kF32Scalar;
#if defined(TT_HAVE_AVX2_KERNELS)
extern const F32Kernels kF32Avx2;
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
extern const F32Kernels kF32Avx512;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
extern const F32Kernels kF32Neon;
#endif

/* memcpy and nothing: the stream_copy / fence of ISAs without non-temporal stores. */
void plain_copy(void *dst, const void *src, int64_t bytes);
void no_fence();

/* float64: scalar loops (fusion_ops_scalar.cpp) on every ISA. */
void f64_unary(int op, const double *a, double *y, int64_t n, double imm);
void f64_binary(int op, const double *a, const double *b, double *y, int64_t n);
void f64_where(const double *cond, const double *b, const double *c, double *y, int64_t n);
double f64_sum(const double *a, int64_t n);
double f64_max(const double *a, int64_t n);

}  // namespace fusion
}  // namespace tt
