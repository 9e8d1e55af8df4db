/*
 * fuzz_tensor.c -- libFuzzer harness for the storage and tensor-descriptor API, against a
 * model of it kept here.
 *
 * Design. One input is a sequence of up to 64 operations, each an opcode byte and its
 * arguments: create a storage; retain / release one; create a tensor; a tensor over a
 * storage (tt_tensor_from_storage: shape, strides or NULL, offset); reshape, transpose and
 * slice; free; queries; use of a handle that was freed (or never created, or of the other
 * kind); enum values out of range; memory counters. The harness holds up to 12 storages
 * and 16 tensors, and remembers the handles it saw freed.
 *
 * The model is computed here, independently, with overflow-checked arithmetic: for every
 * tensor its storage, dtype, shape, strides, offset; for every storage its size, the
 * references the harness holds and the number of live tensors over it. Each operation's
 * expectation follows from the header:
 *   - valid calls must succeed, and then every query must agree with the model: ndim, dtype,
 *     shape, strides, offset, numel, contiguity, storage, refcount, and the data pointer
 *     (storage data + offset * itemsize; a non-empty view must lie inside its storage);
 *     new storages are zeroed and 64-byte aligned; the memory counters move by the sizes;
 *   - invalid calls (bad dtype/ndim, negative sizes, offsets or strides, out-of-range dims
 *     or slices, element counts or extents that overflow, views reaching past the storage,
 *     reshape of a non-contiguous tensor or to another count) must fail with a message;
 *   - a freed, never-created or wrong-kind handle must be refused with exactly
 *     TT_ERR_INVALID_HANDLE, and a new handle must never equal a freed one of its kind
 *     (handles are tokens that are never reused). The harness runs with ASan's quarantine
 *     off (see __asan_default_options below) so the library's freed memory comes back at
 *     once, which is when a handle that was an address would alias a new object;
 *   - the rules the header spells out for edge cases: a shape is refused
 *     (TT_ERR_OVERFLOW) when the product of its sizes, each counted as at least 1, times
 *     the element size overflows int64, even with a size 0; a view over a storage must
 *     have its span offset + sum (shape[i] - 1) * strides[i] over the non-empty
 *     dimensions fit in int64 bytes, and, without elements, offset * itemsize <= nbytes;
 *     a slice keeps the old stride for a result dimension of size <= 1 and the old offset
 *     for a result without elements; releasing a storage the caller holds no reference on
 *     is refused with TT_ERR_INVALID_ARGUMENT (tt_tensor_storage only lends the handle).
 * Contiguity is modelled as usual (PyTorch's rule, and what the library's own check
 * intends): a tensor without elements is contiguous, else every dimension of size > 1 has
 * the row-major stride. At the end everything is freed and the memory counters must be
 * back where they started.
 *
 * Known-finding tags (TT_FUZZ_KNOWN, triage only): empty_contiguous (tt_tensor_is_contiguous
 * of a tensor without elements depends on where the size-0 dimension is).
 */
#include <limits.h>

#include "fuzz_util.h"

const char *__asan_default_options(void) { return "quarantine_size_mb=0:allocator_may_return_null=1"; }

#define NS 12
#define NT 16
#define NSTALE 64
#define MAX_OPS 64

typedef struct {
    tt_storage_t *h; /* NULL: free slot */
    int64_t nbytes, my_refs;
    uintptr_t data;
} mstorage;

typedef struct {
    tt_tensor_t *h; /* NULL: free slot */
    int s;          /* storage slot */
    int dtype, ndim;
    int64_t shape[TT_MAX_DIMS], strides[TT_MAX_DIMS], offset;
} mtensor;

typedef struct {
    mstorage st[NS];
    mtensor t[NT];
    const void *stale_storage[NSTALE], *stale_tensor[NSTALE];
    int n_stale_storage, n_stale_tensor;
    tt_memory_stats stats; /* what the counters must read now */
} model_t;

/* ---- overflow-checked helpers ---- */

static int64_t itemsize(int dtype) {
    static const int64_t sizes[] = {4, 8, 2, 4, 8}; /* TT_F32, TT_F64, TT_F16, TT_I32, TT_I64 */
    return dtype >= 0 && dtype <= 4 ? sizes[dtype] : 0;
}

/* Element count; returns 0 on overflow. */
static int numel_of(int ndim, const int64_t *shape, int64_t *out) {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i)
        if (__builtin_mul_overflow(n, shape[i], &n)) return 0;
    *out = n;
    return 1;
}

