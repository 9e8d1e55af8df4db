/*
 * test_reliability.c -- regression tests for what fuzzing the C ABI found: a deadlock
 * in the batched GEMM, a hang in the GELU references, absurd thread counts, integer
 * overflow in descriptor and GEMM argument arithmetic, enum values out of range,
 * stale handles whose memory was reused, and promises of the header (lda >= K with
 * K == 0, overlap rules of the GELU kernels, borrowed storage handles).
 *
 * ctest runs this file with a timeout, so a deadlock or hang that comes back fails
 * the suite instead of stalling it.
 */
#include "tt_test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* ---- 1. batched GEMM with more matrices than threads, not a multiple of them ---- */

static void batched_matches_reference(int threads, int64_t batch, int64_t n) {
    const int64_t per = n * n;
    float *a = malloc(sizeof(float) * (size_t)(batch * per));
    float *c = malloc(sizeof(float) * (size_t)(batch * per));
    float *ref = malloc(sizeof(float) * (size_t)per);
    tt_test_seed((uint64_t)(threads * 131 + batch));
    tt_test_fill(a, batch * per, -1.0f, 1.0f);
    CHECK_OK(tt_set_num_threads(threads));
    CHECK_OK(tt_sgemm_strided_batched(0, 0, n, n, n, 1.0f, a, n, per, a, n, per, 0.0f, c, n, per,
                                      batch));
    for (int64_t b = 0; b < batch; ++b) {
        CHECK_OK(tt_sgemm_reference(0, 0, n, n, n, 1.0f, a + b * per, n, a + b * per, n, 0.0f,
                                    ref, n));
        double worst = 0.0;
        for (int64_t i = 0; i < per; ++i) worst = fmax(worst, fabs(c[b * per + i] - ref[i]));
        CHECK(worst < 1e-3);
    }
    free(a);
    free(c);
    free(ref);
}

static void test_batched_no_deadlock(void) {
    const int before = tt_get_num_threads();
    batched_matches_reference(2, 3, 100); /* the reported case: (3, 100, 100) @ itself */
    batched_matches_reference(2, 5, 96);
    batched_matches_reference(3, 4, 100);
    batched_matches_reference(3, 7, 80);
    CHECK_OK(tt_set_num_threads(before));
}

/* ---- 2. GELU references with cols == 0 and huge rows return at once ---- */

static void test_gelu_reference_empty_rows(void) {
    float gb[1] = {7.0f};
    CHECK_OK(tt_bias_gelu_forward_reference(NULL, NULL, NULL, INT64_MAX, 0));
    CHECK_OK(tt_bias_gelu_backward_reference(NULL, NULL, NULL, NULL, NULL, INT64_MAX, 0));
    CHECK_OK(tt_bias_gelu_forward(NULL, NULL, NULL, INT64_MAX, 0));
    CHECK_OK(tt_bias_gelu_backward(NULL, NULL, NULL, NULL, gb, INT64_MAX, 0));
    CHECK_FAILS(tt_bias_gelu_forward_reference(NULL, NULL, NULL, INT64_MAX, 2), TT_ERR_OVERFLOW,
                "overflow");
}

/* ---- 3. thread counts OpenMP cannot create are refused ---- */

static void test_thread_limit(void) {
    const int before = tt_get_num_threads();
    CHECK_FAILS(tt_set_num_threads(50000), TT_ERR_INVALID_ARGUMENT, "n=50000");
    CHECK_FAILS(tt_set_num_threads(100000), TT_ERR_INVALID_ARGUMENT, "1..256");
    CHECK_FAILS(tt_set_num_threads(TT_MAX_THREADS + 1), TT_ERR_INVALID_ARGUMENT, "outside");
    CHECK(tt_get_num_threads() == before);
    CHECK_OK(tt_set_num_threads(TT_MAX_THREADS));
    CHECK(tt_get_num_threads() >= 1 && tt_get_num_threads() <= TT_MAX_THREADS);
    CHECK_OK(tt_set_num_threads(before));
}

/* ---- 4. overflow in descriptor arithmetic ---- */

static void shape_of(tt_tensor_t *t, int64_t *shape, int64_t *strides, int64_t *offset) {
    CHECK_OK(tt_tensor_shape(t, shape));
    CHECK_OK(tt_tensor_strides(t, strides));
    CHECK_OK(tt_tensor_offset(t, offset));
}

