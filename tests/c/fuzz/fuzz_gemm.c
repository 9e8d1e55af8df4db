/*
 * fuzz_gemm.c -- libFuzzer harness for tt_sgemm, tt_sgemm_reference,
 * tt_sgemm_strided_batched, tt_hgemm and tt_hgemm_reference.
 *
 * Design. One input is one GEMM call. The input picks (in this order): the function, the
 * ISA (among those compiled and supported), the thread count (1..3), transA/transB (0 or
 * any non-zero int), M, N, K (0..40, or a "big" size class: K up to 700, M up to 320,
 * batch up to 48, narrow results over 2 threads, so that K blocking, M blocking and the
 * threaded paths run; work is capped at ~4M multiply-adds), the padding of each leading
 * dimension (ld = 0 for a matrix without columns, a huge ld for one with one row), alpha
 * and beta (0, 1, -1 and odd values), batch and strides (stacked, stride 0 for A or B, C
 * interleaved row by row), NULL for empty matrices, the kind of values (unit range, small
 * integers, wide exponents, sparse), and optionally one mutation that makes the call
 * invalid. A last flag adds checks of tt_set_isa / tt_set_num_threads / tt_isa_* with bad
 * values.
 *
 * Valid calls get exactly-sized heap buffers ((rows-1)*ld + cols elements, (batch-1)*stride
 * + extent for batches), so ASan flags any access outside what the call may touch. The
 * result is compared with a float64 product computed here: |C - want| <= (K + 4) 2^-23
 * (|alpha| sum|a b| + |beta c0|) (+ the float16 rounding for hgemm). C elements outside
 * the M x N matrices (ld padding, gaps between batch matrices) must be bit-identical, A and
 * B must be unchanged, and when beta == 0 C starts as NaN (it must not be read). Invalid
 * calls (negative sizes, ld < columns, NULL with elements, negative batch or stride,
 * overlapping C matrices, extents overflowing int64 bytes) must return a non-OK status
 * with a non-empty tt_last_error(). Any mismatch is __builtin_trap().
 *
 * Rules taken from the header that are worth knowing when triaging:
 *   - "lda >= K" (etc.) is the whole rule: a matrix with no columns accepts ld = 0;
 *   - the C matrices of a batch "must not overlap": refusal is required when they do; a
 *     non-overlapping layout that is neither stacked nor row-interleaved may be accepted
 *     or refused (the library only recognises those two); so may NULL for an operand with
 *     elements when batch == 0;
 *   - tt_set_num_threads accepts 1..TT_MAX_THREADS and refuses anything else; tt_set_isa
 *     and the tt_isa_* queries take any int.
 */
#include <limits.h>
#include <math.h>

#include "fuzz_util.h"

enum { F_SGEMM, F_SGEMM_REF, F_BATCHED, F_HGEMM, F_HGEMM_REF, F_COUNT };
static const char *const kFnName[F_COUNT] = {"tt_sgemm", "tt_sgemm_reference",
                                             "tt_sgemm_strided_batched", "tt_hgemm",
                                             "tt_hgemm_reference"};

#define WORK_LIMIT (4 << 20) /* multiply-adds per input */

typedef struct {
    int fn, ta, tb;
    int64_t M, N, K, batch;
    float alpha, beta;
    int64_t ld[3], stride[3]; /* A, B, C */
    int null_ptr[3];          /* pass NULL for this matrix */
    int half;                 /* hgemm: buffers hold binary16 */
} call_t;

typedef struct {
    int64_t rows, cols;
} dims_t;

static dims_t stored_dims(const call_t *c, int which) {
    dims_t d;
    if (which == 0) d.rows = c->ta ? c->K : c->M, d.cols = c->ta ? c->M : c->K;
    else if (which == 1) d.rows = c->tb ? c->N : c->K, d.cols = c->tb ? c->K : c->N;
    else d.rows = c->M, d.cols = c->N;
    return d;
}

/* Elements one matrix spans; -1 if that overflows (only for invalid calls). */
static int64_t extent(dims_t d, int64_t ld) {
    int64_t e;
    if (d.rows == 0 || d.cols == 0) return 0;
    if (__builtin_mul_overflow(d.rows - 1, ld, &e) || __builtin_add_overflow(e, d.cols, &e)) return -1;
    return e;
}