/* The header's shape rule: the product of the sizes, each counted as at least 1, times
 * the element size fits in int64. Then the row-major strides (a size-0 dimension counts
 * as 1) fit too; they are written to strides. Returns 0 if the rule is broken. */
static int contiguous_strides(int ndim, const int64_t *shape, int64_t isz, int64_t *strides) {
    int64_t s = 1, bytes;
    for (int i = ndim - 1; i >= 0; --i) {
        strides[i] = s;
        if (__builtin_mul_overflow(s, shape[i] > 0 ? shape[i] : 1, &s)) return 0;
    }
    return !__builtin_mul_overflow(s, isz, &bytes);
}

static int64_t model_numel(const mtensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; ++i) n *= t->shape[i]; /* fits: checked when it was made */
    return n;
}

static int model_contiguous(const mtensor *t) {
    int64_t expect = 1;
    if (model_numel(t) == 0) return 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return 0;
        expect *= t->shape[i];
    }
    return 1;
}

/* ---- handles ---- */

static void remember_stale(const void **list, int *n, const void *h) {
    if (*n == NSTALE) {
        memmove(list, list + 1, sizeof(list[0]) * (NSTALE - 1));
        --*n;
    }
    list[(*n)++] = h;
}

static void check_new_handle(const void **stale, int n, const void *h, const char *kind) {
    FZ_CHECK(h != NULL, "a successful %s create returned NULL", kind);
    for (int i = 0; i < n; ++i)
        FZ_CHECK(h != stale[i], "a new %s handle %p equals a freed one: a stale copy would alias it",
                 kind, h);
}

static int64_t tensors_on(const model_t *m, int s) {
    int64_t n = 0;
    for (int i = 0; i < NT; ++i) n += m->t[i].h && m->t[i].s == s;
    return n;
}

/* The storage slot lost a reference: free it in the model when none is left. */
static void storage_dropped(model_t *m, int s) {
    mstorage *st = &m->st[s];
    if (st->my_refs + tensors_on(m, s) > 0) return;
    remember_stale(m->stale_storage, &m->n_stale_storage, st->h);
    m->stats.bytes_in_use -= st->nbytes;
    m->stats.frees += 1;
    st->h = NULL;
}

static int free_slot_s(const model_t *m) {
    for (int i = 0; i < NS; ++i) if (!m->st[i].h) return i;
    return -1;
}
static int free_slot_t(const model_t *m) {
    for (int i = 0; i < NT; ++i) if (!m->t[i].h) return i;
    return -1;
}
/* A live slot chosen by the input, or -1 if there is none. */
static int pick_s(const model_t *m, fz_in *in) {
    const int start = fz_u8(in) % NS;
    for (int k = 0; k < NS; ++k) if (m->st[(start + k) % NS].h) return (start + k) % NS;
    return -1;
}
static int pick_t(const model_t *m, fz_in *in) {
    const int start = fz_u8(in) % NT;
    for (int k = 0; k < NT; ++k) if (m->t[(start + k) % NT].h) return (start + k) % NT;
    return -1;
}

/* ---- checks of one live tensor / storage against the model ---- */

static void check_storage(const model_t *m, int s) {
    const mstorage *st = &m->st[s];
    int64_t v;
    void *p;
    FZ_OK(tt_storage_nbytes(st->h, &v));
    FZ_CHECK(v == st->nbytes, "storage nbytes %lld, model %lld", (long long)v, (long long)st->nbytes);
    FZ_OK(tt_storage_refcount(st->h, &v));
    const int64_t want = st->my_refs + tensors_on(m, s);
    FZ_CHECK(v == want, "storage refcount %lld, model %lld", (long long)v, (long long)want);
    FZ_OK(tt_storage_data(st->h, &p));
    FZ_CHECK((uintptr_t)p == st->data, "storage data moved");
}

/* "dtype 0 shape [2 3] strides [3 1] offset 0 over 24 bytes" (for failure messages). */
static const char *model_str(const model_t *m, const mtensor *t) {
    static char buf[512];
    int n = snprintf(buf, sizeof buf, "model: dtype %d shape [", t->dtype);
    for (int d = 0; d < t->ndim; ++d) n += snprintf(buf + n, sizeof buf - (size_t)n, " %lld", (long long)t->shape[d]);
    n += snprintf(buf + n, sizeof buf - (size_t)n, " ] strides [");
    for (int d = 0; d < t->ndim; ++d) n += snprintf(buf + n, sizeof buf - (size_t)n, " %lld", (long long)t->strides[d]);
    snprintf(buf + n, sizeof buf - (size_t)n, " ] offset %lld over %lld bytes", (long long)t->offset,
             (long long)m->st[t->s].nbytes);
    return buf;
}

