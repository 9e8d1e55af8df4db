/*
 * interp.cpp -- the tile interpreter of fusion programs (tt_fusion_run's engine).
 *
 * The domain is rows x cols (cols = the last axis). Work is cut into tiles of T <= 1024
 * columns of one row; every step of a pass (plan.cpp) runs over the whole tile before the
 * next step, so each op is one SIMD loop over T contiguous elements (fusion_kernels.h) and
 * every intermediate lives in a per-thread scratch slot of T elements (L1-sized: T is
 * chosen so that all slots together stay within kScratchBudgetBytes), never in DRAM.
 *
 *   inputs   a unit last-axis stride is read in place; stride 0 fills the slot with the
 *            one value; any other stride is gathered into the slot;
 *   outputs  written from the slot (unit stride: memcpy; else scattered) after the tile's
 *            last step, so an output may be the very buffer of an input; the last op of the
 *            output pass writes straight into its output when that is its only output and
 *            the stride is 1 (nothing reads after it); outputs of 8 MB and more are instead
 *            copied from the slot with non-temporal stores (no read-for-ownership);
 *   rows     reductions run in passes (fusion_ir.h): per row, pass p folds each tile into
 *            the row's accumulators (SUM/MEAN in double, MAX_ROW with NaN propagation),
 *            then the row values of stage p are computed; FULL nodes needed by several
 *            passes are recomputed;
 *   ACCUMULATE  an output with a zero stride on an axis of size != 1 gets double partial
 *            sums over its distinct elements, one set per chunk of a fixed number of
 *            chunks (kAccChunks), added in chunk order at the end (the same bits on any
 *            thread count) and written (zeros included).
 *
 * Threads (core/parallel.h): one below TT_ELEMENTWISE_PARALLEL_MIN domain points, else up
 * to the runtime's thread count, over chunks of rows when the program has reductions or
 * row outputs, else over chunks of (row, tile) blocks. Without reductions, adjacent axes that every operand
 * walks contiguously are merged first, so a contiguous [N, 7] domain runs as long tiles.
 */
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "fusion/fusion_ir.h"
#include "fusion/fusion_kernels.h"
#include "fusion/fusion_scalar.h"

