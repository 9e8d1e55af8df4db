/*
 * test_argument_promises.c -- regressions where the code and the header disagreed, or the
 * checks themselves misbehaved: attention with d = 0 ran every query block (S = 2^40: an
 * hour), attention's dimension check overflowed int64 (UB; the sanitizer build fails on
 * it), max-pool backward took any argmax when H*W = 0, im2col/col2im's TT_ERR_OVERFLOW for
 * dimensions >= 2^31 (and n * pixels overflowing when C = 0), tt_fusion_source's size query
 * with cap = 0, the cross-entropy gradient of large tied logits (exp(x - lse) gave
 * probability 1 to each of two tied logits of 1e7) and cross-entropy's target length
 * (2 * rows) overflowing before it was checked, and layer norm looping over 2^62 empty rows
 * with nothing to write.
 *
 * ctest runs it with a timeout, so the d = 0 loop coming back fails instead of stalling.
 */
#include "tt_test.h"

#include <math.h>
#include <stdint.h>

static void test_attention_zero_width(void) {
    const int64_t huge = (int64_t)1 << 40;
    /* no lse, no elements: nothing at all to compute, whatever sq and sk are */
    CHECK_OK(tt_attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, huge,
                                  huge, 0, 1.0f, TT_ATTENTION_FULL));
    CHECK_OK(tt_attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 2, 3, huge,
                                  huge, 0, 1.0f, TT_ATTENTION_CAUSAL));
    /* with lse: log of the keys each query sees, as the d = 1 kernel gives for zero queries */
    enum { SQ = 5, SK = 3, BH = 2 };
    float zero_q[BH * SQ] = {0}, k[BH * SK] = {0}, v[BH * SK] = {0}, o[BH * SQ];
    for (int causal = 0; causal <= 2; ++causal) {
        float lse0[BH * SQ], lse1[BH * SQ];
        CHECK_OK(tt_attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, lse0, 1, BH,
                                      SQ, SK, 0, 0.5f, causal));
        CHECK_OK(tt_attention_forward(zero_q, NULL, k, NULL, v, NULL, o, NULL, lse1, 1, BH, SQ, SK,
                                      1, 0.5f, causal));
        for (int i = 0; i < BH * SQ; ++i)
            CHECK(lse0[i] == lse1[i] || fabsf(lse0[i] - lse1[i]) < 1e-6f);
    }
}

static void test_attention_dims_near_int64_max(void) {
    const int64_t big = INT64_MAX - 1;
    CHECK_FAILS(tt_attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1,
                                     big, 1, 1, 1.0f, 0), TT_ERR_OVERFLOW, "overflow");
    CHECK_FAILS(tt_attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, 1,
                                     1, INT64_MAX, 1.0f, 0), TT_ERR_OVERFLOW, "overflow");
    CHECK_FAILS(tt_attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                      NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1, big, big,
                                      INT64_MAX, 1.0f, 0), TT_ERR_OVERFLOW, "overflow");
}

static void test_maxpool_backward_empty_planes(void) {
    /* H = 0, one output position per plane: only -1 is a valid argmax */
    const float grad_y[2] = {1.0f, 2.0f};
    int64_t argmax[2] = {-1, -1};
    float grad_x[1] = {0};
    CHECK_OK(tt_maxpool2d_backward(grad_y, argmax, 1, 2, 0, 4, 1, 1, grad_x, 0, 0));
    argmax[1] = 0;
    CHECK_FAILS(tt_maxpool2d_backward(grad_y, argmax, 1, 2, 0, 4, 1, 1, grad_x, 0, 0),
                TT_ERR_INVALID_ARGUMENT, "argmax[1]=0");
    argmax[1] = 7;
    CHECK_FAILS(tt_maxpool2d_backward(grad_y, argmax, 1, 2, 0, 4, 1, 1, grad_x, 0, 0),
                TT_ERR_INVALID_ARGUMENT, "outside");
    /* h * w itself overflowing is refused, not computed */
    CHECK_FAILS(tt_maxpool2d_backward(grad_y, argmax, 1, 1, INT64_MAX / 2, 4, 1, 1, grad_x, 0, 0),
                TT_ERR_OVERFLOW, "overflow");
}

