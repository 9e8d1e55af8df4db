/*
 * test_threads.c -- the threading model (runtime/core/thread_pool.h) without timing:
 *   1. determinism: every threaded kernel family gives the same bits on 1, 2, 3 and 7
 *      threads (GEMM and its strided batch, bias-GELU backward's column sums, layer-norm
 *      backward, softmax, attention forward and backward with few heads, Adam, the
 *      embedding scatter-add, im2col / col2im; the fusion interpreter's accumulated outputs
 *      are checked from Python, tests/native/test_threading.py);
 *   2. held workers (tt_thread_pool_hold, as if they had lost their cores): calls complete
 *      on the caller with the same bits, and the counters say no worker ran a chunk;
 *   3. nesting and concurrency: a kernel called from inside a chunk (a rows function run by
 *      tt_fusion_run_rows calls tt_sgemm) and from two threads at once;
 *   4. fork: a child forked after the pool ran still runs parallel kernels;
 *   5. the thread count's source and its refusals.
 * ctest's TIMEOUT turns a deadlock into a failure.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tt_test.h"

/* ---- one run of every kernel family into a list of output buffers ---- */

#define MAX_OUT 24
typedef struct {
    float *buf[MAX_OUT];
    int64_t n[MAX_OUT];
    int count;
} outputs;

static float *out_new(outputs *o, int64_t n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    o->buf[o->count] = p;
    o->n[o->count++] = n;
    return p;
}

static void outputs_free(outputs *o) {
    for (int i = 0; i < o->count; ++i) free(o->buf[i]);
    o->count = 0;
}

typedef struct {
    float *a, *b, *x, *bias, *gy, *gamma, *q, *k, *v, *go, *params, *grads, *img;
    int64_t *ids;
} inputs;

enum { M = 97, N = 333, K = 515, BATCH = 5, ROWS = 1000, COLS = 37, S = 200, D = 16, H = 2 };
enum { NPARAM = 70000, VOCAB = 50, DIM = 48, NIDS = 3000, IMG_C = 3, IMG_H = 30 };

static inputs make_inputs(void) {
    inputs in;
    in.a = tt_test_filled((int64_t)M * K * BATCH, -1, 1);
    in.b = tt_test_filled((int64_t)K * N * BATCH, -1, 1);
    in.x = tt_test_filled((int64_t)ROWS * COLS, -1, 1);
    in.bias = tt_test_filled(COLS, -1, 1);
    in.gy = tt_test_filled((int64_t)ROWS * COLS, -1, 1);
    in.gamma = tt_test_filled(COLS, -1, 1);
    in.q = tt_test_filled((int64_t)H * S * D, -1, 1);
    in.k = tt_test_filled((int64_t)H * S * D, -1, 1);
    in.v = tt_test_filled((int64_t)H * S * D, -1, 1);
    in.go = tt_test_filled((int64_t)H * S * D, -1, 1);
    in.params = tt_test_filled(NPARAM, -1, 1);
    in.grads = tt_test_filled(NPARAM, -1, 1);
    in.img = tt_test_filled((int64_t)2 * IMG_C * IMG_H * IMG_H, -1, 1);
    in.ids = malloc(NIDS * sizeof(int64_t));
    for (int i = 0; i < NIDS; ++i) in.ids[i] = (int64_t)(tt_test_uniform(0.0f, 1.0f) * (VOCAB - 1));
    return in;
}

static void free_inputs(inputs *in) {
    float *all[] = {in->a, in->b, in->x, in->bias, in->gy, in->gamma, in->q, in->k, in->v, in->go,
                    in->params, in->grads, in->img};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free(all[i]);
    free(in->ids);
}

