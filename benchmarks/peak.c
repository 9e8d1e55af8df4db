/*
 * peak.c -- the machine's fp32 FMA ceiling, measured by a register-only loop.
 *
 * Compiled at run time by benchmarks/bench_gemm.py (cc -O2 -mavx2 -mfma [-mavx512f]) and
 * run on the benchmark's thread count: each thread runs 12 independent FMA chains in
 * registers (enough to cover latency x pipes on current x86 cores), so the loop is
 * bound only by the FMA units. Prints one line per vector width:
 *   peak <isa> <threads> <GFLOP/s>
 * Width is chosen with __builtin_cpu_supports, so the program runs on any x86-64 CPU.
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <pthread.h>

#define CHAINS 12
static long iterations = 20000000;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Twelve named accumulators (not an array) so every chain stays in a register at -O2. */
#define TT_FMA12(T, FMA)                                                                   \
    do {                                                                                   \
        a0 = FMA(a0, m, c); a1 = FMA(a1, m, c); a2 = FMA(a2, m, c); a3 = FMA(a3, m, c);    \
        a4 = FMA(a4, m, c); a5 = FMA(a5, m, c); a6 = FMA(a6, m, c); a7 = FMA(a7, m, c);    \
        a8 = FMA(a8, m, c); a9 = FMA(a9, m, c); a10 = FMA(a10, m, c); a11 = FMA(a11, m, c); \
    } while (0)

__attribute__((target("avx2,fma"))) static void *fma_ymm(void *out) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    /* Distinct starting values: identical chains would be merged by the compiler. */
    __m256 a0 = _mm256_set1_ps(0.1f), a1 = _mm256_set1_ps(0.2f), a2 = _mm256_set1_ps(0.3f),
           a3 = _mm256_set1_ps(0.4f), a4 = _mm256_set1_ps(0.5f), a5 = _mm256_set1_ps(0.6f),
           a6 = _mm256_set1_ps(0.7f), a7 = _mm256_set1_ps(0.8f), a8 = _mm256_set1_ps(0.9f),
           a9 = _mm256_set1_ps(1.0f), a10 = _mm256_set1_ps(1.1f), a11 = _mm256_set1_ps(1.2f);
    for (long it = 0; it < iterations; ++it) TT_FMA12(__m256, _mm256_fmadd_ps);
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    *(float *)out = _mm256_cvtss_f32(s);
    return NULL;
}

#if defined(__GNUC__) && !defined(NO_AVX512)
__attribute__((target("avx512f"))) static void *fma_zmm(void *out) {
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    __m512 a0 = _mm512_set1_ps(0.1f), a1 = _mm512_set1_ps(0.2f), a2 = _mm512_set1_ps(0.3f),
           a3 = _mm512_set1_ps(0.4f), a4 = _mm512_set1_ps(0.5f), a5 = _mm512_set1_ps(0.6f),
           a6 = _mm512_set1_ps(0.7f), a7 = _mm512_set1_ps(0.8f), a8 = _mm512_set1_ps(0.9f),
           a9 = _mm512_set1_ps(1.0f), a10 = _mm512_set1_ps(1.1f), a11 = _mm512_set1_ps(1.2f);
    for (long it = 0; it < iterations; ++it) TT_FMA12(__m512, _mm512_fmadd_ps);
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                             _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
    *(float *)out = _mm512_reduce_add_ps(s);
    return NULL;
}
#endif

static double run(void *(*fn)(void *), int threads, int lanes) {
    pthread_t tid[64];
    float sink[64];
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        const double t0 = now();
        for (int t = 0; t < threads; ++t) pthread_create(&tid[t], NULL, fn, &sink[t]);
        for (int t = 0; t < threads; ++t) pthread_join(tid[t], NULL);
        const double dt = now() - t0;
        const double gflops = 2.0 * lanes * CHAINS * (double)iterations * threads / dt / 1e9;
        if (gflops > best) best = gflops;
    }
    return best;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (threads < 1 || threads > 64) threads = 1;
    if (argc > 2) iterations = atol(argv[2]);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        printf("peak avx2 %d %.1f\n", threads, run(fma_ymm, threads, 8));
#if defined(__GNUC__) && !defined(NO_AVX512)
    if (__builtin_cpu_supports("avx512f"))
        printf("peak avx512 %d %.1f\n", threads, run(fma_zmm, threads, 16));
#endif
    return 0;
}
