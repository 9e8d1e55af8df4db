/*
 * test_fusion.c -- the fusion programs (tt_fusion_*): every op in both dtypes against this
 * file's own double-precision evaluator of the IR, broadcasting through strides (row
 * vectors, column vectors, scalars), non-contiguous inputs and outputs (padded rows,
 * transposed, reversed), shapes 0, 1, odd, prime and longer than one tile, NaN and inf
 * propagation, row reductions (softmax, layer norm, empty rows), ACCUMULATE outputs, for
 * every ISA this CPU runs on 1 and 2 threads; every class of invalid IR and of bad run
 * arguments refused with its message; and the generated C (reductions and ACCUMULATE
 * included) compiled with cc -Wall -Werror (run whole and as row ranges on the pool, skipped when no
 * compiler is on PATH), run on the same inputs as the interpreter and held to the same
 * oracle and tolerance.
 *
 * The oracle evaluates each node in double from its operands and rounds the result to the
 * node dtype, so a float32 node is compared with the correctly rounded float of its op.
 * Tolerances: float32 1e-5 relative + 1e-6 absolute (vector exp / tanh / sigmoid are good
 * to a few 1e-7); float64 1e-12 relative; sums relative to the sum of magnitudes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "tt_test.h"

enum {
    INPUT = 0, CONST = 1, CAST = 2, NEG = 3, ABS_ = 4, EXP = 5, LOG = 6, SQRT = 7, RSQRT = 8,
    TANH = 9, SIGMOID = 10, RELU = 11, GELU = 12, ERF = 13, POWI = 14, RECIP = 15,
    ADD = 20, SUB = 21, MUL = 22, DIV = 23, MAX = 24, MIN = 25, POW = 26,
    LT = 30, LE = 31, GT = 32, GE = 33, EQ = 34, NE = 35, WHERE = 40,
    SUM = 50, MEAN = 51, MAXROW = 52
};
#define ACC 1
#define MAXN 64

/* ------------------------------------------------------------ program builder */

typedef struct {
    int rank;
    int64_t shape[8];
    int n_in, in_dtype[8];
    int n;
    int64_t node[MAXN][5];
    double imm[MAXN];
    int kind_full[MAXN];
    int n_out;
    int64_t out[16][2];
} prog;

static void p_init(prog *p, int rank, const int64_t *shape) {
    memset(p, 0, sizeof *p);
    p->rank = rank;
    for (int d = 0; d < rank; ++d) p->shape[d] = shape[d];
}

static int p_node(prog *p, int op, int dtype, int a, int b, int c, double imm) {
    const int i = p->n++;
    p->node[i][0] = op;
    p->node[i][1] = dtype;
    p->node[i][2] = a;
    p->node[i][3] = b;
    p->node[i][4] = c;
    p->imm[i] = imm;
    int full = op == INPUT;
    if (op != INPUT && op != CONST && op < SUM) {
        if (a >= 0) full |= p->kind_full[a];
        if (b >= 0) full |= p->kind_full[b];
        if (c >= 0) full |= p->kind_full[c];
    }
    p->kind_full[i] = full;
    return i;
}

static int p_input(prog *p, int dtype) {
    p->in_dtype[p->n_in] = dtype;
    return p_node(p, INPUT, dtype, p->n_in++, -1, -1, 0);
}
static int p_un(prog *p, int op, int a) { return p_node(p, op, (int)p->node[a][1], a, -1, -1, 0); }
static int p_bin(prog *p, int op, int a, int b) { return p_node(p, op, (int)p->node[a][1], a, b, -1, 0); }
static int p_const(prog *p, int dtype, double v) { return p_node(p, CONST, dtype, -1, -1, -1, v); }
static void p_output(prog *p, int node, int flags) {
    p->out[p->n_out][0] = node;
    p->out[p->n_out][1] = flags;
    p->n_out++;
}

static int64_t p_words(const prog *p, int64_t *w) {
    int64_t k = 0;
    w[k++] = 0x54544655;
    w[k++] = 1;
    w[k++] = p->rank;
    for (int d = 0; d < p->rank; ++d) w[k++] = p->shape[d];
    w[k++] = p->n_in;
    for (int i = 0; i < p->n_in; ++i) w[k++] = p->in_dtype[i];
    w[k++] = p->n;
    for (int i = 0; i < p->n; ++i)
        for (int j = 0; j < 5; ++j) w[k++] = p->node[i][j];
    w[k++] = p->n_out;
    for (int o = 0; o < p->n_out; ++o) {
        w[k++] = p->out[o][0];
        w[k++] = p->out[o][1];
    }
    return k;
}

static tt_fusion_t *p_build(const prog *p) {
    int64_t w[512];
    const int64_t nw = p_words(p, w);
    tt_fusion_t *f = NULL;
    CHECK_OK(tt_fusion_create(w, nw, p->imm, p->n, &f));
    return f;
}

/* ------------------------------------------------------------ buffers */

/* A strided view over its own allocation: data points at element offset 0. */
typedef struct {
    void *base, *data;
    int dtype;
    int64_t strides[8];
    int64_t lo, hi; /* element offsets reachable */
} buf;

static int64_t esize(int dtype) { return dtype == TT_F64 ? 8 : 4; }

static buf buf_make(const prog *p, int dtype, const int64_t *strides, int axes) {
    buf b;
    memset(&b, 0, sizeof b);
    b.dtype = dtype;
    int64_t lo = 0, hi = 0;
    int empty = 0;
    for (int d = 0; d < p->rank; ++d) {
        b.strides[d] = strides[d];
        if (d >= axes) continue;
        if (p->shape[d] == 0) empty = 1;
        const int64_t span = (p->shape[d] > 0 ? p->shape[d] - 1 : 0) * strides[d];
        if (span < 0) lo += span;
        else hi += span;
    }
    (void)empty;
    b.lo = lo;
    b.hi = hi;
    const int64_t n = hi - lo + 1;
    b.base = malloc((size_t)(n * esize(dtype)));
    b.data = (char *)b.base - lo * esize(dtype);
    return b;
}

