/*
 * storage.cpp -- aligned, zeroed, reference-counted buffers and the memory
 * counters over them.
 *
 * Allocation rounds the size up to a multiple of TT_ALIGNMENT and uses
 * aligned_alloc. Buffers of TT_CONFIG_HUGEPAGE_MIN_BYTES or more are aligned
 * to 2 MiB and marked MADV_HUGEPAGE, since first-touch page faults at 4 KiB
 * dominate the cost of a fresh large output on Linux.
 *
 * Handles are tokens from a HandleTable (core/handles.h); the two reference counts
 * (caller and tensor, see storage.h) change under one mutex, and the storage is
 * freed, and its token retired, when both reach zero.
 */
#include "core/config.h"
#include "core/error.h"
#include "core/handles.h"
#include "core/storage.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

std::mutex &refs_mutex() {
    static std::mutex *m = new std::mutex();  // never destroyed: safe at exit
    return *m;
}

tt::HandleTable<tt::Storage> &table() {
    static auto *t = new tt::HandleTable<tt::Storage>();
    return *t;
}

std::atomic<int64_t> g_in_use{0}, g_peak{0}, g_allocs{0}, g_frees{0};

void count_alloc(int64_t bytes) {
    int64_t now = g_in_use.fetch_add(bytes) + bytes;
    int64_t peak = g_peak.load();
    while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
    }
    g_allocs.fetch_add(1);
}

void count_free(int64_t bytes) {
    g_in_use.fetch_sub(bytes);
    g_frees.fetch_add(1);
}

constexpr int64_t kHugePage = 2 * 1024 * 1024;

tt_status allocate(const char *fn, int64_t nbytes, int64_t caller_refs, int64_t tensor_refs,
                   tt::Storage **out) {
    if (nbytes < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: nbytes=%lld is negative", fn, (long long)nbytes);
    int64_t align = nbytes >= TT_CONFIG_HUGEPAGE_MIN_BYTES ? kHugePage : TT_CONFIG_ALIGNMENT;
    int64_t reserved;
    if (tt::add_overflows(nbytes, align - 1, &reserved) || (uint64_t)reserved > SIZE_MAX / 2)
        return tt::fail(TT_ERR_OVERFLOW, "%s: nbytes=%lld is too large", fn, (long long)nbytes);
    reserved = reserved / align * align;
    if (reserved == 0) reserved = align;  // a valid, aligned, non-NULL pointer for empty storage
    void *data = std::aligned_alloc((size_t)align, (size_t)reserved);
    if (!data)
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes", fn, (long long)nbytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == kHugePage) madvise(data, (size_t)reserved, MADV_HUGEPAGE);
#endif
    std::memset(data, 0, (size_t)reserved);
    tt::Storage *s = new (std::nothrow) tt::Storage{data, nbytes, reserved, caller_refs, tensor_refs, 0};
    if (!s) {
        std::free(data);
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate the handle", fn);
    }
    s->token = table().add(s);
    count_alloc(nbytes);
    *out = s;
    return TT_OK;
}

/* Called with refs_mutex() held, after a count went down. */
void free_if_unreferenced(tt::Storage *s) {
    if (s->caller_refs > 0 || s->tensor_refs > 0) return;
    table().remove(s->token);
    count_free(s->nbytes);
    std::free(s->data);
    delete s;
}

}  // namespace

namespace tt {

Storage *storage_lookup(const tt_storage_t *handle) { return table().lookup(handle); }

void storage_add_tensor_ref(Storage *s) {
    std::lock_guard<std::mutex> lock(refs_mutex());
    ++s->tensor_refs;
}

void storage_drop_tensor_ref(Storage *s) {
    std::lock_guard<std::mutex> lock(refs_mutex());
    --s->tensor_refs;
    free_if_unreferenced(s);
}

tt_status storage_create_for_tensor(const char *fn, int64_t nbytes, Storage **out) {
    return allocate(fn, nbytes, 0, 1, out);
}

}  // namespace tt

#define LOOKUP_STORAGE(fn, handle, s)                                                        \
    TT_CHECK_NOT_NULL(fn, handle);                                                            \
    tt::Storage *s = tt::storage_lookup(handle);                                              \
    if (s == nullptr)                                                                         \
        return tt::fail(TT_ERR_INVALID_HANDLE,                                                \
                        "%s: storage %p is not a live handle (already released?)", fn,        \
                        (const void *)(handle))

extern "C" {

TT_API tt_status tt_storage_create(int64_t nbytes, tt_storage_t **out) {
    TT_CHECK_NOT_NULL("tt_storage_create", out);
    *out = nullptr;
    tt::Storage *s = nullptr;
    tt_status st = allocate("tt_storage_create", nbytes, 1, 0, &s);
    if (st != TT_OK) return st;
    *out = tt::storage_handle(s);
    return TT_OK;
}

TT_API tt_status tt_storage_retain(tt_storage_t *storage) {
    LOOKUP_STORAGE("tt_storage_retain", storage, s);
    std::lock_guard<std::mutex> lock(refs_mutex());
    ++s->caller_refs;
    return TT_OK;
}

TT_API tt_status tt_storage_release(tt_storage_t *storage) {
    LOOKUP_STORAGE("tt_storage_release", storage, s);
    std::lock_guard<std::mutex> lock(refs_mutex());
    if (s->caller_refs == 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "tt_storage_release: storage %p has no caller reference left (only its "
                        "%lld tensors hold it; tt_tensor_storage lends the handle without a "
                        "reference -- retain it first to keep it)",
                        (const void *)storage, (long long)s->tensor_refs);
    --s->caller_refs;
    free_if_unreferenced(s);
    return TT_OK;
}

TT_API tt_status tt_storage_data(const tt_storage_t *storage, void **out) {
    LOOKUP_STORAGE("tt_storage_data", storage, s);
    TT_CHECK_NOT_NULL("tt_storage_data", out);
    *out = s->data;
    return TT_OK;
}

TT_API tt_status tt_storage_nbytes(const tt_storage_t *storage, int64_t *out) {
    LOOKUP_STORAGE("tt_storage_nbytes", storage, s);
    TT_CHECK_NOT_NULL("tt_storage_nbytes", out);
    *out = s->nbytes;
    return TT_OK;
}

TT_API tt_status tt_storage_refcount(const tt_storage_t *storage, int64_t *out) {
    LOOKUP_STORAGE("tt_storage_refcount", storage, s);
    TT_CHECK_NOT_NULL("tt_storage_refcount", out);
    std::lock_guard<std::mutex> lock(refs_mutex());
    *out = s->caller_refs + s->tensor_refs;
    return TT_OK;
}

TT_API tt_status tt_memory_stats_get(tt_memory_stats *out) {
    TT_CHECK_NOT_NULL("tt_memory_stats_get", out);
    out->bytes_in_use = g_in_use.load();
    out->peak_bytes = g_peak.load();
    out->allocations = g_allocs.load();
    out->frees = g_frees.load();
    return TT_OK;
}

TT_API void tt_memory_reset_peak(void) { g_peak.store(g_in_use.load()); }

}  // extern "C"