static void test_slice_overflow(void) {
    int64_t s2[1] = {2}, s83[1] = {83}, s32[2] = {3, 2}, shape[8], strides[8], offset;
    tt_tensor_t *t = NULL, *v = NULL;

    CHECK_OK(tt_tensor_create(TT_F32, 1, s2, &t));
    CHECK_OK(tt_tensor_slice(t, 0, 0, 2, INT64_MAX, &v));
    shape_of(v, shape, strides, &offset);
    CHECK(shape[0] == 1 && offset == 0); /* was {-1} */
    CHECK_OK(tt_tensor_free(v));
    CHECK_OK(tt_tensor_free(t));

    CHECK_OK(tt_tensor_create(TT_F32, 1, s83, &t));
    CHECK_OK(tt_tensor_slice(t, 0, 36, 60, INT64_MAX - 7, &v));
    shape_of(v, shape, strides, &offset);
    CHECK(shape[0] == 1 && offset == 36); /* was {0} */
    CHECK_OK(tt_tensor_free(v));
    CHECK_OK(tt_tensor_slice(t, 0, 5, 83, 7, &v)); /* ceil(78 / 7) = 12 */
    shape_of(v, shape, strides, &offset);
    CHECK(shape[0] == 12 && strides[0] == 7 && offset == 5);
    CHECK_OK(tt_tensor_free(v));
    CHECK_OK(tt_tensor_free(t));

    CHECK_OK(tt_tensor_create(TT_F32, 2, s32, &t));
    CHECK_OK(tt_tensor_slice(t, 0, 0, 3, (int64_t)1 << 62, &v));
    shape_of(v, shape, strides, &offset);
    CHECK(shape[0] == 1 && strides[0] == 2 && strides[1] == 1); /* was {-2^63, 1} */
    CHECK_OK(tt_tensor_free(v));
    CHECK_OK(tt_tensor_free(t));
}

static void test_zero_dim_shapes(void) {
    const int64_t big = (int64_t)1 << 32;
    int64_t a[3] = {0, big, big}, b[3] = {0, (int64_t)1 << 62, 4}, c[3] = {(int64_t)1 << 62, 4, 0};
    int64_t ok[3] = {0, 1 << 20, 1 << 20};
    tt_tensor_t *t = NULL;
    CHECK_FAILS(tt_tensor_create(TT_F32, 3, a, &t), TT_ERR_OVERFLOW, "overflows");
    CHECK_FAILS(tt_tensor_create(TT_F32, 3, b, &t), TT_ERR_OVERFLOW, "overflows");
    CHECK_FAILS(tt_tensor_create(TT_F32, 3, c, &t), TT_ERR_OVERFLOW, "overflows");
    /* a zero-sized shape whose strides fit is fine, and its views are exact */
    CHECK_OK(tt_tensor_create(TT_F32, 3, ok, &t));
    int64_t numel = -1, strides[8];
    int contig = -1;
    CHECK_OK(tt_tensor_numel(t, &numel));
    CHECK(numel == 0);
    CHECK_OK(tt_tensor_is_contiguous(t, &contig));
    CHECK(contig == 1);
    CHECK_OK(tt_tensor_strides(t, strides));
    CHECK(strides[0] == ((int64_t)1 << 40) && strides[1] == (1 << 20) && strides[2] == 1);
    tt_tensor_t *tr = NULL, *rs = NULL;
    CHECK_OK(tt_tensor_transpose(t, 0, 2, &tr));
    int64_t flat[2] = {0, 5};
    CHECK_OK(tt_tensor_reshape(t, 2, flat, &rs));
    CHECK_OK(tt_tensor_free(rs));
    CHECK_OK(tt_tensor_free(tr));
    CHECK_OK(tt_tensor_free(t));
}

