/*
 * error.h -- private: how runtime code reports failure.
 *
 * Every public function that can fail returns a tt_status. The detail goes into a
 * thread-local message that tt_last_error() returns. Code reports a failure with
 *
 *     return tt_fail(TT_ERR_SHAPE_MISMATCH, "tt_sgemm: lda=%lld is smaller than K=%lld", ...);
 *
 * and nothing else: no exceptions cross the ABI, nothing aborts.
 */
#pragma once
#include "tinytorch/tinytorch.h"

#include <cstdint>

namespace tt {

/* Record a printf-style message for this thread and return status. */
tt_status fail(tt_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Clear this thread's message (public calls do this on entry only when cheap). */
void clear_error();

/* Record which code path a kernel took ("sgemm:avx2"); read by tt_last_kernel_path(). */
void set_kernel_path(const char *path);

/* Overflow-checked arithmetic on non-negative int64 sizes. Return false on overflow. */
inline bool mul_overflows(int64_t a, int64_t b, int64_t *out) {
    return __builtin_mul_overflow(a, b, out);
}
inline bool add_overflows(int64_t a, int64_t b, int64_t *out) {
    return __builtin_add_overflow(a, b, out);
}

}  // namespace tt

/* Convenience: fail with TT_ERR_NULL_POINTER when p is NULL. */
#define TT_CHECK_NOT_NULL(fn, p)                                                            \
    do {                                                                                     \
        if ((p) == nullptr) return tt::fail(TT_ERR_NULL_POINTER, "%s: argument '%s' is NULL", \
                                            (fn), #p);                                       \
    } while (0)