static void buf_fill(buf *b, double lo, double hi, int specials) {
    for (int64_t e = b->lo; e <= b->hi; ++e) {
        double v = tt_test_uniform_f64(lo, hi);
        if (specials) {
            const double r = tt_test_uniform_f64(0, 1);
            if (r < 0.02) v = NAN;
            else if (r < 0.04) v = INFINITY;
            else if (r < 0.06) v = -INFINITY;
            else if (r < 0.08) v = 0.0;
            else if (r < 0.09) v = -0.0;
        }
        if (b->dtype == TT_F32) ((float *)b->data)[e] = (float)v;
        else ((double *)b->data)[e] = v;
    }
}

static void buf_set(buf *b, double v) {
    for (int64_t e = b->lo; e <= b->hi; ++e) {
        if (b->dtype == TT_F32) ((float *)b->data)[e] = (float)v;
        else ((double *)b->data)[e] = v;
    }
}

static double buf_get(const buf *b, int64_t off) {
    return b->dtype == TT_F32 ? (double)((const float *)b->data)[off] : ((const double *)b->data)[off];
}

static void contiguous(const prog *p, int64_t *s) {
    int64_t run = 1;
    for (int d = p->rank - 1; d >= 0; --d) {
        s[d] = run;
        run *= p->shape[d] > 0 ? p->shape[d] : 1;
    }
}

/* ------------------------------------------------------------ the oracle */

static double rnd(double x, int dtype) { return dtype == TT_F32 ? (double)(float)x : x; }

static double ref_op(int op, double a, double b, double c, double imm) {
    switch (op) {
        case CAST: return a;
        case NEG: return -a;
        case ABS_: return fabs(a);
        case EXP: return exp(a);
        case LOG: return log(a);
        case SQRT: return sqrt(a);
        case RSQRT: return 1.0 / sqrt(a);
        case TANH: return tanh(a);
        case SIGMOID: return 1.0 / (1.0 + exp(-a));
        case RELU: return a < 0 ? 0.0 : a;
        case GELU:
            if (a == -INFINITY) return -0.0;
            if (a < -5) return a / (1.0 + exp(-1.5957691216057308 * (a + 0.044715 * a * a * a)));
            return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
        case ERF: return erf(a);
        case POWI: return pow(a, imm);
        case RECIP: return 1.0 / a;
        case ADD: return a + b;
        case SUB: return a - b;
        case MUL: return a * b;
        case DIV: return a / b;
        case MAX: return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
        case MIN: return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
        case POW: return pow(a, b);
        case LT: return a < b;
        case LE: return a <= b;
        case GT: return a > b;
        case GE: return a >= b;
        case EQ: return a == b;
        case NE: return a != b;
        case WHERE: return a != 0 ? b : c;
    }
    return NAN;
}

/* Expected values: full outputs at every domain point (row-major), row outputs per row. */
static void ref_run(const prog *p, buf *in, double **expect) {
    const int R = p->rank;
    const int64_t cols = p->shape[R - 1];
    int64_t rows = 1;
    for (int d = 0; d + 1 < R; ++d) rows *= p->shape[d];
    double *V = malloc((size_t)(p->n * (cols > 0 ? cols : 1)) * sizeof(double));
    double RV[MAXN];
    for (int64_t r = 0; r < rows; ++r) {
        int64_t idx[8] = {0}, rest = r;
        for (int d = R - 2; d >= 0; --d) {
            idx[d] = rest % p->shape[d];
            rest /= p->shape[d];
        }
        for (int i = 0; i < p->n; ++i) {
            const int op = (int)p->node[i][0], dt = (int)p->node[i][1];
            const int a = (int)p->node[i][2], b = (int)p->node[i][3], c = (int)p->node[i][4];
            double *vi = V + (size_t)i * (size_t)cols;
            if (op == INPUT) {
                int64_t off = 0;
                for (int d = 0; d + 1 < R; ++d) off += idx[d] * in[a].strides[d];
                for (int64_t j = 0; j < cols; ++j) vi[j] = buf_get(&in[a], off + j * in[a].strides[R - 1]);
            } else if (op == CONST) {
                RV[i] = rnd(p->imm[i], dt);
            } else if (op >= SUM) {
                double s = op == MAXROW ? -INFINITY : 0.0;
                const double *va = V + (size_t)a * (size_t)cols;
                for (int64_t j = 0; j < cols; ++j) s = op == MAXROW ? ref_op(MAX, s, va[j], 0, 0) : s + va[j];
                if (op == MEAN) s /= (double)cols;
                RV[i] = rnd(s, dt);
            } else if (!p->kind_full[i]) {
                RV[i] = rnd(ref_op(op, a >= 0 ? RV[a] : 0, b >= 0 ? RV[b] : 0, c >= 0 ? RV[c] : 0, p->imm[i]), dt);
            } else {
                for (int64_t j = 0; j < cols; ++j) {
                    const double x = a >= 0 ? (p->kind_full[a] ? V[(size_t)a * cols + j] : RV[a]) : 0;
                    const double y = b >= 0 ? (p->kind_full[b] ? V[(size_t)b * cols + j] : RV[b]) : 0;
                    const double z = c >= 0 ? (p->kind_full[c] ? V[(size_t)c * cols + j] : RV[c]) : 0;
                    vi[j] = rnd(ref_op(op, x, y, z, op == POWI ? p->imm[i] : 0), dt);
                }
            }
        }
        for (int o = 0; o < p->n_out; ++o) {
            const int node = (int)p->out[o][0];
            if (p->kind_full[node])
                for (int64_t j = 0; j < cols; ++j) expect[o][r * cols + j] = V[(size_t)node * cols + j];
            else
                expect[o][r] = RV[node];
        }
    }
    free(V);
}

static int close_enough(double got, double want, int dtype, double scale) {
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return got == want;
    if (isnan(got) || isinf(got)) return 0;
    const double rtol = dtype == TT_F32 ? 1e-5 : 1e-12, atol = dtype == TT_F32 ? 1e-6 : 1e-14;
    return fabs(got - want) <= rtol * (fabs(want) + scale) + atol;
}

/* ------------------------------------------------------------ one checked run */

typedef struct {
    int64_t in_strides[8][8];
    int64_t out_strides[16][8];
    double lo[8], hi[8];
    int specials;
} layout;

static void layout_contiguous(const prog *p, layout *L, double lo, double hi) {
    memset(L, 0, sizeof *L);
    for (int k = 0; k < 8; ++k) {
        contiguous(p, L->in_strides[k]);
        L->lo[k] = lo;
        L->hi[k] = hi;
    }
    for (int o = 0; o < 16; ++o) contiguous(p, L->out_strides[o]);
}