static void test_empty_view_offset(void) {
    tt_storage_t *s = NULL;
    tt_tensor_t *v = NULL;
    int64_t zero[1] = {0}, two_zero[2] = {4, 0}, strides[2] = {(int64_t)1 << 61, 1};
    void *data = NULL, *base = NULL;
    CHECK_OK(tt_storage_create(64, &s));
    CHECK_OK(tt_storage_data(s, &base));
    CHECK_FAILS(tt_tensor_from_storage(s, TT_F32, 1, zero, NULL, INT64_MAX, &v), TT_ERR_OVERFLOW,
                "extent");
    CHECK_FAILS(tt_tensor_from_storage(s, TT_F32, 1, zero, NULL, 17, &v), TT_ERR_INVALID_ARGUMENT,
                "offset=17");
    /* offset 16 of 16 floats: an empty view may sit at the end, not past it */
    CHECK_OK(tt_tensor_from_storage(s, TT_F32, 1, zero, NULL, 16, &v));
    CHECK_OK(tt_tensor_data(v, &data));
    CHECK((char *)data == (char *)base + 64);
    CHECK_OK(tt_tensor_free(v));
    /* an empty view with a huge stride: the span must still fit in int64 bytes */
    CHECK_FAILS(tt_tensor_from_storage(s, TT_F32, 2, two_zero, strides, 0, &v), TT_ERR_OVERFLOW,
                "extent");
    strides[0] = (int64_t)1 << 40;
    CHECK_OK(tt_tensor_from_storage(s, TT_F32, 2, two_zero, strides, 0, &v));
    /* slicing it keeps the offset: the data pointer never leaves the storage */
    tt_tensor_t *sl = NULL;
    int64_t offset = -1;
    CHECK_OK(tt_tensor_slice(v, 0, 3, 4, 1, &sl));
    CHECK_OK(tt_tensor_offset(sl, &offset));
    CHECK(offset == 0);
    CHECK_OK(tt_tensor_free(sl));
    CHECK_OK(tt_tensor_free(v));
    CHECK_OK(tt_storage_release(s));
}

static void test_gemm_empty_operands(void) {
    float c[6] = {1, 2, 3, 4, 5, 6};
    uint16_t hc[6] = {0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00, 0x3c00}, ha[1] = {0};
    /* K == 0: A and B are never read, whatever their pointers and leading dimensions */
    CHECK_OK(tt_hgemm(0, 0, 2, 3, 0, 1.0f, NULL, 0, NULL, 3, 2.0f, hc, 3));
    for (int i = 0; i < 6; ++i) CHECK(hc[i] == 0x4000); /* 1.0 * beta 2 = 2.0 */
    CHECK_OK(tt_hgemm(0, 1, 2, 3, 0, 1.0f, ha, INT64_MAX, ha, INT64_MAX, 0.0f, hc, 3));
    for (int i = 0; i < 6; ++i) CHECK(hc[i] == 0);
    CHECK_OK(tt_hgemm_reference(1, 0, 2, 3, 0, 1.0f, NULL, 2, NULL, 3, 0.0f, hc, 3));
    /* the header allows lda >= K, so lda = 0 with K = 0 */
    CHECK_OK(tt_sgemm(0, 1, 2, 3, 0, 1.0f, NULL, 0, NULL, 0, 0.5f, c, 3));
    CHECK(c[0] == 0.5f && c[5] == 3.0f);
    CHECK_OK(tt_sgemm_reference(0, 1, 2, 3, 0, 1.0f, NULL, 0, NULL, 0, 2.0f, c, 3));
    CHECK(c[0] == 1.0f && c[5] == 6.0f);
    CHECK_FAILS(tt_sgemm(0, 0, 2, 3, 1, 1.0f, c, 0, c, 3, 0.0f, c, 3), TT_ERR_INVALID_ARGUMENT,
                "lda=0");
    /* batched with K == 0: huge strides of A and B are never used */
    float cb[12];
    for (int i = 0; i < 12; ++i) cb[i] = 1.0f;
    float dummy = 0.0f;
    CHECK_OK(tt_sgemm_strided_batched(0, 0, 2, 3, 0, 1.0f, &dummy, 0, INT64_MAX / 2, &dummy, 3,
                                      INT64_MAX / 2, 3.0f, cb, 3, 6, 2));
    for (int i = 0; i < 12; ++i) CHECK(cb[i] == 3.0f);
    /* but a stride that overflows for a matrix that is read is refused */
    CHECK_FAILS(tt_sgemm_strided_batched(0, 0, 2, 3, 1, 1.0f, &dummy, 1, INT64_MAX / 2, &dummy, 3,
                                         0, 0.0f, cb, 3, 6, 3),
                TT_ERR_OVERFLOW, "strideA");
}

/* ---- 4b. enum values out of range are refused, not loaded ---- */

static void test_enums(void) {
    CHECK(strcmp(tt_status_string(99), "TT_ERR_UNKNOWN_STATUS") == 0);
    CHECK(strcmp(tt_status_string(-1), "TT_ERR_UNKNOWN_STATUS") == 0);
    CHECK(strcmp(tt_isa_name(7), "unknown") == 0);
    CHECK(strcmp(tt_dtype_name(99), "unknown") == 0);
    CHECK(tt_dtype_size(99) == 0 && tt_dtype_size(-5) == 0);
    CHECK(tt_isa_compiled(42) == 0 && tt_isa_supported(-1) == 0);
    CHECK_FAILS(tt_set_isa(42), TT_ERR_INVALID_ARGUMENT, "isa=42");
    int64_t one[1] = {1};
    tt_tensor_t *t = NULL;
    CHECK_FAILS(tt_tensor_create(99, 1, one, &t), TT_ERR_INVALID_ARGUMENT, "dtype=99");
}