/* Elements a whole batch spans; -1 on overflow. */
static int64_t batch_extent(const call_t *c, int which) {
    const int64_t e = extent(stored_dims(c, which), c->ld[which]);
    const int64_t batch = c->fn == F_BATCHED ? c->batch : 1;
    int64_t s;
    if (e <= 0 || batch <= 0) return e < 0 ? -1 : 0;
    if (__builtin_mul_overflow(batch - 1, c->stride[which], &s) || __builtin_add_overflow(s, e, &s))
        return -1;
    return s;
}

/* ---- values ---- */

static double value(fz_rng *r, int mode, int half) {
    switch (mode) {
        case 1: return (double)((int64_t)(fz_next(r) % 9) - 4); /* small integers: exact sums */
        case 2:                                                  /* wide exponents */
            if (half) return fz_unit(r) * ldexp(1.0, (int)(fz_next(r) % 5) - 2);
            return fz_unit(r) * ldexp(1.0, (int)(fz_next(r) % 21) - 10);
        case 3: return (fz_next(r) % 4) ? 0.0 : fz_unit(r); /* mostly zeros */
        default: return fz_unit(r);
    }
}

/* ---- the invalid-call mutations ---- */

enum {
    BAD_NONE, BAD_M, BAD_N, BAD_K, BAD_LDA, BAD_LDB, BAD_LDC, BAD_NULL_A, BAD_NULL_B, BAD_NULL_C,
    BAD_HUGE_LD, BAD_BATCH, BAD_STRIDE, BAD_OVERLAP, BAD_STRIDE_OVERFLOW, BAD_COUNT
};

/* Applies mutation `kind`; returns 1 if the call is now invalid, 0 if it did not apply
 * (or, for BAD_OVERLAP, if only the exact overlap check can tell). */
static int make_invalid(call_t *c, int kind, fz_in *in) {
    static const int64_t negative[] = {-1, -2, -41, INT64_MIN, -((int64_t)1 << 40)};
    switch (kind) {
        case BAD_M: c->M = FZ_PICK(in, negative); return 1;
        case BAD_N: c->N = FZ_PICK(in, negative); return 1;
        case BAD_K: c->K = FZ_PICK(in, negative); return 1;
        case BAD_LDA: case BAD_LDB: case BAD_LDC: {
            const int w = kind - BAD_LDA;
            const int64_t cols = stored_dims(c, w).cols;
            c->ld[w] = cols - 1 - (fz_u8(in) % 3); /* < cols, possibly negative */
            return 1;
        }
        case BAD_NULL_A: case BAD_NULL_B: case BAD_NULL_C: {
            const int w = kind - BAD_NULL_A;
            const dims_t d = stored_dims(c, w);
            if (d.rows == 0 || d.cols == 0) return 0;
            if (c->fn == F_BATCHED && c->batch == 0) return 0; /* nothing addressed: valid */
            c->null_ptr[w] = 1;
            return 1;
        }
        case BAD_HUGE_LD: { /* ld so large that (rows - 1) * ld overflows int64 bytes */
            const int w = fz_u8(in) % 3;
            const dims_t d = stored_dims(c, w);
            if (d.rows < 2 || d.cols == 0) return 0;
            const uint8_t b = fz_u8(in); /* (rows - 1) * ld * sizeof(float) > INT64_MAX */
            c->ld[w] = b & 1 ? INT64_MAX / 4 + 1 + (b >> 1) : INT64_MAX - (b >> 1);
            return 1;
        }
        case BAD_BATCH:
            if (c->fn != F_BATCHED) return 0;
            c->batch = FZ_PICK(in, negative);
            return 1;
        case BAD_STRIDE:
            if (c->fn != F_BATCHED) return 0;
            c->stride[fz_u8(in) % 3] = FZ_PICK(in, negative);
            return 1;
        case BAD_OVERLAP: { /* strideC below the size of one C matrix */
            if (c->fn != F_BATCHED || c->batch < 2 || c->M == 0 || c->N == 0) return 0;
            const int64_t ec = extent(stored_dims(c, 2), c->ld[2]);
            c->stride[2] = fz_u8(in) % ec;
            return 0; /* overlap is likely, not certain: the caller checks exactly */
        }
        case BAD_STRIDE_OVERFLOW: {
            if (c->fn != F_BATCHED || c->batch < 3) return 0;
            const int w = fz_u8(in) % 3;
            if (extent(stored_dims(c, w), c->ld[w]) == 0) return 0;
            c->stride[w] = INT64_MAX / 2 + (int64_t)(fz_u8(in) % 7);
            return 1;
        }
    }
    return 0;
}