typedef int (*kernel_fn)(const void *const *, const int64_t *, void *const *, const int64_t *);

/* Runs p (interpreter, and the compiled kernel when given) on random inputs laid out by L
 * and compares every output element with the oracle. Returns the number of mismatches. */
static int check_run(const char *label, const prog *p, const layout *L, kernel_fn compiled) {
    const int R = p->rank;
    int64_t total = 1, rows = 1;
    for (int d = 0; d < R; ++d) total *= p->shape[d];
    for (int d = 0; d + 1 < R; ++d) rows *= p->shape[d];
    const int64_t cols = p->shape[R - 1];
    buf in[8], out[16];
    const void *in_ptr[8];
    void *out_ptr[16];
    int64_t in_strides[64], out_strides[128];
    double *expect[16];
    for (int k = 0; k < p->n_in; ++k) {
        in[k] = buf_make(p, p->in_dtype[k], L->in_strides[k], R);
        buf_fill(&in[k], L->lo[k], L->hi[k], L->specials);
        in_ptr[k] = in[k].data;
        for (int d = 0; d < R; ++d) in_strides[k * R + d] = L->in_strides[k][d];
    }
    for (int o = 0; o < p->n_out; ++o) {
        const int node = (int)p->out[o][0];
        out[o] = buf_make(p, (int)p->node[node][1], L->out_strides[o], p->kind_full[node] ? R : R - 1);
        buf_set(&out[o], 777.0);
        out_ptr[o] = out[o].data;
        for (int d = 0; d < R; ++d) out_strides[o * R + d] = L->out_strides[o][d];
        expect[o] = malloc((size_t)((total > rows ? total : rows) + 1) * sizeof(double));
    }
    ref_run(p, in, expect);
    tt_fusion_t *f = p_build(p);
    int bad = 0;
    if (compiled) {
        if (compiled(in_ptr, in_strides, out_ptr, out_strides) != 0) bad++;
    } else {
        tt_clear_error();
        const tt_status st = tt_fusion_run(f, in_ptr, in_strides, out_ptr, out_strides);
        if (st != TT_OK) {
            fprintf(stderr, "%s: tt_fusion_run: %s\n", label, tt_last_error());
            bad++;
        }
        CHECK(strncmp(tt_last_kernel_path(), "fusion:interp:", 14) == 0);
    }
    int any_f32 = 0; /* a float64 result of float32 arithmetic gets the float32 tolerance */
    for (int i = 0; i < p->n; ++i) any_f32 |= p->node[i][1] == TT_F32;
    for (int o = 0; o < p->n_out && !bad; ++o) {
        const int node = (int)p->out[o][0], dt = any_f32 ? TT_F32 : (int)p->node[node][1];
        if (!p->kind_full[node]) {
            for (int64_t r = 0; r < rows; ++r) {
                int64_t off = 0, rest = r;
                for (int d = R - 2; d >= 0; --d) {
                    off += (rest % p->shape[d]) * L->out_strides[o][d];
                    rest /= p->shape[d];
                }
                const double got = buf_get(&out[o], off);
                if (!close_enough(got, expect[o][r], dt, 0) && bad++ < 5)
                    fprintf(stderr, "%s: output %d row %lld: got %.9g want %.9g\n", label, o,
                            (long long)r, got, expect[o][r]);
            }
            continue;
        }
        if (p->out[o][1] & ACC) { /* sums over the points that share an element */
            const int64_t n_el = out[o].hi - out[o].lo + 1;
            double *sum = calloc((size_t)n_el, sizeof(double)), *mag = calloc((size_t)n_el, sizeof(double));
            char *hit = calloc((size_t)n_el, 1);
            for (int64_t e = 0; e < total; ++e) {
                int64_t off = 0, rest = e;
                for (int d = R - 1; d >= 0; --d) {
                    off += (rest % p->shape[d]) * L->out_strides[o][d];
                    rest /= p->shape[d];
                }
                sum[off - out[o].lo] += expect[o][e];
                mag[off - out[o].lo] += fabs(expect[o][e]);
            }
            /* every element the strides reach (zero sums included) */
            int64_t reach = 1;
            for (int d = 0; d < R; ++d) if (L->out_strides[o][d] != 0) reach *= p->shape[d];
            for (int64_t e = 0; e < reach; ++e) {
                int64_t off = 0, rest = e;
                for (int d = R - 1; d >= 0; --d) {
                    if (L->out_strides[o][d] == 0) continue;
                    off += (rest % p->shape[d]) * L->out_strides[o][d];
                    rest /= p->shape[d];
                }
                hit[off - out[o].lo] = 1;
            }
            for (int64_t e = 0; e < n_el; ++e) {
                if (!hit[e]) continue;
                const double got = buf_get(&out[o], out[o].lo + e);
                const double want = rnd(sum[e], dt);
                if (!close_enough(got, want, dt, 10 * mag[e]) && bad++ < 5)
                    fprintf(stderr, "%s: accumulated output %d element %lld: got %.9g want %.9g\n",
                            label, o, (long long)e, got, want);
            }
            free(sum);
            free(mag);
            free(hit);
            continue;
        }
        for (int64_t e = 0; e < total; ++e) {
            int64_t off = 0, rest = e;
            for (int d = R - 1; d >= 0; --d) {
                off += (rest % p->shape[d]) * L->out_strides[o][d];
                rest /= p->shape[d];
            }
            const double got = buf_get(&out[o], off);
            if (!close_enough(got, expect[o][e], dt, 0) && bad++ < 5)
                fprintf(stderr, "%s: output %d point %lld (row %lld col %lld): got %.9g want %.9g\n",
                        label, o, (long long)e, (long long)(cols ? e / cols : 0),
                        (long long)(cols ? e % cols : 0), got, expect[o][e]);
        }
    }
    CHECK_OK(tt_fusion_free(f));
    for (int k = 0; k < p->n_in; ++k) free(in[k].base);
    for (int o = 0; o < p->n_out; ++o) {
        free(out[o].base);
        free(expect[o]);
    }
    if (bad) {
        fprintf(stderr, "%s: %d mismatch(es)\n", label, bad);
        tt_test_failures++;
    }
    return bad;
}

/* ------------------------------------------------------------ the cases */