static void run_all(const inputs *in, outputs *o) {
    /* GEMM, op(A) row-major and transposed */
    CHECK_OK(tt_sgemm(0, 0, M, N, K, 1.0f, in->a, K, in->b, N, 0.0f, out_new(o, (int64_t)M * N), N));
    CHECK_OK(tt_sgemm(1, 1, M, N, K, 0.5f, in->a, M, in->b, K, 0.0f, out_new(o, (int64_t)M * N), N));
    CHECK_OK(tt_sgemm_strided_batched(0, 0, M, N, K, 1.0f, in->a, K, (int64_t)M * K, in->b, N,
                                      (int64_t)K * N, 0.0f, out_new(o, (int64_t)M * N * BATCH), N,
                                      (int64_t)M * N, BATCH));
    /* bias-GELU backward with its column sums */
    CHECK_OK(tt_bias_gelu_backward(in->x, in->bias, in->gy, out_new(o, (int64_t)ROWS * COLS),
                                   out_new(o, COLS), ROWS, COLS));
    /* layer norm forward + backward (grad_gamma, grad_beta are column sums) */
    float *y = out_new(o, (int64_t)ROWS * COLS), *mean = out_new(o, ROWS), *rstd = out_new(o, ROWS);
    CHECK_OK(tt_layernorm_forward(in->x, in->gamma, in->bias, y, mean, rstd, ROWS, COLS, 1e-5f));
    CHECK_OK(tt_layernorm_backward(in->x, in->gamma, mean, rstd, in->gy, out_new(o, (int64_t)ROWS * COLS),
                                   out_new(o, COLS), out_new(o, COLS), ROWS, COLS));
    CHECK_OK(tt_softmax_forward(in->x, out_new(o, (int64_t)ROWS * COLS), NULL, ROWS, COLS));
    /* attention with 2 heads: the backward cuts each head's key blocks into groups */
    float *att = out_new(o, (int64_t)H * S * D), *lse = out_new(o, (int64_t)H * S);
    CHECK_OK(tt_attention_forward(in->q, NULL, in->k, NULL, in->v, NULL, att, NULL, lse, 1, H, S, S, D,
                                  0.25f, TT_ATTENTION_CAUSAL));
    CHECK_OK(tt_attention_backward(in->q, NULL, in->k, NULL, in->v, NULL, att, NULL, in->go, NULL, lse,
                                   out_new(o, (int64_t)H * S * D), NULL, out_new(o, (int64_t)H * S * D),
                                   NULL, out_new(o, (int64_t)H * S * D), NULL, 1, H, S, S, D, 0.25f,
                                   TT_ATTENTION_CAUSAL));
    /* Adam over two tensors */
    float *p = out_new(o, NPARAM), *m = out_new(o, NPARAM), *v = out_new(o, NPARAM);
    memcpy(p, in->params, NPARAM * sizeof(float));
    float *ps[2] = {p, p + 40000}, *ms[2] = {m, m + 40000}, *vs[2] = {v, v + 40000};
    const float *gs[2] = {in->grads, in->grads + 40000};
    const int64_t numel[2] = {40000, NPARAM - 40000}, steps[2] = {1, 3};
    CHECK_OK(tt_adam_step(2, ps, gs, ms, vs, numel, steps, 1e-3, 0.9, 0.999, 1e-8, 0.01, 1));
    /* embedding scatter-add (repeated ids) */
    CHECK_OK(tt_embedding_backward(in->gy, in->ids, NIDS / 3 > ROWS ? ROWS : NIDS / 3, DIM > COLS ? COLS : DIM,
                                   out_new(o, (int64_t)VOCAB * COLS), VOCAB, 0));
    /* im2col and col2im of a 2 x 3 x 30 x 30 batch, 3 x 3 kernel, padding 1 */
    const int64_t cols_n = (int64_t)IMG_C * 9 * 2 * IMG_H * IMG_H;
    float *cols = out_new(o, cols_n);
    CHECK_OK(tt_im2col(in->img, 2, IMG_C, IMG_H, IMG_H, 3, 3, 1, 1, 1, 1, cols));
    CHECK_OK(tt_col2im(cols, 2, IMG_C, IMG_H, IMG_H, 3, 3, 1, 1, 1, 1, out_new(o, (int64_t)2 * IMG_C * IMG_H * IMG_H)));
}