namespace tt {
namespace fusion {

/* Chunks of a program with an accumulated output: each owns one set of partial sums. */
constexpr int64_t kAccChunks = 16;

namespace {

constexpr int64_t kScratchBudgetBytes = 32 * 1024;
constexpr int64_t kTileMin = 64, kTileMax = 1024;
/* A unit-stride full output of at least this many bytes is written with non-temporal
 * stores (no read-for-ownership of its lines: 4 instead of 5 memory transfers for
 * (x + bias) * scale). Far above L2 and a good part of a shared L3, so it would be evicted
 * before anyone read it back anyway. */
constexpr int64_t kStreamMinBytes = (int64_t)8 << 20;

const F32Kernels &f32_kernels_for(tt_isa isa) {
    switch (isa) {
#if defined(TT_HAVE_AVX512_KERNELS)
        case TT_ISA_AVX512: return kF32Avx512;
#endif
#if defined(TT_HAVE_AVX2_KERNELS)
        case TT_ISA_AVX2: return kF32Avx2;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_ISA_NEON: return kF32Neon;
#endif
        default: return kF32Scalar;
    }
}

int64_t elem_size(int dtype) { return dtype == TT_F64 ? 8 : 4; }

/* The domain as this run sees it (after merging axes) and every operand's strides. */
struct View {
    int rank;
    int64_t shape[TT_MAX_DIMS];
    int64_t rows, cols;
    std::vector<int64_t> in_strides, out_strides;  // R per operand
};

/* Distinct elements of an accumulated output: the axes it does not broadcast over. */
struct AccPlan {
    bool effective = false;  // some axis of size != 1 has stride 0
    int64_t n_compact = 0;
    int64_t compact_stride[TT_MAX_DIMS] = {};  // 0 on collapsed axes
};


/* Per-thread state: scratch slots, row values, the current row and tile. Each thread's
 * arrays live in one 64-byte aligned block of whole cache lines (and the struct itself is
 * line-aligned), so two threads never write the same line. */
struct alignas(64) ThreadState {
    double *scratch = nullptr;       // (n_slots + 1) tiles; the last one is WHERE's condition
    double *row_val = nullptr;       // per node: ROW values (and reduction accumulators)
    const void **val = nullptr;      // per node: its values over the current tile
    int64_t *in_off = nullptr, *out_off = nullptr;
    int *slot_node = nullptr;        // per slot: the row node whose value fills it, or -1
    double *slot_value = nullptr;    // per slot: that value
    int64_t idx[TT_MAX_DIMS] = {};   // multi-index of the current row (outer axes)
    void *block = nullptr;           // the allocation behind the arrays above
};

/* Bytes rounded up to whole cache lines. */
size_t line_round(size_t bytes) { return (bytes + 63) / 64 * 64; }

template <class T> void fill(T *y, T value, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = value;
}

template <class T> void gather(const T *x, int64_t stride, T *y, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j] = x[j * stride];
}

template <class T> void scatter(const T *x, T *y, int64_t stride, int64_t n) {
    for (int64_t j = 0; j < n; ++j) y[j * stride] = x[j];
}

/* Row value arithmetic: node i of the row stage, from its operands' row values. */
template <class T> double row_op(const Program &p, const Node &nd, const double *rv) {
    if (nd.op == OP_CAST) return (double)(T)rv[(size_t)nd.a];
    if (nd.op == OP_WHERE) return rv[(size_t)nd.a] != 0.0 ? rv[(size_t)nd.b] : rv[(size_t)nd.c];
    if (is_unary(nd.op)) return (double)unary_of<T>(nd.op, (T)rv[(size_t)nd.a], nd.imm);
    return (double)binary_of<T>(nd.op, (T)rv[(size_t)nd.a], (T)rv[(size_t)nd.b]);
}

struct Runner {
    const Program &p;
    const F32Kernels &k32;
    const void *const *inputs;
    void *const *outputs;
    View v;
    int64_t tile = kTileMax;
    std::vector<AccPlan> acc;       // per output
    std::vector<double *> partial;  // per output: team * n_compact doubles when accumulated
    int direct_output = -1;         // output the last op writes in place, or -1
    std::vector<char> stream;       // per output: stored with non-temporal stores

    /* Doubles between two threads' partial sums: whole cache lines. */
    static int64_t partial_stride(const AccPlan &ap) { return (ap.n_compact + 7) / 8 * 8; }

    double *slot_ptr(ThreadState &ts, int slot) const { return ts.scratch + (size_t)slot * (size_t)tile; }

    void set_row(int64_t r, ThreadState &ts) const {
        const int R = v.rank;
        for (int d = R - 2; d >= 0; --d) {
            ts.idx[d] = r % v.shape[d];
            r /= v.shape[d];
        }
        for (size_t k = 0; k < p.input_dtypes.size(); ++k) {
            int64_t off = 0;
            for (int d = 0; d + 1 < R; ++d) off += ts.idx[d] * v.in_strides[k * R + d];
            ts.in_off[k] = off;
        }
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            int64_t off = 0;
            for (int d = 0; d + 1 < R; ++d) off += ts.idx[d] * v.out_strides[o * R + d];
            ts.out_off[o] = off;
        }
    }

    void init_thread(ThreadState &ts) const {
        for (size_t i = 0; i < p.nodes.size(); ++i) {
            const Node &nd = p.nodes[i];
            if (nd.op == OP_CONST) ts.row_val[i] = nd.dtype == TT_F32 ? (double)(float)nd.imm : nd.imm;
        }
        eval_row_stage(0, ts);
    }

    void eval_row_stage(int stage, ThreadState &ts) const {
        for (int i : p.row_order) {
            const Node &nd = p.nodes[(size_t)i];
            if (nd.stage != stage) continue;
            ts.row_val[(size_t)i] = nd.dtype == TT_F32 ? row_op<float>(p, nd, ts.row_val)
                                                      : row_op<double>(p, nd, ts.row_val);
        }
    }

