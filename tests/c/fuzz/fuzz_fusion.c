/*
 * fuzz_fusion.c -- libFuzzer harness for the fusion IR validator (tt_fusion_create) and,
 * for the programs it accepts, the interpreter (tt_fusion_run) and the code generator
 * (tt_fusion_source).
 *
 * Design. The first byte picks the decoding:
 *   - raw (even byte): the rest of the input is the int64 words themselves (8 bytes each,
 *     little-endian), with n_words and n_imm sometimes off by one; almost always invalid,
 *     it exercises every early refusal and the bounds of the reader;
 *   - structured (odd byte): a program built from the bytes that is valid by construction
 *     (rank 1..3, sizes 0..9, 1..3 inputs, 1..14 nodes whose ops, dtypes and earlier
 *     operands the bytes choose, 1..3 outputs), then optionally one word overwritten with
 *     a nasty value (0, -1, 1, 2^31, 2^62, INT64_MAX, INT64_MIN, a byte) so that the
 *     validator sees near-valid programs: a kind or dtype mismatch, a cycle, a bad count.
 * Every refusal must carry a status among INVALID_ARGUMENT / OVERFLOW / NULL_POINTER and a
 * non-empty message. An accepted program with a domain of at most 4096 points is run on
 * buffers allocated to exactly the elements its strides reach (contiguous or broadcast,
 * chosen per operand and axis; ASan reports any access outside), on 1 or 2 threads and a
 * chosen ISA; a zero stride on a non-accumulated output must be refused. Its source must
 * be NUL-terminated with the announced length and define the kernel.
 * Values are not checked here (tests/c/test_fusion.c has the oracle); NaN and inf flow.
 *
 * Known-finding tags (TT_FUZZ_KNOWN): none.
 */
#include <math.h>

#include "fuzz_util.h"

static const int kOps[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 20, 21, 22,
                           23, 24, 25, 26, 30, 31, 32, 33, 34, 35, 40, 50, 51, 52};

static int arity(int op) {
    if (op <= 1) return 0;
    if (op < 20 || op >= 50) return 1;
    if (op < 40) return 2;
    return 3;
}

static const int64_t kNasty[] = {0, -1, 1, 2, 3, (int64_t)1 << 31, (int64_t)1 << 62, INT64_MAX, INT64_MIN};

static void expect_refusal(tt_status st) {
    FZ_CHECK(st == TT_ERR_INVALID_ARGUMENT || st == TT_ERR_OVERFLOW || st == TT_ERR_NULL_POINTER,
             "tt_fusion_create refused with %s", tt_status_string(st));
    FZ_CHECK(tt_last_error()[0] != '\0', "a refusal without a message");
}

