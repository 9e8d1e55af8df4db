/*
 * fuzz_gelu.c -- libFuzzer harness for the fused bias + GELU kernels
 * (tt_bias_gelu_forward / _backward and their _reference versions) and the float16
 * conversions (tt_f16_to_f32, tt_f32_to_f16).
 *
 * Design. One input is one call. The input picks the function, the ISA and the thread
 * count (1..3), the size (rows 0..16 x cols 0..40, or a "big" class of >= 2^16 elements so
 * the rows are split across threads), which optional buffers are passed (bias, grad_bias),
 * in-place use (y == x; grad_x == grad_y or grad_x == x), the value source (raw float / half bits taken
 * from the input, so the fuzzer can place NaN, inf, denormals and FLT_MAX; or random values
 * of several ranges), and optionally one mutation that makes the call invalid (negative
 * rows/cols, rows * cols overflowing int64 bytes, NULL with elements, a partial overlap of
 * an output with an input), or one that is valid but has no elements and a huge other
 * dimension (rows = 2^62, cols = 0 must return at once).
 *
 * Oracles, computed here in float64 from the header's formula (u = x + bias rounded to
 * float, y = u sigmoid(z), z = 2 sqrt(2/pi) (u + 0.044715 u^3), dy/du = s + u z' s (1 - s)):
 *   - fast kernels: |got - want| <= 1e-6 (2 + |z|) * (size of the terms) + 1e-37, the float
 *     conditioning bound of tests/c/test_gelu.c with some slack; grad_bias within the sum of
 *     the element bounds plus float accumulation over chunks of 64 rows;
 *   - reference kernels (float64 inside): correctly rounded up to 1 ulp, grad_bias is the
 *     float64 sum rounded;
 *   - edge rules: NaN in gives NaN out; u = +inf gives y = inf, dy/du = 1; u = -inf gives
 *     y = 0, dy/du = 0; grad_bias is overwritten (NaN beforehand), zeros when rows == 0;
 *   - conversions: bit-exact against this file's converter (round to nearest even,
 *     overflow to inf, subnormals exact); NaN must stay NaN (payload not checked).
 * Inputs must not change (except in place), and buffers are exactly sized for ASan.
 *
 * Known-finding tags (TT_FUZZ_KNOWN, triage only): empty_grad_bias_overlap (rows == 0 with
 * grad_bias overlapping bias is accepted, and bias is zeroed).
 */
#include <float.h>
#include <math.h>

#include "fuzz_util.h"

enum { G_FWD, G_BWD, G_FWD_REF, G_BWD_REF, G_F16_TO_F32, G_F32_TO_F16, G_COUNT };

typedef tt_status (*fwd_fn)(const float *, const float *, float *, int64_t, int64_t);
typedef tt_status (*bwd_fn)(const float *, const float *, const float *, float *, float *, int64_t,
                            int64_t);

/* ---- the float64 oracle ---- */

typedef struct {
    double y, dy, abs_z, dy_terms, u_dz; /* u_dz = |u z'|: scales the error of a denormal e */
} gelu_t;

static gelu_t gelu(double u) {
    const double k = 2.0 * 0.79788456080286535588;
    const double z = k * (u + 0.044715 * u * u * u);
    const double e = exp(-fabs(z));
    const double s = z >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
    const double u_dz = u * k * (1.0 + 3.0 * 0.044715 * u * u);
    const double slope = (e == 0.0) ? 0.0 : u_dz * (e / ((1.0 + e) * (1.0 + e)));
    gelu_t g = {u * s, s + slope, fabs(z), fabs(s) + fabs(slope), fabs(u_dz)};
    if (isinf(u)) g = u > 0 ? (gelu_t){INFINITY, 1.0, 0.0, 1.0, 0.0} : (gelu_t){0.0, 0.0, 0.0, 0.0, 0.0};
    return g;
}

/* got (a float result) against want (float64): NaN must match NaN, infinities exactly (a
 * finite want beyond FLT_MAX may round to inf), else |got - want| <= tol. */