    void eval_step(const Pass &pass, size_t s, int64_t c0, int64_t n, ThreadState &ts, bool final_pass) const {
        const Step &st = pass.steps[s];
        const Node &nd = p.nodes[(size_t)st.node];
        const bool f32 = nd.dtype == TT_F32;
        const int R = v.rank;
        void *y = st.slot >= 0 ? slot_ptr(ts, st.slot) : nullptr;
        switch (st.kind) {
            case STEP_LOAD: {
                ts.slot_node[(size_t)st.slot] = -1;
                const int k = nd.a;
                const int64_t stride = v.in_strides[(size_t)k * R + R - 1];
                const int64_t off = ts.in_off[(size_t)k] + c0 * stride;
                if (f32) {
                    const float *x = static_cast<const float *>(inputs[k]) + off;
                    if (stride == 1) { ts.val[(size_t)st.node] = x; return; }
                    if (stride == 0) fill(static_cast<float *>(y), *x, n);
                    else gather(x, stride, static_cast<float *>(y), n);
                } else {
                    const double *x = static_cast<const double *>(inputs[k]) + off;
                    if (stride == 1) { ts.val[(size_t)st.node] = x; return; }
                    if (stride == 0) fill(static_cast<double *>(y), *x, n);
                    else gather(x, stride, static_cast<double *>(y), n);
                }
                break;
            }
            case STEP_BCAST: {
                /* Refill only when the slot holds something else: once per row and pass. */
                const double value = ts.row_val[(size_t)st.node];
                const size_t slot = (size_t)st.slot;
                if (ts.slot_node[slot] != st.node || std::memcmp(&ts.slot_value[slot], &value, sizeof value) != 0) {
                    if (f32) fill(static_cast<float *>(y), (float)value, tile);
                    else fill(static_cast<double *>(y), value, tile);
                    ts.slot_node[slot] = st.node;
                    ts.slot_value[slot] = value;
                }
                break;
            }
            case STEP_REDUCE: {
                const void *a = ts.val[(size_t)nd.a];
                double &accum = ts.row_val[(size_t)st.node];
                if (nd.op == OP_MAX_ROW) {
                    const double m = f32 ? (double)k32.max(static_cast<const float *>(a), n)
                                         : f64_max(static_cast<const double *>(a), n);
                    accum = max_of(accum, m);
                } else {
                    accum += f32 ? k32.sum(static_cast<const float *>(a), n)
                                 : f64_sum(static_cast<const double *>(a), n);
                }
                return;
            }
            case STEP_EVAL: {
                if (final_pass && direct_output >= 0 && (int)s == pass.last_eval) {
                    const int o = direct_output;
                    y = static_cast<char *>(outputs[o]) + (ts.out_off[(size_t)o] + c0) * elem_size(nd.dtype);
                } else {
                    ts.slot_node[(size_t)st.slot] = -1;
                }
                eval_op(nd, y, n, ts);
                break;
            }
        }
        ts.val[(size_t)st.node] = y;
    }