static int same_bits(const outputs *a, const outputs *b) {
    if (a->count != b->count) return 0;
    for (int i = 0; i < a->count; ++i)
        if (a->n[i] != b->n[i] || memcmp(a->buf[i], b->buf[i], (size_t)a->n[i] * sizeof(float)) != 0) {
            fprintf(stderr, "output %d differs\n", i);
            return 0;
        }
    return 1;
}

static void check_determinism(const inputs *in) {
    outputs ref = {{0}, {0}, 0};
    CHECK_OK(tt_set_num_threads(1));
    run_all(in, &ref);
    const int counts[] = {2, 3, 7};
    for (size_t t = 0; t < sizeof counts / sizeof counts[0]; ++t) {
        CHECK_OK(tt_set_num_threads(counts[t]));
        for (int rep = 0; rep < 2; ++rep) {
            outputs got = {{0}, {0}, 0};
            run_all(in, &got);
            if (!same_bits(&ref, &got)) {
                fprintf(stderr, "threads=%d rep %d: results differ from 1 thread\n", counts[t], rep);
                CHECK(0);
            }
            outputs_free(&got);
        }
    }
    outputs_free(&ref);
}

static void check_held_workers(const inputs *in) {
    CHECK_OK(tt_set_num_threads(4));
    outputs ref = {{0}, {0}, 0}, held = {{0}, {0}, 0};
    run_all(in, &ref);
    tt_thread_stats_t before, after;
    CHECK_OK(tt_thread_pool_hold(3));  /* every worker of a 4-thread pool */
    CHECK_OK(tt_thread_stats_reset());
    CHECK_OK(tt_thread_stats(&before));
    run_all(in, &held);
    CHECK_OK(tt_thread_stats(&after));
    CHECK_OK(tt_thread_pool_hold(0));
    CHECK(same_bits(&ref, &held));
    CHECK(after.jobs > before.jobs);                 /* the calls were offered to the pool */
    CHECK(after.chunks_workers == before.chunks_workers);  /* ... and no held worker ran one */
    CHECK(after.chunks_caller > before.chunks_caller);
    CHECK(after.workers >= 3);
    outputs_free(&ref);
    outputs_free(&held);
    CHECK_FAILS(tt_thread_pool_hold(-1), TT_ERR_INVALID_ARGUMENT, "workers=-1");
    CHECK_FAILS(tt_thread_pool_slow(-1), TT_ERR_INVALID_ARGUMENT, "delay_us=-1");
    CHECK_FAILS(tt_thread_pool_slow(1000001), TT_ERR_INVALID_ARGUMENT, "delay_us=1000001");
    CHECK_OK(tt_thread_pool_slow(0));  /* the slow worker's effects: tests/native/test_threading.py */
    CHECK_FAILS(tt_thread_stats(NULL), TT_ERR_NULL_POINTER, "NULL");
}

/* ---- nesting: a rows function (run on the pool) that calls a parallel GEMM ---- */

static const inputs *g_in;
static float *g_nested_out;
static int nested_rows(const void *const *in, const int64_t *is, void *const *out, const int64_t *os,
                       int64_t r0, int64_t r1) {
    (void)in, (void)is, (void)out, (void)os;
    for (int64_t r = r0; r < r1; ++r)  /* row r: its own 40 x 50 x 60 product */
        if (tt_sgemm(0, 0, 40, 50, 60, 1.0f, g_in->a + r * 7, 60, g_in->b, 50, 0.0f,
                     g_nested_out + r * 2000, 50) != TT_OK)
            return 1;
    return 0;
}

