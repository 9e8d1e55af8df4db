/*
 * tt_test.h -- the smallest test harness that does the job, shared by every C test:
 *   - CHECK(cond) prints the failing expression with file and line and counts it;
 *     CHECK_OK / CHECK_FAILS check a tt_status (and the message); TT_TEST_MAIN_END returns
 *     the count, so ctest sees failure as a non-zero exit.
 *   - random inputs: one xorshift64 stream per test program (tt_test_seed, tt_test_uniform,
 *     tt_test_filled), the same numbers on every run and machine; *tt_test_rng_state()
 *     saved and restored replays a stretch of it.
 *   - tt_test_each_isa_and_threads: runs a test body under every ISA this build and CPU
 *     run, on 1..N threads, and restores the ISA and thread count afterwards.
 * Assumes: one test program per C file (the state here is per translation unit); C99.
 */
#ifndef TT_TEST_H
#define TT_TEST_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tinytorch/tinytorch.h>

static int tt_test_failures = 0;

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            tt_test_failures++;                                                  \
        }                                                                        \
    } while (0)

/* The call must fail with `status`, and leave a message mentioning `needle`. */
#define CHECK_FAILS(call, status, needle)                                                   \
    do {                                                                                    \
        tt_clear_error();                                                                   \
        tt_status st_ = (call);                                                             \
        if (st_ != (status) || strstr(tt_last_error(), (needle)) == NULL) {                 \
            fprintf(stderr, "%s:%d: expected %s with '%s' from %s, got %s: '%s'\n", __FILE__, \
                    __LINE__, tt_status_string(status), needle, #call, tt_status_string(st_), \
                    tt_last_error());                                                       \
            tt_test_failures++;                                                             \
        }                                                                                   \
    } while (0)

#define CHECK_OK(call)                                                                        \
    do {                                                                                      \
        tt_status st_ = (call);                                                               \
        if (st_ != TT_OK) {                                                                   \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #call,          \
                    tt_status_string(st_), tt_last_error());                                  \
            tt_test_failures++;                                                               \
        }                                                                                     \
    } while (0)

/* ---- random inputs ------------------------------------------------------------------ */

static inline uint64_t *tt_test_rng_state(void) {
    static uint64_t state = 0x9E3779B97F4A7C15ull;
    return &state;
}

/* Restart the stream (a program that never calls it starts from 0x9E3779B97F4A7C15).
 * xorshift never leaves 0, so 0 stands for the default seed. */
static inline void tt_test_seed(uint64_t seed) {
    *tt_test_rng_state() = seed ? seed : 0x9E3779B97F4A7C15ull;
}

/* The next 64 bits of the stream (xorshift64, shifts 13, 7, 17). */
static inline uint64_t tt_test_rand_u64(void) {
    uint64_t *s = tt_test_rng_state();
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform in [lo, hi): the top 24 bits of the stream, so every value is exact in float. */
static inline float tt_test_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((tt_test_rand_u64() >> 40) * (1.0 / 16777216.0));
}

/* Uniform in [lo, hi) in double precision: the top 53 bits of the stream. */
static inline double tt_test_uniform_f64(double lo, double hi) {
    return lo + (hi - lo) * (double)(tt_test_rand_u64() >> 11) * (1.0 / 9007199254740992.0);
}

static inline void tt_test_fill(float *p, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; ++i) p[i] = tt_test_uniform(lo, hi);
}

/* A malloc'd array of n (at least one, so n = 0 still gives a valid pointer) uniform
 * values in [lo, hi); the caller frees it. */
static inline float *tt_test_filled(int64_t n, float lo, float hi) {
    float *p = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!p) {
        fprintf(stderr, "tt_test_filled: out of memory for %lld floats\n", (long long)n);
        exit(2);
    }
    tt_test_fill(p, n, lo, hi);
    return p;
}

/* ---- every ISA x thread count ------------------------------------------------------------ */

/* label is "<prefix>:<isa>/<threads>t", for messages. */
typedef void (*tt_test_body)(tt_isa isa, int threads, const char *label);

/* Runs body once per ISA (scalar, avx2, avx512, neon) that is compiled in and supported by
 * this CPU, and per thread count 1..max_threads, with both set; says which ISAs it skips
 * and why; restores the active ISA and the thread count afterwards. */
static inline void tt_test_each_isa_and_threads(const char *prefix, int max_threads,
                                                tt_test_body body) {
    static const tt_isa isas[] = {TT_ISA_SCALAR, TT_ISA_AVX2, TT_ISA_AVX512, TT_ISA_NEON};
    const tt_isa original = tt_isa_active();
    const int original_threads = tt_get_num_threads();
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; ++i) {
        if (!tt_isa_compiled(isas[i]) || !tt_isa_supported(isas[i])) {
            printf("%s: skip %s: not %s\n", prefix, tt_isa_name(isas[i]),
                   tt_isa_compiled(isas[i]) ? "supported by this CPU" : "compiled");
            continue;
        }
        CHECK_OK(tt_set_isa(isas[i]));
        for (int threads = 1; threads <= max_threads; ++threads) {
            CHECK_OK(tt_set_num_threads(threads));
            char label[96];
            snprintf(label, sizeof label, "%s:%s/%dt", prefix, tt_isa_name(isas[i]), threads);
            const int failures_before = tt_test_failures;
            body(isas[i], threads, label);
            printf("%s %s\n", label, tt_test_failures == failures_before ? "ok" : "FAILED");
        }
    }
    CHECK_OK(tt_set_isa(original));
    CHECK_OK(tt_set_num_threads(original_threads));
}

#define TT_TEST_MAIN_END                                                        \
    do {                                                                        \
        if (tt_test_failures) fprintf(stderr, "%d check(s) failed\n", tt_test_failures); \
        else printf("all checks passed\n");                                     \
        return tt_test_failures ? 1 : 0;                                        \
    } while (0)

#endif
