/*
 * tensor.cpp -- tensor descriptors: dtype, shape, strides and offset over a
 * storage. Views (reshape, transpose, slice) make a new descriptor over the
 * same storage and never copy.
 *
 * Invariants of a live descriptor: 0 <= ndim <= TT_MAX_DIMS; shape[i] >= 0;
 * strides[i] >= 0 (in elements); offset + sum over non-empty dims of
 * (shape[i] - 1) * strides[i], times the element size, fits in int64 (so no view
 * arithmetic can overflow); every addressable element lies inside the storage, and a
 * descriptor with no elements has offset * itemsize <= the storage's bytes (its data
 * pointer never leaves the storage); the descriptor holds one tensor reference to its
 * storage. A shape is accepted only if the product of its sizes, each counted as at
 * least 1, fits in int64 bytes: {0, 2^62, 4} is refused like {2^62, 4, 0}, because
 * its strides would overflow.
 */
#include "core/error.h"
#include "core/handles.h"
#include "core/storage.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace tt {
struct Tensor {
    Storage *storage;
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    int64_t strides[TT_MAX_DIMS];
    int64_t offset;
    uintptr_t token;
};
}  // namespace tt

namespace {

using tt::Tensor;

tt::HandleTable<Tensor> &table() {
    static auto *t = new tt::HandleTable<Tensor>();  // never destroyed: safe at exit
    return *t;
}

#define LOOKUP_TENSOR(fn, handle, t)                                                          \
    TT_CHECK_NOT_NULL(fn, handle);                                                             \
    Tensor *t = table().lookup(handle);                                                        \
    if (t == nullptr)                                                                          \
        return tt::fail(TT_ERR_INVALID_HANDLE,                                                 \
                        "%s: tensor %p is not a live handle (already freed?)", fn,             \
                        (const void *)(handle))

bool valid_dtype(int d) { return d >= TT_F32 && d <= TT_I64; }

int64_t itemsize(int dtype) { return tt_dtype_size(dtype); }

/* Checks ndim and shape, and computes the element count. Also checks that the
 * shape's span (sizes counted as at least 1) fits in int64 bytes of itemsize. */
tt_status check_shape(const char *fn, int ndim, const int64_t *shape, int64_t item, int64_t *numel) {
    if (ndim < 0 || ndim > TT_MAX_DIMS)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: ndim=%d is outside 0..%d", fn, ndim,
                        TT_MAX_DIMS);
    if (ndim > 0 && shape == nullptr)
        return tt::fail(TT_ERR_NULL_POINTER, "%s: argument 'shape' is NULL with ndim=%d", fn, ndim);
    int64_t n = 1, span = item;
    for (int i = 0; i < ndim; ++i) {
        if (shape[i] < 0)
            return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: shape[%d]=%lld is negative", fn, i,
                            (long long)shape[i]);
        if (tt::mul_overflows(span, std::max<int64_t>(shape[i], 1), &span))
            return tt::fail(TT_ERR_OVERFLOW,
                            "%s: the shape overflows int64 bytes at shape[%d]=%lld (sizes of 0 "
                            "count as 1: the strides must still fit)",
                            fn, i, (long long)shape[i]);
        n *= shape[i];  // <= span / item: cannot overflow
    }
    *numel = n;
    return TT_OK;
}

void contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; --i) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

int64_t numel_of(const Tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
    return n;
}

bool is_contiguous(const Tensor *t) {
    // A tensor with no elements is contiguous whatever its strides (as in PyTorch): its
    // reshape needs no copy. Checked first, so the answer does not depend on where the 0 is.
    for (int i = 0; i < t->ndim; ++i)
        if (t->shape[i] == 0) return true;
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

/* New descriptor sharing src's storage (takes a tensor reference). */
tt_status make_view(const Tensor *src, Tensor **view) {
    Tensor *v = new (std::nothrow) Tensor(*src);
    if (!v) return tt::fail(TT_ERR_OUT_OF_MEMORY, "tensor view: cannot allocate the descriptor");
    tt::storage_add_tensor_ref(src->storage);
    *view = v;
    return TT_OK;
}

tt_status publish(Tensor *t, tt_tensor_t **out) {
    t->token = table().add(t);
    *out = reinterpret_cast<tt_tensor_t *>(t->token);
    return TT_OK;
}

}  // namespace