static void check_nested(const inputs *in) {
    enum { R = 64 };
    g_in = in;
    g_nested_out = calloc(R * 2000, sizeof(float));
    float *want = calloc(R * 2000, sizeof(float));
    CHECK_OK(tt_set_num_threads(1));
    for (int r = 0; r < R; ++r)
        CHECK_OK(tt_sgemm(0, 0, 40, 50, 60, 1.0f, in->a + r * 7, 60, in->b, 50, 0.0f, want + r * 2000, 50));
    for (int nt = 2; nt <= 7; nt += 5) {
        CHECK_OK(tt_set_num_threads(nt));
        memset(g_nested_out, 0, R * 2000 * sizeof(float));
        /* 64 rows x 2048 columns: above the one-thread threshold, so the rows go to the pool */
        CHECK_OK(tt_fusion_run_rows(nested_rows, NULL, NULL, NULL, NULL, R, 2048));
        CHECK(memcmp(g_nested_out, want, R * 2000 * sizeof(float)) == 0);
    }
    free(g_nested_out);
    free(want);
}

/* ---- two threads calling kernels at once ---- */

typedef struct {
    const inputs *in;
    float *c;
    int ok;
} caller_arg;

static void *caller_main(void *p) {
    caller_arg *arg = p;
    arg->ok = 1;
    for (int i = 0; i < 30; ++i)
        if (tt_sgemm(0, 0, M, N, K, 1.0f, arg->in->a, K, arg->in->b, N, 0.0f, arg->c, N) != TT_OK) arg->ok = 0;
    return NULL;
}

static void check_concurrent(const inputs *in) {
    CHECK_OK(tt_set_num_threads(2));
    float *want = calloc((size_t)M * N, sizeof(float));
    CHECK_OK(tt_sgemm(0, 0, M, N, K, 1.0f, in->a, K, in->b, N, 0.0f, want, N));
    caller_arg args[2] = {{in, calloc((size_t)M * N, sizeof(float)), 0},
                          {in, calloc((size_t)M * N, sizeof(float)), 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; ++i) CHECK(pthread_create(&th[i], NULL, caller_main, &args[i]) == 0);
    for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; ++i) {
        CHECK(args[i].ok);
        CHECK(memcmp(args[i].c, want, (size_t)M * N * sizeof(float)) == 0);
        free(args[i].c);
    }
    free(want);
}

static void check_fork(const inputs *in) {
    CHECK_OK(tt_set_num_threads(2));
    float *want = calloc((size_t)M * N, sizeof(float));
    CHECK_OK(tt_sgemm(0, 0, M, N, K, 1.0f, in->a, K, in->b, N, 0.0f, want, N));
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(20);  /* a hang in the child fails the test instead of stalling it */
        float *c = calloc((size_t)M * N, sizeof(float));
        const int ok = tt_sgemm(0, 0, M, N, K, 1.0f, in->a, K, in->b, N, 0.0f, c, N) == TT_OK &&
                       memcmp(c, want, (size_t)M * N * sizeof(float)) == 0;
        _exit(ok ? 0 : 3);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    free(want);
}

static void check_thread_count(void) {
    CHECK(strlen(tt_threads_source()) > 0);
    CHECK_OK(tt_set_num_threads(3));
    CHECK(tt_get_num_threads() == 3);
    CHECK(strcmp(tt_threads_source(), "tt_set_num_threads(3)") == 0);
    CHECK_FAILS(tt_set_num_threads(0), TT_ERR_INVALID_ARGUMENT, "n=0");
    CHECK_FAILS(tt_set_num_threads(TT_MAX_THREADS + 1), TT_ERR_INVALID_ARGUMENT, "outside");
}

int main(void) {
    const int original = tt_get_num_threads();
    inputs in = make_inputs();
    check_thread_count();
    check_determinism(&in);
    check_held_workers(&in);
    check_nested(&in);
    check_concurrent(&in);
    check_fork(&in);
    free_inputs(&in);
    CHECK_OK(tt_set_num_threads(original));
    TT_TEST_MAIN_END;
}
