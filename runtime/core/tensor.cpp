/*
 * tensor.cpp -- tensor descriptors: dtype, shape, strides and offset over a
 * storage. Views (reshape, transpose, slice) make a new descriptor over the
 * same storage and never copy.
 *
 * Invariants of a live descriptor: 0 <= ndim <= TT_MAX_DIMS; shape[i] >= 0;
 * strides[i] >= 0 (in elements); every addressable element lies inside the
 * storage; the descriptor holds one reference to its storage.
 */
#include "core/error.h"
#include "core/handles.h"
#include "core/storage.h"

#include <cstring>
#include <new>
#include <utility>

struct tt_tensor {
    tt_storage *storage;
    tt_dtype dtype;
    int ndim;
    int64_t shape[TT_MAX_DIMS];
    int64_t strides[TT_MAX_DIMS];
    int64_t offset;
};

namespace {

tt::HandleRegistry &registry() {
    static tt::HandleRegistry *r = new tt::HandleRegistry();
    return *r;
}

#define CHECK_TENSOR(fn, t)                                                                   \
    do {                                                                                       \
        TT_CHECK_NOT_NULL(fn, t);                                                              \
        if (!registry().contains(t))                                                           \
            return tt::fail(TT_ERR_INVALID_HANDLE,                                             \
                            "%s: tensor %p is not a live handle (already freed?)", fn,         \
                            (const void *)(t));                                                \
    } while (0)

bool valid_dtype(tt_dtype d) { return (int)d >= TT_F32 && (int)d <= TT_I64; }

/* Checks ndim and shape, and computes the element count with overflow checks. */
tt_status check_shape(const char *fn, int ndim, const int64_t *shape, int64_t *numel) {
    if (ndim < 0 || ndim > TT_MAX_DIMS)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: ndim=%d is outside 0..%d", fn, ndim,
                        TT_MAX_DIMS);
    if (ndim > 0 && shape == nullptr)
        return tt::fail(TT_ERR_NULL_POINTER, "%s: argument 'shape' is NULL with ndim=%d", fn, ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) {
        if (shape[i] < 0)
            return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: shape[%d]=%lld is negative", fn, i,
                            (long long)shape[i]);
        if (tt::mul_overflows(n, shape[i], &n))
            return tt::fail(TT_ERR_OVERFLOW, "%s: the element count overflows int64 at shape[%d]=%lld",
                            fn, i, (long long)shape[i]);
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

bool is_contiguous(const tt_tensor *t) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
        if (t->shape[i] == 0) return true;
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

/* New descriptor sharing src's storage (takes a storage reference). */
tt_status make_view(const tt_tensor *src, tt_tensor **view) {
    tt_tensor *v = new (std::nothrow) tt_tensor(*src);
    if (!v) return tt::fail(TT_ERR_OUT_OF_MEMORY, "tensor view: cannot allocate the descriptor");
    src->storage->refcount.fetch_add(1);
    *view = v;
    return TT_OK;
}

tt_status publish(tt_tensor *t, tt_tensor **out) {
    registry().add(t);
    *out = t;
    return TT_OK;
}

}  // namespace

extern "C" {

TT_API int64_t tt_dtype_size(tt_dtype dtype) {
    switch (dtype) {
        case TT_F32: return 4;
        case TT_F64: return 8;
        case TT_F16: return 2;
        case TT_I32: return 4;
        case TT_I64: return 8;
    }
    return 0;
}

TT_API const char *tt_dtype_name(tt_dtype dtype) {
    switch (dtype) {
        case TT_F32: return "float32";
        case TT_F64: return "float64";
        case TT_F16: return "float16";
        case TT_I32: return "int32";
        case TT_I64: return "int64";
    }
    return "unknown";
}

TT_API tt_status tt_tensor_create(tt_dtype dtype, int ndim, const int64_t *shape,
                                  tt_tensor_t **out) {
    TT_CHECK_NOT_NULL("tt_tensor_create", out);
    *out = nullptr;
    if (!valid_dtype(dtype))
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_tensor_create: dtype=%d is not a tt_dtype value",
                        (int)dtype);
    int64_t numel, nbytes;
    tt_status st = check_shape("tt_tensor_create", ndim, shape, &numel);
    if (st != TT_OK) return st;
    if (tt::mul_overflows(numel, tt_dtype_size(dtype), &nbytes))
        return tt::fail(TT_ERR_OVERFLOW, "tt_tensor_create: %lld elements of %s overflow int64 bytes",
                        (long long)numel, tt_dtype_name(dtype));
    tt_storage_t *storage = nullptr;
    st = tt_storage_create(nbytes, &storage);
    if (st != TT_OK) return st;
    tt_tensor *t = new (std::nothrow) tt_tensor{};
    if (!t) {
        tt_storage_release(storage);
        return tt::fail(TT_ERR_OUT_OF_MEMORY, "tt_tensor_create: cannot allocate the descriptor");
    }
    t->storage = storage;  // the creation reference becomes the descriptor's
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; ++i) t->shape[i] = shape[i];
    contiguous_strides(ndim, t->shape, t->strides);
    t->offset = 0;
    return publish(t, out);
}