extern "C" {

TT_API int64_t tt_dtype_size(int dtype) {
    switch (dtype) {
        case TT_F32: return 4;
        case TT_F64: return 8;
        case TT_F16: return 2;
        case TT_I32: return 4;
        case TT_I64: return 8;
    }
    return 0;
}

TT_API const char *tt_dtype_name(int dtype) {
    switch (dtype) {
        case TT_F32: return "float32";
        case TT_F64: return "float64";
        case TT_F16: return "float16";
        case TT_I32: return "int32";
        case TT_I64: return "int64";
    }
    return "unknown";
}

TT_API tt_status tt_tensor_create(int dtype, int ndim, const int64_t *shape, tt_tensor_t **out) {
    const char *fn = "tt_tensor_create";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    if (!valid_dtype(dtype))
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: dtype=%d is not a tt_dtype value", fn, dtype);
    int64_t numel;
    tt_status st = check_shape(fn, ndim, shape, itemsize(dtype), &numel);
    if (st != TT_OK) return st;
    tt::Storage *storage = nullptr;
    st = tt::storage_create_for_tensor(fn, numel * itemsize(dtype), &storage);
    if (st != TT_OK) return st;
    Tensor *t = new (std::nothrow) Tensor{};
    if (!t) {
        tt::storage_drop_tensor_ref(storage);
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate the descriptor", fn);
    }
    t->storage = storage;  // the storage's only reference is this descriptor's
    t->dtype = (tt_dtype)dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; ++i) t->shape[i] = shape[i];
    contiguous_strides(ndim, t->shape, t->strides);
    t->offset = 0;
    return publish(t, out);
}

TT_API tt_status tt_tensor_from_storage(tt_storage_t *storage, int dtype, int ndim,
                                        const int64_t *shape, const int64_t *strides,
                                        int64_t offset, tt_tensor_t **out) {
    const char *fn = "tt_tensor_from_storage";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    TT_CHECK_NOT_NULL(fn, storage);
    tt::Storage *s = tt::storage_lookup(storage);
    if (s == nullptr)
        return tt::fail(TT_ERR_INVALID_HANDLE, "%s: storage %p is not a live handle", fn,
                        (const void *)storage);
    if (!valid_dtype(dtype))
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: dtype=%d is not a tt_dtype value", fn, dtype);
    const int64_t item = itemsize(dtype);
    int64_t numel;
    tt_status st = check_shape(fn, ndim, shape, item, &numel);
    if (st != TT_OK) return st;
    if (offset < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: offset=%lld is negative", fn, (long long)offset);
    Tensor t{};
    t.storage = s;
    t.dtype = (tt_dtype)dtype;
    t.ndim = ndim;
    for (int i = 0; i < ndim; ++i) t.shape[i] = shape[i];
    if (strides) {
        for (int i = 0; i < ndim; ++i) {
            if (strides[i] < 0)
                return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: strides[%d]=%lld is negative", fn, i,
                                (long long)strides[i]);
            t.strides[i] = strides[i];
        }
    } else {
        contiguous_strides(ndim, t.shape, t.strides);
    }
    t.offset = offset;
    /* The view's span over its non-empty dims, in bytes, must fit in int64 even when it
     * has no elements: later views do arithmetic on it. */
    int64_t last = offset, bytes;
    for (int i = 0; i < ndim; ++i) {
        int64_t step;
        if (t.shape[i] == 0) continue;
        if (tt::mul_overflows(t.shape[i] - 1, t.strides[i], &step) || tt::add_overflows(last, step, &last))
            return tt::fail(TT_ERR_OVERFLOW, "%s: the extent of the view overflows int64", fn);
    }
    if (tt::add_overflows(last, 1, &last) || tt::mul_overflows(last, item, &bytes))
        return tt::fail(TT_ERR_OVERFLOW, "%s: the extent of the view overflows int64", fn);
    if (numel > 0 && bytes > s->nbytes)
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: the view reaches byte %lld but the storage holds %lld bytes", fn,
                        (long long)bytes, (long long)s->nbytes);
    if (numel == 0 && offset > s->nbytes / item)
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: offset=%lld lies past the end of the storage (%lld bytes), even for a "
                        "view with no elements",
                        fn, (long long)offset, (long long)s->nbytes);
    Tensor *p = new (std::nothrow) Tensor(t);
    if (!p) return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate the descriptor", fn);
    tt::storage_add_tensor_ref(s);
    return publish(p, out);
}

TT_API tt_status tt_tensor_reshape(const tt_tensor_t *handle, int ndim, const int64_t *shape,
                                   tt_tensor_t **out) {
    const char *fn = "tt_tensor_reshape";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    LOOKUP_TENSOR(fn, handle, t);
    int64_t numel;
    tt_status st = check_shape(fn, ndim, shape, itemsize(t->dtype), &numel);
    if (st != TT_OK) return st;
    const int64_t old = numel_of(t);
    if (numel != old)
        return tt::fail(TT_ERR_SHAPE_MISMATCH, "%s: cannot view %lld elements as %lld elements", fn,
                        (long long)old, (long long)numel);
    if (!is_contiguous(t))
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: the tensor is not contiguous; a reshape would need a copy", fn);
    Tensor *v = nullptr;
    if ((st = make_view(t, &v)) != TT_OK) return st;
    v->ndim = ndim;
    for (int i = 0; i < ndim; ++i) v->shape[i] = shape[i];
    contiguous_strides(ndim, v->shape, v->strides);
    return publish(v, out);
}