static void test_conv_dimension_limits(void) {
    const int64_t limit = (int64_t)1 << 31; /* the header: above 2^31 - 1 is TT_ERR_OVERFLOW */
    float one[1] = {0};
    CHECK_FAILS(tt_im2col(one, 1, 1, limit, 1, 1, 1, 1, 1, 0, 0, one), TT_ERR_OVERFLOW, "2^31");
    CHECK_FAILS(tt_col2im(one, 1, 1, 1, limit, 1, 1, 1, 1, 0, 0, one), TT_ERR_OVERFLOW, "2^31");
    CHECK_FAILS(tt_im2col(one, 1, 1, 1, 1, 1, 1, 1, 1, limit, 0, one), TT_ERR_OVERFLOW, "2^31");
    /* C = 0 makes every plane count 0; n * pixels must still be checked before it is used */
    CHECK_FAILS(tt_im2col(NULL, INT64_MAX / 2, 0, 8, 8, 1, 1, 1, 1, 0, 0, NULL), TT_ERR_OVERFLOW,
                "overflow");
}

static void test_fusion_source_size_query(void) {
    /* y = x0 + x1 over [3, 4] */
    const int64_t w[] = {0x54544655, 1, 2, 3, 4, 2, 0, 0, 3, 0, 0, 0, -1, -1, 0, 0, 1, -1, -1,
                         20, 0, 0, 1, -1, 1, 2, 0};
    const double imm[3] = {0, 0, 0};
    tt_fusion_t *p = NULL;
    CHECK_OK(tt_fusion_create(w, (int64_t)(sizeof w / sizeof w[0]), imm, 3, &p));
    if (!p) return;
    int64_t needed = -1;
    CHECK_OK(tt_fusion_source(p, NULL, 0, &needed)); /* the header's size query */
    CHECK(needed > 1);
    char small[4];
    int64_t again = -1;
    CHECK_FAILS(tt_fusion_source(p, small, (int64_t)sizeof small, &again), TT_ERR_INVALID_ARGUMENT,
                "smaller");
    CHECK(again == needed);
    tt_fusion_free(p);
}

static void test_cross_entropy_tied_large_logits(void) {
    const float scales[] = {1e5f, 1e7f, 3e7f, 1e30f};
    for (int s = 0; s < 4; ++s) {
        const float m = scales[s];
        const float logits[4] = {0.0f, 0.0f, m, m};
        const int64_t target[1] = {0};
        float loss[1], lse[1], grad[4];
        const float g[1] = {1.0f};
        CHECK_OK(tt_cross_entropy_forward(logits, target, loss, lse, 1, 4, -100));
        CHECK_OK(tt_cross_entropy_backward(logits, target, lse, g, grad, 1, 4, -100));
        CHECK(grad[0] == -1.0f && grad[1] == 0.0f); /* exp(-m) underflows: p = 0 exactly */
        CHECK(fabsf(grad[2] - 0.5f) < 1e-6f && fabsf(grad[3] - 0.5f) < 1e-6f);
    }
}

static void test_empty_rows_return_at_once(void) {
    /* cols = 0 and no statistics wanted: nothing to write for 2^62 rows (it looped; fuzz_rows) */
    CHECK_OK(tt_layernorm_forward(NULL, NULL, NULL, NULL, NULL, NULL, (int64_t)1 << 62, 0, 1e-5f));
}

static void test_cross_entropy_target_length_overflow(void) {
    /* rows = 2^62, cols = 0: no logits, but 2 * rows target floats overflow (found by fuzz_rows) */
    const int64_t rows = (int64_t)1 << 62;
    CHECK_FAILS(tt_cross_entropy_forward(NULL, NULL, NULL, NULL, rows, 0, -100), TT_ERR_OVERFLOW, "targets");
    CHECK_FAILS(tt_cross_entropy_backward(NULL, NULL, NULL, NULL, NULL, rows, 0, -100), TT_ERR_OVERFLOW,
                "targets");
}

int main(void) {
    test_attention_zero_width();
    test_attention_dims_near_int64_max();
    test_maxpool_backward_empty_planes();
    test_conv_dimension_limits();
    test_fusion_source_size_query();
    test_cross_entropy_tied_large_logits();
    test_cross_entropy_target_length_overflow();
    test_empty_rows_return_at_once();
    TT_TEST_MAIN_END;
}
