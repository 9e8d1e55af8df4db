/*
 * parallel.h -- private: the one way kernels split a range of rows across threads.
 *
 * split_range gives part `index` of `count` items cut into `parts` near-equal contiguous
 * runs; parallel_ranges runs body(begin, end, tid) once per thread of an OpenMP team of
 * up to nt threads (on the caller's thread alone when nt == 1, which enters no parallel
 * region) and returns the team's real size (OpenMP may give fewer threads than asked,
 * in a nested region for example). Deterministic: a given team size always gives the
 * same split.
 */
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/config.h"
#include "core/isa.h"

#if defined(TT_HAVE_OPENMP)
#include <omp.h>
#endif

namespace tt {

/* [begin, end) of part `index` when `count` items are split into `parts` near-equal runs. */
inline void split_range(int64_t count, int parts, int index, int64_t *begin, int64_t *end) {
    const int64_t base = count / parts, extra = count % parts;
    *begin = index * base + std::min<int64_t>(index, extra);
    *end = *begin + base + (index < extra ? 1 : 0);
}

/* Threads for a row-wise elementwise kernel over rows x cols: one below
 * TT_ELEMENTWISE_PARALLEL_MIN elements (waking a team costs more than it saves), else up to
 * one per row. */
/* Threads for memory-bound work of `work` elements cut into `parts` independent pieces:
 * one below TT_ELEMENTWISE_PARALLEL_MIN elements (waking a team costs more than it saves) or
 * with fewer than two pieces, else up to one per piece. */
inline int memory_bound_threads(double work, int64_t parts) {
    const int nt = num_threads();
    if (nt <= 1 || parts < 2 || work < (double)TT_ELEMENTWISE_PARALLEL_MIN) return 1;
    return (int)std::min<int64_t>(nt, parts);
}

inline int elementwise_threads(int64_t rows, int64_t cols) {
    return memory_bound_threads((double)rows * (double)cols, rows);
}

/* Column sums over rows (grad_bias, grad_gamma, ...) add this many rows in float before
 * adding them to float64 totals: short enough that float rounding stays near eps, long
 * enough to amortise the add. */
constexpr int64_t kColsumChunkRows = 64;

template <class Body>
int parallel_ranges(int64_t count, int nt, Body body) {
    if (nt <= 1) {
        body(int64_t{0}, count, 0);
        return 1;
    }
    int team = 1;
#if defined(TT_HAVE_OPENMP)
#pragma omp parallel num_threads(nt)
    {
        const int size = omp_get_num_threads(), tid = omp_get_thread_num();
        if (tid == 0) team = size;  // read only after the region ends
        int64_t begin, end;
        split_range(count, size, tid, &begin, &end);
        body(begin, end, tid);
    }
#else
    body(int64_t{0}, count, 0);
#endif
    return team;
}

}  // namespace tt