/* ---- 5. handles: stale handles stay refused after their memory is reused ---- */

static void test_stale_handles(void) {
    tt_storage_t *s1 = NULL, *s2 = NULL;
    void *d2 = NULL;
    CHECK_OK(tt_storage_create(128, &s1));
    CHECK_OK(tt_storage_release(s1));
    for (int round = 0; round < 16; ++round) {
        CHECK_OK(tt_storage_create(128, &s2)); /* the allocator may hand back s1's memory */
        CHECK(s2 != s1);
        CHECK_FAILS(tt_storage_release(s1), TT_ERR_INVALID_HANDLE, "not a live handle");
        CHECK_OK(tt_storage_data(s2, &d2)); /* s2 survived the stale release */
        CHECK_OK(tt_storage_release(s2));
    }
    int64_t shape[1] = {4};
    tt_tensor_t *t1 = NULL, *t2 = NULL;
    CHECK_OK(tt_tensor_create(TT_F32, 1, shape, &t1));
    CHECK_OK(tt_tensor_free(t1));
    CHECK_OK(tt_tensor_create(TT_F32, 1, shape, &t2));
    CHECK(t2 != t1);
    CHECK_FAILS(tt_tensor_free(t1), TT_ERR_INVALID_HANDLE, "not a live handle");
    int ndim = -1;
    CHECK_OK(tt_tensor_ndim(t2, &ndim));
    CHECK(ndim == 1);
    /* a handle of the other kind is refused too */
    tt_storage_t *borrowed = NULL;
    CHECK_OK(tt_tensor_storage(t2, &borrowed));
    CHECK_FAILS(tt_tensor_ndim((tt_tensor_t *)borrowed, &ndim), TT_ERR_INVALID_HANDLE, "tensor");
    CHECK_FAILS(tt_storage_retain((tt_storage_t *)t2), TT_ERR_INVALID_HANDLE, "storage");
    CHECK_OK(tt_tensor_free(t2));
}

static void test_borrowed_storage(void) {
    int64_t shape[1] = {8}, rc = 0;
    tt_tensor_t *t = NULL;
    tt_storage_t *s = NULL;
    float *data = NULL;
    CHECK_OK(tt_tensor_create(TT_F32, 1, shape, &t));
    CHECK_OK(tt_tensor_storage(t, &s));
    /* the tensor's storage is lent, not owned: releasing it is refused */
    CHECK_FAILS(tt_storage_release(s), TT_ERR_INVALID_ARGUMENT, "no caller reference");
    CHECK_OK(tt_tensor_data(t, (void **)&data));
    data[7] = 3.0f; /* still the tensor's memory */
    /* retained, it outlives the tensor */
    CHECK_OK(tt_storage_retain(s));
    CHECK_OK(tt_storage_refcount(s, &rc));
    CHECK(rc == 2);
    CHECK_OK(tt_tensor_free(t));
    CHECK_OK(tt_storage_data(s, (void **)&data));
    CHECK(data[7] == 3.0f);
    CHECK_OK(tt_storage_release(s));
    CHECK_FAILS(tt_storage_release(s), TT_ERR_INVALID_HANDLE, "not a live handle");
    /* a created storage over-released: the second release cannot touch a tensor's reference */
    tt_storage_t *own = NULL;
    CHECK_OK(tt_storage_create(32, &own));
    CHECK_OK(tt_tensor_from_storage(own, TT_F32, 1, shape, NULL, 0, &t));
    CHECK_OK(tt_storage_release(own));
    CHECK_FAILS(tt_storage_release(own), TT_ERR_INVALID_ARGUMENT, "no caller reference");
    CHECK_OK(tt_tensor_data(t, (void **)&data));
    data[0] = 1.0f;
    CHECK_OK(tt_tensor_free(t));
    CHECK_FAILS(tt_storage_refcount(own, &rc), TT_ERR_INVALID_HANDLE, "not a live handle");
}

/* ---- 5b. GELU overlap rules: the same for the fast kernels and the references ---- */

