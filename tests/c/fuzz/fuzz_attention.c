/*
 * fuzz_attention.c -- libFuzzer harness for tt_attention_forward / tt_attention_backward:
 * their argument checks first, their results second.
 *
 * Design. One input is one call. It picks forward or backward, the ISA and the thread count
 * (1..3), then one of two classes:
 *   - extreme arguments: batch, heads, sq, sk, d each from a table of edge values (0, 1, 64,
 *     65, 2^31, 2^40, 2^62, INT64_MAX - 64, INT64_MAX, -1, INT64_MIN), scale (0, 1, -0.5,
 *     inf, NaN), causal (-2..4), every pointer NULL. The call must return at once (libFuzzer's
 *     -timeout catches a loop over 2^40 query blocks), fail with a message on a negative size,
 *     an unknown causal mode or a non-finite scale, fail whenever an operand has elements
 *     (its pointer is NULL), and never report TT_OK for a call with elements. This is where
 *     check_dims' int64 arithmetic near INT64_MAX runs (UBSan reports an overflow).
 *   - small problems with real buffers: batch 1..2, heads 1..3, sq and sk 0..9 (or 63..70,
 *     across a 64-row block), d 0..8, any causal mode and scale, each operand contiguous
 *     (NULL strides) or padded, K and V optionally shared by every head (stride 0), lse
 *     passed or not (forward). Buffers are exactly the operand's span, so ASan sees any
 *     access outside it. Optionally one mutation that must be refused: a negative stride,
 *     o over q, o aliasing itself (row stride 0), a NULL input with elements, lse over o.
 *     Otherwise the result is compared with a float64 evaluation of the header's formula
 *     (masked keys excluded; a query with no key: zero row and lse = -inf), forward within
 *     2e-4 (1 + |value|), backward's three gradients within 2e-3 of their magnitude, and the
 *     inputs must be unchanged.
 */
#include <math.h>

#include "fuzz_util.h"

typedef struct {
    int64_t s0, s1, s2, rows;
    size_t span; /* floats */
    float *p;
} operand;

static int64_t B_, H_, SQ, SK, D_;

/* strides[3] for an operand of `rows` rows: contiguous (returns NULL) or padded / shared. */
static const int64_t *layout(fz_in *in, operand *op, int64_t rows, int shareable, int64_t *strides) {
    const uint8_t f = fz_u8(in);
    op->rows = rows;
    op->s2 = D_ + ((f & 1) ? 1 + (f >> 4) % 3 : 0);
    op->s1 = rows * op->s2 + ((f & 2) ? 1 : 0);
    op->s0 = H_ * op->s1 + ((f & 4) ? 2 : 0);
    if (shareable && (f & 8)) op->s1 = 0; /* one head for all: a broadcast input */
    op->span = 0;
    if (B_ && H_ && rows && D_)
        op->span = (size_t)((B_ - 1) * op->s0 + (H_ - 1) * op->s1 + (rows - 1) * op->s2 + D_);
    if (!(f & 0x0f)) { /* plain contiguous, passed as NULL strides */
        op->s2 = D_, op->s1 = rows * D_, op->s0 = H_ * rows * D_;
        op->span = (size_t)(B_ * H_ * rows * D_);
        return NULL;
    }
    strides[0] = op->s0, strides[1] = op->s1, strides[2] = op->s2;
    return strides;
}

static float *at(const operand *op, int64_t b, int64_t h, int64_t r) {
    return op->p + b * op->s0 + h * op->s1 + r * op->s2;
}

static void fill(operand *op, fz_rng *r) {
    op->p = fz_alloc(op->span * sizeof(float));
    for (size_t i = 0; i < op->span; ++i) op->p[i] = (float)(2 * fz_unit(r));
}

static int sees(int causal, int64_t i, int64_t j) {
    if (!causal) return 1;
    const int64_t off = causal == 2 ? SK - SQ : 0;
    return j <= i + off;
}