static void check_tensor(const model_t *m, int i) {
    const mtensor *t = &m->t[i];
    const mstorage *st = &m->st[t->s];
    int ndim, contiguous;
    tt_dtype dtype;
    int64_t shape[TT_MAX_DIMS + 1], strides[TT_MAX_DIMS + 1], offset, numel;
    void *data;
    tt_storage_t *sh;
    FZ_OK(tt_tensor_ndim(t->h, &ndim));
    FZ_CHECK(ndim == t->ndim, "ndim %d, model %d", ndim, t->ndim);
    FZ_OK(tt_tensor_dtype(t->h, &dtype));
    FZ_CHECK((int)dtype == t->dtype, "dtype %d, model %d", (int)dtype, t->dtype);
    shape[t->ndim] = strides[t->ndim] = -12345; /* must not be written past ndim */
    FZ_OK(tt_tensor_shape(t->h, shape));
    FZ_OK(tt_tensor_strides(t->h, strides));
    FZ_CHECK(shape[t->ndim] == -12345 && strides[t->ndim] == -12345, "wrote past ndim");
    for (int d = 0; d < t->ndim; ++d) {
        FZ_CHECK(shape[d] == t->shape[d], "shape[%d] = %lld; %s", d, (long long)shape[d], model_str(m, t));
        FZ_CHECK(strides[d] == t->strides[d], "strides[%d] = %lld; %s", d, (long long)strides[d],
                 model_str(m, t));
    }
    FZ_OK(tt_tensor_offset(t->h, &offset));
    FZ_CHECK(offset == t->offset, "offset = %lld; %s", (long long)offset, model_str(m, t));
    FZ_OK(tt_tensor_numel(t->h, &numel));
    FZ_CHECK(numel == model_numel(t), "numel %lld, model %lld", (long long)numel, (long long)model_numel(t));
    FZ_OK(tt_tensor_is_contiguous(t->h, &contiguous));
    if (!(model_numel(t) == 0 && fz_known("empty_contiguous")))
        FZ_CHECK(contiguous == model_contiguous(t), "is_contiguous = %d; %s", contiguous, model_str(m, t));
    FZ_OK(tt_tensor_storage(t->h, &sh));
    FZ_CHECK(sh == st->h, "tensor storage %p, model %p", (void *)sh, (void *)st->h);
    FZ_OK(tt_tensor_data(t->h, &data));
    const int64_t isz = itemsize(t->dtype);
    FZ_CHECK((uintptr_t)data == st->data + (uintptr_t)t->offset * (uintptr_t)isz,
             "data %p is not storage data + offset %lld * %lld", data, (long long)t->offset,
             (long long)isz);
    /* The model's own invariant (derived views inherit it): inside the storage. */
    int64_t last = t->offset;
    for (int d = 0; d < t->ndim; ++d) last += t->shape[d] ? (t->shape[d] - 1) * t->strides[d] : 0;
    FZ_CHECK(numel > 0 ? (last + 1) * isz <= st->nbytes : t->offset * isz <= st->nbytes,
             "the model's view leaves its storage of %lld bytes", (long long)st->nbytes);
}

/* ---- generators ---- */

static int64_t gen_dim(fz_in *in) {
    const uint8_t b = fz_u8(in);
    switch (b >> 5) {
        case 0: case 1: case 2: case 3: return b % 5; /* 0..4 */
        case 4: return 0;
        case 5: return ((int64_t)1 << (20 + b % 43)) + (b & 1); /* 2^20 .. 2^62 */
        case 6: return b & 1 ? INT64_MAX : INT64_MAX / 2 + 1;
        default: return -1 - (b & 3);
    }
}

static int gen_ndim(fz_in *in) {
    static const int ndims[] = {0, 1, 1, 2, 2, 2, 3, 3, 4, 5, 8, 9, -1, INT_MAX, 6, 7};
    return FZ_PICK(in, ndims);
}

static int gen_dtype(fz_in *in) {
    const uint8_t b = fz_u8(in);
    if (b < 240) return b % 5;
    static const int bad[] = {5, 6, 7, 8, -1, 255, INT_MAX, INT_MIN, 1 << 20, 16};
    return bad[b % 10];
}

/* Reads a shape of `ndim` (clamped to 0..TT_MAX_DIMS entries stored). */
static void gen_shape(fz_in *in, int ndim, int64_t *shape) {
    for (int i = 0; i < TT_MAX_DIMS; ++i) shape[i] = i < ndim ? gen_dim(in) : 1;
}