static int close_enough(float got, double want, double tol) {
    if (isnan(want)) return isnan(got);
    if (isinf(got) && !isinf(want)) return fabs(want) >= FLT_MAX * (1 - 1e-6) && (got > 0) == (want > 0);
    if (isinf(want)) return got == want;
    return fabs((double)got - want) <= tol;
}

/* ---- values ---- */

static float value(fz_in *in, fz_rng *r, int mode) {
    static const float specials[] = {0.0f, -0.0f, 1e30f, -1e30f, FLT_MAX, -FLT_MAX, 1e-40f, -1e-40f,
                                     -5.0f, -9.5f, -10.5f, -12.0f, -60.0f, 3.0f, -0.7518f, 0.5f,
                                     INFINITY, -INFINITY, NAN, 1e10f, -1e10f, 88.0f, -88.0f};
    switch (mode) {
        case 0: /* raw bits from the input while it lasts */
            if (in->n >= 4) {
                const uint32_t bits = fz_u32(in);
                float f;
                memcpy(&f, &bits, 4);
                return f;
            }
            return (float)(8 * fz_unit(r));
        case 1: return (float)(8 * fz_unit(r));
        case 2: return (fz_next(r) % 4) ? (float)(12 * fz_unit(r)) : specials[fz_next(r) % (sizeof specials / sizeof specials[0])];
        default: return (float)(fz_unit(r) * ldexp(1.0, (int)(fz_next(r) % 61) - 30));
    }
}

static float *alloc_floats(int64_t n) { return fz_alloc((size_t)n * sizeof(float)); }

/* ---- GELU ---- */

static void describe(int fn, int64_t rows, int64_t cols, int bias, int gb, int inplace) {
    static const char *const names[] = {"tt_bias_gelu_forward", "tt_bias_gelu_backward",
                                        "tt_bias_gelu_forward_reference", "tt_bias_gelu_backward_reference"};
    fprintf(stderr, "%s rows=%lld cols=%lld bias=%s grad_bias=%s in_place=%d isa=%s threads=%d\n",
            names[fn], (long long)rows, (long long)cols, bias ? "yes" : "NULL", gb ? "yes" : "NULL",
            inplace, tt_isa_name(tt_isa_active()), tt_get_num_threads());
}

/* Invalid (or empty-but-huge) variants of a GELU call. The buffers of a valid 2 x 3 call
 * live in one arena: x at 0, grad_y at 16, y / grad_x at 32, bias at 48, grad_bias at 56. */
