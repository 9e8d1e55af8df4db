/*
 * test_attention.c -- tt_attention_forward / tt_attention_backward: results against this
 * file's own double-precision naive formula (every score materialised), for every ISA this
 * CPU runs, on 1 and 2 threads, the three causal modes, sizes that are not multiples of the
 * 64 x 64 blocks, sk != sq, d in {1, 5, 16, 64, 128}, strided and broadcast layouts; then
 * the edge rules (no keys, NaN) and every refusal of a bad argument with its message.
 *
 * Tolerance: float32 products of d terms and softmax sums of sk terms; relative to the size
 * of the values (|o| <= max |v|), 2e-5 covers it with room (observed ~1e-6).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tt_test.h"

/* Element (b, h, r, c) of an operand with strides s (NULL: contiguous rows x d). */
static int64_t at(const int64_t *s, int64_t H, int64_t rows, int64_t d, int64_t b, int64_t h,
                  int64_t r) {
    if (s) return b * s[0] + h * s[1] + r * s[2];
    return ((b * H + h) * rows + r) * d;
}

static int visible(int causal, int64_t i, int64_t j, int64_t sq, int64_t sk) {
    if (causal == TT_ATTENTION_CAUSAL) return j <= i;
    if (causal == TT_ATTENTION_CAUSAL_END) return j <= i + sk - sq;
    return 1;
}

typedef struct {
    int64_t B, H, sq, sk, d;
    int causal;
    float scale;
    const int64_t *qs, *ks, *vs; /* input strides (NULL: contiguous) */
} Problem;

/* Naive forward and backward in double for one problem; outputs contiguous. */
static void oracle(const Problem *p, const float *q, const float *k, const float *v,
                   const float *go, double *o, double *lse, double *dq, double *dk, double *dv) {
    const int64_t B = p->B, H = p->H, sq = p->sq, sk = p->sk, d = p->d;
    double *P = malloc((size_t)(sk > 0 ? sk : 1) * sizeof(double));
    double *dP = malloc((size_t)(sk > 0 ? sk : 1) * sizeof(double));
    for (int64_t n = 0; n < B * H * sk * d; ++n) dk[n] = dv[n] = 0.0;
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
            for (int64_t i = 0; i < sq; ++i) {
                const float *qi = q + at(p->qs, H, sq, d, b, h, i);
                double m = -INFINITY, l = 0.0;
                for (int64_t j = 0; j < sk; ++j) {
                    P[j] = -INFINITY;
                    if (!visible(p->causal, i, j, sq, sk)) continue;
                    const float *kj = k + at(p->ks, H, sk, d, b, h, j);
                    double s = 0.0;
                    for (int64_t c = 0; c < d; ++c) s += (double)qi[c] * kj[c];
                    P[j] = s * p->scale;
                    if (P[j] > m) m = P[j];
                }
                for (int64_t j = 0; j < sk; ++j) {
                    P[j] = m == -INFINITY ? 0.0 : exp(P[j] - m);
                    l += P[j];
                }
                const int64_t row = ((b * H + h) * sq + i);
                lse[row] = l == 0.0 ? -INFINITY : m + log(l);
                double *oi = o + row * d;
                for (int64_t c = 0; c < d; ++c) oi[c] = 0.0;
                for (int64_t j = 0; j < sk; ++j) {
                    if (l > 0.0) P[j] /= l;
                    const float *vj = v + at(p->vs, H, sk, d, b, h, j);
                    for (int64_t c = 0; c < d; ++c) oi[c] += P[j] * vj[c];
                }
                /* backward of this row */
                const float *gi = go + row * d;
                double Di = 0.0;
                for (int64_t c = 0; c < d; ++c) Di += gi[c] * oi[c];
                double *dqi = dq + row * d;
                for (int64_t c = 0; c < d; ++c) dqi[c] = 0.0;
                for (int64_t j = 0; j < sk; ++j) {
                    const float *vj = v + at(p->vs, H, sk, d, b, h, j);
                    const float *kj = k + at(p->ks, H, sk, d, b, h, j);
                    double s = 0.0;
                    for (int64_t c = 0; c < d; ++c) s += (double)gi[c] * vj[c];
                    dP[j] = P[j] * (s - Di) * p->scale;
                    double *dkj = dk + ((b * H + h) * sk + j) * d;
                    double *dvj = dv + ((b * H + h) * sk + j) * d;
                    for (int64_t c = 0; c < d; ++c) {
                        dqi[c] += dP[j] * kj[c];
                        dkj[c] += dP[j] * qi[c];
                        dvj[c] += P[j] * gi[c];
                    }
                }
            }
    free(P);
    free(dP);
}