/* Do the C matrices of a batch share an element? (sizes are small: mark them) */
static int c_matrices_overlap(const call_t *c, int64_t c_elems) {
    if (c->batch < 2 || c->M == 0 || c->N == 0) return 0;
    unsigned char *owner = calloc((size_t)c_elems, 1);
    int overlap = 0;
    for (int64_t b = 0; b < c->batch && !overlap; ++b)
        for (int64_t i = 0; i < c->M && !overlap; ++i)
            for (int64_t j = 0; j < c->N; ++j) {
                unsigned char *o = &owner[b * c->stride[2] + i * c->ld[2] + j];
                if (*o) { overlap = 1; break; }
                *o = 1;
            }
    free(owner);
    return overlap;
}

/* ---- decoding one call ---- */

static int decode_trans(fz_in *in) {
    static const int flags[] = {0, 1, 0, 1, 2, -1, INT_MAX, INT_MIN};
    return FZ_PICK(in, flags);
}

static void shrink_to_work_limit(call_t *c) {
    for (;;) {
        const double work = (double)c->M * (double)c->N * (double)c->K *
                            (double)(c->fn == F_BATCHED && c->batch > 0 ? c->batch : 1);
        if (work <= WORK_LIMIT) return;
        int64_t *largest = &c->K;
        if (c->M > *largest) largest = &c->M;
        if (c->N > *largest) largest = &c->N;
        if (c->fn == F_BATCHED && c->batch > *largest) largest = &c->batch;
        *largest /= 2;
    }
}

static void decode_sizes(call_t *c, fz_in *in) {
    c->M = fz_u8(in) % 41, c->N = fz_u8(in) % 41, c->K = fz_u8(in) % 41;
    c->batch = fz_u8(in) % 6;
    switch (fz_u8(in) % 8) { /* size class */
        case 1: c->K = fz_u16(in) % 701; break;               /* several K blocks (KC = 256) */
        case 2: c->M = fz_u16(in) % 321; break;               /* several M blocks (MC = 144) */
        case 3: /* many matrices with work for 2-3 threads: one matrix per thread */
            c->batch = 16 + fz_u8(in) % 33, c->M = 24 + fz_u8(in) % 17, c->N = 24 + fz_u8(in) % 17;
            c->K = 64 + fz_u8(in) % 64;
            break;
        case 4: c->M = 64 + fz_u8(in) % 64, c->N = 64 + fz_u8(in) % 64, c->K = 128 + fz_u8(in) % 128;
            break;                                             /* enough work for 2-3 threads */
        case 5: /* narrow results (N <= 12) with work for 2 threads */
            c->M = 280 + fz_u8(in) % 40, c->N = 10 + fz_u8(in) % 3, c->K = 600 + fz_u8(in) % 100;
            break;
        default: break;
    }
    if (c->half && c->K > 200) c->K = 200; /* keeps float16 results far from overflow */
    shrink_to_work_limit(c);
}

static void decode_layout(call_t *c, fz_in *in) {
    static const int64_t pads[] = {0, 0, 0, 1, 2, 3, 7, 16};
    for (int w = 0; w < 3; ++w) {
        const dims_t d = stored_dims(c, w);
        const uint8_t b = fz_u8(in);
        c->ld[w] = d.cols + pads[b % 8];
        if (d.cols == 0 && (b & 0x10)) c->ld[w] = 0; /* "ld >= cols" */
        if (d.rows <= 1 && (b & 0x20)) c->ld[w] = INT64_MAX / 8;       /* never stepped over */
    }
    if (c->fn != F_BATCHED) return;
    const uint8_t sb = fz_u8(in);
    for (int w = 0; w < 3; ++w) {
        const int64_t e = extent(stored_dims(c, w), c->ld[w]);
        c->stride[w] = e + pads[(sb >> (2 * w)) % 8 % 4];
        if (w < 2 && (sb & (0x40 << w))) c->stride[w] = 0; /* one A (or B) for every matrix */
        if (c->batch <= 1 && (sb & 0x3) == 3) c->stride[w] = INT64_MAX / 16; /* never stepped over */
    }
    if ((fz_u8(in) & 3) == 3 && c->batch > 1 && c->M > 0 && c->N > 0) {
        /* C interleaved: matrix b is columns [b * strideC, b * strideC + N) of each row */
        c->stride[2] = c->N + fz_u8(in) % 3;
        c->ld[2] = (c->batch - 1) * c->stride[2] + c->N + fz_u8(in) % 3;
    }
}