static void gelu_bad_call(int fn, fz_in *in) {
    const int backward = fn == G_BWD || fn == G_BWD_REF;
    const fwd_fn fwd = fn == G_FWD ? tt_bias_gelu_forward : tt_bias_gelu_forward_reference;
    const bwd_fn bwd = fn == G_BWD ? tt_bias_gelu_backward : tt_bias_gelu_backward_reference;
    float *arena = alloc_floats(64);
    for (int i = 0; i < 64; ++i) arena[i] = (float)i;
    static const int64_t negative[] = {-1, -3, INT64_MIN};
    static const int64_t huge[] = {(int64_t)1 << 62, INT64_MAX, (int64_t)1 << 40};
    int64_t rows = 2, cols = 3;
    const float *x = arena, *gy = arena + 16, *bias = (fz_u8(in) & 1) ? arena + 48 : NULL;
    float *out = arena + 32, *gb = backward && (fz_u8(in) & 1) ? arena + 56 : NULL;
    const int k = fz_u8(in) % 5;
    int valid = 0;
    switch (fz_u8(in) % 12) {
        case 0: rows = FZ_PICK(in, negative); break;
        case 1: cols = FZ_PICK(in, negative); break;
        case 2: rows = (int64_t)1 << 31, cols = ((int64_t)1 << 31) + fz_u8(in); break; /* bytes overflow */
        case 3: rows = FZ_PICK(in, huge), cols = FZ_PICK(in, huge); break;             /* count overflows */
        case 4: x = NULL; break;
        case 5: out = NULL; break;
        case 6: if (backward) gy = NULL; else out = arena + 1 + k; break; /* partly over x */
        case 7: out = (backward && (k & 1) ? arena + 16 : arena) + 1 + k; break; /* partly over grad_y or x */
        case 8: bias = arena + 48, out = arena + 43 + k; break; /* y / grad_x over bias */
        case 9: { /* grad_bias over one of x, bias, grad_y, grad_x */
            if (!backward) { out = arena + 47 + k % 3, bias = arena + 48; break; }
            static const int at[] = {0, 48, 16, 32};
            const int w = fz_u8(in) % 4;
            if (w == 1) bias = arena + 48;
            gb = arena + at[w] + k % 3;
            break;
        }
        case 10: /* no elements, but grad_bias (cols entries, written) still over bias */
            if (!backward || fz_known("empty_grad_bias_overlap")) { valid = 1, rows = 0, gb = NULL; break; }
            rows = 0, bias = arena + 48, gb = arena + 48 + k % 3;
            break;
        default: /* no elements, a huge other dimension: valid, and must return at once */
            valid = 1;
            if (fz_u8(in) & 1) rows = FZ_PICK(in, huge), cols = 0;
            else rows = 0, cols = FZ_PICK(in, huge), bias = NULL;
            x = gy = out = NULL;
            gb = NULL;
    }
    float *const pgb = gb;
    tt_clear_error();
    const tt_status st = backward ? bwd(x, bias, gy, out, pgb, rows, cols) : fwd(x, bias, out, rows, cols);
    const int as_expected = valid ? st == TT_OK : (st != TT_OK && tt_last_error()[0]);
    if (!as_expected) {
        fprintf(stderr, "%s(x=%+td, bias=%+td, %s=%+td, grad_bias=%+td floats from the arena, rows=%lld, cols=%lld)\n",
                backward ? "bias_gelu_backward" : "bias_gelu_forward", x ? x - arena : -1,
                bias ? bias - arena : -1, backward ? "grad_y=.., grad_x" : "y", out ? out - arena : -1,
                pgb ? pgb - arena : -1, (long long)rows, (long long)cols);
        describe(fn, rows, cols, bias != NULL, pgb != NULL, 0);
    }
    if (valid) FZ_CHECK(st == TT_OK, "an empty call returned %s", tt_status_string(st));
    else FZ_CHECK(st != TT_OK && tt_last_error()[0], "an invalid call returned %s", tt_status_string(st));
    free(arena);
}

