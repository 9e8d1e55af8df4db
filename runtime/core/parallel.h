/*
 * parallel.h -- private: the one way kernels split work across threads.
 *
 * What it owns: the loops kernels write on top of the runtime's thread pool
 * (core/thread_pool.h, where the threading model is described) and the rules that decide
 * how many threads a kernel family may use. What it assumes: a body writes only its own
 * part of the result, and anything it reduces goes to a per-chunk partial that the kernel
 * adds up in chunk order afterwards.
 *
 *   parallel_chunks(chunks, nt, body(chunk, slot))      chunk = 0 .. chunks-1
 *   parallel_for(count, grain, nt, body(begin, end, slot))
 *       [0, count) cut into runs of `grain` items (the last one shorter): the cut depends
 *       on count and grain only, never on nt, so a reduction over the runs gives the same
 *       bits on every thread count.
 *
 * `slot` (0 .. nt-1) indexes per-thread scratch; it says nothing about which part of the
 * work a body gets. nt <= 1 runs everything on the caller, in order.
 */
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/config.h"
#include "core/thread_pool.h"

namespace tt {

/* [begin, end) of part `index` when `count` items are split into `parts` near-equal runs. */
inline void split_range(int64_t count, int parts, int index, int64_t *begin, int64_t *end) {
    const int64_t base = count / parts, extra = count % parts;
    *begin = index * base + std::min<int64_t>(index, extra);
    *end = *begin + base + (index < extra ? 1 : 0);
}

template <class Body>
void parallel_chunks(int64_t chunks, int nt, Body &&body) {
    if (chunks <= 0) return;
    if (nt <= 1 || chunks == 1) {
        for (int64_t c = 0; c < chunks; ++c) body(c, 0);
        return;
    }
    using B = typename std::remove_reference<Body>::type;
    run_chunks(chunks, nt, [](void *ctx, int64_t c, int slot) { (*static_cast<B *>(ctx))(c, slot); },
               const_cast<void *>(static_cast<const void *>(&body)));
}

inline int64_t chunk_count(int64_t count, int64_t grain) {
    return count <= 0 ? 0 : (count + grain - 1) / grain;
}

template <class Body>
void parallel_for(int64_t count, int64_t grain, int nt, Body &&body) {
    if (count <= 0) return;
    grain = std::max<int64_t>(1, grain);
    parallel_chunks(chunk_count(count, grain), nt, [&](int64_t c, int slot) {
        const int64_t begin = c * grain;
        body(begin, std::min(count, begin + grain), slot);
    });
}

/* One-thread time estimates, for the pool's wake-up rule (threads_now: a call estimated
 * under 150 us runs on its caller when every worker sleeps, since waking one costs
 * 30-60 us). All of them are here. Measured on one thread of the 2-vCPU Zen 3 (AVX2) by
 * benchmarks/bench_wakeup.py (ranges over three runs): the memory-bound kernels'
 * nanoseconds per element, the slope between 512 and 2048 rows of 1024 floats (bias + GELU
 * 0.68-0.69, softmax 0.72-0.92, softmax backward 0.39-0.59, layer norm 0.38-0.58, ReLU
 * 0.19-0.23, fused chain a*b+1 compiled 0.34-0.44 and interpreted 0.67-0.87); the rest take
 * 1 ns. With 200 us of Python between calls, two threads against one, before this rule:
 * bias + GELU 128 x 1024 1.03x, layer norm 128 x 1024 1.25x, a compiled fused chain
 * 256 x 1024 1.25x (all now alone: 0.91-1.01x in bench_wakeup.md), bias + GELU 256 x 1024
 * 0.77x, softmax 256 x 1024 0.69x (still two threads). */
namespace solo_cost {
constexpr double kNsPerElement = 1.0;
constexpr double kBiasGeluNs = 0.7, kSoftmaxNs = 0.9, kLayerNormNs = 0.6, kReluNs = 0.25;
constexpr double kFusedCompiledNs = 0.45, kFusedInterpNs = 0.7;
/* GEMM: multiply-adds at 40 per ns (83-90 % of the FMA peak) or its operand bytes at 10 GB/s,
 * the longer; int8 GEMM the same (8 x 768 x 768 gained nothing from two threads, 16 rows did).
 * Attention: its two products' multiply-adds at 25 per ns (1 x 4 x 64 x 64, 2M: 1.08x on two
 * threads; 1 x 4 x 128 x 64: 0.80x). */
constexpr double kGemmMacsPerUs = 40000, kGemmBytesPerUs = 10000, kAttentionMacsPerUs = 25000;
}  // namespace solo_cost

/* Threads for memory-bound work of `work` elements cut into `parts` independent pieces,
 * each element costing about `ns_per_element` on one thread: one below
 * TT_ELEMENTWISE_PARALLEL_MIN elements or with fewer than two pieces, else up to one per
 * piece, as threads_now allows. */
inline int memory_bound_threads(double work, int64_t parts,
                                double ns_per_element = solo_cost::kNsPerElement) {
    const int nt = num_threads();
    if (nt <= 1 || parts < 2 || work < (double)TT_ELEMENTWISE_PARALLEL_MIN) return 1;
    return threads_now((int)std::min<int64_t>(nt, parts), work * ns_per_element / 1000.0);
}

/* Rows per chunk of a row-wise kernel over rows x cols: about TT_PARALLEL_CHUNK_ELEMENTS
 * elements (a few microseconds of work: short enough that a preempted worker holds back
 * little, long enough that claiming costs nothing), at least one row, and a multiple of
 * `multiple` rows. */
inline int64_t row_grain(int64_t cols, int64_t multiple = 1) {
    int64_t rows = std::max<int64_t>(1, (int64_t)TT_PARALLEL_CHUNK_ELEMENTS / std::max<int64_t>(cols, 1));
    rows = (rows + multiple - 1) / multiple * multiple;
    return rows;
}

/* Items per chunk when `items` pieces hold `work` elements in all: about
 * TT_PARALLEL_CHUNK_ELEMENTS elements a chunk, at least one item. */
inline int64_t grain_for(int64_t items, double work) {
    if (items <= 0 || work <= 0) return 1;
    const double per_item = work / (double)items;
    return std::max<int64_t>(1, (int64_t)((double)TT_PARALLEL_CHUNK_ELEMENTS / per_item));
}

inline int elementwise_threads(int64_t rows, int64_t cols, double ns_per_element) {
    return memory_bound_threads((double)rows * (double)cols, rows, ns_per_element);
}

/* Column sums over rows (grad_bias, grad_gamma, ...) add this many rows in float before
 * adding them to float64 totals: short enough that float rounding stays near eps, long
 * enough to amortise the add. */
constexpr int64_t kColsumChunkRows = 64;

/* Rows per chunk of a column-sum kernel: whole kColsumChunkRows blocks, and at most
 * kMaxSumChunks chunks, so the per-chunk partial sums (chunks x cols doubles) stay small. */
constexpr int64_t kMaxSumChunks = 64;
inline int64_t colsum_grain(int64_t rows, int64_t cols) {
    const int64_t by_count = (rows + kMaxSumChunks - 1) / kMaxSumChunks;
    const int64_t g = std::max(row_grain(cols), by_count);
    return (g + kColsumChunkRows - 1) / kColsumChunkRows * kColsumChunkRows;
}

}  // namespace tt