/* ---- checks of the configuration API ---- */

static void check_config_api(fz_in *in) {
    static const int bad_threads[] = {0, -1, INT_MIN, TT_MAX_THREADS + 1, 1 << 20, INT_MAX};
    const int threads = tt_get_num_threads();
    const tt_isa isa = tt_isa_active();
    FZ_CHECK(FZ_FAILS(tt_set_num_threads(FZ_PICK(in, bad_threads))) == TT_ERR_INVALID_ARGUMENT,
             "tt_set_num_threads out of 1..%d", TT_MAX_THREADS);
    FZ_CHECK(tt_get_num_threads() == threads, "a refused tt_set_num_threads changed the count");
    FZ_OK(tt_set_num_threads(TT_MAX_THREADS)); /* the largest valid count (no kernel runs on it) */
    FZ_CHECK(tt_get_num_threads() == TT_MAX_THREADS, "tt_set_num_threads(%d)", TT_MAX_THREADS);
    FZ_OK(tt_set_num_threads(threads));
    const int v = (int)fz_u32(in); /* any int, as a C caller may pass */
    if (v < TT_ISA_SCALAR || v > TT_ISA_NEON) {
        FZ_CHECK(strcmp(tt_isa_name(v), "unknown") == 0, "tt_isa_name(%d)", v);
        FZ_CHECK(!tt_isa_compiled(v) && !tt_isa_supported(v), "isa %d", v);
        FZ_CHECK(FZ_FAILS(tt_set_isa(v)) != TT_OK, "tt_set_isa(%d)", v);
    } else if (!tt_isa_compiled(v) || !tt_isa_supported(v)) {
        FZ_CHECK(FZ_FAILS(tt_set_isa(v)) == TT_ERR_UNSUPPORTED, "tt_set_isa(%d)", v);
    }
    FZ_CHECK(tt_isa_active() == isa, "a refused tt_set_isa changed the active ISA");
}

/* ---- the call and the oracle ---- */

typedef tt_status (*sgemm_fn)(int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                              const float *, int64_t, float, float *, int64_t);
typedef tt_status (*hgemm_fn)(int, int, int64_t, int64_t, int64_t, float, const uint16_t *,
                              int64_t, const uint16_t *, int64_t, float, uint16_t *, int64_t);

static tt_status do_call(const call_t *c, void *A, void *B, void *C) {
    const void *a = c->null_ptr[0] ? NULL : A, *b = c->null_ptr[1] ? NULL : B;
    void *cc = c->null_ptr[2] ? NULL : C;
    switch (c->fn) {
        case F_SGEMM: case F_SGEMM_REF: {
            const sgemm_fn f = c->fn == F_SGEMM ? tt_sgemm : tt_sgemm_reference;
            return f(c->ta, c->tb, c->M, c->N, c->K, c->alpha, a, c->ld[0], b, c->ld[1], c->beta,
                     cc, c->ld[2]);
        }
        case F_BATCHED:
            return tt_sgemm_strided_batched(c->ta, c->tb, c->M, c->N, c->K, c->alpha, a, c->ld[0],
                                            c->stride[0], b, c->ld[1], c->stride[1], c->beta, cc,
                                            c->ld[2], c->stride[2], c->batch);
        default: {
            const hgemm_fn f = c->fn == F_HGEMM ? tt_hgemm : tt_hgemm_reference;
            return f(c->ta, c->tb, c->M, c->N, c->K, c->alpha, a, c->ld[0], b, c->ld[1], c->beta,
                     cc, c->ld[2]);
        }
    }
}

static double elem(const call_t *c, const void *buf, int64_t i) {
    return c->half ? fz_half_value(((const uint16_t *)buf)[i]) : (double)((const float *)buf)[i];
}