/* Run an accepted program on exactly sized buffers. */
static void exercise(tt_fusion_t *f, const int64_t *w, fz_in *in) {
    int64_t n_in = 0, n_out = 0, rank = 0;
    FZ_OK(tt_fusion_info(f, &n_in, &n_out, &rank));
    const int64_t *shape = w + 3;
    int64_t total = 1;
    for (int d = 0; d < rank; ++d) {
        if (shape[d] > 4096) return;
        total *= shape[d] > 0 ? shape[d] : 1;
        if (total > 4096) return;
    }
    if (n_in > 8 || n_out > 8) return;
    /* dtypes: inputs from the words, outputs from their nodes */
    const int64_t *p = w + 3 + rank;
    int in_dtype[8];
    for (int k = 0; k < n_in; ++k) in_dtype[k] = (int)p[1 + k];
    const int64_t n_nodes = p[1 + n_in];
    const int64_t *nodes = p + 2 + n_in;
    const int64_t *outs = nodes + 5 * n_nodes + 1;
    if (n_nodes > 128) return;
    int full[128]; /* kinds, as the README defines them */
    for (int i = 0; i < n_nodes; ++i) {
        const int64_t op = nodes[5 * i], a = nodes[5 * i + 2], b = nodes[5 * i + 3], c = nodes[5 * i + 4];
        full[i] = op == 0 || (op != 1 && op < 50 && ((a >= 0 && full[a]) || (b >= 0 && full[b]) || (c >= 0 && full[c])));
    }
    int64_t in_strides[64], out_strides[64];
    const void *in_ptr[8];
    void *out_ptr[8];
    void *blocks[16];
    int n_blocks = 0, has_zero_race = 0;
    for (int k = 0; k < n_in + n_out; ++k) {
        const int is_out = k >= n_in;
        const int o = k - (int)n_in;
        const int dtype = is_out ? (int)nodes[5 * outs[2 * o] + 1] : in_dtype[k];
        const uint8_t bcast = fz_u8(in);
        int64_t *s = (is_out ? out_strides + o * rank : in_strides + k * rank);
        int64_t run = 1;
        for (int d = (int)rank - 1; d >= 0; --d) {
            const int zero = (bcast >> d) & 1;
            s[d] = zero ? 0 : run;
            if (!zero) run *= shape[d] > 0 ? shape[d] : 1;
            const int row_last = is_out && !full[outs[2 * o]] && d == rank - 1;
            if (is_out && zero && shape[d] > 1 && !(outs[2 * o + 1] & 1) && !row_last) has_zero_race = 1;
        }
        const size_t bytes = (size_t)run * (dtype == TT_F64 ? 8 : 4);
        void *b = fz_alloc(bytes);
        for (size_t i = 0; i < bytes; ++i) ((uint8_t *)b)[i] = (uint8_t)(fz_u8(in) ^ (i * 37));
        blocks[n_blocks++] = b;
        if (is_out) out_ptr[o] = b;
        else in_ptr[k] = b;
    }
    static const tt_isa isas[] = {TT_ISA_SCALAR, TT_ISA_AVX2, TT_ISA_AVX512, TT_ISA_NEON};
    const tt_isa isa = FZ_PICK(in, isas);
    const tt_isa before = tt_isa_active();
    if (tt_isa_compiled(isa) && tt_isa_supported(isa)) FZ_OK(tt_set_isa(isa));
    FZ_OK(tt_set_num_threads(1 + (fz_u8(in) & 1)));
    tt_clear_error();
    const tt_status st = tt_fusion_run(f, in_ptr, in_strides, out_ptr, out_strides);
    if (has_zero_race) {
        FZ_CHECK(st == TT_ERR_INVALID_ARGUMENT, "a zero-stride output without ACCUMULATE ran (%s)",
                 tt_status_string(st));
    } else {
        FZ_CHECK(st == TT_OK, "tt_fusion_run failed: %s", tt_status_string(st));
        FZ_CHECK(strncmp(tt_last_kernel_path(), "fusion:interp:", 14) == 0, "path '%s'",
                 tt_last_kernel_path());
    }
    FZ_OK(tt_set_isa(before));
    for (int i = 0; i < n_blocks; ++i) free(blocks[i]);

    int64_t need = 0;
    tt_clear_error();
    const tt_status ss = tt_fusion_source(f, NULL, 0, &need);
    if (ss == TT_OK) {
        char *src = fz_alloc((size_t)need);
        FZ_OK(tt_fusion_source(f, src, need, &need));
        FZ_CHECK(src[need - 1] == '\0' && strlen(src) + 1 == (size_t)need, "source length");
        FZ_CHECK(strstr(src, "tt_fused_kernel") != NULL, "source without the kernel");
        free(src);
    } else {
        FZ_CHECK(0, "tt_fusion_source failed: %s", tt_status_string(ss));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    const uint8_t mode = fz_u8(&in);
    int64_t w[512];
    double imm[130];
    int64_t nw = 0, n_nodes = 0;
    if ((mode & 1) == 0) {
        while (in.n >= 8 && nw < 512) w[nw++] = (int64_t)fz_u64(&in);
        for (int i = 0; i < 130; ++i) imm[i] = (double)(i % 7) - 2.5;
        const int64_t n_imm = (int64_t)(mode >> 1) % 130;
        tt_fusion_t *f = NULL;
        tt_clear_error();
        const tt_status st = tt_fusion_create(w, nw, imm, n_imm, &f);
        if (st != TT_OK) {
            expect_refusal(st);
            return 0;
        }
        exercise(f, w, &in);
        FZ_OK(tt_fusion_free(f));
        return 0;
    }
    /* structured */
    const int rank = 1 + fz_u8(&in) % 3;
    w[nw++] = 0x54544655;
    w[nw++] = 1;
    w[nw++] = rank;
    for (int d = 0; d < rank; ++d) w[nw++] = fz_u8(&in) % 10;
    const int n_in = 1 + fz_u8(&in) % 3;
    w[nw++] = n_in;
    int in_dt[3];
    for (int k = 0; k < n_in; ++k) w[nw++] = in_dt[k] = fz_u8(&in) & 1;
    n_nodes = 1 + fz_u8(&in) % 14;
    w[nw++] = n_nodes;
    int dt[16], full[16];
    for (int i = 0; i < n_nodes; ++i) {
        int op = FZ_PICK(&in, kOps);
        const uint8_t pick = fz_u8(&in);
        if (i == 0 && op != 0 && op != 1) op = 0;
        int a = -1, b = -1, c = -1, d = (pick >> 7) & 1;
        if (op == 0) {
            a = pick % n_in;
            d = in_dt[a];
        } else if (op != 1) {
            const int k = arity(op);
            a = (int)(fz_u8(&in) % i);
            if (k >= 2) b = (int)(fz_u8(&in) % i);
            if (k >= 3) c = (int)(fz_u8(&in) % i);
            if (op != 2) d = dt[a];  /* operands must share the dtype: take a's */
            if (k == 2 && dt[b] != d) b = a;
            if (op == 40) {
                d = dt[b];
                if (dt[c] != d) c = b;
            }
            if ((op >= 50) && !full[a]) op = 3; /* reductions of row values: make it a neg */
        }
        w[nw++] = op;
        w[nw++] = d;
        w[nw++] = a;
        w[nw++] = b;
        w[nw++] = c;
        dt[i] = d;
        full[i] = op == 0 || (op != 1 && op < 50 && ((a >= 0 && full[a]) || (b >= 0 && full[b]) || (c >= 0 && full[c])));
        imm[i] = (double)(int8_t)fz_u8(&in) / 8.0;
    }
    const int n_out = 1 + fz_u8(&in) % 3;
    w[nw++] = n_out;
    for (int o = 0; o < n_out; ++o) {
        const int node = (int)(fz_u8(&in) % n_nodes);
        w[nw++] = node;
        w[nw++] = full[node] ? (fz_u8(&in) & 1) : 0;
    }
    const uint8_t mutate = fz_u8(&in);
    if (mutate & 1) {
        const int64_t at = fz_u8(&in) % nw;
        const uint8_t which = fz_u8(&in);
        w[at] = which < 200 ? kNasty[which % (sizeof kNasty / sizeof kNasty[0])] : (int64_t)(which - 200);
    }
    const int64_t n_words = nw - ((mutate & 6) == 6 ? 1 : 0);
    tt_fusion_t *f = NULL;
    tt_clear_error();
    const tt_status st = tt_fusion_create(w, n_words, imm, n_nodes, &f);
    if (st != TT_OK) {
        FZ_CHECK(mutate & 1 || (mutate & 6) == 6, "a program valid by construction was refused");
        expect_refusal(st);
        return 0;
    }
    exercise(f, w, &in);
    FZ_OK(tt_fusion_free(f));
    return 0;
}