static const int64_t kShapes[][2] = {{1, 1}, {3, 17}, {2, 1031}, {5, 0}, {0, 4}, {67, 13}};

static void check_every_op(const char *isa_label) {
    static const int unary[] = {NEG, ABS_, EXP, LOG, SQRT, RSQRT, TANH, SIGMOID, RELU, GELU, ERF, RECIP};
    static const int binary[] = {ADD, SUB, MUL, DIV, MAX, MIN, POW, LT, LE, GT, GE, EQ, NE};
    char label[128];
    for (int dt = TT_F32; dt <= TT_F64; ++dt)
        for (size_t s = 0; s < sizeof kShapes / sizeof kShapes[0]; ++s) {
            prog p;
            layout L;
            for (size_t u = 0; u < sizeof unary / sizeof unary[0]; ++u) {
                p_init(&p, 2, kShapes[s]);
                const int x = p_input(&p, dt);
                p_output(&p, p_un(&p, unary[u], x), 0);
                layout_contiguous(&p, &L, -12.0, 12.0);
                L.specials = 1;
                snprintf(label, sizeof label, "%s op %d dtype %d shape %lldx%lld", isa_label, unary[u], dt,
                         (long long)kShapes[s][0], (long long)kShapes[s][1]);
                check_run(label, &p, &L, NULL);
            }
            for (size_t b = 0; b < sizeof binary / sizeof binary[0]; ++b) {
                p_init(&p, 2, kShapes[s]);
                const int x = p_input(&p, dt), y = p_input(&p, dt);
                p_output(&p, p_bin(&p, binary[b], x, y), 0);
                layout_contiguous(&p, &L, binary[b] == POW ? 0.1 : -3.0, 3.0);
                L.specials = 1;
                snprintf(label, sizeof label, "%s op %d dtype %d shape %lldx%lld", isa_label, binary[b], dt,
                         (long long)kShapes[s][0], (long long)kShapes[s][1]);
                check_run(label, &p, &L, NULL);
            }
            /* powi with several exponents, where with a condition of the other dtype, casts */
            static const double exps[] = {2.0, 3.0, 0.5, -1.5};
            for (int e = 0; e < 4; ++e) {
                p_init(&p, 2, kShapes[s]);
                const int x = p_input(&p, dt);
                p_output(&p, p_node(&p, POWI, dt, x, -1, -1, exps[e]), 0);
                layout_contiguous(&p, &L, 0.0, 4.0);
                L.specials = 1;
                snprintf(label, sizeof label, "%s powi %g dtype %d", isa_label, exps[e], dt);
                check_run(label, &p, &L, NULL);
            }
            p_init(&p, 2, kShapes[s]);
            {
                const int cond = p_input(&p, 1 - dt), x = p_input(&p, dt), y = p_input(&p, dt);
                const int c2 = p_bin(&p, GT, cond, p_const(&p, 1 - dt, 0.0));
                p_output(&p, p_node(&p, WHERE, dt, cond, x, y, 0), 0);
                p_output(&p, p_node(&p, WHERE, dt, c2, x, y, 0), 0);
                p_output(&p, p_node(&p, CAST, 1 - dt, x, -1, -1, 0), 0);
                layout_contiguous(&p, &L, -2.0, 2.0);
                L.specials = 1;
                snprintf(label, sizeof label, "%s where/cast dtype %d", isa_label, dt);
                check_run(label, &p, &L, NULL);
            }
        }
}

/* (x + bias) * scale with every broadcast and layout, plus a chain with constants. */
static void check_broadcast(const char *isa_label) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 17}, {7, 1031}, {300, 301}, {4096, 3}, {1, 20011}};
    char label[128];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1];
        for (int variant = 0; variant < 7; ++variant) {
            prog p;
            p_init(&p, 2, shapes[s]);
            const int x = p_input(&p, TT_F32), b = p_input(&p, TT_F32), sc = p_input(&p, TT_F32);
            p_output(&p, p_bin(&p, MUL, p_bin(&p, ADD, x, b), sc), 0);
            layout L;
            layout_contiguous(&p, &L, -2.0, 2.0);
            switch (variant) {
                case 0: break;                                                   /* all full */
                case 1: L.in_strides[1][0] = 0; L.in_strides[2][0] = 0; L.in_strides[2][1] = 0; break; /* row vector, scalar */
                case 2: L.in_strides[1][0] = 1; L.in_strides[1][1] = 0; break;  /* column vector */
                case 3: L.in_strides[0][0] = cols + 3; break;                    /* padded rows */
                case 4: L.in_strides[0][0] = 1; L.in_strides[0][1] = rows; break; /* transposed */
                case 5: L.in_strides[0][1] = -1; L.in_strides[1][0] = -cols; break; /* reversed */
                case 6: L.out_strides[0][0] = 2 * cols; L.out_strides[0][1] = 2; L.in_strides[2][1] = 3; L.in_strides[2][0] = 3 * cols; break;
            }
            snprintf(label, sizeof label, "%s broadcast variant %d shape %lldx%lld", isa_label, variant,
                     (long long)rows, (long long)cols);
            check_run(label, &p, &L, NULL);
        }
        /* a 10-op chain with constants (row values broadcast into tiles) */
        prog p;
        p_init(&p, 2, shapes[s]);
        const int x = p_input(&p, TT_F32), y = p_input(&p, TT_F32);
        const int c1 = p_const(&p, TT_F32, 0.5), c2 = p_const(&p, TT_F32, 3.0);
        const int c3 = p_bin(&p, ADD, c1, c2); /* a row value of constants */
        int t = p_bin(&p, MUL, x, c1);
        t = p_bin(&p, ADD, t, y);
        t = p_un(&p, TANH, t);
        t = p_bin(&p, MUL, t, c3);
        t = p_un(&p, EXP, t);
        t = p_bin(&p, SUB, t, c2);
        t = p_un(&p, ABS_, t);
        t = p_bin(&p, ADD, t, c1);
        t = p_un(&p, SQRT, t);
        t = p_bin(&p, MAX, t, x);
        t = p_un(&p, GELU, t);
        p_output(&p, t, 0);
        p_output(&p, p_un(&p, SIGMOID, y), 0);
        layout L;
        layout_contiguous(&p, &L, -2.0, 2.0);
        snprintf(label, sizeof label, "%s chain shape %lldx%lld", isa_label, (long long)rows, (long long)cols);
        check_run(label, &p, &L, NULL);
    }
    /* outputs of 8 MB and more are stored with non-temporal stores */
    {
        const int64_t big[2] = {2048, 1031};
        prog p;
        p_init(&p, 2, big);
        const int x = p_input(&p, TT_F32), b = p_input(&p, TT_F32);
        p_output(&p, p_bin(&p, MUL, p_bin(&p, ADD, x, b), x), 0);
        p_output(&p, p_un(&p, NEG, b), 0);
        layout L;
        layout_contiguous(&p, &L, -2.0, 2.0);
        L.in_strides[1][0] = 0;
        snprintf(label, sizeof label, "%s streamed outputs", isa_label);
        check_run(label, &p, &L, NULL);
    }
    /* rank 1 and rank 4 domains */
    const int64_t r1[1] = {1009}, r4[4] = {2, 3, 5, 7};
    for (int k = 0; k < 2; ++k) {
        prog p;
        p_init(&p, k ? 4 : 1, k ? r4 : r1);
        const int x = p_input(&p, TT_F64), b = p_input(&p, TT_F64);
        p_output(&p, p_un(&p, GELU, p_bin(&p, ADD, x, b)), 0);
        layout L;
        layout_contiguous(&p, &L, -3.0, 3.0);
        if (k) { L.in_strides[1][0] = 0; L.in_strides[1][2] = 0; }
        snprintf(label, sizeof label, "%s rank %d", isa_label, k ? 4 : 1);
        check_run(label, &p, &L, NULL);
    }
}