static double max_abs(const float *x, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; ++i) m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static int close_all(const char *what, const float *got, const double *want, int64_t n,
                     double ref_scale) {
    const double tol = 2e-5 * (ref_scale > 1.0 ? ref_scale : 1.0);
    for (int64_t i = 0; i < n; ++i) {
        const int both_inf = isinf(want[i]) && got[i] == want[i];
        if (!both_inf && !(fabs(got[i] - want[i]) <= tol)) {
            fprintf(stderr, "%s[%lld] = %.9g, want %.9g (tol %.3g)\n", what, (long long)i,
                    (double)got[i], want[i], tol);
            return 0;
        }
    }
    return 1;
}

/* q, k, v are allocated large enough for their strides; returns 1 if all results match. */
static int run_case(const Problem *p, const char *label) {
    const int64_t B = p->B, H = p->H, sq = p->sq, sk = p->sk, d = p->d;
    int64_t qn = B * H * sq * d, kn = B * H * sk * d;
    if (p->qs) qn = (B - 1) * p->qs[0] + (H - 1) * p->qs[1] + (sq - 1) * p->qs[2] + d;
    if (p->ks) kn = (B - 1) * p->ks[0] + (H - 1) * p->ks[1] + (sk - 1) * p->ks[2] + d;
    int64_t vn = kn;
    if (p->vs) vn = (B - 1) * p->vs[0] + (H - 1) * p->vs[1] + (sk - 1) * p->vs[2] + d;
    float *q = tt_test_filled(qn, -2, 2), *k = tt_test_filled(kn, -2, 2);
    float *v = tt_test_filled(vn, -2, 2), *go = tt_test_filled(B * H * sq * d, -2, 2);
    float *o = tt_test_filled(B * H * sq * d, -2, 2), *lse = tt_test_filled(B * H * sq, -2, 2);
    float *dq = tt_test_filled(B * H * sq * d, -2, 2), *dk = tt_test_filled(B * H * sk * d, -2, 2);
    float *dv = tt_test_filled(B * H * sk * d, -2, 2);
    double *ro = malloc((size_t)(B * H * sq * d + 1) * sizeof(double));
    double *rl = malloc((size_t)(B * H * sq + 1) * sizeof(double));
    double *rq = malloc((size_t)(B * H * sq * d + 1) * sizeof(double));
    double *rk = malloc((size_t)(B * H * sk * d + 1) * sizeof(double));
    double *rv = malloc((size_t)(B * H * sk * d + 1) * sizeof(double));
    oracle(p, q, k, v, go, ro, rl, rq, rk, rv);
    int ok = 1;
    tt_status st = tt_attention_forward(q, p->qs, k, p->ks, v, p->vs, o, NULL, lse, B, H, sq,
                                        sk, d, p->scale, p->causal);
    if (st != TT_OK) {
        fprintf(stderr, "%s: forward failed: %s\n", label, tt_last_error());
        ok = 0;
    }
    char path[64];
    /* few queries (a block would leave half its SIMD lanes empty) take the rows forward */
    const int isa = tt_isa_active();
    const int64_t lanes = isa == TT_ISA_AVX512 ? 16 : isa == TT_ISA_AVX2 ? 8 : isa == TT_ISA_NEON ? 4 : 0;
    snprintf(path, sizeof path, "attention_forward:%s%s", tt_isa_name(isa),
             sq >= 1 && 2 * sq <= lanes ? ":rows" : "");
    if (strcmp(tt_last_kernel_path(), path) != 0) {
        fprintf(stderr, "%s: path %s, want %s\n", label, tt_last_kernel_path(), path);
        ok = 0;
    }
    st = tt_attention_backward(q, p->qs, k, p->ks, v, p->vs, o, NULL, go, NULL, lse, dq, NULL,
                               dk, NULL, dv, NULL, B, H, sq, sk, d, p->scale, p->causal);
    if (st != TT_OK) {
        fprintf(stderr, "%s: backward failed: %s\n", label, tt_last_error());
        ok = 0;
    }
    const double vmax = max_abs(v, vn), gmax = max_abs(go, B * H * sq * d);
    ok = ok && close_all("o", o, ro, B * H * sq * d, vmax);
    ok = ok && close_all("lse", lse, rl, B * H * sq, 1.0 + log((double)(sk > 1 ? sk : 1)));
    ok = ok && close_all("dq", dq, rq, B * H * sq * d, 4 * vmax * gmax * (d > 8 ? d / 8.0 : 1.0));
    ok = ok && close_all("dk", dk, rk, B * H * sk * d, 4 * vmax * gmax * (d > 8 ? d / 8.0 : 1.0));
    ok = ok && close_all("dv", dv, rv, B * H * sk * d, gmax * (sq > 8 ? sq / 8.0 : 1.0));
    if (!ok)
        fprintf(stderr, "  in %s: B=%lld H=%lld sq=%lld sk=%lld d=%lld causal=%d on %s, %d thread(s)\n",
                label, (long long)B, (long long)H, (long long)sq, (long long)sk, (long long)d,
                p->causal, tt_isa_name(tt_isa_active()), tt_get_num_threads());
    free(q), free(k), free(v), free(go), free(o), free(lse), free(dq), free(dk), free(dv);
    free(ro), free(rl), free(rq), free(rk), free(rv);
    return ok;
}