static int valid_shape(int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TT_MAX_DIMS) return 0;
    for (int i = 0; i < ndim; ++i) if (shape[i] < 0) return 0;
    return 1;
}

/* Adds the model tensor after a successful call (a slot is free); returns its slot. */
static int add_tensor(model_t *m, tt_tensor_t *h, int s, int dtype, int ndim, const int64_t *shape,
                      const int64_t *strides, int64_t offset) {
    check_new_handle(m->stale_tensor, m->n_stale_tensor, h, "tensor");
    for (int i = 0; i < NT; ++i) FZ_CHECK(m->t[i].h != h, "a new tensor handle equals a live one");
    const int slot = free_slot_t(m);
    mtensor *t = &m->t[slot];
    memset(t, 0, sizeof *t);
    t->h = h, t->s = s, t->dtype = dtype, t->ndim = ndim, t->offset = offset;
    for (int d = 0; d < ndim; ++d) t->shape[d] = shape[d], t->strides[d] = strides[d];
    return slot;
}

/* ---- operations ---- */

/* The call returned rc; `valid` says what the header requires. A refusal needs a message. */
static void expect_outcome(int valid, tt_status rc, const char *what) {
    if (valid) FZ_CHECK(rc == TT_OK, "%s (valid) returned %s", what, tt_status_string(rc));
    else fz_expect_failure(rc, what, __FILE__, __LINE__);
}

static void op_storage_create(model_t *m, fz_in *in) {
    const uint8_t b = fz_u8(in);
    int64_t nbytes;
    switch (b % 8) {
        case 0: nbytes = -1 - fz_u8(in); break;
        case 1: nbytes = INT64_MIN; break;
        case 2: nbytes = ((int64_t)1 << 62) + fz_u16(in); break; /* never allocatable */
        case 3: nbytes = INT64_MAX - fz_u8(in); break;
        case 4: nbytes = fz_u16(in) % 4097; break;
        default: nbytes = fz_u8(in); break;
    }
    const int valid = nbytes >= 0 && nbytes <= 4096, slot = free_slot_s(m);
    if (valid && slot < 0) return;
    tt_storage_t *h = NULL;
    tt_clear_error();
    expect_outcome(valid, tt_storage_create(nbytes, &h), "tt_storage_create");
    if (!valid) return;
    check_new_handle(m->stale_storage, m->n_stale_storage, h, "storage");
    mstorage *st = &m->st[slot];
    st->h = h, st->nbytes = nbytes, st->my_refs = 1;
    void *p;
    FZ_OK(tt_storage_data(h, &p));
    FZ_CHECK(p != NULL && (uintptr_t)p % TT_ALIGNMENT == 0, "storage data %p is not aligned", p);
    for (int64_t i = 0; i < nbytes; ++i) FZ_CHECK(((unsigned char *)p)[i] == 0, "storage byte %lld not zero", (long long)i);
    st->data = (uintptr_t)p;
    m->stats.bytes_in_use += nbytes, m->stats.allocations += 1;
    check_storage(m, slot);
}

static void op_storage_retain_release(model_t *m, fz_in *in, int release) {
    const int s = pick_s(m, in);
    if (s < 0) return;
    if (!release) {
        FZ_OK(tt_storage_retain(m->st[s].h));
        m->st[s].my_refs++;
    } else if (m->st[s].my_refs == 0) { /* lent by tt_tensor_storage only: must be refused */
        FZ_CHECK(FZ_FAILS(tt_storage_release(m->st[s].h)) == TT_ERR_INVALID_ARGUMENT,
                 "tt_storage_release without a caller reference");
    } else {
        FZ_OK(tt_storage_release(m->st[s].h));
        m->st[s].my_refs--;
        storage_dropped(m, s);
    }
    if (m->st[s].h) check_storage(m, s);
}

/* Model of a new contiguous shape (create, reshape, from_storage with NULL strides). */
static int valid_contiguous(int ndim, const int64_t *shape, int64_t isz, int64_t *strides, int64_t *numel) {
    return isz && valid_shape(ndim, shape) && numel_of(ndim, shape, numel) &&
           contiguous_strides(ndim, shape, isz, strides);
}