/* Softmax rows (two reduction stages), layer norm (mean, variance, rsqrt of a row value),
 * row outputs, rank 3 with broadcast gamma, empty rows. */
static void build_softmax(prog *p, const int64_t *shape, int rank, int dt) {
    p_init(p, rank, shape);
    const int x = p_input(p, dt);
    const int m = p_un(p, MAXROW, x);
    const int e = p_un(p, EXP, p_bin(p, SUB, x, m));
    const int s = p_un(p, SUM, e);
    p_output(p, p_bin(p, DIV, e, s), 0);
    p_output(p, p_bin(p, ADD, m, p_un(p, LOG, s)), 0); /* log-sum-exp, a row output */
}

static void build_layernorm(prog *p, const int64_t *shape, int rank, int dt) {
    p_init(p, rank, shape);
    const int x = p_input(p, dt), g = p_input(p, dt);
    const int mean = p_un(p, MEAN, x);
    const int d = p_bin(p, SUB, x, mean);
    const int var = p_un(p, MEAN, p_bin(p, MUL, d, d));
    const int rstd = p_un(p, RSQRT, p_bin(p, ADD, var, p_const(p, dt, 1e-5)));
    p_output(p, p_bin(p, MUL, p_bin(p, MUL, d, rstd), g), 0);
    p_output(p, mean, 0);
    p_output(p, rstd, 0);
}

static void check_reductions(const char *isa_label) {
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 1, 1031}, {5, 1, 0}, {2, 3, 17}, {300, 1, 257}, {1, 1, 5000}};
    char label[128];
    for (int dt = TT_F32; dt <= TT_F64; ++dt)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
            const int rank = shapes[s][1] == 1 ? 2 : 3;
            int64_t shape[3] = {shapes[s][0], shapes[s][1], shapes[s][2]};
            if (rank == 2) shape[1] = shapes[s][2];
            prog p;
            layout L;
            build_softmax(&p, shape, rank, dt);
            layout_contiguous(&p, &L, -5.0, 5.0);
            snprintf(label, sizeof label, "%s softmax dtype %d shape %lld/%lld/%lld", isa_label, dt,
                     (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2]);
            check_run(label, &p, &L, NULL);
            build_layernorm(&p, shape, rank, dt);
            layout_contiguous(&p, &L, -3.0, 3.0);
            L.lo[1] = 0.5;
            L.hi[1] = 1.5;
            for (int d = 0; d + 1 < rank; ++d) L.in_strides[1][d] = 0; /* gamma: one row */
            L.in_strides[0][rank - 2] = shape[rank - 1] + 1;          /* padded rows */
            if (rank == 3) L.in_strides[0][0] = shape[1] * (shape[2] + 1);
            snprintf(label, sizeof label, "%s layernorm dtype %d shape %lld/%lld/%lld", isa_label, dt,
                     (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2]);
            check_run(label, &p, &L, NULL);
        }
    /* NaN and inf inside rows: max_row propagates NaN, sums see inf */
    const int64_t shape[2] = {40, 37};
    prog p;
    p_init(&p, 2, shape);
    const int x = p_input(&p, TT_F32);
    p_output(&p, p_un(&p, MAXROW, x), 0);
    p_output(&p, p_un(&p, SUM, x), 0);
    p_output(&p, p_bin(&p, SUB, x, p_un(&p, MEAN, x)), 0);
    layout L;
    layout_contiguous(&p, &L, 0.5, 1.0); /* positive: the sums do not cancel */
    L.specials = 1;
    snprintf(label, sizeof label, "%s reductions with NaN/inf", isa_label);
    check_run(label, &p, &L, NULL);
}

/* ACCUMULATE: gradients of broadcast inputs (row vector, column, scalar) and a plain one. */
static void check_accumulate(const char *isa_label) {
    static const int64_t shapes[][2] = {{1, 1}, {3, 17}, {300, 301}, {5, 0}, {0, 3}, {1, 3000}};
    char label[128];
    for (int dt = TT_F32; dt <= TT_F64; ++dt)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
            prog p;
            p_init(&p, 2, shapes[s]);
            const int x = p_input(&p, dt), g = p_input(&p, dt);
            const int prod = p_bin(&p, MUL, x, g);
            p_output(&p, prod, ACC);                       /* row vector (grad of a bias) */
            p_output(&p, prod, ACC);                       /* column */
            p_output(&p, g, ACC);                          /* scalar */
            p_output(&p, p_un(&p, NEG, g), ACC);           /* not broadcast: plain */
            p_output(&p, p_un(&p, SUM, prod), 0);          /* with a reduction in the program */
            layout L;
            layout_contiguous(&p, &L, -1.0, 1.0);
            L.out_strides[0][0] = 0;
            L.out_strides[1][1] = 0;
            L.out_strides[1][0] = 1;
            L.out_strides[2][0] = 0;
            L.out_strides[2][1] = 0;
            snprintf(label, sizeof label, "%s accumulate dtype %d shape %lldx%lld", isa_label, dt,
                     (long long)shapes[s][0], (long long)shapes[s][1]);
            check_run(label, &p, &L, NULL);
        }
}

