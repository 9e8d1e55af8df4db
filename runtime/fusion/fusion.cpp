/*
 * fusion.cpp -- the C ABI of fusion programs (tt_fusion_*, header section "Fusion").
 *
 * A program is validated and planned once by tt_fusion_create (validate.cpp, plan.cpp) and
 * lives behind a token handle (core/handles.h), like tensors: a freed or foreign handle is
 * refused with TT_ERR_INVALID_HANDLE. It is immutable after creation, so several threads
 * may run the same program at once. No C++ exception crosses the ABI: allocation failures
 * become TT_ERR_OUT_OF_MEMORY.
 */
#include <atomic>
#include <cstring>
#include <new>

#include "core/error.h"
#include "core/handles.h"
#include "core/parallel.h"
#include "fusion/fusion_ir.h"

namespace {

using tt::fusion::Program;

tt::HandleTable<Program> &table() {
    static auto *t = new tt::HandleTable<Program>();  // never destroyed: safe at exit
    return *t;
}

#define LOOKUP_PROGRAM(fn, handle, prog)                                                     \
    TT_CHECK_NOT_NULL(fn, handle);                                                            \
    const Program *prog = table().lookup(handle);                                             \
    if (prog == nullptr)                                                                      \
        return tt::fail(TT_ERR_INVALID_HANDLE,                                                \
                        "%s: program %p is not a live handle (already freed?)", fn,           \
                        (const void *)(handle))

}  // namespace

extern "C" {

TT_API tt_status tt_fusion_create(const int64_t *words, int64_t n_words, const double *imm,
                                  int64_t n_imm, tt_fusion_t **out) {
    static const char *kFn = "tt_fusion_create";
    TT_CHECK_NOT_NULL(kFn, out);
    *out = nullptr;
    Program *p = nullptr;
    try {
        p = new Program();
        const tt_status st = tt::fusion::parse_program(kFn, words, n_words, imm, n_imm, p);
        if (st != TT_OK) {
            delete p;
            return st;
        }
        p->token = table().add(p);
    } catch (const std::bad_alloc &) {
        delete p;
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: out of memory for a program of %lld words", kFn,
                        (long long)n_words);
    }
    *out = reinterpret_cast<tt_fusion_t *>(p->token);
    return TT_OK;
}

TT_API tt_status tt_fusion_free(tt_fusion_t *program) {
    if (program == nullptr) return TT_OK;
    Program *p = table().lookup(program);
    if (p == nullptr)
        return tt::fail(TT_ERR_INVALID_HANDLE,
                        "tt_fusion_free: program %p is not a live handle (double free?)",
                        (const void *)program);
    table().remove(p->token);
    delete p;
    return TT_OK;
}

TT_API tt_status tt_fusion_info(const tt_fusion_t *program, int64_t *n_inputs, int64_t *n_outputs,
                                int64_t *rank) {
    LOOKUP_PROGRAM("tt_fusion_info", program, p);
    if (n_inputs) *n_inputs = (int64_t)p->input_dtypes.size();
    if (n_outputs) *n_outputs = (int64_t)p->outputs.size();
    if (rank) *rank = p->rank;
    return TT_OK;
}

TT_API tt_status tt_fusion_run(const tt_fusion_t *program, const void *const *inputs,
                               const int64_t *input_strides, void *const *outputs,
                               const int64_t *output_strides) {
    LOOKUP_PROGRAM("tt_fusion_run", program, p);
    try {
        return tt::fusion::run_program(*p, inputs, input_strides, outputs, output_strides);
    } catch (const std::bad_alloc &) {
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "tt_fusion_run: out of memory");
    }
}

TT_API tt_status tt_fusion_run_rows(tt_fused_rows_fn rows_fn, const void *const *inputs,
                                    const int64_t *input_strides, void *const *outputs,
                                    const int64_t *output_strides, int64_t rows, int64_t cols) {
    if (rows_fn == nullptr) return tt::fail(TT_ERR_NULL_POINTER, "tt_fusion_run_rows: rows_fn is NULL");
    if (rows < 0 || cols < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_fusion_run_rows: rows=%lld, cols=%lld must be >= 0",
                        (long long)rows, (long long)cols);
    std::atomic<int> failed{0};
    const int nt = tt::memory_bound_threads((double)rows * (double)cols, rows,
                                            tt::solo_cost::kFusedCompiledNs);
    tt::parallel_for(rows, tt::row_grain(cols), nt, [&](int64_t r0, int64_t r1, int) {
        if (rows_fn(inputs, input_strides, outputs, output_strides, r0, r1) != 0) failed.store(1);
    });
    tt::set_kernel_path("fusion:compiled");
    return failed.load() ? tt::fail(TT_ERR_INTERNAL, "tt_fusion_run_rows: the generated kernel failed")
                         : TT_OK;
}

TT_API tt_status tt_fusion_source(const tt_fusion_t *program, char *buf, int64_t cap,
                                  int64_t *needed) {
    static const char *kFn = "tt_fusion_source";
    LOOKUP_PROGRAM(kFn, program, p);
    if (cap < 0) return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: cap=%lld is negative", kFn, (long long)cap);
    if (buf == nullptr && cap > 0)
        return tt::fail(TT_ERR_NULL_POINTER, "%s: buf is NULL but cap=%lld", kFn, (long long)cap);
    std::vector<char> text;
    try {
        const tt_status st = tt::fusion::emit_source(*p, &text);
        if (st != TT_OK) return st;
    } catch (const std::bad_alloc &) {
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: out of memory", kFn);
    }
    const int64_t size = (int64_t)text.size() + 1;
    if (needed) *needed = size;
    if (cap == 0) return TT_OK;
    if (cap < size)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: cap=%lld is smaller than the %lld bytes needed",
                        kFn, (long long)cap, (long long)size);
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    return TT_OK;
}

}  // extern "C"