    void eval_op(const Node &nd, void *y, int64_t n, ThreadState &ts) const {
        const void *a = nd.a >= 0 ? ts.val[(size_t)nd.a] : nullptr;
        const void *b = nd.b >= 0 && nd.op != OP_POWI ? ts.val[(size_t)nd.b] : nullptr;
        const bool f32 = nd.dtype == TT_F32;
        if (nd.op == OP_CAST) {
            const int from = p.nodes[(size_t)nd.a].dtype;
            if (from == nd.dtype) std::memmove(y, a, (size_t)(n * elem_size(from)));
            else if (f32) for (int64_t j = 0; j < n; ++j) static_cast<float *>(y)[j] = (float)static_cast<const double *>(a)[j];
            else for (int64_t j = 0; j < n; ++j) static_cast<double *>(y)[j] = (double)static_cast<const float *>(a)[j];
            return;
        }
        if (nd.op == OP_WHERE) {
            const void *cond = a;
            if (p.nodes[(size_t)nd.a].dtype != nd.dtype) {  // 1/0 in the node dtype
                void *t = slot_ptr(ts, p.n_slots);
                if (f32) for (int64_t j = 0; j < n; ++j) static_cast<float *>(t)[j] = static_cast<const double *>(a)[j] != 0.0 ? 1.0f : 0.0f;
                else for (int64_t j = 0; j < n; ++j) static_cast<double *>(t)[j] = static_cast<const float *>(a)[j] != 0.0f ? 1.0 : 0.0;
                cond = t;
            }
            const void *c = ts.val[(size_t)nd.c];
            if (f32) k32.where(static_cast<const float *>(cond), static_cast<const float *>(ts.val[(size_t)nd.b]),
                               static_cast<const float *>(c), static_cast<float *>(y), n);
            else f64_where(static_cast<const double *>(cond), static_cast<const double *>(ts.val[(size_t)nd.b]),
                           static_cast<const double *>(c), static_cast<double *>(y), n);
            return;
        }
        if (is_unary(nd.op)) {
            if (f32) k32.unary(nd.op, static_cast<const float *>(a), static_cast<float *>(y), n, nd.imm);
            else f64_unary(nd.op, static_cast<const double *>(a), static_cast<double *>(y), n, nd.imm);
            return;
        }
        if (f32) k32.binary(nd.op, static_cast<const float *>(a), static_cast<const float *>(b), static_cast<float *>(y), n);
        else f64_binary(nd.op, static_cast<const double *>(a), static_cast<const double *>(b), static_cast<double *>(y), n);
    }

    /* Fold the tile of a full output into partial-sum set `part` (its chunk's). */
    void accumulate(int o, int part, int64_t c0, int64_t n, ThreadState &ts) const {
        const AccPlan &ap = acc[(size_t)o];
        const int R = v.rank;
        int64_t base = 0;
        for (int d = 0; d + 1 < R; ++d) base += ts.idx[d] * ap.compact_stride[d];
        double *sums = partial[(size_t)o] + (size_t)part * (size_t)partial_stride(ap) + base;
        const Node &nd = p.nodes[(size_t)p.outputs[(size_t)o].node];
        const void *x = ts.val[(size_t)p.outputs[(size_t)o].node];
        if (ap.compact_stride[R - 1] != 0) {
            sums += c0;
            if (nd.dtype == TT_F32) for (int64_t j = 0; j < n; ++j) sums[j] += static_cast<const float *>(x)[j];
            else for (int64_t j = 0; j < n; ++j) sums[j] += static_cast<const double *>(x)[j];
        } else {
            *sums += nd.dtype == TT_F32 ? k32.sum(static_cast<const float *>(x), n)
                                        : f64_sum(static_cast<const double *>(x), n);
        }
    }

    void write_tile_outputs(int64_t c0, int64_t n, ThreadState &ts, int part) const {
        const int R = v.rank;
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const Node &nd = p.nodes[(size_t)p.outputs[o].node];
            if (nd.kind != FULL || (int)o == direct_output) continue;
            if (acc[o].effective) { accumulate((int)o, part, c0, n, ts); continue; }
            const int64_t stride = v.out_strides[o * R + R - 1];
            const int64_t esz = elem_size(nd.dtype);
            char *dst = static_cast<char *>(outputs[o]) + (ts.out_off[o] + c0 * stride) * esz;
            const void *src = ts.val[(size_t)p.outputs[o].node];
            if (stride == 1 && stream[o]) k32.stream_copy(dst, src, n * esz);
            else if (stride == 1) std::memmove(dst, src, (size_t)(n * esz));
            else if (nd.dtype == TT_F32) scatter(static_cast<const float *>(src), reinterpret_cast<float *>(dst), stride, n);
            else scatter(static_cast<const double *>(src), reinterpret_cast<double *>(dst), stride, n);
        }
    }