/* ------------------------------------------------------------ invalid programs */

static tt_status create_words(const int64_t *w, int64_t n, const double *imm, int64_t n_imm) {
    tt_fusion_t *f = NULL;
    const tt_status st = tt_fusion_create(w, n, imm, n_imm, &f);
    if (st == TT_OK) tt_fusion_free(f);
    return st;
}

static void check_invalid(void) {
    /* a valid base: y = x0 + x1 over [3, 4] */
    const int64_t base[] = {0x54544655, 1, 2, 3, 4, 2, 0, 0, 3, 0, 0, 0, -1, -1, 0, 0, 1, -1, -1,
                            20, 0, 0, 1, -1, 1, 2, 0};
    const int64_t nb = (int64_t)(sizeof base / sizeof base[0]);
    const double imm[3] = {0, 0, 0};
    int64_t w[64];
    CHECK_OK(create_words(base, nb, imm, 3));
#define MUTATE(index, value, needle)                                  \
    do {                                                              \
        memcpy(w, base, sizeof base);                                 \
        w[index] = (value);                                           \
        CHECK_FAILS(create_words(w, nb, imm, 3), TT_ERR_INVALID_ARGUMENT, needle); \
    } while (0)
    MUTATE(0, 0x1234, "magic");
    MUTATE(1, 2, "version");
    MUTATE(2, 0, "rank");
    MUTATE(2, 9, "rank");
    MUTATE(3, -1, "negative");
    MUTATE(5, -1, "input count");
    MUTATE(6, 5, "dtype 5");
    MUTATE(8, 0, "node count");
    MUTATE(8, 100, "node count");
    MUTATE(9, 99, "unknown op 99");
    MUTATE(10, 3, "dtype 3");
    MUTATE(11, 2, "input slot 2");
    MUTATE(12, 0, "must be -1");
    MUTATE(15, 1, "but input 1 is float32"); /* node 1 is float64, its input float32 */
    MUTATE(21, 2, "not an earlier node"); /* operand is the node itself: a cycle */
    MUTATE(22, 7, "not an earlier node");
    MUTATE(22, -1, "not an earlier node");
    MUTATE(23, 0, "must be -1");
    MUTATE(24, 0, "output count");
    MUTATE(25, 3, "names node 3");
    MUTATE(26, 2, "unknown flags");
    /* dtype mismatch: input 1 and node 1 float64, added to a float32 node */
    memcpy(w, base, sizeof base);
    w[7] = TT_F64;
    w[15] = TT_F64;
    CHECK_FAILS(create_words(w, nb, imm, 3), TT_ERR_INVALID_ARGUMENT, "dtype mismatch");
    /* lengths */
    CHECK_FAILS(create_words(base, nb - 1, imm, 3), TT_ERR_INVALID_ARGUMENT, "output count");
    CHECK_FAILS(create_words(base, 20, imm, 3), TT_ERR_INVALID_ARGUMENT, "node count");
    memcpy(w, base, sizeof base);
    w[nb] = 0;
    CHECK_FAILS(create_words(w, nb + 1, imm, 3), TT_ERR_INVALID_ARGUMENT, "n_words mismatch");
    CHECK_FAILS(create_words(base, nb, imm, 2), TT_ERR_INVALID_ARGUMENT, "n_imm");
    CHECK_FAILS(create_words(base, 2, imm, 3), TT_ERR_INVALID_ARGUMENT, "needs");
    CHECK_FAILS(create_words(base, -1, imm, 3), TT_ERR_INVALID_ARGUMENT, "negative");
    CHECK_FAILS(create_words(NULL, nb, imm, 3), TT_ERR_NULL_POINTER, "words");
    CHECK_FAILS(create_words(base, nb, NULL, 3), TT_ERR_NULL_POINTER, "imm");
    CHECK_FAILS(tt_fusion_create(base, nb, imm, 3, NULL), TT_ERR_NULL_POINTER, "out");
    /* size overflow of the domain */
    {
        const int64_t ov[] = {0x54544655, 1, 2, (int64_t)1 << 40, (int64_t)1 << 30, 1, 0, 1, 0, 0, 0, -1, -1, 1, 0, 0};
        CHECK_FAILS(create_words(ov, (int64_t)(sizeof ov / sizeof ov[0]), imm, 1), TT_ERR_OVERFLOW, "overflow");
        const int64_t ov0[] = {0x54544655, 1, 3, 0, (int64_t)1 << 40, (int64_t)1 << 30, 1, 0, 1, 0, 0, 0, -1, -1, 1, 0, 0};
        CHECK_FAILS(create_words(ov0, (int64_t)(sizeof ov0 / sizeof ov0[0]), imm, 1), TT_ERR_OVERFLOW, "overflow");
    }
    /* kind mismatch: a reduction of a constant; accumulating a row value */
    {
        prog p;
        const int64_t shape[2] = {2, 3};
        p_init(&p, 2, shape);
        p_output(&p, p_un(&p, SUM, p_const(&p, TT_F32, 1.0)), 0);
        int64_t pw[128];
        int64_t n = p_words(&p, pw);
        CHECK_FAILS(create_words(pw, n, p.imm, p.n), TT_ERR_INVALID_ARGUMENT, "kind mismatch");
        p_init(&p, 2, shape);
        p_output(&p, p_un(&p, SUM, p_input(&p, TT_F32)), ACC);
        n = p_words(&p, pw);
        CHECK_FAILS(create_words(pw, n, p.imm, p.n), TT_ERR_INVALID_ARGUMENT, "kind mismatch");
        /* a reduction of a row op of a reduction */
        p_init(&p, 2, shape);
        const int s = p_un(&p, SUM, p_input(&p, TT_F32));
        p_output(&p, p_un(&p, MEAN, p_un(&p, EXP, s)), 0);
        n = p_words(&p, pw);
        CHECK_FAILS(create_words(pw, n, p.imm, p.n), TT_ERR_INVALID_ARGUMENT, "kind mismatch");
    }
    /* run-time refusals */
    {
        tt_fusion_t *f = NULL;
        CHECK_OK(tt_fusion_create(base, nb, imm, 3, &f));
        float x[12] = {0}, y[12];
        const void *in[2] = {x, x};
        void *out[1] = {y};
        const int64_t s_ok[4] = {4, 1, 4, 1}, s_race[2] = {0, 1}, s_ok_out[2] = {4, 1};
        const int64_t s_over[4] = {INT64_MAX / 2, 1, 4, 1};
        CHECK_FAILS(tt_fusion_run(f, in, s_ok, out, s_race), TT_ERR_INVALID_ARGUMENT, "write race");
        CHECK_FAILS(tt_fusion_run(f, in, s_over, out, s_ok_out), TT_ERR_OVERFLOW, "input 0");
        const void *in_null[2] = {x, NULL};
        CHECK_FAILS(tt_fusion_run(f, in_null, s_ok, out, s_ok_out), TT_ERR_NULL_POINTER, "input 1");
        CHECK_FAILS(tt_fusion_run(f, NULL, s_ok, out, s_ok_out), TT_ERR_NULL_POINTER, "inputs");
        CHECK_FAILS(tt_fusion_run(f, in, s_ok, NULL, s_ok_out), TT_ERR_NULL_POINTER, "outputs");
        int64_t n_in = 0, n_out = 0, rank = 0, need = 0;
        CHECK_OK(tt_fusion_info(f, &n_in, &n_out, &rank));
        CHECK(n_in == 2 && n_out == 1 && rank == 2);
        CHECK_OK(tt_fusion_source(f, NULL, 0, &need));
        CHECK(need > 100);
        char small[8];
        CHECK_FAILS(tt_fusion_source(f, small, 8, &need), TT_ERR_INVALID_ARGUMENT, "cap=8");
        CHECK_FAILS(tt_fusion_source(f, NULL, 8, &need), TT_ERR_NULL_POINTER, "buf");
        CHECK_OK(tt_fusion_free(f));
        CHECK_FAILS(tt_fusion_run(f, in, s_ok, out, s_ok_out), TT_ERR_INVALID_HANDLE, "not a live handle");
        CHECK_FAILS(tt_fusion_free(f), TT_ERR_INVALID_HANDLE, "double free");
        CHECK_FAILS(tt_fusion_info(NULL, &n_in, &n_out, &rank), TT_ERR_NULL_POINTER, "program");
        CHECK_OK(tt_fusion_free(NULL));
    }
#undef MUTATE
}

