/*
 * fuzz_util.h -- what the libFuzzer harnesses in this folder share.
 *
 *   fz_in        the fuzz input read front to back as bytes; once it runs out every read
 *                returns 0, so any input (even an empty one) decodes to a valid scenario.
 *   fz_rng       xorshift64* seeded from the input, for bulk data (matrix values): the
 *                fuzzer steers the shapes and flags; the values only need variety.
 *   FZ_CHECK     a failed expectation prints what was wrong and calls __builtin_trap(), so
 *                libFuzzer records the input as a crash.
 *   FZ_OK / FZ_FAILS   a call that must succeed / must return a non-OK status with a
 *                non-empty tt_last_error().
 *   fz_find_isas / fz_set_isa_and_threads   the ISA and thread count of one input.
 *   fz_known(tag) 1 if the comma-separated list in TT_FUZZ_KNOWN names tag: a reported
 *                finding whose fix is pending, which the harness then tolerates so that the
 *                fuzzer can look past it (triage only; CI never sets it; each tag is named
 *                in the design comment of its harness).
 */
#ifndef TT_FUZZ_UTIL_H
#define TT_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tinytorch/tinytorch.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_in;

static inline uint8_t fz_u8(fz_in *in) {
    if (in->n == 0) return 0;
    in->n--;
    return *in->p++;
}
static inline uint16_t fz_u16(fz_in *in) { return (uint16_t)(fz_u8(in) | (fz_u8(in) << 8)); }
static inline uint32_t fz_u32(fz_in *in) { return (uint32_t)fz_u16(in) | ((uint32_t)fz_u16(in) << 16); }
static inline uint64_t fz_u64(fz_in *in) { return (uint64_t)fz_u32(in) | ((uint64_t)fz_u32(in) << 32); }

/* Pick one of n entries of a table with one byte. */
#define FZ_PICK(in, table) ((table)[fz_u8(in) % (sizeof(table) / sizeof((table)[0]))])

typedef struct {
    uint64_t s;
} fz_rng;

static inline uint64_t fz_next(fz_rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}
static inline void fz_seed(fz_rng *r, uint64_t seed) { r->s = seed ^ 0x9E3779B97F4A7C15ull; if (!r->s) r->s = 1; }
/* Uniform in [-1, 1), a multiple of 2^-23. */
static inline double fz_unit(fz_rng *r) { return (double)(int64_t)(fz_next(r) >> 40) / 8388608.0 - 1.0; }

static inline int fz_known(const char *tag) {
    const char *list = getenv("TT_FUZZ_KNOWN");
    const size_t n = strlen(tag);
    for (const char *p = list; p && (p = strstr(p, tag)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
    return 0;
}

#define FZ_CHECK(cond, ...)                                                                  \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "\n==fuzz== %s:%d: check failed: %s\n==fuzz== ", __FILE__,       \
                    __LINE__, #cond);                                                        \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fprintf(stderr, "\n==fuzz== last error: '%s'\n", tt_last_error());               \
            __builtin_trap();                                                                \
        }                                                                                    \
    } while (0)

#define FZ_OK(call)                                                                          \
    do {                                                                                     \
        tt_clear_error();                                                                    \
        tt_status fz_st_ = (call);                                                           \
        FZ_CHECK(fz_st_ == TT_OK, "%s returned %s", #call, tt_status_string(fz_st_));         \
    } while (0)

/* Evaluates to the status, after checking it is an error with a message. */
static inline tt_status fz_expect_failure(tt_status st, const char *what, const char *file, int line) {
    if (st == TT_OK || tt_last_error()[0] == '\0') {
        fprintf(stderr, "\n==fuzz== %s:%d: %s must fail with a message, got %s, message '%s'\n",
                file, line, what, tt_status_string(st), tt_last_error());
        __builtin_trap();
    }
    return st;
}
#define FZ_FAILS(call) (tt_clear_error(), fz_expect_failure((call), #call, __FILE__, __LINE__))

/* The ISAs this build has and this CPU runs: fz_find_isas() fills them once (from
 * LLVMFuzzerInitialize); fz_set_isa_and_threads() spends two input bytes on one of them
 * and on 1..3 threads, and returns the ISA. */
static int fz_isas[4], fz_nisas;

static inline void fz_find_isas(void) {
    for (int i = TT_ISA_SCALAR; i <= TT_ISA_NEON; ++i)
        if (tt_isa_compiled(i) && tt_isa_supported(i)) fz_isas[fz_nisas++] = i;
}

static inline int fz_set_isa_and_threads(fz_in *in) {
    const int isa = fz_isas[fz_u8(in) % fz_nisas];
    FZ_OK(tt_set_isa(isa));
    FZ_OK(tt_set_num_threads(1 + fz_u8(in) % 3));
    return isa;
}

/* malloc of exactly `bytes` (ASan reports any access past them; malloc(0) gives a
 * non-NULL pointer with nothing addressable). */
static inline void *fz_alloc(size_t bytes) {
    void *p = malloc(bytes);
    if (!p && bytes) __builtin_trap();
    return p;
}

/* ---- IEEE binary16, exactly, without the library's converters ---- */

/* Value of a binary16 (NaN for NaN). */
static inline double fz_half_value(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31) v = m ? __builtin_nan("") : __builtin_inf();
    else if (e == 0) v = m * 0x1p-24;
    else v = (1024 + m) * __builtin_ldexp(1.0, e - 25);
    return (h & 0x8000) ? -v : v;
}

/* binary16 nearest to the float f (ties to even), NaN -> a NaN, overflow -> inf. Works
 * in double: f has 24 significant bits, so f / quantum is exact and rint() (round to
 * nearest even, the default mode) does the rounding. */
static inline uint16_t fz_half_from_float(float f) {
    const uint16_t sign = __builtin_signbit(f) ? 0x8000 : 0;
    const double a = __builtin_fabs((double)f);
    if (a != a) return 0x7e00 | sign;
    if (a >= 65520.0) return 0x7c00 | sign; /* 65504 + half an ulp (2^4) rounds up to inf */
    int e;
    (void)__builtin_frexp(a, &e); /* a = frac * 2^e, frac in [0.5, 1) */
    int exp = e - 1;              /* a in [2^exp, 2^(exp+1)) */
    if (exp < -14) exp = -14;     /* subnormals share the quantum 2^-24 */
    const double q = __builtin_ldexp(1.0, exp - 10);
    const double n = __builtin_rint(a / q); /* 0 .. 2048 */
    /* n * q as a binary16: n < 1024 only for subnormals; n == 2048 carried into the next binade */
    const double v = n * q;
    if (v == 0) return sign;
    if (exp == -14 && n < 1024) return sign | (uint16_t)n;
    int ve;
    (void)__builtin_frexp(v, &ve);
    const int be = ve - 1 + 15; /* biased exponent */
    const int mant = (int)(v / __builtin_ldexp(1.0, ve - 1 - 10)) - 1024;
    return sign | (uint16_t)(be << 10) | (uint16_t)mant;
}

#endif /* TT_FUZZ_UTIL_H */