static void op_tensor_create(model_t *m, fz_in *in) {
    const int dtype = gen_dtype(in), ndim = gen_ndim(in);
    int64_t shape[TT_MAX_DIMS], strides[TT_MAX_DIMS], numel = 0;
    gen_shape(in, ndim, shape);
    const int valid = valid_contiguous(ndim, shape, itemsize(dtype), strides, &numel);
    const int64_t nbytes = valid ? numel * itemsize(dtype) : 0; /* fits: by the shape rule */
    const int s = free_slot_s(m);
    if (valid && (nbytes > (1 << 16) || s < 0 || free_slot_t(m) < 0)) return; /* too big here */
    tt_tensor_t *h = NULL;
    tt_clear_error();
    expect_outcome(valid, tt_tensor_create(dtype, ndim, shape, &h), "tt_tensor_create");
    if (!valid) return;
    tt_storage_t *sh;
    void *p;
    FZ_OK(tt_tensor_storage(h, &sh));
    check_new_handle(m->stale_storage, m->n_stale_storage, sh, "storage");
    FZ_OK(tt_storage_data(sh, &p));
    for (int64_t i = 0; i < nbytes; ++i) FZ_CHECK(((unsigned char *)p)[i] == 0, "tensor byte %lld not zero", (long long)i);
    m->st[s] = (mstorage){sh, nbytes, 0, (uintptr_t)p};
    m->stats.bytes_in_use += nbytes, m->stats.allocations += 1;
    check_tensor(m, add_tensor(m, h, s, dtype, ndim, shape, strides, 0));
    check_storage(m, s);
}

static void op_from_storage(model_t *m, fz_in *in) {
    const uint8_t how = fz_u8(in);
    const int dtype = gen_dtype(in), ndim = gen_ndim(in);
    int64_t shape[TT_MAX_DIMS], strides[TT_MAX_DIMS], offset, numel = 0;
    gen_shape(in, ndim, shape);
    const int null_strides = how & 1;
    for (int i = 0; i < TT_MAX_DIMS; ++i) {
        const uint8_t b = fz_u8(in);
        strides[i] = b < 200 ? b % 9 : b < 240 ? ((int64_t)1 << (30 + b % 33)) : -1 - (b & 3);
    }
    const uint8_t ob = fz_u8(in);
    offset = ob < 220 ? ob % 65 : ob < 240 ? INT64_MAX / (1 + ob % 8) : -1 - (ob & 3);
    const int s = pick_s(m, in);
    if (s < 0 || free_slot_t(m) < 0) return;
    const mstorage *st = &m->st[s];

    /* the expectation, from the header */
    const int64_t isz = itemsize(dtype);
    int64_t contiguous[TT_MAX_DIMS];
    int valid = valid_contiguous(ndim, shape, isz, contiguous, &numel) && offset >= 0;
    if (valid && null_strides) memcpy(strides, contiguous, sizeof strides);
    for (int i = 0; valid && i < ndim; ++i) valid = strides[i] >= 0;
    if (valid) { /* the span over the non-empty dimensions, in bytes, fits in int64 ... */
        int64_t last = offset, step, bytes;
        for (int i = 0; i < ndim; ++i)
            if (shape[i] > 0)
                valid &= !__builtin_mul_overflow(shape[i] - 1, strides[i], &step) &&
                         !__builtin_add_overflow(last, step, &last);
        valid = valid && !__builtin_add_overflow(last, 1, &last) && !__builtin_mul_overflow(last, isz, &bytes);
        /* ... and every element lies inside the storage; without elements, offset does */
        if (valid) valid = numel > 0 ? bytes <= st->nbytes : offset <= st->nbytes / isz;
    }
    tt_tensor_t *h = NULL;
    tt_clear_error();
    const tt_status rc = tt_tensor_from_storage(st->h, dtype, ndim, shape, null_strides ? NULL : strides,
                                                offset, &h);
    if ((rc == TT_OK) != valid) {
        fprintf(stderr, "tt_tensor_from_storage(storage of %lld bytes, dtype=%d, ndim=%d, shape=[",
                (long long)st->nbytes, dtype, ndim);
        for (int i = 0; i < ndim && i < TT_MAX_DIMS; ++i) fprintf(stderr, " %lld", (long long)shape[i]);
        fprintf(stderr, " ], strides=");
        if (null_strides) fprintf(stderr, "NULL");
        else for (int i = 0; i < ndim && i < TT_MAX_DIMS; ++i) fprintf(stderr, "%lld ", (long long)strides[i]);
        fprintf(stderr, ", offset=%lld)\n", (long long)offset);
    }
    expect_outcome(valid, rc, "tt_tensor_from_storage");
    if (!valid) return;
    check_tensor(m, add_tensor(m, h, s, dtype, ndim, shape, strides, offset));
    check_storage(m, s);
}