static void test_gelu_overlap(void) {
    float buf[16] = {0}, gb[4];
    for (int i = 0; i < 16; ++i) buf[i] = (float)i / 8.0f - 1.0f;
    /* y overlapping bias is refused by both */
    CHECK_FAILS(tt_bias_gelu_forward(buf, buf + 2, buf + 4, 2, 4), TT_ERR_INVALID_ARGUMENT, "bias");
    CHECK_FAILS(tt_bias_gelu_forward_reference(buf, buf + 2, buf + 4, 2, 4), TT_ERR_INVALID_ARGUMENT,
                "bias");
    CHECK_FAILS(tt_bias_gelu_backward(buf, buf + 10, buf + 8, buf + 8, NULL, 2, 4),
                TT_ERR_INVALID_ARGUMENT, "bias");
    /* grad_bias overlapping an input is refused by both */
    CHECK_FAILS(tt_bias_gelu_backward(buf, NULL, buf + 8, buf + 8, buf + 2, 1, 4),
                TT_ERR_INVALID_ARGUMENT, "grad_bias overlaps x");
    CHECK_FAILS(tt_bias_gelu_backward_reference(buf, NULL, buf + 8, buf + 8, buf + 9, 1, 4),
                TT_ERR_INVALID_ARGUMENT, "grad_bias overlaps grad_y");
    /* in place is allowed: y == x, grad_x == grad_y or x */
    float x[8], y_fast[8], y_ref[8];
    for (int i = 0; i < 8; ++i) x[i] = y_fast[i] = y_ref[i] = (float)i - 4.0f;
    CHECK_OK(tt_bias_gelu_forward(y_fast, NULL, y_fast, 2, 4));
    CHECK_OK(tt_bias_gelu_forward_reference(y_ref, NULL, y_ref, 2, 4));
    for (int i = 0; i < 8; ++i) CHECK(fabsf(y_fast[i] - y_ref[i]) < 1e-5f);
    CHECK_OK(tt_bias_gelu_backward(x, NULL, x, x, gb, 2, 4));
    /* with rows == 0, grad_bias is still written: it may not overlap bias (fuzzing found it) */
    float bias[3] = {1, 2, 3};
    CHECK_FAILS(tt_bias_gelu_backward(NULL, bias, NULL, NULL, bias, 0, 3), TT_ERR_INVALID_ARGUMENT,
                "grad_bias overlaps bias");
    CHECK_FAILS(tt_bias_gelu_backward_reference(NULL, bias, NULL, NULL, bias, 0, 3),
                TT_ERR_INVALID_ARGUMENT, "grad_bias overlaps bias");
    CHECK(bias[0] == 1 && bias[2] == 3);
}

/* An empty tensor is contiguous wherever its 0 is, so its reshape never needs a copy. */
static void test_empty_is_contiguous(void) {
    int64_t shape[2] = {0, 4}, flat[1] = {0}, rev[2] = {2, 0}, zero_strides[2] = {0, 0};
    tt_tensor_t *t = NULL, *s = NULL, *r = NULL, *v = NULL;
    int contig = -1;
    CHECK_OK(tt_tensor_create(TT_F32, 2, shape, &t));
    CHECK_OK(tt_tensor_slice(t, 1, 0, 4, 2, &s)); /* [0, 2], strides [4, 2] */
    CHECK_OK(tt_tensor_is_contiguous(s, &contig));
    CHECK(contig == 1);
    CHECK_OK(tt_tensor_reshape(s, 1, flat, &r));
    tt_storage_t *st = NULL;
    CHECK_OK(tt_tensor_storage(t, &st));
    int64_t shape_a[2] = {0, 2};
    CHECK_OK(tt_tensor_from_storage(st, TT_F32, 2, shape_a, zero_strides, 0, &v));
    CHECK_OK(tt_tensor_is_contiguous(v, &contig));
    CHECK(contig == 1);
    CHECK_OK(tt_tensor_free(v));
    CHECK_OK(tt_tensor_from_storage(st, TT_F32, 2, rev, zero_strides, 0, &v));
    CHECK_OK(tt_tensor_is_contiguous(v, &contig));
    CHECK(contig == 1);
    CHECK_OK(tt_tensor_free(v));
    CHECK_OK(tt_tensor_free(r));
    CHECK_OK(tt_tensor_free(s));
    CHECK_OK(tt_tensor_free(t));
}

int main(void) {
    test_batched_no_deadlock();
    test_gelu_reference_empty_rows();
    test_thread_limit();
    test_slice_overflow();
    test_zero_dim_shapes();
    test_empty_view_offset();
    test_gemm_empty_operands();
    test_enums();
    test_stale_handles();
    test_borrowed_storage();
    test_gelu_overlap();
    test_empty_is_contiguous();
    TT_TEST_MAIN_END;
}