static void describe(const call_t *c) {
    fprintf(stderr, "%s(transA=%d, transB=%d, M=%lld, N=%lld, K=%lld, alpha=%g, lda=%lld, ldb=%lld, "
            "beta=%g, ldc=%lld", kFnName[c->fn], c->ta, c->tb, (long long)c->M, (long long)c->N,
            (long long)c->K, c->alpha, (long long)c->ld[0], (long long)c->ld[1], c->beta,
            (long long)c->ld[2]);
    if (c->fn == F_BATCHED)
        fprintf(stderr, ", strideA=%lld, strideB=%lld, strideC=%lld, batch=%lld",
                (long long)c->stride[0], (long long)c->stride[1], (long long)c->stride[2],
                (long long)c->batch);
    fprintf(stderr, ") NULL A/B/C=%d/%d/%d isa=%s threads=%d\n", c->null_ptr[0], c->null_ptr[1],
            c->null_ptr[2], tt_isa_name(tt_isa_active()), tt_get_num_threads());
}

/* Judges C after a successful call against the float64 product. */
static void judge(const call_t *c, const void *A, const void *B, const void *C, const void *C0,
                  int64_t c_elems) {
    const size_t es = c->half ? 2 : 4;
    unsigned char *written = calloc((size_t)c_elems + 1, 1);
    const int64_t batch = c->fn == F_BATCHED ? c->batch : 1;
    const double u = 0x1p-23 * (double)(c->K + 4);
    for (int64_t b = 0; b < batch; ++b) {
        const int64_t oa = b * (c->fn == F_BATCHED ? c->stride[0] : 0);
        const int64_t ob = b * (c->fn == F_BATCHED ? c->stride[1] : 0);
        const int64_t oc = b * (c->fn == F_BATCHED ? c->stride[2] : 0);
        for (int64_t i = 0; i < c->M; ++i)
            for (int64_t j = 0; j < c->N; ++j) {
                double s = 0, sa = 0;
                for (int64_t k = 0; k < c->K; ++k) {
                    const int64_t ia = oa + (c->ta ? k * c->ld[0] + i : i * c->ld[0] + k);
                    const int64_t ib = ob + (c->tb ? j * c->ld[1] + k : k * c->ld[1] + j);
                    const double p = elem(c, A, ia) * elem(c, B, ib);
                    s += p, sa += fabs(p);
                }
                const int64_t ic = oc + i * c->ld[2] + j;
                const double c0 = c->beta == 0.0f ? 0.0 : elem(c, C0, ic);
                const double want = (double)c->alpha * s + (double)c->beta * c0;
                double tol = u * (fabs((double)c->alpha) * sa + fabs((double)c->beta * c0)) + 1e-37;
                if (c->half) tol += 0x1p-10 * (fabs(want) + tol) + 0x1p-24;
                const double got = elem(c, C, ic);
                if (!(fabs(got - want) <= tol)) {
                    describe(c);
                    FZ_CHECK(0, "C[%lld][%lld] of matrix %lld = %.9g, want %.9g (tolerance %.3g)",
                             (long long)i, (long long)j, (long long)b, got, want, tol);
                }
                written[ic] = 1;
            }
    }
    for (int64_t e = 0; e < c_elems; ++e)
        if (!written[e] && memcmp((const char *)C + e * es, (const char *)C0 + e * es, es) != 0) {
            describe(c);
            FZ_CHECK(0, "C element %lld is outside every M x N matrix but was written", (long long)e);
        }
    free(written);
}