static void gelu_call(int fn, fz_in *in, fz_rng *r) {
    const int backward = fn == G_BWD || fn == G_BWD_REF, reference = fn >= G_FWD_REF;
    int64_t rows = fz_u8(in) % 17, cols = fz_u8(in) % 41;
    const uint8_t flags = fz_u8(in), mode = fz_u8(in) % 4;
    if ((flags & 0xc0) == 0xc0) rows = 200 + fz_u8(in) % 100, cols = 330 + fz_u8(in) % 40; /* threads */
    const int with_bias = flags & 1, with_gb = flags & 2;
    /* in place: 1 = y over x (forward) or grad_x over grad_y, 2 = grad_x over x (backward) */
    int inplace = (flags >> 2) & 3;
    if (inplace == 3) inplace = 0;
    if (inplace == 2 && !backward) inplace = 1;
    const int64_t n = rows * cols;
    float *x = alloc_floats(n), *gy = alloc_floats(n), *bias = alloc_floats(cols);
    float *out = inplace ? NULL : alloc_floats(n), *gb = alloc_floats(cols);
    for (int64_t i = 0; i < cols; ++i) bias[i] = value(in, r, mode), gb[i] = NAN;
    for (int64_t i = 0; i < n; ++i) x[i] = value(in, r, mode), gy[i] = value(in, r, mode == 0 ? 0 : 1);
    float *x0 = alloc_floats(n), *gy0 = alloc_floats(n), *bias0 = alloc_floats(cols);
    memcpy(x0, x, (size_t)n * 4), memcpy(gy0, gy, (size_t)n * 4), memcpy(bias0, bias, (size_t)cols * 4);
    const float *pb = with_bias ? bias : NULL;

    float *res = inplace == 0 ? out : inplace == 1 && backward ? gy : x;
    tt_clear_error();
    tt_status st;
    if (backward) {
        const bwd_fn f = reference ? tt_bias_gelu_backward_reference : tt_bias_gelu_backward;
        st = f(x, pb, gy, res, with_gb ? gb : NULL, rows, cols);
    } else {
        const fwd_fn f = reference ? tt_bias_gelu_forward_reference : tt_bias_gelu_forward;
        st = f(x, pb, res, rows, cols);
    }
    if (st != TT_OK) describe(fn, rows, cols, with_bias, with_gb, inplace);
    FZ_CHECK(st == TT_OK, "a valid call returned %s", tt_status_string(st));

    /* Fast kernels: float conditioning, plus a few denormal ulps of e = exp(-|z|) (2^-149
     * absolute) scaled by what multiplies e. Reference: float64 inside, rounded once. */
    const double rel = reference ? 1e-12 : 1e-6;
    for (int64_t j = 0; j < cols; ++j) {
        double sum = 0, sum_abs = 0, sum_bound = 0;
        int judged = 1;
        for (int64_t i = 0; i < rows; ++i) {
            const float u = with_bias ? x0[i * cols + j] + bias0[j] : x0[i * cols + j];
            const double gyv = gy0[i * cols + j];
            const gelu_t g = gelu((double)u);
            const float got = res[i * cols + j];
            double want, tol;
            if (backward) {
                want = gyv * g.dy;
                tol = rel * (2 + g.abs_z) * fabs(gyv) * g.dy_terms;
                if (!reference) tol += fabs(gyv) * (1 + g.u_dz) * 0x1p-145;
            } else {
                want = g.y;
                tol = rel * (2 + g.abs_z) * fabs(want);
                if (!reference) tol += fabs((double)u) * 0x1p-145;
            }
            if (isnan(u)) want = NAN;
            tol += reference ? 0x1p-23 * fabs(want) + 0x1p-149 : 1e-37;
            if (backward && !reference && isinf(gyv) && fabs(g.dy) < 1e-30) {
                /* float dy/du may underflow to 0 (inf * 0 = NaN) or not (inf): no claim */
                FZ_CHECK(!isfinite(got), "grad_x = %.9g for grad_y = inf", got);
                judged = 0;
                continue;
            }
            if (!close_enough(got, want, tol)) {
                describe(fn, rows, cols, with_bias, with_gb, inplace);
                FZ_CHECK(0, "element [%lld][%lld]: u = %.9g%s%.9g: got %.9g, want %.9g (tolerance %.3g)",
                         (long long)i, (long long)j, u, backward ? ", grad_y = " : "",
                         backward ? gy0[i * cols + j] : 0.0f, got, want, tol);
            }
            sum += want, sum_abs += fabs(want), sum_bound += tol;
        }
        if (!backward || !with_gb) continue;
        double tol = sum_bound + 1e-30;
        tol += reference ? 0x1p-23 * fabs(sum) : ((rows < 64 ? rows : 64) + 4) * 0x1p-23 * sum_abs;
        /* float chunk sums may overflow where the float64 total does not: no claim there */
        judged = reference || (judged && !(sum_abs > FLT_MAX / 4));
        if (judged && !close_enough(gb[j], sum, tol)) {
            describe(fn, rows, cols, with_bias, with_gb, inplace);
            FZ_CHECK(0, "grad_bias[%lld] = %.9g, want %.9g (tolerance %.3g)", (long long)j, gb[j], sum, tol);
        }
    }
    FZ_CHECK(memcmp(bias, bias0, (size_t)cols * 4) == 0, "bias was written");
    if (res != x) FZ_CHECK(memcmp(x, x0, (size_t)n * 4) == 0, "x was written");
    if (res != gy) FZ_CHECK(memcmp(gy, gy0, (size_t)n * 4) == 0, "grad_y was written");
    free(x), free(gy), free(bias), free(out), free(gb), free(x0), free(gy0), free(bias0);
}