static void op_reshape(model_t *m, fz_in *in) {
    const int i = pick_t(m, in);
    if (i < 0 || free_slot_t(m) < 0) return;
    const mtensor src = m->t[i];
    int ndim = gen_ndim(in);
    int64_t shape[TT_MAX_DIMS], strides[TT_MAX_DIMS], numel = 0;
    if (fz_u8(in) & 1) { /* same count: split the source count over ndim factors */
        if (ndim < 0 || ndim > TT_MAX_DIMS) ndim = 2;
        int64_t left = model_numel(&src);
        for (int d = 0; d < TT_MAX_DIMS; ++d) shape[d] = 1;
        for (int d = 0; d + 1 < ndim; ++d) {
            const int64_t f = 1 + fz_u8(in) % 4;
            if (left % f == 0 && left != 0) shape[d] = f, left /= f;
            else if (left == 0 && (fz_u8(in) & 1)) shape[d] = gen_dim(in) & INT64_MAX;
        }
        if (ndim > 0) shape[ndim - 1] = left;
        else if (left != 1) ndim = 1, shape[0] = left;
    } else {
        gen_shape(in, ndim, shape);
    }
    const int valid = valid_contiguous(ndim, shape, itemsize(src.dtype), strides, &numel) &&
                      numel == model_numel(&src) && model_contiguous(&src);
    tt_tensor_t *h = NULL;
    tt_clear_error();
    const tt_status rc = tt_tensor_reshape(src.h, ndim, shape, &h);
    if (valid && rc != TT_OK && numel == 0 && fz_known("empty_contiguous")) return;
    expect_outcome(valid, rc, "tt_tensor_reshape");
    if (valid) check_tensor(m, add_tensor(m, h, src.s, src.dtype, ndim, shape, strides, src.offset));
}

static void op_transpose(model_t *m, fz_in *in) {
    static const int dims[] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, -1, 8, INT_MAX, INT_MIN, 1, 0};
    const int i = pick_t(m, in);
    if (i < 0 || free_slot_t(m) < 0) return;
    const mtensor src = m->t[i];
    const int d0 = FZ_PICK(in, dims), d1 = FZ_PICK(in, dims);
    const int valid = d0 >= 0 && d0 < src.ndim && d1 >= 0 && d1 < src.ndim;
    tt_tensor_t *h = NULL;
    tt_clear_error();
    expect_outcome(valid, tt_tensor_transpose(src.h, d0, d1, &h), "tt_tensor_transpose");
    if (!valid) return;
    const int k = add_tensor(m, h, src.s, src.dtype, src.ndim, src.shape, src.strides, src.offset);
    mtensor *t = &m->t[k];
    t->shape[d0] = src.shape[d1], t->shape[d1] = src.shape[d0];
    t->strides[d0] = src.strides[d1], t->strides[d1] = src.strides[d0];
    check_tensor(m, k);
}

static int64_t gen_index(fz_in *in, int64_t size) {
    const uint8_t b = fz_u8(in);
    if (b < 200) return b % (size < 1000 ? size + 2 : 1000); /* mostly in range, sometimes size + 1 */
    static const int64_t odd[] = {-1, INT64_MIN, INT64_MAX, INT64_MAX - 1, (int64_t)1 << 62};
    return b < 220 ? size - (b & 1) : odd[b % 5];
}

static void op_slice(model_t *m, fz_in *in) {
    const int i = pick_t(m, in);
    if (i < 0 || free_slot_t(m) < 0) return;
    const mtensor src = m->t[i];
    const uint8_t db = fz_u8(in);
    const int dim = db < 240 ? (src.ndim ? db % src.ndim : 0) : (db & 1 ? -1 : src.ndim);
    const int64_t size = dim >= 0 && dim < src.ndim ? src.shape[dim] : 0;
    const int64_t start = gen_index(in, size), stop = gen_index(in, size);
    static const int64_t steps[] = {1, 1, 1, 2, 3, 4, 7, 0, -1, INT64_MAX, (int64_t)1 << 62, INT64_MIN, 5, 2, 1000, (int64_t)1 << 40};
    const int64_t step = FZ_PICK(in, steps);
    const int valid = dim >= 0 && dim < src.ndim && step >= 1 && start >= 0 && stop >= start && stop <= size;
    tt_tensor_t *h = NULL;
    tt_clear_error();
    const tt_status rc = tt_tensor_slice(src.h, dim, start, stop, step, &h);
    if ((rc == TT_OK) != valid)
        fprintf(stderr, "tt_tensor_slice(dim=%d of size %lld, %lld:%lld:%lld)\n", dim, (long long)size,
                (long long)start, (long long)stop, (long long)step);
    expect_outcome(valid, rc, "tt_tensor_slice");
    if (!valid) return;
    const int k = add_tensor(m, h, src.s, src.dtype, src.ndim, src.shape, src.strides, src.offset);
    mtensor *t = &m->t[k];
    t->shape[dim] = stop == start ? 0 : 1 + (stop - start - 1) / step; /* ceil, without overflow */
    if (t->shape[dim] > 1) { /* (size - 1) * step < stop - start: inside the source's span */
        FZ_CHECK(!__builtin_mul_overflow(src.strides[dim], step, &t->strides[dim]), "model: stride overflow");
    }
    if (model_numel(t) > 0) t->offset = src.offset + start * src.strides[dim]; /* <= the source's span */
    check_tensor(m, k);
}