    void write_row_outputs(ThreadState &ts) const {
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const int node = p.outputs[o].node;
            const Node &nd = p.nodes[(size_t)node];
            if (nd.kind != ROW) continue;
            if (nd.dtype == TT_F32) static_cast<float *>(outputs[o])[ts.out_off[o]] = (float)ts.row_val[(size_t)node];
            else static_cast<double *>(outputs[o])[ts.out_off[o]] = ts.row_val[(size_t)node];
        }
    }

    void run_tile(const Pass &pass, int64_t c0, int64_t n, ThreadState &ts, bool final_pass) const {
        for (size_t s = 0; s < pass.steps.size(); ++s) eval_step(pass, s, c0, n, ts, final_pass);
    }

    /* Every pass over one whole row. */
    void run_row(int64_t r, ThreadState &ts, int part) const {
        set_row(r, ts);
        for (int stage = 1; stage <= p.max_stage; ++stage) {
            const Pass &pass = p.passes[(size_t)stage - 1];
            for (const Step &st : pass.steps)
                if (st.kind == STEP_REDUCE)
                    ts.row_val[(size_t)st.node] = p.nodes[(size_t)st.node].op == OP_MAX_ROW
                                                      ? -std::numeric_limits<double>::infinity() : 0.0;
            for (int64_t c0 = 0; c0 < v.cols; c0 += tile) run_tile(pass, c0, std::min(tile, v.cols - c0), ts, false);
            for (const Step &st : pass.steps) {
                if (st.kind != STEP_REDUCE) continue;
                const Node &nd = p.nodes[(size_t)st.node];
                double &x = ts.row_val[(size_t)st.node];
                if (nd.op == OP_MEAN) x = x / (double)v.cols;  // 0 / 0 = NaN for an empty row
                if (nd.dtype == TT_F32) x = (double)(float)x;
            }
            eval_row_stage(stage, ts);
        }
        const Pass &out_pass = p.passes.back();
        if (!out_pass.steps.empty())
            for (int64_t c0 = 0; c0 < v.cols; c0 += tile) {
                const int64_t n = std::min(tile, v.cols - c0);
                run_tile(out_pass, c0, n, ts, true);
                write_tile_outputs(c0, n, ts, part);
            }
        write_row_outputs(ts);
    }

    /* One (row, tile) block of a program without reductions or row outputs. */
    void run_block(int64_t item, int64_t tiles_per_row, ThreadState &ts, int part) const {
        const int64_t r = item / tiles_per_row, c0 = (item % tiles_per_row) * tile;
        set_row(r, ts);
        const int64_t n = std::min(tile, v.cols - c0);
        run_tile(p.passes.back(), c0, n, ts, true);
        write_tile_outputs(c0, n, ts, part);
    }
};

/* |stride| * (size - 1) summed over axes, times the element size, fits int64. */
bool span_fits(const int64_t *shape, const int64_t *strides, int rank, int64_t esz) {
    int64_t span = 0;
    for (int d = 0; d < rank; ++d) {
        if (shape[d] <= 1) continue;
        if (strides[d] == std::numeric_limits<int64_t>::min()) return false;
        int64_t t;
        if (mul_overflows(shape[d] - 1, strides[d] < 0 ? -strides[d] : strides[d], &t) || add_overflows(span, t, &span))
            return false;
    }
    int64_t bytes;
    return !mul_overflows(span + 1, esz, &bytes);
}

/* Merge axes d and d+1 wherever every operand walks them as one (stride[d] == shape[d+1] *
 * stride[d+1]); only for programs without row semantics. */
void merge_axes(View &v, int n_in, int n_out) {
    int R = v.rank;
    for (int d = R - 2; d >= 0; --d) {
        bool ok = true;
        auto check = [&](const std::vector<int64_t> &s, int count) {
            for (int k = 0; k < count && ok; ++k)
                if (s[(size_t)k * R + d] != v.shape[d + 1] * s[(size_t)k * R + d + 1]) ok = false;
        };
        check(v.in_strides, n_in);
        check(v.out_strides, n_out);
        if (!ok) continue;
        auto merge = [&](std::vector<int64_t> &s, int count) {
            std::vector<int64_t> t;
            for (int k = 0; k < count; ++k)
                for (int e = 0; e < R; ++e)
                    if (e != d) t.push_back(s[(size_t)k * R + e]);
            s.swap(t);
        };
        merge(v.in_strides, n_in);
        merge(v.out_strides, n_out);
        v.shape[d] *= v.shape[d + 1];
        for (int e = d + 1; e + 1 < R; ++e) v.shape[e] = v.shape[e + 1];
        --R;
        v.rank = R;
    }
    v.cols = v.shape[R - 1];
    v.rows = 1;
    for (int d = 0; d + 1 < R; ++d) v.rows *= v.shape[d];
}

}  // namespace