/* ---- float16 conversions ---- */

static void convert_call(int fn, fz_in *in, fz_rng *r) {
    const uint8_t flags = fz_u8(in);
    int64_t n = fz_u8(in) % 70;
    if ((flags & 0x30) == 0x30) n = 64 + fz_u16(in) % 2048;
    if ((flags & 0x0f) == 0x0f) { /* bad arguments, and the empty call */
        const int64_t neg = -1 - (int64_t)(fz_u8(in) % 3);
        float f = 1.0f;
        uint16_t h = 0;
        if (fn == G_F16_TO_F32) {
            FZ_FAILS(tt_f16_to_f32(&h, &f, neg));
            FZ_FAILS(tt_f16_to_f32(NULL, &f, 1));
            FZ_FAILS(tt_f16_to_f32(&h, NULL, 1));
            FZ_OK(tt_f16_to_f32(NULL, NULL, 0));
        } else {
            FZ_FAILS(tt_f32_to_f16(&f, &h, neg));
            FZ_FAILS(tt_f32_to_f16(NULL, &h, 1));
            FZ_FAILS(tt_f32_to_f16(&f, NULL, 1));
            FZ_OK(tt_f32_to_f16(NULL, NULL, 0));
        }
        return;
    }
    if (fn == G_F16_TO_F32) {
        uint16_t *src = fz_alloc((size_t)n * 2);
        float *dst = alloc_floats(n);
        for (int64_t i = 0; i < n; ++i) src[i] = in->n >= 2 ? fz_u16(in) : (uint16_t)fz_next(r);
        FZ_OK(tt_f16_to_f32(src, dst, n));
        for (int64_t i = 0; i < n; ++i) {
            const double want = fz_half_value(src[i]);
            const int ok = isnan(want) ? isnan(dst[i]) : ((double)dst[i] == want && !signbit(dst[i]) == !signbit(want));
            FZ_CHECK(ok, "tt_f16_to_f32(0x%04x) = %.9g (element %lld of %lld, isa %s), want %.9g", src[i],
                     dst[i], (long long)i, (long long)n, tt_isa_name(tt_isa_active()), want);
        }
        free(src), free(dst);
    } else {
        float *src = alloc_floats(n);
        uint16_t *dst = fz_alloc((size_t)n * 2);
        for (int64_t i = 0; i < n; ++i) {
            const uint32_t bits = in->n >= 4 ? fz_u32(in) : (uint32_t)fz_next(r);
            memcpy(&src[i], &bits, 4);
        }
        FZ_OK(tt_f32_to_f16(src, dst, n));
        for (int64_t i = 0; i < n; ++i) {
            const uint16_t want = fz_half_from_float(src[i]);
            const int ok = isnan(src[i]) ? ((dst[i] & 0x7c00) == 0x7c00 && (dst[i] & 0x3ff)) : dst[i] == want;
            uint32_t bits;
            memcpy(&bits, &src[i], 4);
            FZ_CHECK(ok, "tt_f32_to_f16(%.9g = 0x%08x) = 0x%04x (element %lld of %lld, isa %s), want 0x%04x",
                     src[i], bits, dst[i], (long long)i, (long long)n, tt_isa_name(tt_isa_active()), want);
        }
        free(src), free(dst);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fz_find_isas();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size};
    const int fn = fz_u8(&in) % G_COUNT;
    fz_set_isa_and_threads(&in);
    fz_rng rng;
    fz_seed(&rng, fz_u64(&in));
    if (fn >= G_F16_TO_F32) convert_call(fn, &in, &rng);
    else if (fz_u8(&in) % 8 == 7) gelu_bad_call(fn, &in);
    else gelu_call(fn, &in, &rng);
    return 0;
}