/* float64 reference of one (b, h): P (sq x sk) and o, lse. */
static void reference_probs(const operand *q, const operand *k, int64_t b, int64_t h, float scale,
                            int causal, double *P, double *lse) {
    for (int64_t i = 0; i < SQ; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < SK; ++j) {
            double s = -INFINITY;
            if (sees(causal, i, j)) {
                s = 0;
                for (int64_t c = 0; c < D_; ++c) s += (double)at(q, b, h, i)[c] * at(k, b, h, j)[c];
                s *= scale;
            }
            P[i * SK + j] = s;
            if (s > m) m = s;
        }
        double sum = 0;
        for (int64_t j = 0; j < SK; ++j) sum += (P[i * SK + j] = m == -INFINITY ? 0 : exp(P[i * SK + j] - m));
        for (int64_t j = 0; j < SK; ++j) P[i * SK + j] = sum > 0 ? P[i * SK + j] / sum : 0;
        lse[i] = sum > 0 ? m + log(sum) : -INFINITY;
    }
}

static int close_to(double got, double want, double tol) {
    if (isinf(want)) return got == want;
    return fabs(got - want) <= tol;
}

static int64_t pick_size(fz_in *in) {
    static const int64_t edges[] = {0, 1, 2, 64, 65, (int64_t)1 << 31, (int64_t)1 << 40,
                                    (int64_t)1 << 62, INT64_MAX - 64, INT64_MAX, -1, INT64_MIN};
    return FZ_PICK(in, edges);
}

/* elements of a B x H x rows x d operand, saturated */
static int has_elements(int64_t b, int64_t h, int64_t rows, int64_t d) {
    return b > 0 && h > 0 && rows > 0 && d > 0;
}

static void extreme_call(int backward, fz_in *in) {
    const int64_t b = pick_size(in), h = pick_size(in), sq = pick_size(in), sk = pick_size(in),
                  d = pick_size(in);
    static const float scales[] = {1.0f, 0.0f, -0.5f, INFINITY, NAN};
    const float scale = FZ_PICK(in, scales);
    const int causal = (int)(fz_u8(in) % 7) - 2;
    tt_clear_error();
    const tt_status st = backward
        ? tt_attention_backward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                                NULL, NULL, NULL, NULL, NULL, b, h, sq, sk, d, scale, causal)
        : tt_attention_forward(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, b, h, sq, sk, d,
                               scale, causal);
    const int bad = b < 0 || h < 0 || sq < 0 || sk < 0 || d < 0 || causal < 0 || causal > 2 ||
                    !isfinite(scale);
    const int elements = has_elements(b, h, sq, d) || has_elements(b, h, sk, d);
    FZ_CHECK(st == TT_OK || tt_last_error()[0] != '\0', "an error without a message");
    FZ_CHECK(!(bad && st == TT_OK), "accepted batch=%lld heads=%lld sq=%lld sk=%lld d=%lld scale=%g causal=%d",
             (long long)b, (long long)h, (long long)sq, (long long)sk, (long long)d, (double)scale, causal);
    FZ_CHECK(!(elements && st == TT_OK), "accepted NULL operands with elements: batch=%lld heads=%lld "
             "sq=%lld sk=%lld d=%lld", (long long)b, (long long)h, (long long)sq, (long long)sk, (long long)d);
}