/* Results against the oracle under one ISA and thread count: every shape x causal mode,
 * then the transposed-heads and broadcast-k/v layouts. */
static void check_results(tt_isa isa, int threads, const char *label) {
    (void)isa, (void)threads, (void)label;
    static const int64_t shapes[][5] = {
        /* B, H, sq, sk, d */
        {1, 1, 1, 1, 1},    {1, 2, 65, 130, 16}, {2, 3, 127, 61, 64}, {1, 1, 200, 200, 128},
        {1, 2, 70, 9, 5},   {1, 1, 3, 0, 8},     {1, 1, 0, 5, 8},     {1, 1, 131, 131, 64},
        {2, 4, 64, 64, 32}, {1, 1, 1, 300, 64},  {1, 3, 257, 190, 32}, {1, 12, 1, 290, 64},
        {2, 3, 2, 77, 33},  {1, 2, 4, 131, 65},  {1, 1, 8, 19, 16},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
        for (int causal = 0; causal <= 2; ++causal) {
            Problem p = {shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3],
                         shapes[s][4], causal, 0.0f, NULL, NULL, NULL};
            p.scale = 1.0f / sqrtf((float)(p.d > 0 ? p.d : 1));
            CHECK(run_case(&p, "contiguous"));
        }
    /* [B, T, H, d] memory seen as [B, H, T, d] (what splitting heads gives), and one
     * K/V head broadcast to every query head (stride 0). */
    const int64_t B = 2, H = 3, T = 77, d = 24;
    const int64_t bthd[3] = {T * H * d, d, H * d};
    Problem p = {B, H, T, T, d, 1, 0.3f, bthd, bthd, bthd};
    CHECK(run_case(&p, "transposed heads"));
    const int64_t shared[3] = {T * d, 0, d};
    Problem g = {B, H, T, T, d, 0, 0.2f, bthd, shared, shared};
    CHECK(run_case(&g, "broadcast k/v head"));
}

