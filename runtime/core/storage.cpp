/*
 * storage.cpp -- aligned, zeroed, reference-counted buffers and the memory
 * counters over them.
 *
 * Allocation rounds the size up to a multiple of TT_ALIGNMENT and uses
 * aligned_alloc. Buffers of TT_CONFIG_HUGEPAGE_MIN_BYTES or more are aligned
 * to 2 MiB and marked MADV_HUGEPAGE, since first-touch page faults at 4 KiB
 * dominate the cost of a fresh large output on Linux.
 */
#include "core/config.h"
#include "core/error.h"
#include "core/handles.h"
#include "core/storage.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

tt::HandleRegistry &registry() {
    static tt::HandleRegistry *r = new tt::HandleRegistry();  // never destroyed: safe at exit
    return *r;
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

}  // namespace

namespace tt {
bool storage_is_live(const tt_storage *storage) { return registry().contains(storage); }
}  // namespace tt

#define CHECK_STORAGE(fn, s)                                                                 \
    do {                                                                                      \
        TT_CHECK_NOT_NULL(fn, s);                                                             \
        if (!tt::storage_is_live(s))                                                          \
            return tt::fail(TT_ERR_INVALID_HANDLE,                                            \
                            "%s: storage %p is not a live handle (already released?)", fn,    \
                            (const void *)(s));                                               \
    } while (0)

extern "C" {

TT_API tt_status tt_storage_create(int64_t nbytes, tt_storage_t **out) {
    TT_CHECK_NOT_NULL("tt_storage_create", out);
    *out = nullptr;
    if (nbytes < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_storage_create: nbytes=%lld is negative",
                        (long long)nbytes);
    int64_t align = nbytes >= TT_CONFIG_HUGEPAGE_MIN_BYTES ? kHugePage : TT_CONFIG_ALIGNMENT;
    int64_t reserved;
    if (tt::add_overflows(nbytes, align - 1, &reserved) || (uint64_t)reserved > SIZE_MAX / 2)
        return tt::fail(TT_ERR_OVERFLOW, "tt_storage_create: nbytes=%lld is too large",
                        (long long)nbytes);
    reserved = reserved / align * align;
    if (reserved == 0) reserved = align;  // a valid, aligned, non-NULL pointer for empty storage
    void *data = std::aligned_alloc((size_t)align, (size_t)reserved);
    if (!data)
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "tt_storage_create: cannot allocate %lld bytes",
                        (long long)nbytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == kHugePage) madvise(data, (size_t)reserved, MADV_HUGEPAGE);
#endif
    std::memset(data, 0, (size_t)reserved);
    tt_storage *s = new (std::nothrow) tt_storage{data, nbytes, reserved, {1}};
    if (!s) {
        std::free(data);
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "tt_storage_create: cannot allocate the handle");
    }
    registry().add(s);
    count_alloc(nbytes);
    *out = s;
    return TT_OK;
}

TT_API tt_status tt_storage_retain(tt_storage_t *storage) {
    CHECK_STORAGE("tt_storage_retain", storage);
    storage->refcount.fetch_add(1);
    return TT_OK;
}

TT_API tt_status tt_storage_release(tt_storage_t *storage) {
    CHECK_STORAGE("tt_storage_release", storage);
    if (storage->refcount.fetch_sub(1) == 1) {
        registry().remove(storage);
        count_free(storage->nbytes);
        std::free(storage->data);
        delete storage;
    }
    return TT_OK;
}

TT_API tt_status tt_storage_data(const tt_storage_t *storage, void **out) {
    CHECK_STORAGE("tt_storage_data", storage);
    TT_CHECK_NOT_NULL("tt_storage_data", out);
    *out = storage->data;
    return TT_OK;
}

TT_API tt_status tt_storage_nbytes(const tt_storage_t *storage, int64_t *out) {
    CHECK_STORAGE("tt_storage_nbytes", storage);
    TT_CHECK_NOT_NULL("tt_storage_nbytes", out);
    *out = storage->nbytes;
    return TT_OK;
}

TT_API tt_status tt_storage_refcount(const tt_storage_t *storage, int64_t *out) {
    CHECK_STORAGE("tt_storage_refcount", storage);
    TT_CHECK_NOT_NULL("tt_storage_refcount", out);
    *out = storage->refcount.load();
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
