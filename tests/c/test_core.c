/*
 * test_core.c -- status and errors, ISA choice, threads, storage (alignment,
 * reference counts, memory counters) and tensor descriptors (views without
 * copies), and every bad-argument case of those functions.
 */
#include "tt_test.h"

#include <stdint.h>
#include <stdlib.h>

static void test_status(void) {
    CHECK(strcmp(tt_status_string(TT_OK), "TT_OK") == 0);
    CHECK(strcmp(tt_status_string(TT_ERR_SHAPE_MISMATCH), "TT_ERR_SHAPE_MISMATCH") == 0);
    CHECK(strcmp(tt_status_string((tt_status)99), "TT_ERR_UNKNOWN_STATUS") == 0);
    tt_clear_error();
    CHECK(strcmp(tt_last_error(), "") == 0);
    CHECK(strlen(tt_version()) >= 5);
    const char *info = tt_build_info();
    CHECK(strstr(info, "\"isa_active\"") != NULL);
    CHECK(strstr(info, "\"isas_compiled\"") != NULL);
    CHECK(strstr(info, tt_version()) != NULL);
}

static void test_isa(void) {
    tt_isa original = tt_isa_active();
    CHECK(tt_isa_compiled(TT_ISA_SCALAR) && tt_isa_supported(TT_ISA_SCALAR));
    const tt_isa all[] = {TT_ISA_SCALAR, TT_ISA_AVX2, TT_ISA_AVX512, TT_ISA_NEON};
    for (int i = 0; i < 4; ++i) {
        tt_status st = tt_set_isa(all[i]);
        int usable = tt_isa_compiled(all[i]) && tt_isa_supported(all[i]);
        CHECK((st == TT_OK) == (usable != 0));
        if (usable) CHECK(tt_isa_active() == all[i]);
        else {
            CHECK(st == TT_ERR_UNSUPPORTED);
            CHECK(strstr(tt_last_error(), tt_isa_name(all[i])) != NULL);
            CHECK(tt_isa_active() != all[i] || usable);
        }
    }
    CHECK_FAILS(tt_set_isa((tt_isa)42), TT_ERR_INVALID_ARGUMENT, "isa=42");
    tt_isa parsed;
    CHECK_OK(tt_isa_from_name("AVX2", &parsed));
    CHECK(parsed == TT_ISA_AVX2);
    CHECK_FAILS(tt_isa_from_name("sse9", &parsed), TT_ERR_INVALID_ARGUMENT, "sse9");
    CHECK_FAILS(tt_isa_from_name(NULL, &parsed), TT_ERR_NULL_POINTER, "name");
    CHECK_OK(tt_set_isa(original));
}

static void test_threads(void) {
    int before = tt_get_num_threads();
    CHECK(before >= 1);
    CHECK_FAILS(tt_set_num_threads(0), TT_ERR_INVALID_ARGUMENT, "n=0");
    CHECK_FAILS(tt_set_num_threads(-3), TT_ERR_INVALID_ARGUMENT, "n=-3");
    CHECK_OK(tt_set_num_threads(1));
    CHECK(tt_get_num_threads() == 1);
    CHECK_OK(tt_set_num_threads(before));
}

static void test_storage(void) {
    tt_memory_stats s0, s1, s2;
    CHECK_OK(tt_memory_stats_get(&s0));
    tt_storage_t *a = NULL, *b = NULL;
    CHECK_OK(tt_storage_create(1000, &a));
    CHECK_OK(tt_storage_create(0, &b));
    void *pa = NULL, *pb = NULL;
    CHECK_OK(tt_storage_data(a, &pa));
    CHECK_OK(tt_storage_data(b, &pb));
    CHECK(pa != NULL && ((uintptr_t)pa % TT_ALIGNMENT) == 0);
    CHECK(pb != NULL && ((uintptr_t)pb % TT_ALIGNMENT) == 0);
    int zero = 1;
    for (int i = 0; i < 1000; ++i) zero &= ((unsigned char *)pa)[i] == 0;
    CHECK(zero);
    int64_t n = -1;
    CHECK_OK(tt_storage_nbytes(a, &n));
    CHECK(n == 1000);
    CHECK_OK(tt_memory_stats_get(&s1));
    CHECK(s1.bytes_in_use == s0.bytes_in_use + 1000);
    CHECK(s1.allocations == s0.allocations + 2);
    CHECK(s1.peak_bytes >= s1.bytes_in_use);

    /* A big buffer raises the peak, freeing it lowers use but not the peak. */
    tt_storage_t *big = NULL;
    CHECK_OK(tt_storage_create(4 << 20, &big));
    void *pbig = NULL;
    CHECK_OK(tt_storage_data(big, &pbig));
    CHECK(((uintptr_t)pbig % TT_ALIGNMENT) == 0);
    CHECK_OK(tt_storage_release(big));
    CHECK_OK(tt_memory_stats_get(&s2));
    CHECK(s2.bytes_in_use == s1.bytes_in_use);
    CHECK(s2.peak_bytes >= s1.bytes_in_use + (4 << 20));
    CHECK(s2.frees == s1.frees + 1);
    tt_memory_reset_peak();
    CHECK_OK(tt_memory_stats_get(&s2));
    CHECK(s2.peak_bytes == s2.bytes_in_use);

    int64_t rc = 0;
    CHECK_OK(tt_storage_retain(a));
    CHECK_OK(tt_storage_refcount(a, &rc));
    CHECK(rc == 2);
    CHECK_OK(tt_storage_release(a));
    CHECK_OK(tt_storage_refcount(a, &rc));
    CHECK(rc == 1);
    CHECK_OK(tt_storage_release(a));
    CHECK_OK(tt_storage_release(b));
    /* Use after release is detected, not dereferenced. */
    CHECK_FAILS(tt_storage_release(a), TT_ERR_INVALID_HANDLE, "not a live handle");
    CHECK_FAILS(tt_storage_data(a, &pa), TT_ERR_INVALID_HANDLE, "tt_storage_data");

    tt_storage_t *bad = (tt_storage_t *)0x1;
    CHECK_FAILS(tt_storage_create(-5, &bad), TT_ERR_INVALID_ARGUMENT, "nbytes=-5");
    CHECK(bad == NULL);
    CHECK_FAILS(tt_storage_create(INT64_MAX, &bad), TT_ERR_OVERFLOW, "too large");
    CHECK_FAILS(tt_storage_create(16, NULL), TT_ERR_NULL_POINTER, "out");
    CHECK_FAILS(tt_storage_retain(NULL), TT_ERR_NULL_POINTER, "storage");
    CHECK_FAILS(tt_memory_stats_get(NULL), TT_ERR_NULL_POINTER, "out");
}

