/*
 * row_checks.h -- private: the argument checks shared by the kernel families that work on a
 * rows x cols float matrix, one row at a time (bias_gelu.cpp, rownorm.cpp).
 *
 * Owns: the size rule (rows and cols non-negative, rows x cols floats addressable in int64
 * bytes) with its messages, and the overlap test between two float buffers. Assumes the
 * lengths it is given were checked by check_rows_cols first; never touches the data.
 */
#pragma once
#include <cstdint>

#include "core/error.h"

namespace tt {

/* rows >= 0, cols >= 0, and rows * cols floats fit in int64 bytes; the message names fn.
 * On success *elements (when given) is rows * cols. */
inline tt_status check_rows_cols(const char *fn, int64_t rows, int64_t cols,
                                 int64_t *elements = nullptr) {
    if (rows < 0) return fail(TT_ERR_INVALID_ARGUMENT, "%s: rows=%lld is negative", fn, (long long)rows);
    if (cols < 0) return fail(TT_ERR_INVALID_ARGUMENT, "%s: cols=%lld is negative", fn, (long long)cols);
    int64_t n = 0, bytes = 0;
    if (mul_overflows(rows, cols, &n) || mul_overflows(n, (int64_t)sizeof(float), &bytes))
        return fail(TT_ERR_OVERFLOW, "%s: rows=%lld x cols=%lld floats overflow int64 bytes", fn,
                    (long long)rows, (long long)cols);
    if (elements) *elements = n;
    return TT_OK;
}

/* The float ranges [a, a + na) and [b, b + nb) share memory. A NULL or empty range
 * overlaps nothing. */
inline bool float_ranges_overlap(const void *a, int64_t na, const void *b, int64_t nb) {
    if (a == nullptr || b == nullptr || na <= 0 || nb <= 0) return false;
    const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return pa < pb + (uintptr_t)nb * sizeof(float) && pb < pa + (uintptr_t)na * sizeof(float);
}

}  // namespace tt
