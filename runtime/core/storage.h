/*
 * storage.h -- private: a storage's layout and the calls tensor.cpp makes on it.
 *
 * A storage counts two kinds of references. Caller references come from
 * tt_storage_create and tt_storage_retain and go with tt_storage_release; tensor
 * references are held by descriptors (tt_tensor_create, tt_tensor_from_storage and
 * every view take one, tt_tensor_free drops it). The memory goes when both counts
 * reach zero. Keeping them apart means a caller who releases more often than it
 * retained is refused instead of pulling the memory from under a live tensor.
 */
#pragma once
#include "tinytorch/tinytorch.h"

#include <cstdint>

namespace tt {

struct Storage {
    void *data;              /* TT_ALIGNMENT-aligned, never NULL      */
    int64_t nbytes;          /* usable bytes                          */
    int64_t reserved;        /* bytes actually allocated (rounded up) */
    int64_t caller_refs;     /* guarded by the storage table's mutex  */
    int64_t tensor_refs;     /* likewise                              */
    uintptr_t token;         /* the public handle                     */
};

/* The storage behind a live handle, or nullptr. */
Storage *storage_lookup(const tt_storage_t *handle);

/* The public handle of a storage. */
inline tt_storage_t *storage_handle(const Storage *s) {
    return reinterpret_cast<tt_storage_t *>(s->token);
}

/* A descriptor takes / drops its reference (the last reference frees the memory). */
void storage_add_tensor_ref(Storage *s);
void storage_drop_tensor_ref(Storage *s);

/* Allocate a storage whose only reference is a tensor reference (for tt_tensor_create). */
tt_status storage_create_for_tensor(const char *fn, int64_t nbytes, Storage **out);

}  // namespace tt