TT_API tt_status tt_tensor_from_storage(tt_storage_t *storage, tt_dtype dtype, int ndim,
                                        const int64_t *shape, const int64_t *strides,
                                        int64_t offset, tt_tensor_t **out) {
    const char *fn = "tt_tensor_from_storage";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    TT_CHECK_NOT_NULL(fn, storage);
    if (!tt::storage_is_live(storage))
        return tt::fail(TT_ERR_INVALID_HANDLE, "%s: storage %p is not a live handle", fn,
                        (const void *)storage);
    if (!valid_dtype(dtype))
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: dtype=%d is not a tt_dtype value", fn, (int)dtype);
    int64_t numel;
    tt_status st = check_shape(fn, ndim, shape, &numel);
    if (st != TT_OK) return st;
    if (offset < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: offset=%lld is negative", fn, (long long)offset);
    tt_tensor t{};
    t.storage = storage;
    t.dtype = dtype;
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
    if (numel > 0) {
        // The last addressable element must lie inside the storage.
        int64_t last = offset, bytes;
        for (int i = 0; i < ndim; ++i) {
            int64_t step;
            if (tt::mul_overflows(shape[i] - 1, t.strides[i], &step) || tt::add_overflows(last, step, &last))
                return tt::fail(TT_ERR_OVERFLOW, "%s: the extent of the view overflows int64", fn);
        }
        if (tt::add_overflows(last, 1, &last) || tt::mul_overflows(last, tt_dtype_size(dtype), &bytes))
            return tt::fail(TT_ERR_OVERFLOW, "%s: the extent of the view overflows int64", fn);
        if (bytes > storage->nbytes)
            return tt::fail(TT_ERR_INVALID_ARGUMENT,
                            "%s: the view reaches byte %lld but the storage holds %lld bytes", fn,
                            (long long)bytes, (long long)storage->nbytes);
    }
    tt_tensor *p = new (std::nothrow) tt_tensor(t);
    if (!p) return tt::fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate the descriptor", fn);
    storage->refcount.fetch_add(1);
    return publish(p, out);
}

TT_API tt_status tt_tensor_reshape(const tt_tensor_t *t, int ndim, const int64_t *shape,
                                   tt_tensor_t **out) {
    const char *fn = "tt_tensor_reshape";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    CHECK_TENSOR(fn, t);
    int64_t numel, old = 1;
    tt_status st = check_shape(fn, ndim, shape, &numel);
    if (st != TT_OK) return st;
    for (int i = 0; i < t->ndim; ++i) old *= t->shape[i];
    if (numel != old)
        return tt::fail(TT_ERR_SHAPE_MISMATCH, "%s: cannot view %lld elements as %lld elements", fn,
                        (long long)old, (long long)numel);
    if (!is_contiguous(t))
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: the tensor is not contiguous; a reshape would need a copy", fn);
    tt_tensor *v = nullptr;
    if ((st = make_view(t, &v)) != TT_OK) return st;
    v->ndim = ndim;
    for (int i = 0; i < ndim; ++i) v->shape[i] = shape[i];
    contiguous_strides(ndim, v->shape, v->strides);
    return publish(v, out);
}

TT_API tt_status tt_tensor_transpose(const tt_tensor_t *t, int dim0, int dim1, tt_tensor_t **out) {
    const char *fn = "tt_tensor_transpose";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    CHECK_TENSOR(fn, t);
    if (dim0 < 0 || dim0 >= t->ndim || dim1 < 0 || dim1 >= t->ndim)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: dims (%d, %d) out of range for ndim=%d", fn,
                        dim0, dim1, t->ndim);
    tt_tensor *v = nullptr;
    tt_status st;
    if ((st = make_view(t, &v)) != TT_OK) return st;
    std::swap(v->shape[dim0], v->shape[dim1]);
    std::swap(v->strides[dim0], v->strides[dim1]);
    return publish(v, out);
}