/* ------------------------------------------------------------ generated C */

static int have_compiler(void) { return system("cc --version > /dev/null 2>&1") == 0; }

/* The generated tt_fused_rows of the last compiled program (NULL for ACCUMULATE programs)
 * and its domain, run on the runtime's pool through tt_fusion_run_rows by run_rows_on_pool,
 * which has tt_fused_kernel's signature so check_run can call either. */
static tt_fused_rows_fn g_rows;
static int64_t g_rows_domain[2];

static int run_rows_on_pool(const void *const *in, const int64_t *in_s, void *const *out,
                            const int64_t *out_s) {
    return tt_fusion_run_rows(g_rows, in, in_s, out, out_s, g_rows_domain[0], g_rows_domain[1]) == TT_OK ? 0 : -1;
}

/* Compile p's source into a shared object and return its kernel (NULL on failure); g_rows
 * gets its row-range function. */
static kernel_fn compile_program(const prog *p, void **handle) {
    tt_fusion_t *f = p_build(p);
    int64_t need = 0;
    CHECK_OK(tt_fusion_source(f, NULL, 0, &need));
    char *src = malloc((size_t)need);
    CHECK_OK(tt_fusion_source(f, src, need, &need));
    CHECK(strlen(src) + 1 == (size_t)need);
    int any_acc = 0;
    for (int o = 0; o < p->n_out; ++o) any_acc |= (int)(p->out[o][1] & ACC);
    /* the file starts no threads; without sums its rows are a function the pool can run */
    CHECK(strstr(src, "omp") == NULL);
    CHECK((strstr(src, "int tt_fused_rows(") != NULL) == !any_acc);
    tt_fusion_free(f);
    char dir[] = "/tmp/tt_fusion_testXXXXXX";
    if (!mkdtemp(dir)) {
        free(src);
        CHECK(0);
        return NULL;
    }
    char c_path[128], so_path[128], cmd[512];
    snprintf(c_path, sizeof c_path, "%s/kernel.c", dir);
    snprintf(so_path, sizeof so_path, "%s/kernel.so", dir);
    FILE *fp = fopen(c_path, "w");
    fputs(src, fp);
    fclose(fp);
    free(src);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -O3 -Wall -Werror -fPIC -shared -o %s %s -lm", so_path,
             c_path);
    const int rc = system(cmd);
    CHECK(rc == 0);
    kernel_fn k = NULL;
    if (rc == 0) {
        *handle = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
        CHECK(*handle != NULL);
        if (*handle) k = (kernel_fn)dlsym(*handle, "tt_fused_kernel");
        CHECK(k != NULL);
        g_rows = NULL;
        if (*handle) {
            *(void **)&g_rows = dlsym(*handle, "tt_fused_rows");
            const int64_t *domain = (const int64_t *)dlsym(*handle, "tt_fused_domain");
            CHECK(domain != NULL);
            CHECK((g_rows != NULL) == !any_acc);
            if (domain) g_rows_domain[0] = domain[0], g_rows_domain[1] = domain[1];
        }
    } else {
        fprintf(stderr, "generated C failed to compile: %s (kept in %s)\n", cmd, dir);
        return NULL;
    }
    unlink(c_path);
    unlink(so_path);
    rmdir(dir);
    return k;
}