static void op_free(model_t *m, fz_in *in) {
    const int i = pick_t(m, in);
    if (i < 0) {
        FZ_OK(tt_tensor_free(NULL));
        return;
    }
    const int s = m->t[i].s;
    FZ_OK(tt_tensor_free(m->t[i].h));
    remember_stale(m->stale_tensor, &m->n_stale_tensor, m->t[i].h);
    m->t[i].h = NULL;
    storage_dropped(m, s);
    if (m->st[s].h) check_storage(m, s);
}

static void op_query(model_t *m, fz_in *in) {
    const int i = pick_t(m, in);
    if (i >= 0) {
        check_tensor(m, i);
        const tt_tensor_t *h = m->t[i].h;
        switch (fz_u8(in) % 4) { /* NULL out-pointers */
            case 0: FZ_FAILS(tt_tensor_ndim(h, NULL)); break;
            case 1: FZ_FAILS(tt_tensor_shape(h, NULL)); break;
            case 2: FZ_FAILS(tt_tensor_data(h, NULL)); break;
            default: FZ_FAILS(tt_tensor_reshape(h, 0, NULL, NULL)); break;
        }
    }
    const int s = pick_s(m, in);
    if (s >= 0) check_storage(m, s);
}

/* A handle that is not live: freed, never created, or of the other kind. */
static void op_stale(model_t *m, fz_in *in) {
    const uint8_t b = fz_u8(in);
    int64_t local = 0;
    const void *h;
    const int tensor_kind = b & 1;
    if ((b >> 1) % 4 == 0) {
        h = &local; /* never created (and not heap memory: must not be read) */
    } else if ((b >> 1) % 4 == 1) { /* a live handle of the other kind */
        const int i = tensor_kind ? pick_s(m, in) : pick_t(m, in);
        if (i < 0) return;
        h = tensor_kind ? (const void *)m->st[i].h : (const void *)m->t[i].h;
    } else {
        const int n = tensor_kind ? m->n_stale_tensor : m->n_stale_storage;
        if (n == 0) return;
        h = (tensor_kind ? m->stale_tensor : m->stale_storage)[fz_u8(in) % n];
        /* a freed address that is live again (reuse) is reported by check_new_handle */
        for (int i = 0; i < NT; ++i) if (tensor_kind && m->t[i].h == h) return;
        for (int i = 0; i < NS; ++i) if (!tensor_kind && m->st[i].h == h) return;
    }
    tt_status st;
    const uint8_t fn = fz_u8(in);
    tt_clear_error();
    if (tensor_kind) {
        tt_tensor_t *t = (tt_tensor_t *)h, *out = NULL;
        int64_t v[TT_MAX_DIMS];
        int iv;
        void *p;
        tt_storage_t *sp;
        tt_dtype d;
        switch (fn % 12) {
            case 0: st = tt_tensor_ndim(t, &iv); break;
            case 1: st = tt_tensor_shape(t, v); break;
            case 2: st = tt_tensor_strides(t, v); break;
            case 3: st = tt_tensor_offset(t, v); break;
            case 4: st = tt_tensor_numel(t, v); break;
            case 5: st = tt_tensor_data(t, &p); break;
            case 6: st = tt_tensor_storage(t, &sp); break;
            case 7: st = tt_tensor_is_contiguous(t, &iv); break;
            case 8: st = tt_tensor_dtype(t, &d); break;
            case 9: v[0] = 1; st = tt_tensor_reshape(t, 1, v, &out); break;
            case 10: st = tt_tensor_slice(t, 0, 0, 0, 1, &out); break;
            default: st = fn & 0x80 ? tt_tensor_transpose(t, 0, 0, &out) : tt_tensor_free(t); break;
        }
        FZ_CHECK(out == NULL, "a view of a stale tensor was returned");
    } else {
        tt_storage_t *s = (tt_storage_t *)h;
        int64_t v;
        void *p;
        tt_tensor_t *out = NULL;
        switch (fn % 6) {
            case 0: st = tt_storage_retain(s); break;
            case 1: st = tt_storage_release(s); break;
            case 2: st = tt_storage_data(s, &p); break;
            case 3: st = tt_storage_nbytes(s, &v); break;
            case 4: st = tt_storage_refcount(s, &v); break;
            default: st = tt_tensor_from_storage(s, TT_F32, 0, NULL, NULL, 0, &out); break;
        }
        FZ_CHECK(out == NULL, "a tensor over a stale storage was returned");
    }
    FZ_CHECK(st == TT_ERR_INVALID_HANDLE && tt_last_error()[0],
             "a %s %s handle %p (call %d) gave %s, want TT_ERR_INVALID_HANDLE", tensor_kind ? "tensor" : "storage",
             (b >> 1) % 4 == 0 ? "never-created" : (b >> 1) % 4 == 1 ? "wrong-kind" : "freed", h,
             fn % 12, tt_status_string(st));
}