static void test_edges(void) {
    /* No keys: zero rows and lse = -inf; gradients of q are zero. */
    float q[2 * 4], o[2 * 4], lse[2], go[2 * 4], dq[2 * 4];
    for (int i = 0; i < 8; ++i) q[i] = go[i] = 1.0f, o[i] = dq[i] = 7.0f;
    CHECK_OK(tt_attention_forward(q, NULL, NULL, NULL, NULL, NULL, o, NULL, lse, 1, 1, 2, 0, 4,
                                  0.5f, 0));
    for (int i = 0; i < 8; ++i) CHECK(o[i] == 0.0f);
    CHECK(lse[0] == -INFINITY && lse[1] == -INFINITY);
    CHECK_OK(tt_attention_backward(q, NULL, NULL, NULL, NULL, NULL, o, NULL, go, NULL, lse, dq,
                                   NULL, NULL, NULL, NULL, NULL, 1, 1, 2, 0, 4, 0.5f, 0));
    for (int i = 0; i < 8; ++i) CHECK(dq[i] == 0.0f);

    /* CAUSAL_END with sq > sk: the first sq - sk queries see nothing. */
    float k3[2 * 3], v3[2 * 3], q3[4 * 3], o3[4 * 3], l3[4];
    for (int i = 0; i < 6; ++i) k3[i] = v3[i] = (float)i;
    for (int i = 0; i < 12; ++i) q3[i] = 0.1f * (float)i;
    CHECK_OK(tt_attention_forward(q3, NULL, k3, NULL, v3, NULL, o3, NULL, l3, 1, 1, 4, 2, 3,
                                  1.0f, TT_ATTENTION_CAUSAL_END));
    CHECK(l3[0] == -INFINITY && l3[1] == -INFINITY && isfinite(l3[2]) && isfinite(l3[3]));
    CHECK(o3[0] == 0.0f && o3[5] == 0.0f);
    /* query 2 sees key 0 only: o = v[0] */
    CHECK(o3[6] == v3[0] && o3[7] == v3[1] && o3[8] == v3[2]);

    /* NaN in q row 1 poisons that row only; NaN in key 0 poisons every query that sees it. */
    enum { S = 70, D = 8 };
    float *qq = tt_test_filled(S * D, -2, 2), *kk = tt_test_filled(S * D, -2, 2);
    float *vv = tt_test_filled(S * D, -2, 2), *oo = tt_test_filled(S * D, -2, 2);
    qq[1 * D + 3] = NAN;
    CHECK_OK(tt_attention_forward(qq, NULL, kk, NULL, vv, NULL, oo, NULL, NULL, 1, 1, S, S, D,
                                  0.3f, 0));
    for (int i = 0; i < S; ++i) CHECK((i == 1) == (isnan(oo[i * D]) != 0));
    qq[1 * D + 3] = 0.5f;
    kk[5 * D] = NAN; /* causal: queries 0..4 do not see key 5 */
    CHECK_OK(tt_attention_forward(qq, NULL, kk, NULL, vv, NULL, oo, NULL, NULL, 1, 1, S, S, D,
                                  0.3f, TT_ATTENTION_CAUSAL));
    for (int i = 0; i < S; ++i) CHECK((i >= 5) == (isnan(oo[i * D + 2]) != 0));
    free(qq), free(kk), free(vv), free(oo);

    /* The workspace is runtime storage: it is counted, and given back. */
    tt_memory_stats before, after;
    CHECK_OK(tt_memory_stats_get(&before));
    tt_memory_reset_peak();
    float *a = tt_test_filled(256 * 64, -2, 2), *out = tt_test_filled(256 * 64, -2, 2);
    float *l = tt_test_filled(256, -2, 2);
    CHECK_OK(tt_attention_forward(a, NULL, a, NULL, a, NULL, out, NULL, l, 1, 1, 256, 256, 64,
                                  0.125f, 0));
    CHECK_OK(tt_memory_stats_get(&after));
    CHECK(after.bytes_in_use == before.bytes_in_use);
    CHECK(after.peak_bytes > before.bytes_in_use);
    CHECK(after.peak_bytes - before.bytes_in_use < 4 * 1024 * 1024); /* O(d), not O(S^2) */
    free(a), free(out), free(l);
}