TT_API tt_status tt_tensor_transpose(const tt_tensor_t *handle, int dim0, int dim1, tt_tensor_t **out) {
    const char *fn = "tt_tensor_transpose";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    LOOKUP_TENSOR(fn, handle, t);
    if (dim0 < 0 || dim0 >= t->ndim || dim1 < 0 || dim1 >= t->ndim)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: dims (%d, %d) out of range for ndim=%d", fn,
                        dim0, dim1, t->ndim);
    Tensor *v = nullptr;
    tt_status st;
    if ((st = make_view(t, &v)) != TT_OK) return st;
    std::swap(v->shape[dim0], v->shape[dim1]);
    std::swap(v->strides[dim0], v->strides[dim1]);
    return publish(v, out);
}

TT_API tt_status tt_tensor_slice(const tt_tensor_t *handle, int dim, int64_t start, int64_t stop,
                                 int64_t step, tt_tensor_t **out) {
    const char *fn = "tt_tensor_slice";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    LOOKUP_TENSOR(fn, handle, t);
    if (dim < 0 || dim >= t->ndim)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: dim=%d out of range for ndim=%d", fn, dim, t->ndim);
    if (step < 1)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: step=%lld must be >= 1", fn, (long long)step);
    if (start < 0 || stop < start || stop > t->shape[dim])
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: slice %lld:%lld is outside 0..%lld of dim %d", fn, (long long)start,
                        (long long)stop, (long long)t->shape[dim], dim);
    const int64_t len = stop - start;
    const int64_t size = len == 0 ? 0 : 1 + (len - 1) / step;  // ceil(len / step), no overflow
    /* A dimension of size <= 1 never steps: it keeps the parent's stride. Otherwise
     * (size - 1) * step < len, so stride * step stays inside the parent's span. */
    int64_t stride = t->strides[dim];
    if (size > 1 && tt::mul_overflows(t->strides[dim], step, &stride))
        return tt::fail(TT_ERR_INTERNAL, "%s: stride %lld x step %lld overflows", fn,
                        (long long)t->strides[dim], (long long)step);
    Tensor *v = nullptr;
    tt_status st;
    if ((st = make_view(t, &v)) != TT_OK) return st;
    v->shape[dim] = size;
    v->strides[dim] = stride;
    /* An empty view keeps its parent's offset, so its data pointer never leaves the storage. */
    if (numel_of(v) > 0) v->offset = t->offset + start * t->strides[dim];
    return publish(v, out);
}

TT_API tt_status tt_tensor_free(tt_tensor_t *handle) {
    if (handle == nullptr) return TT_OK;
    Tensor *t = table().lookup(handle);
    if (t == nullptr)
        return tt::fail(TT_ERR_INVALID_HANDLE,
                        "tt_tensor_free: tensor %p is not a live handle (double free?)",
                        (const void *)handle);
    table().remove(t->token);
    tt::storage_drop_tensor_ref(t->storage);
    delete t;
    return TT_OK;
}

/* Read-only queries: look the handle up, check the out pointer, copy one field. */
#define TENSOR_QUERY(name, out_type, assign)                                         \
    TT_API tt_status name(const tt_tensor_t *handle, out_type *out) {                \
        LOOKUP_TENSOR(#name, handle, t);                                             \
        TT_CHECK_NOT_NULL(#name, out);                                               \
        assign;                                                                      \
        return TT_OK;                                                                \
    }

TENSOR_QUERY(tt_tensor_is_contiguous, int, *out = is_contiguous(t) ? 1 : 0)
TENSOR_QUERY(tt_tensor_ndim, int, *out = t->ndim)
TENSOR_QUERY(tt_tensor_dtype, tt_dtype, *out = t->dtype)
TENSOR_QUERY(tt_tensor_shape, int64_t, std::memcpy(out, t->shape, sizeof(int64_t) * (size_t)t->ndim))
TENSOR_QUERY(tt_tensor_strides, int64_t,
             std::memcpy(out, t->strides, sizeof(int64_t) * (size_t)t->ndim))
TENSOR_QUERY(tt_tensor_offset, int64_t, *out = t->offset)
TENSOR_QUERY(tt_tensor_numel, int64_t, *out = numel_of(t))
TENSOR_QUERY(tt_tensor_data, void *,
             *out = (char *)t->storage->data + t->offset * itemsize(t->dtype))
TENSOR_QUERY(tt_tensor_storage, tt_storage_t *, *out = tt::storage_handle(t->storage))

}  // extern "C"