static void fill(const call_t *c, void *buf, int64_t n, fz_rng *r, int mode) {
    for (int64_t i = 0; i < n; ++i) {
        const double v = value(r, mode, c->half);
        if (c->half) ((uint16_t *)buf)[i] = fz_half_from_float((float)v);
        else ((float *)buf)[i] = (float)v;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_find_isas();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    static const float scalars[] = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -0.375f, 1.7f, 3.25f, -2.5f, 1e-3f, 0.1f, 1.0f};
    call_t c;
    memset(&c, 0, sizeof c);
    c.fn = fz_u8(&in) % F_COUNT;
    c.half = c.fn == F_HGEMM || c.fn == F_HGEMM_REF;
    const int isa = fz_set_isa_and_threads(&in);
    c.ta = decode_trans(&in), c.tb = decode_trans(&in);
    decode_sizes(&c, &in);
    decode_layout(&c, &in);
    c.alpha = FZ_PICK(&in, scalars), c.beta = FZ_PICK(&in, scalars);
    const uint8_t null_bits = fz_u8(&in), mode = fz_u8(&in) % 4, bad = fz_u8(&in);
    int maybe = 0; /* a call the header allows but the library may refuse */
    for (int w = 0; w < 3; ++w) /* NULL is fine for a matrix without elements */
        if ((null_bits >> w & 1) && batch_extent(&c, w) == 0) {
            c.null_ptr[w] = 1;
            /* batch == 0 of matrices with elements: "no elements" is a reading of the header */
            maybe |= extent(stored_dims(&c, w), c.ld[w]) > 0;
        }
    fz_rng rng;
    fz_seed(&rng, fz_u64(&in));

    /* Buffers are sized for the valid call; a mutation below may then make it invalid. */
    int64_t elems[3];
    for (int w = 0; w < 3; ++w) elems[w] = batch_extent(&c, w);
    int invalid = bad % 4 == 3 && make_invalid(&c, 1 + (bad >> 2) % (BAD_COUNT - 1), &in);
    if (!invalid && c.fn == F_BATCHED && c.batch > 1 && c.M > 0 && c.N > 0) {
        invalid = c_matrices_overlap(&c, elems[2]);
        const int64_t s = c.stride[2];
        const int stacked = s >= (c.M - 1) * c.ld[2] + c.N;
        const int interleaved = s >= c.N && (c.batch - 1) * s + c.N <= c.ld[2];
        maybe |= !invalid && !stacked && !interleaved;
    }
    if (fz_u8(&in) % 8 == 7) check_config_api(&in);

    const size_t es = c.half ? 2 : 4;
    void *A = fz_alloc((size_t)elems[0] * es), *B = fz_alloc((size_t)elems[1] * es);
    void *C = fz_alloc((size_t)elems[2] * es), *C0 = fz_alloc((size_t)elems[2] * es);
    void *A0 = fz_alloc((size_t)elems[0] * es), *B0 = fz_alloc((size_t)elems[1] * es);
    fill(&c, A, elems[0], &rng, mode);
    fill(&c, B, elems[1], &rng, mode);
    fill(&c, C, elems[2], &rng, mode);
    if (c.beta == 0.0f) /* C must not be read: NaN would show */
        for (int64_t i = 0; i < elems[2]; ++i) {
            if (c.half) ((uint16_t *)C)[i] = 0x7e00;
            else ((float *)C)[i] = NAN;
        }
    memcpy(A0, A, (size_t)elems[0] * es), memcpy(B0, B, (size_t)elems[1] * es);
    memcpy(C0, C, (size_t)elems[2] * es);

    tt_clear_error();
    const tt_status st = do_call(&c, A, B, C);
    if (invalid) {
        if (st == TT_OK || tt_last_error()[0] == '\0') describe(&c);
        FZ_CHECK(st != TT_OK && tt_last_error()[0] != '\0',
                 "an invalid call returned %s with message '%s'", tt_status_string(st), tt_last_error());
    } else if (!(maybe && st != TT_OK)) {
        if (st != TT_OK) describe(&c);
        FZ_CHECK(st == TT_OK, "a valid call returned %s", tt_status_string(st));
        const char *path = tt_last_kernel_path();
        static const char *const prefix[F_COUNT] = {"sgemm:", "sgemm:reference",
                                                    "sgemm_strided_batched:", "hgemm:",
                                                    "hgemm:reference"};
        FZ_CHECK(strncmp(path, prefix[c.fn], strlen(prefix[c.fn])) == 0, "%s: kernel path '%s'",
                 kFnName[c.fn], path);
        judge(&c, A, B, C, C0, elems[2]);
        FZ_CHECK(memcmp(A, A0, (size_t)elems[0] * es) == 0 && memcmp(B, B0, (size_t)elems[1] * es) == 0,
                 "%s wrote to A or B", kFnName[c.fn]);
    }
    free(A), free(B), free(C), free(C0), free(A0), free(B0);
    return 0;
}