static void check_codegen(void) {
    if (!have_compiler()) {
        printf("skip generated C: no cc on PATH\n");
        return;
    }
    char label[128];
    /* pass 0: tt_fused_kernel on the calling thread; pass 1: tt_fused_rows on the pool */
    for (int pool = 0; pool <= 1; ++pool) {
        CHECK_OK(tt_set_num_threads(pool ? 3 : 1));
        prog progs[8];
        layout layouts[8];
        int n = 0;
        const int64_t s2[2] = {67, 1031}, s3[3] = {2, 3, 17};
        /* every unary and binary op in one program, both dtypes */
        for (int dt = TT_F32; dt <= TT_F64; ++dt) {
            prog *p = &progs[n];
            p_init(p, 2, s2);
            const int x = p_input(p, dt), y = p_input(p, dt);
            static const int un[] = {NEG, ABS_, EXP, LOG, SQRT, RSQRT, TANH, SIGMOID, RELU, GELU, ERF, RECIP};
            static const int bi[] = {ADD, SUB, MUL, DIV, MAX, MIN, POW, LT, LE, GT, GE, EQ, NE};
            for (size_t u = 0; u < sizeof un / sizeof un[0]; ++u) p_output(p, p_un(p, un[u], x), 0);
            int t = x;
            for (size_t b = 0; b < sizeof bi / sizeof bi[0]; ++b) t = p_bin(p, ADD, t, p_bin(p, bi[b], x, y));
            t = p_bin(p, ADD, t, p_node(p, POWI, dt, y, -1, -1, 3.0));
            t = p_node(p, WHERE, dt, p_bin(p, GT, x, y), t, p_const(p, dt, -1.0), 0);
            p_output(p, p_node(p, CAST, 1 - dt, t, -1, -1, 0), 0);
            layout_contiguous(p, &layouts[n], 0.1, 3.0);
            layouts[n].specials = 1;
            layouts[n].in_strides[1][0] = 0; /* y: a row vector */
            n++;
        }
        build_softmax(&progs[n], s2, 2, TT_F32);
        layout_contiguous(&progs[n], &layouts[n], -5.0, 5.0);
        layouts[n].in_strides[0][1] = -1; /* reversed rows */
        n++;
        build_layernorm(&progs[n], s3, 3, TT_F64);
        layout_contiguous(&progs[n], &layouts[n], -3.0, 3.0);
        layouts[n].in_strides[1][0] = layouts[n].in_strides[1][1] = 0;
        n++;
        {
            prog *p = &progs[n];
            const int64_t s1[1] = {10007};
            p_init(p, 1, s1);
            const int x = p_input(p, TT_F32), b = p_input(p, TT_F32), sc = p_input(p, TT_F32);
            p_output(p, p_bin(p, MUL, p_bin(p, ADD, x, b), sc), 0);
            layout_contiguous(p, &layouts[n], -2.0, 2.0);
            layouts[n].in_strides[2][0] = 0;
            layouts[n].out_strides[0][0] = 3;
            n++;
        }
        /* ACCUMULATE outputs (row vector, column, scalar, plain) next to a reduction */
        for (int dt = TT_F32; dt <= TT_F64; ++dt) {
            prog *p = &progs[n];
            const int64_t sa[2] = {37, 53};
            p_init(p, 2, sa);
            const int x = p_input(p, dt), g = p_input(p, dt);
            const int prod = p_bin(p, MUL, x, g);
            p_output(p, prod, ACC);
            p_output(p, prod, ACC);
            p_output(p, g, ACC);
            p_output(p, p_un(p, NEG, g), ACC);
            p_output(p, p_un(p, SUM, prod), 0);
            p_output(p, p_un(p, EXP, x), 0);
            layout_contiguous(p, &layouts[n], -1.0, 1.0);
            layouts[n].out_strides[0][0] = 0;
            layouts[n].out_strides[1][1] = 0;
            layouts[n].out_strides[1][0] = 1;
            layouts[n].out_strides[2][0] = 0;
            layouts[n].out_strides[2][1] = 0;
            n++;
        }
        for (int k = 0; k < n; ++k) {
            void *h = NULL;
            kernel_fn kern = compile_program(&progs[k], &h);
            if (!kern) continue;
            if (pool && g_rows) kern = run_rows_on_pool;
            snprintf(label, sizeof label, "generated C %d (%s)", k, pool && g_rows ? "rows on the pool" : "one thread");
            const uint64_t saved = *tt_test_rng_state();
            check_run(label, &progs[k], &layouts[k], kern);
            *tt_test_rng_state() = saved; /* the interpreter on the same inputs */
            snprintf(label, sizeof label, "interpreter for generated C %d", k);
            check_run(label, &progs[k], &layouts[k], NULL);
            dlclose(h);
        }
    }
}

/* Regression: a float32 -> float64 cast must not reuse its operand's scratch slot (the
 * wider elements would overwrite operand elements not yet read): x.astype(f32).astype(f64) * x
 * on a 3 x 3 float64 domain, equal to the double formula at every element. */
static void check_cast_round_trip(void) {
    const int64_t w[] = {0x54544655, 1, 2, 3, 3, 1, TT_F64, 4,
                         0, TT_F64, 0, -1, -1,  2, TT_F32, 0, -1, -1,  2, TT_F64, 1, -1, -1,
                         22, TT_F64, 2, 0, -1,  1, 3, 0};
    const double imm[4] = {0, 0, 0, 0};
    double x[9], y[9];
    for (int i = 0; i < 9; ++i) x[i] = 0.1 * (i + 1) - 0.37;
    tt_fusion_t *f = NULL;
    CHECK_OK(tt_fusion_create(w, (int64_t)(sizeof w / sizeof w[0]), imm, 4, &f));
    const void *ins[1] = {x};
    void *outs[1] = {y};
    const int64_t in_strides[2] = {3, 1}, out_strides[2] = {3, 1};
    CHECK_OK(tt_fusion_run(f, ins, in_strides, outs, out_strides));
    for (int i = 0; i < 9; ++i) CHECK(y[i] == (double)(float)x[i] * x[i]);
    CHECK_OK(tt_fusion_free(f));
}

/* The tile interpreter under one ISA and thread count: every op, broadcasting, reductions,
 * ACCUMULATE, casts, and the path (which names the ISA). */
static void check_interpreter(tt_isa isa, int threads, const char *label) {
    (void)threads;
    check_every_op(label);
    check_broadcast(label);
    check_reductions(label);
    check_accumulate(label);
    check_cast_round_trip();
    char want[64];
    snprintf(want, sizeof want, "fusion:interp:%s", tt_isa_name(isa));
    CHECK(strcmp(tt_last_kernel_path(), want) == 0);
}

int main(void) {
    check_invalid();
    tt_test_each_isa_and_threads("fusion", 2, check_interpreter);
    check_codegen();
    TT_TEST_MAIN_END;
}