static void test_bad_arguments(void) {
    float x[64], o[64], lse[8], g[64];
    for (int i = 0; i < 64; ++i) x[i] = g[i] = 0.1f * (float)i;
    const int64_t neg[3] = {16, -4, 4};
    const int64_t alias[3] = {16, 16, 0}; /* every row of o at one address */
#define FWD(q, qs, k, v, out, os, l, B, H, sq, sk, d, scale, causal) \
    tt_attention_forward(q, qs, k, NULL, v, NULL, out, os, l, B, H, sq, sk, d, scale, causal)
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, lse, -1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "batch=-1 is negative");
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, lse, 1, 1, 2, -3, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "sk=-3 is negative");
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, lse, 1, 1, 2, 2, -1, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "d=-1 is negative");
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, lse, 1, 1, 2, 2, 4, 1.0f, 3),
                TT_ERR_INVALID_ARGUMENT, "causal=3");
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, lse, 1, 1, 2, 2, 4, NAN, 0),
                TT_ERR_INVALID_ARGUMENT, "scale=nan is not finite");
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, lse, 1, 1, 2, 2, 4, INFINITY, 0),
                TT_ERR_INVALID_ARGUMENT, "is not finite");
    CHECK_FAILS(FWD(NULL, NULL, x, x, o, NULL, lse, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_NULL_POINTER, "q is NULL");
    CHECK_FAILS(FWD(x, NULL, NULL, x, o, NULL, lse, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_NULL_POINTER, "k is NULL");
    CHECK_FAILS(FWD(x, NULL, x, x, NULL, NULL, lse, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_NULL_POINTER, "o is NULL");
    CHECK_FAILS(FWD(x, neg, x, x, o, NULL, lse, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "q_strides[1]=-4 is negative");
    CHECK_FAILS(FWD(x, NULL, x, x, o, alias, lse, 1, 2, 2, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "o has overlapping elements");
    CHECK_FAILS(FWD(x, NULL, x, x, x + 4, NULL, lse, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "o overlaps q");
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, o + 4, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "o overlaps lse");
    const int64_t huge[3] = {0, 0, INT64_MAX / 2};
    CHECK_FAILS(FWD(x, huge, x, x, o, NULL, lse, 1, 1, 3, 2, 4, 1.0f, 0), TT_ERR_OVERFLOW,
                "q spans");
    CHECK_FAILS(FWD(x, NULL, x, x, o, NULL, lse, INT64_MAX / 4, 8, 2, 2, 4, 1.0f, 0),
                TT_ERR_OVERFLOW, "overflow int64 bytes");
    /* nothing above wrote o */
    for (int i = 0; i < 64; ++i) o[i] = 0.0f;
    CHECK_OK(FWD(NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 3, 5, 5, 4, 1.0f, 0));
    CHECK_OK(FWD(x, NULL, x, x, o, NULL, NULL, 1, 1, 2, 2, 4, 1.0f, 0)); /* lse optional */
#undef FWD
    float dq[64], dk[64], dv[64];
    CHECK_FAILS(tt_attention_backward(x, NULL, x, NULL, x, NULL, o, NULL, g, NULL, NULL, dq, NULL,
                                      dk, NULL, dv, NULL, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_NULL_POINTER, "lse is NULL");
    CHECK_FAILS(tt_attention_backward(x, NULL, x, NULL, x, NULL, o, NULL, NULL, NULL, lse, dq,
                                      NULL, dk, NULL, dv, NULL, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_NULL_POINTER, "grad_o is NULL");
    CHECK_FAILS(tt_attention_backward(x, NULL, x, NULL, x, NULL, o, NULL, g, NULL, lse, dq, NULL,
                                      dq + 4, NULL, dv, NULL, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "grad_q overlaps grad_k");
    CHECK_FAILS(tt_attention_backward(x, NULL, x, NULL, x, NULL, o, NULL, g, NULL, lse, g, NULL,
                                      dk, NULL, dv, NULL, 1, 1, 2, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "grad_q overlaps grad_o");
    CHECK_FAILS(tt_attention_backward(x, NULL, x, NULL, x, NULL, o, NULL, g, NULL, lse, dq, NULL,
                                      dk, alias, dv, NULL, 1, 2, 1, 2, 4, 1.0f, 0),
                TT_ERR_INVALID_ARGUMENT, "grad_k has overlapping elements");
    CHECK_FAILS(tt_attention_backward(x, NULL, x, NULL, x, NULL, o, NULL, g, NULL, lse, dq, NULL,
                                      dk, NULL, dv, NULL, 1, 1, 2, 2, 4, 1.0f, 7),
                TT_ERR_INVALID_ARGUMENT, "causal=7");
    /* gradients are optional */
    CHECK_OK(tt_attention_forward(x, NULL, x, NULL, x, NULL, o, NULL, lse, 1, 1, 2, 2, 4, 1.0f, 0));
    CHECK_OK(tt_attention_backward(x, NULL, x, NULL, x, NULL, o, NULL, g, NULL, lse, NULL, NULL,
                                   dk, NULL, NULL, NULL, 1, 1, 2, 2, 4, 1.0f, 0));
}

int main(void) {
    tt_test_each_isa_and_threads("attention", 2, check_results);
    test_edges();
    test_bad_arguments();
    TT_TEST_MAIN_END;
}