static void test_tensors(void) {
    int64_t shape[3] = {2, 3, 4}, got[TT_MAX_DIMS], strides[TT_MAX_DIMS];
    tt_tensor_t *t = NULL;
    CHECK_OK(tt_tensor_create(TT_F32, 3, shape, &t));
    CHECK_OK(tt_tensor_strides(t, strides));
    CHECK(strides[0] == 12 && strides[1] == 4 && strides[2] == 1);
    int contig = 0;
    CHECK_OK(tt_tensor_is_contiguous(t, &contig));
    CHECK(contig == 1);
    float *base = NULL;
    CHECK_OK(tt_tensor_data(t, (void **)&base));
    for (int i = 0; i < 24; ++i) base[i] = (float)i;

    /* transpose: a view with swapped strides, not contiguous, same memory */
    tt_tensor_t *tr = NULL;
    CHECK_OK(tt_tensor_transpose(t, 0, 2, &tr));
    CHECK_OK(tt_tensor_shape(tr, got));
    CHECK(got[0] == 4 && got[1] == 3 && got[2] == 2);
    CHECK_OK(tt_tensor_strides(tr, strides));
    CHECK(strides[0] == 1 && strides[2] == 12);
    CHECK_OK(tt_tensor_is_contiguous(tr, &contig));
    CHECK(contig == 0);
    float *trp = NULL;
    CHECK_OK(tt_tensor_data(tr, (void **)&trp));
    CHECK(trp == base);
    int64_t flat[1] = {24};
    tt_tensor_t *flat_view = NULL;
    CHECK_FAILS(tt_tensor_reshape(tr, 1, flat, &flat_view), TT_ERR_INVALID_ARGUMENT, "not contiguous");

    /* reshape of a contiguous tensor shares memory */
    int64_t s2[2] = {6, 4};
    tt_tensor_t *rs = NULL;
    CHECK_OK(tt_tensor_reshape(t, 2, s2, &rs));
    float *rsp = NULL;
    CHECK_OK(tt_tensor_data(rs, (void **)&rsp));
    CHECK(rsp == base);
    int64_t s_bad[2] = {5, 4};
    CHECK_FAILS(tt_tensor_reshape(t, 2, s_bad, &flat_view), TT_ERR_SHAPE_MISMATCH, "24 elements");

    /* slice rows 1:6:2 of the 6x4 view -> rows 1, 3, 5 */
    tt_tensor_t *sl = NULL;
    CHECK_OK(tt_tensor_slice(rs, 0, 1, 6, 2, &sl));
    CHECK_OK(tt_tensor_shape(sl, got));
    CHECK(got[0] == 3 && got[1] == 4);
    CHECK_OK(tt_tensor_strides(sl, strides));
    CHECK(strides[0] == 8 && strides[1] == 1);
    float *slp = NULL;
    CHECK_OK(tt_tensor_data(sl, (void **)&slp));
    CHECK(slp[0] == 4.0f && slp[strides[0] * 2 + 3] == 23.0f);
    CHECK_OK(tt_tensor_is_contiguous(sl, &contig));
    CHECK(contig == 0);
    CHECK_FAILS(tt_tensor_slice(rs, 0, 2, 9, 1, &flat_view), TT_ERR_INVALID_ARGUMENT, "2:9");
    CHECK_FAILS(tt_tensor_slice(rs, 0, 0, 1, 0, &flat_view), TT_ERR_INVALID_ARGUMENT, "step=0");
    CHECK_FAILS(tt_tensor_slice(rs, 5, 0, 1, 1, &flat_view), TT_ERR_INVALID_ARGUMENT, "dim=5");
    CHECK_FAILS(tt_tensor_transpose(t, 0, 3, &flat_view), TT_ERR_INVALID_ARGUMENT, "(0, 3)");

    /* views keep the storage alive after the original descriptor is freed */
    tt_storage_t *st = NULL;
    int64_t rc = 0;
    CHECK_OK(tt_tensor_storage(t, &st));
    CHECK_OK(tt_storage_refcount(st, &rc));
    CHECK(rc == 4);
    CHECK_OK(tt_tensor_free(t));
    CHECK_OK(tt_tensor_data(sl, (void **)&slp));
    CHECK(slp[0] == 4.0f);
    CHECK_FAILS(tt_tensor_free(t), TT_ERR_INVALID_HANDLE, "double free");
    CHECK_FAILS(tt_tensor_ndim(t, &contig), TT_ERR_INVALID_HANDLE, "not a live handle");
    CHECK_OK(tt_tensor_free(tr));
    CHECK_OK(tt_tensor_free(rs));
    CHECK_OK(tt_tensor_free(sl));
    CHECK_OK(tt_tensor_free(NULL));

    /* descriptors over caller-owned storage must stay inside it */
    tt_storage_t *storage = NULL;
    CHECK_OK(tt_storage_create(10 * 8, &storage));
    int64_t ok_shape[2] = {2, 5}, ok_strides[2] = {5, 1}, wide[2] = {3, 5};
    tt_tensor_t *v = NULL;
    CHECK_OK(tt_tensor_from_storage(storage, TT_F64, 2, ok_shape, ok_strides, 0, &v));
    CHECK_OK(tt_tensor_free(v));
    CHECK_FAILS(tt_tensor_from_storage(storage, TT_F64, 2, wide, NULL, 0, &v), TT_ERR_INVALID_ARGUMENT,
                "storage holds 80 bytes");
    CHECK_FAILS(tt_tensor_from_storage(storage, TT_F64, 2, ok_shape, NULL, 1, &v),
                TT_ERR_INVALID_ARGUMENT, "reaches byte 88");
    CHECK_FAILS(tt_tensor_from_storage(storage, TT_F64, 2, ok_shape, NULL, -1, &v),
                TT_ERR_INVALID_ARGUMENT, "offset=-1");
    CHECK_FAILS(tt_tensor_from_storage(storage, (tt_dtype)17, 2, ok_shape, NULL, 0, &v),
                TT_ERR_INVALID_ARGUMENT, "dtype=17");
    CHECK_OK(tt_storage_release(storage));
    CHECK_FAILS(tt_tensor_from_storage(storage, TT_F64, 2, ok_shape, NULL, 0, &v),
                TT_ERR_INVALID_HANDLE, "not a live handle");

    /* bad shapes */
    int64_t neg[2] = {3, -1}, huge[3] = {INT64_MAX / 2, 4, 4}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_FAILS(tt_tensor_create(TT_F32, 2, neg, &v), TT_ERR_INVALID_ARGUMENT, "shape[1]=-1");
    CHECK_FAILS(tt_tensor_create(TT_F32, 3, huge, &v), TT_ERR_OVERFLOW, "overflow");
    int64_t big_bytes[1] = {INT64_MAX / 2};
    CHECK_FAILS(tt_tensor_create(TT_F64, 1, big_bytes, &v), TT_ERR_OVERFLOW, "overflow");
    CHECK_FAILS(tt_tensor_create(TT_F32, 9, nine, &v), TT_ERR_INVALID_ARGUMENT, "ndim=9");
    CHECK_FAILS(tt_tensor_create(TT_F32, 2, NULL, &v), TT_ERR_NULL_POINTER, "shape");
    CHECK_FAILS(tt_tensor_create((tt_dtype)-1, 1, shape, &v), TT_ERR_INVALID_ARGUMENT, "dtype=-1");
    CHECK_FAILS(tt_tensor_create(TT_F32, 1, shape, NULL), TT_ERR_NULL_POINTER, "out");

    /* scalar and empty tensors are valid */
    tt_tensor_t *scalar = NULL, *empty = NULL;
    int64_t zero_shape[2] = {0, 7}, numel = -1;
    CHECK_OK(tt_tensor_create(TT_I64, 0, NULL, &scalar));
    CHECK_OK(tt_tensor_numel(scalar, &numel));
    CHECK(numel == 1);
    CHECK_OK(tt_tensor_create(TT_F16, 2, zero_shape, &empty));
    CHECK_OK(tt_tensor_numel(empty, &numel));
    CHECK(numel == 0);
    CHECK(tt_dtype_size(TT_F16) == 2 && tt_dtype_size(TT_I64) == 8 && tt_dtype_size((tt_dtype)9) == 0);
    CHECK_OK(tt_tensor_free(scalar));
    CHECK_OK(tt_tensor_free(empty));
}

int main(void) {
    test_status();
    test_isa();
    test_threads();
    test_storage();
    test_tensors();
    TT_TEST_MAIN_END;
}