static void op_enums(fz_in *in) {
    static const char *const names[] = {"float32", "float64", "float16", "int32", "int64"};
    const int v = (int)fz_u32(in);
    const int64_t size = tt_dtype_size(v);
    const char *name = tt_dtype_name(v);
    FZ_CHECK(size == itemsize(v), "tt_dtype_size(%d) = %lld", v, (long long)size);
    FZ_CHECK(name && strcmp(name, v >= 0 && v <= 4 ? names[v] : "unknown") == 0, "tt_dtype_name(%d)", v);
    const char *status = tt_status_string(v);
    FZ_CHECK(status && status[0], "tt_status_string(%d)", v);
    if (v >= 0 && v <= TT_ERR_INTERNAL) FZ_CHECK(strncmp(status, "TT_", 3) == 0, "tt_status_string(%d)", v);
}

static void check_stats(const model_t *m) {
    tt_memory_stats now;
    FZ_OK(tt_memory_stats_get(&now));
    FZ_CHECK(now.bytes_in_use == m->stats.bytes_in_use && now.allocations == m->stats.allocations &&
                 now.frees == m->stats.frees,
             "memory stats in use %lld / allocations %lld / frees %lld, model %lld / %lld / %lld",
             (long long)now.bytes_in_use, (long long)now.allocations, (long long)now.frees,
             (long long)m->stats.bytes_in_use, (long long)m->stats.allocations, (long long)m->stats.frees);
    FZ_CHECK(now.peak_bytes >= now.bytes_in_use, "peak below bytes in use");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    static model_t m; /* static: the stale lists are large-ish */
    memset(&m, 0, sizeof m);
    FZ_OK(tt_memory_stats_get(&m.stats));
    for (int op = 0; op < MAX_OPS && in.n > 0; ++op) {
        switch (fz_u8(&in) % 14) {
            case 0: op_storage_create(&m, &in); break;
            case 1: op_storage_retain_release(&m, &in, 0); break;
            case 2: op_storage_retain_release(&m, &in, 1); break;
            case 3: case 4: op_tensor_create(&m, &in); break;
            case 5: op_from_storage(&m, &in); break;
            case 6: op_reshape(&m, &in); break;
            case 7: op_transpose(&m, &in); break;
            case 8: op_slice(&m, &in); break;
            case 9: op_free(&m, &in); break;
            case 10: op_query(&m, &in); break;
            case 11: op_stale(&m, &in); break;
            case 12: op_enums(&in); break;
            default: check_stats(&m); break;
        }
    }
    /* Tear down: tensors first, then the harness's own references. */
    for (int i = 0; i < NT; ++i)
        if (m.t[i].h) {
            const int s = m.t[i].s;
            FZ_OK(tt_tensor_free(m.t[i].h));
            m.t[i].h = NULL;
            storage_dropped(&m, s);
        }
    for (int s = 0; s < NS; ++s)
        while (m.st[s].h) {
            FZ_CHECK(m.st[s].my_refs > 0, "storage %d is live without references", s);
            FZ_OK(tt_storage_release(m.st[s].h));
            m.st[s].my_refs--;
            storage_dropped(&m, s);
        }
    check_stats(&m);
    return 0;
}