tt_status run_program(const Program &p, const void *const *inputs, const int64_t *input_strides,
                      void *const *outputs, const int64_t *output_strides) {
    static const char *kFn = "tt_fusion_run";
    const int R = p.rank, n_in = (int)p.input_dtypes.size(), n_out = (int)p.outputs.size();
    int64_t total = p.rows * p.cols;
    std::vector<char> used((size_t)n_in, 0);
    for (const Node &nd : p.nodes)
        if (nd.needed && nd.op == OP_INPUT) used[(size_t)nd.a] = 1;
    bool any_input = false;
    for (char u : used) any_input |= u != 0;
    if (any_input && (inputs == nullptr || input_strides == nullptr))
        return fail(TT_ERR_NULL_POINTER, "%s: inputs or input_strides is NULL but the program reads inputs", kFn);
    if (outputs == nullptr || output_strides == nullptr)
        return fail(TT_ERR_NULL_POINTER, "%s: outputs or output_strides is NULL", kFn);
    for (int k = 0; k < n_in; ++k) {
        if (!used[(size_t)k]) continue;
        if (total > 0 && inputs[k] == nullptr)
            return fail(TT_ERR_NULL_POINTER, "%s: input %d is NULL", kFn, k);
        if (!span_fits(p.shape, input_strides + (size_t)k * R, R, elem_size(p.input_dtypes[(size_t)k])))
            return fail(TT_ERR_OVERFLOW, "%s: input %d: its strides over the domain overflow int64 bytes", kFn, k);
    }
    std::vector<AccPlan> acc((size_t)n_out);
    for (int o = 0; o < n_out; ++o) {
        const Output &out = p.outputs[(size_t)o];
        const Node &nd = p.nodes[(size_t)out.node];
        const int64_t *s = output_strides + (size_t)o * R;
        const int axes = nd.kind == ROW ? R - 1 : R;  // a row output ignores its last stride
        bool touches = nd.kind == ROW ? p.rows > 0 : total > 0;
        if (!span_fits(p.shape, s, axes, elem_size(nd.dtype)))
            return fail(TT_ERR_OVERFLOW, "%s: output %d: its strides over the domain overflow int64 bytes", kFn, o);
        for (int d = 0; d < axes; ++d) {
            if (s[d] != 0 || p.shape[d] == 1) continue;
            if (!out.accumulate) {
                if (p.shape[d] > 1)
                    return fail(TT_ERR_INVALID_ARGUMENT,
                                "%s: output %d has stride 0 on axis %d of size %lld without "
                                "ACCUMULATE (a write race)",
                                kFn, o, d, (long long)p.shape[d]);
                continue;
            }
            acc[(size_t)o].effective = true;
        }
        if (acc[(size_t)o].effective) {
            AccPlan &ap = acc[(size_t)o];
            int64_t run = 1;
            for (int d = R - 1; d >= 0; --d) {
                const bool kept = s[d] != 0 && p.shape[d] != 1;
                ap.compact_stride[d] = kept ? run : 0;
                if (kept) run *= p.shape[d];
            }
            ap.n_compact = run;
            touches = run > 0;
        }
        if (touches && outputs[o] == nullptr) return fail(TT_ERR_NULL_POINTER, "%s: output %d is NULL", kFn, o);
    }

    const F32Kernels &k32 = f32_kernels_for(active_isa());
    char path[64];
    std::snprintf(path, sizeof path, "fusion:interp:%s", k32.isa);
    set_kernel_path(path);

    Runner run{p, k32, inputs, outputs, View{}, kTileMax, acc, {}, -1, {}};
    View &v = run.v;
    v.rank = R;
    std::copy(p.shape, p.shape + R, v.shape);
    v.rows = p.rows;
    v.cols = p.cols;
    v.in_strides.assign((size_t)n_in * R, 0);
    for (int k = 0; k < n_in; ++k)
        if (used[(size_t)k]) std::copy(input_strides + (size_t)k * R, input_strides + (size_t)(k + 1) * R, v.in_strides.begin() + (size_t)k * R);
    v.out_strides.assign(output_strides, output_strides + (size_t)n_out * R);
    const bool row_mode = p.max_stage > 0 || p.has_row_outputs;
    bool any_acc = false;
    for (const AccPlan &ap : acc) any_acc |= ap.effective;
    if (!row_mode && !any_acc) merge_axes(v, n_in, n_out);

    /* Tile: all slots (plus WHERE's condition tile) within the scratch budget, counted in
     * the widest element the program holds (slots are allocated as doubles regardless). */
    const int64_t slots = (int64_t)p.n_slots + 1;
    int64_t widest = 4;
    for (const Node &nd : p.nodes) widest = std::max(widest, elem_size(nd.dtype));
    run.tile = std::max(kTileMin, std::min(kTileMax, (kScratchBudgetBytes / (slots * widest)) / 64 * 64));

    run.stream.assign((size_t)n_out, 0);
    for (int o = 0; o < n_out; ++o) {
        const Node &nd = p.nodes[(size_t)p.outputs[(size_t)o].node];
        run.stream[(size_t)o] = nd.kind == FULL && !acc[(size_t)o].effective &&
                                v.out_strides[(size_t)o * v.rank + v.rank - 1] == 1 &&
                                (double)total * (double)elem_size(nd.dtype) >= (double)kStreamMinBytes;
    }
    /* The last op writes its output in place: its only output, not accumulated, stride 1,
     * not streamed. */
    const Pass &out_pass = p.passes.back();
    if (out_pass.last_eval >= 0 && out_pass.last_eval == (int)out_pass.steps.size() - 1) {
        const int node = out_pass.steps[(size_t)out_pass.last_eval].node;
        int count = 0, which = -1;
        for (int o = 0; o < n_out; ++o)
            if (p.outputs[(size_t)o].node == node) ++count, which = o;
        if (count == 1 && !acc[(size_t)which].effective && !run.stream[(size_t)which] && v.out_strides[(size_t)which * v.rank + v.rank - 1] == 1)
            run.direct_output = which;
    }

    const int64_t tiles_per_row = v.cols > 0 ? (v.cols + run.tile - 1) / run.tile : 0;
    const int64_t count = row_mode ? v.rows : v.rows * tiles_per_row;
    const int nt = memory_bound_threads((double)total, count, solo_cost::kFusedInterpNs);
    /* Chunks: about TT_PARALLEL_CHUNK_ELEMENTS points each; with an accumulated output, a
     * fixed number of chunks (each owns a partial sum), whatever the thread count. */
    const int64_t points_per_item = row_mode ? std::max<int64_t>(v.cols, 1) : run.tile;
    const int64_t grain = any_acc ? std::max<int64_t>(1, (count + kAccChunks - 1) / kAccChunks)
                                  : std::max<int64_t>(1, TT_PARALLEL_CHUNK_ELEMENTS / points_per_item);
    const int64_t chunks = chunk_count(count, grain);

    std::vector<ThreadState> states;
    try {
        states.resize((size_t)nt);
        run.partial.assign((size_t)n_out, nullptr);
    } catch (const std::bad_alloc &) {
        return fail(TT_ERR_OUT_OF_MEMORY, "%s: could not allocate the per-thread state", kFn);
    }
    const size_t n_nodes = p.nodes.size(), n_slot_tags = (size_t)p.n_slots + 1;
    const size_t per_thread = (size_t)slots * (size_t)run.tile;  // doubles: whole lines
    const size_t sz_scratch = per_thread * sizeof(double), sz_row = line_round(n_nodes * sizeof(double)),
                 sz_val = line_round(n_nodes * sizeof(void *)), sz_in = line_round((size_t)n_in * 8 + 8),
                 sz_out = line_round((size_t)n_out * 8), sz_tag = line_round(n_slot_tags * sizeof(int)),
                 sz_tagv = line_round(n_slot_tags * sizeof(double));
    const size_t block_bytes = sz_scratch + sz_row + sz_val + sz_in + sz_out + sz_tag + sz_tagv;
    bool oom = false;
    for (ThreadState &ts : states) {
        char *b = static_cast<char *>(std::aligned_alloc(64, block_bytes));
        if (b == nullptr) { oom = true; break; }
        ts.block = b;
        ts.scratch = reinterpret_cast<double *>(b);
        ts.row_val = reinterpret_cast<double *>(b += sz_scratch);
        ts.val = reinterpret_cast<const void **>(b += sz_row);
        ts.in_off = reinterpret_cast<int64_t *>(b += sz_val);
        ts.out_off = reinterpret_cast<int64_t *>(b += sz_in);
        ts.slot_node = reinterpret_cast<int *>(b += sz_out);
        ts.slot_value = reinterpret_cast<double *>(b += sz_tag);
        std::fill(ts.row_val, ts.row_val + n_nodes, 0.0);
        std::fill(ts.val, ts.val + n_nodes, nullptr);
        std::fill(ts.slot_node, ts.slot_node + n_slot_tags, -1);
        std::fill(ts.slot_value, ts.slot_value + n_slot_tags, 0.0);
    }
    for (int o = 0; o < n_out && !oom; ++o) {
        if (!acc[(size_t)o].effective) continue;
        int64_t cells;
        /* one set per chunk, and one even when there is no chunk (an empty domain still
         * writes its zero sums) */
        if (mul_overflows(Runner::partial_stride(acc[(size_t)o]), std::max<int64_t>(chunks, 1), &cells) || cells > (int64_t)(SIZE_MAX / 8)) { oom = true; break; }
        run.partial[(size_t)o] = static_cast<double *>(std::calloc((size_t)std::max<int64_t>(cells, 1), sizeof(double)));
        oom = run.partial[(size_t)o] == nullptr;
    }
    auto release = [&]() {
        for (ThreadState &ts : states) std::free(ts.block);
        for (double *q : run.partial) std::free(q);
    };
    if (oom) {
        release();
        return fail(TT_ERR_OUT_OF_MEMORY, "%s: could not allocate the scratch tiles or partial sums", kFn);
    }

    parallel_for(count, grain, nt, [&](int64_t begin, int64_t end, int slot) {
        ThreadState &ts = states[(size_t)slot];
        const int part = (int)(begin / grain);  // this chunk's partial sums
        run.init_thread(ts);
        if (row_mode) {
            for (int64_t r = begin; r < end; ++r) run.run_row(r, ts, part);
        } else {
            for (int64_t it = begin; it < end; ++it) run.run_block(it, tiles_per_row, ts, part);
        }
        k32.fence();  // non-temporal stores are visible to every thread after the call
    });

    /* Accumulated outputs: chunk partials in chunk order, then every distinct element. */
    for (int o = 0; o < n_out; ++o) {
        const AccPlan &ap = acc[(size_t)o];
        if (!ap.effective || ap.n_compact == 0) continue;
        double *sum = run.partial[(size_t)o];
        for (int64_t c = 1; c < chunks; ++c)
            for (int64_t e = 0; e < ap.n_compact; ++e) sum[e] += sum[(size_t)c * (size_t)Runner::partial_stride(ap) + (size_t)e];
        const int dtype = p.nodes[(size_t)p.outputs[(size_t)o].node].dtype;
        const int64_t *s = output_strides + (size_t)o * R;
        for (int64_t e = 0; e < ap.n_compact; ++e) {
            int64_t off = 0, rest = e;
            for (int d = R - 1; d >= 0; --d) {
                if (ap.compact_stride[d] == 0) continue;
                off += (rest % p.shape[d]) * s[d];
                rest /= p.shape[d];
            }
            if (dtype == TT_F32) static_cast<float *>(outputs[o])[off] = (float)sum[e];
            else static_cast<double *>(outputs[o])[off] = sum[e];
        }
    }
    release();
    return TT_OK;
}

}  // namespace fusion
}  // namespace tt