static void small_call(int backward, fz_in *in, fz_rng *r) {
    B_ = 1 + fz_u8(in) % 2, H_ = 1 + fz_u8(in) % 3;
    const uint8_t sz = fz_u8(in);
    SQ = (sz & 0x80) ? 63 + fz_u8(in) % 8 : fz_u8(in) % 10;
    SK = (sz & 0x40) ? 63 + fz_u8(in) % 8 : fz_u8(in) % 10;
    D_ = fz_u8(in) % 9;
    const int causal = fz_u8(in) % 3;
    static const float scales[] = {0.35355339f, 0.5f, 1.0f, 0.0f, -1.0f, 3.0f};
    const float scale = FZ_PICK(in, scales);
    const uint8_t mut = fz_u8(in);
    const int mutation = (mut % 8 == 7) ? 1 + (mut >> 3) % 5 : 0;
    operand q, k, v, o, go = {0}, gq = {0}, gk = {0}, gv = {0};
    int64_t qs[3], ks[3], vs[3], os[3];
    const int64_t *qst = layout(in, &q, SQ, 0, qs), *kst = layout(in, &k, SK, 1, ks),
                  *vst = layout(in, &v, SK, 1, vs), *ost = layout(in, &o, SQ, 0, os);
    fill(&q, r), fill(&k, r), fill(&v, r), fill(&o, r);
    const int64_t lse_n = B_ * H_ * SQ;
    float *lse = (backward || (fz_u8(in) & 1)) ? fz_alloc((size_t)lse_n * sizeof(float)) : NULL;
    float *q0 = fz_alloc(q.span * sizeof(float) + 1), *k0 = fz_alloc(k.span * sizeof(float) + 1);
    memcpy(q0, q.p, q.span * sizeof(float)), memcpy(k0, k.p, k.span * sizeof(float));

    if (mutation) {
        const int has_q = has_elements(B_, H_, SQ, D_);
        if (mutation == 5 && !(has_q && lse_n > 0)) goto done; /* o.p would be a too-small lse */
        int64_t neg[3] = {q.s0, q.s1, -1};
        tt_status st = TT_OK;
        int expect = 1;
        switch (mutation) {
            case 1: st = tt_attention_forward(q.p, neg, k.p, kst, v.p, vst, o.p, ost, lse, B_, H_, SQ, SK, D_, scale, causal); break;
            case 2: st = tt_attention_forward(q.p, qst, k.p, kst, v.p, vst, q.p, qst, lse, B_, H_, SQ, SK, D_, scale, causal);
                    expect = has_q; break;
            case 3: { int64_t self[3] = {o.s0, o.s1, 0};
                      st = tt_attention_forward(q.p, qst, k.p, kst, v.p, vst, o.p, self, lse, B_, H_, SQ, SK, D_, scale, causal);
                      expect = has_q && SQ > 1; break; }
            case 4: st = tt_attention_forward(NULL, qst, k.p, kst, v.p, vst, o.p, ost, lse, B_, H_, SQ, SK, D_, scale, causal);
                    expect = has_q; break;
            default: st = tt_attention_forward(q.p, qst, k.p, kst, v.p, vst, o.p, ost, o.p, B_, H_, SQ, SK, D_, scale, causal);
                    expect = has_q && lse_n > 0; break;
        }
        if (mutation == 1) expect = 1; /* a negative stride is refused whatever the sizes */
        if (expect) FZ_CHECK(st != TT_OK && tt_last_error()[0], "mutation %d accepted (sq=%lld sk=%lld d=%lld)",
                             mutation, (long long)SQ, (long long)SK, (long long)D_);
        goto done;
    }
    FZ_OK(tt_attention_forward(q.p, qst, k.p, kst, v.p, vst, o.p, ost, lse, B_, H_, SQ, SK, D_, scale, causal));
    double *P = fz_alloc((size_t)(SQ * SK + 1) * sizeof(double)), *L = fz_alloc((size_t)(SQ + 1) * sizeof(double));
    for (int64_t b = 0; b < B_; ++b)
        for (int64_t h = 0; h < H_; ++h) {
            reference_probs(&q, &k, b, h, scale, causal, P, L);
            for (int64_t i = 0; i < SQ; ++i) {
                if (lse) FZ_CHECK(close_to(lse[(b * H_ + h) * SQ + i], L[i], 2e-4 * (1 + fabs(L[i]))),
                                  "lse[%lld][%lld][%lld] = %g, want %g", (long long)b, (long long)h, (long long)i,
                                  (double)lse[(b * H_ + h) * SQ + i], L[i]);
                for (int64_t c = 0; c < D_; ++c) {
                    double want = 0;
                    for (int64_t j = 0; j < SK; ++j) want += P[i * SK + j] * at(&v, b, h, j)[c];
                    FZ_CHECK(close_to(at(&o, b, h, i)[c], want, 2e-4 * (1 + fabs(want))),
                             "o[%lld][%lld][%lld][%lld] = %g, want %g (sq=%lld sk=%lld d=%lld causal=%d)",
                             (long long)b, (long long)h, (long long)i, (long long)c, (double)at(&o, b, h, i)[c],
                             want, (long long)SQ, (long long)SK, (long long)D_, causal);
                }
            }
        }
    if (backward) {
        int64_t gs[3];
        go.rows = SQ;
        const int64_t *gost = layout(in, &go, SQ, 0, gs);
        fill(&go, r);
        /* gradients contiguous: outputs must not alias, and K/V shared across heads would */
        operand *grads[3] = {&gq, &gk, &gv};
        const int64_t grows[3] = {SQ, SK, SK};
        for (int g = 0; g < 3; ++g) {
            grads[g]->rows = grows[g], grads[g]->s2 = D_, grads[g]->s1 = grows[g] * D_;
            grads[g]->s0 = H_ * grows[g] * D_, grads[g]->span = (size_t)(B_ * H_ * grows[g] * D_);
            grads[g]->p = fz_alloc(grads[g]->span * sizeof(float));
        }
        FZ_OK(tt_attention_backward(q.p, qst, k.p, kst, v.p, vst, o.p, ost, go.p, gost, lse, gq.p, NULL,
                                    gk.p, NULL, gv.p, NULL, B_, H_, SQ, SK, D_, scale, causal));
        const int shared = k.s1 == 0 || v.s1 == 0; /* a shared head sums over heads: skip k, v */
        for (int64_t b = 0; b < B_; ++b)
            for (int64_t h = 0; h < H_; ++h) {
                reference_probs(&q, &k, b, h, scale, causal, P, L);
                double big = 1e-30;
                for (size_t i = 0; i < gq.span; ++i) big = fmax(big, fabs(gq.p[i]));
                for (int64_t i = 0; i < SQ; ++i) {
                    double Di = 0;
                    for (int64_t c = 0; c < D_; ++c) Di += (double)at(&go, b, h, i)[c] * at(&o, b, h, i)[c];
                    for (int64_t c = 0; c < D_; ++c) {
                        double want = 0;
                        for (int64_t j = 0; j < SK; ++j) {
                            double dp = 0;
                            for (int64_t e = 0; e < D_; ++e) dp += (double)at(&go, b, h, i)[e] * at(&v, b, h, j)[e];
                            want += P[i * SK + j] * (dp - Di) * scale * at(&k, b, h, j)[c];
                        }
                        const double got = at(&gq, b, h, i)[c];
                        FZ_CHECK(fabs(got - want) <= 2e-3 * (1 + fabs(want) + big),
                                 "grad_q[%lld][%lld][%lld][%lld] = %g, want %g", (long long)b, (long long)h,
                                 (long long)i, (long long)c, got, want);
                    }
                }
                if (shared) continue;
                for (int64_t j = 0; j < SK; ++j)
                    for (int64_t c = 0; c < D_; ++c) {
                        double want_v = 0;
                        for (int64_t i = 0; i < SQ; ++i) want_v += P[i * SK + j] * at(&go, b, h, i)[c];
                        const double got = at(&gv, b, h, j)[c];
                        FZ_CHECK(fabs(got - want_v) <= 2e-3 * (1 + fabs(want_v)), "grad_v[%lld][%lld][%lld][%lld] = %g, want %g",
                                 (long long)b, (long long)h, (long long)j, (long long)c, got, want_v);
                    }
            }
        for (int g = 0; g < 3; ++g) free(grads[g]->p);
        free(go.p);
    }
    FZ_CHECK(memcmp(q0, q.p, q.span * sizeof(float)) == 0 && memcmp(k0, k.p, k.span * sizeof(float)) == 0,
             "an input changed");
    free(P), free(L);
done:
    free(q.p), free(k.p), free(v.p), free(o.p), free(lse), free(q0), free(k0);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_find_isas();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    const int backward = fz_u8(&in) & 1;
    fz_set_isa_and_threads(&in);
    fz_rng rng;
    fz_seed(&rng, fz_u64(&in));
    if (fz_u8(&in) % 4 == 3) extreme_call(backward, &in);
    else small_call(backward, &in, &rng);
    return 0;
}