TT_API tt_status tt_tensor_slice(const tt_tensor_t *t, int dim, int64_t start, int64_t stop,
                                 int64_t step, tt_tensor_t **out) {
    const char *fn = "tt_tensor_slice";
    TT_CHECK_NOT_NULL(fn, out);
    *out = nullptr;
    CHECK_TENSOR(fn, t);
    if (dim < 0 || dim >= t->ndim)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: dim=%d out of range for ndim=%d", fn, dim, t->ndim);
    if (step < 1)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: step=%lld must be >= 1", fn, (long long)step);
    if (start < 0 || stop < start || stop > t->shape[dim])
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: slice %lld:%lld is outside 0..%lld of dim %d", fn, (long long)start,
                        (long long)stop, (long long)t->shape[dim], dim);
    tt_tensor *v = nullptr;
    tt_status st;
    if ((st = make_view(t, &v)) != TT_OK) return st;
    int64_t len = stop - start;
    v->shape[dim] = (len + step - 1) / step;
    v->offset = t->offset + (v->shape[dim] > 0 ? start * t->strides[dim] : 0);
    v->strides[dim] = t->strides[dim] * step;
    return publish(v, out);
}

TT_API tt_status tt_tensor_free(tt_tensor_t *t) {
    if (t == nullptr) return TT_OK;
    if (!registry().contains(t))
        return tt::fail(TT_ERR_INVALID_HANDLE, "tt_tensor_free: tensor %p is not a live handle (double free?)",
                        (const void *)t);
    registry().remove(t);
    tt_storage_release(t->storage);
    delete t;
    return TT_OK;
}

TT_API tt_status tt_tensor_is_contiguous(const tt_tensor_t *t, int *out) {
    CHECK_TENSOR("tt_tensor_is_contiguous", t);
    TT_CHECK_NOT_NULL("tt_tensor_is_contiguous", out);
    *out = is_contiguous(t) ? 1 : 0;
    return TT_OK;
}

TT_API tt_status tt_tensor_ndim(const tt_tensor_t *t, int *out) {
    CHECK_TENSOR("tt_tensor_ndim", t);
    TT_CHECK_NOT_NULL("tt_tensor_ndim", out);
    *out = t->ndim;
    return TT_OK;
}

TT_API tt_status tt_tensor_dtype(const tt_tensor_t *t, tt_dtype *out) {
    CHECK_TENSOR("tt_tensor_dtype", t);
    TT_CHECK_NOT_NULL("tt_tensor_dtype", out);
    *out = t->dtype;
    return TT_OK;
}

TT_API tt_status tt_tensor_shape(const tt_tensor_t *t, int64_t *out) {
    CHECK_TENSOR("tt_tensor_shape", t);
    TT_CHECK_NOT_NULL("tt_tensor_shape", out);
    std::memcpy(out, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return TT_OK;
}

TT_API tt_status tt_tensor_strides(const tt_tensor_t *t, int64_t *out) {
    CHECK_TENSOR("tt_tensor_strides", t);
    TT_CHECK_NOT_NULL("tt_tensor_strides", out);
    std::memcpy(out, t->strides, sizeof(int64_t) * (size_t)t->ndim);
    return TT_OK;
}

TT_API tt_status tt_tensor_offset(const tt_tensor_t *t, int64_t *out) {
    CHECK_TENSOR("tt_tensor_offset", t);
    TT_CHECK_NOT_NULL("tt_tensor_offset", out);
    *out = t->offset;
    return TT_OK;
}

TT_API tt_status tt_tensor_numel(const tt_tensor_t *t, int64_t *out) {
    CHECK_TENSOR("tt_tensor_numel", t);
    TT_CHECK_NOT_NULL("tt_tensor_numel", out);
    int64_t n = 1;
    for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
    *out = n;
    return TT_OK;
}

TT_API tt_status tt_tensor_data(const tt_tensor_t *t, void **out) {
    CHECK_TENSOR("tt_tensor_data", t);
    TT_CHECK_NOT_NULL("tt_tensor_data", out);
    *out = (char *)t->storage->data + t->offset * tt_dtype_size(t->dtype);
    return TT_OK;
}

TT_API tt_status tt_tensor_storage(const tt_tensor_t *t, tt_storage_t **out) {
    CHECK_TENSOR("tt_tensor_storage", t);
    TT_CHECK_NOT_NULL("tt_tensor_storage", out);
    *out = t->storage;
    return TT_OK;
}

}  // extern "C"
