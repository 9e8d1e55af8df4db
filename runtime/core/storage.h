/*
 * storage.h -- private: layout of a storage, shared with tensor.cpp.
 */
#pragma once
#include "tinytorch/tinytorch.h"

#include <atomic>
#include <cstdint>

struct tt_storage {
    void *data;                  /* TT_ALIGNMENT-aligned, never NULL            */
    int64_t nbytes;              /* usable bytes                                */
    int64_t reserved;            /* bytes actually allocated (rounded up)       */
    std::atomic<int64_t> refcount;
};

namespace tt {
/* 1 if storage is a live handle. */
bool storage_is_live(const tt_storage *storage);
}
