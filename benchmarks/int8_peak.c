/*
 * int8_peak.c -- the machine's integer multiply-accumulate ceiling for the INT8 GEMM, from a
 * register-only loop, for 1..T threads. Built and run by benchmarks/bench_int8.py:
 *
 *     cc -O2 -pthread -o int8_peak benchmarks/int8_peak.c     (ISA via target attributes)
 *     ./int8_peak [max_threads [seconds]]
 *
 * prints "peak <kind> <threads> <GOP/s>" (one multiply-add = 2 ops) for
 *   vnni      vpdpbusd zmm: 64 u8 x s8 products per instruction (AVX-512 VNNI CPUs only)
 *   vpmaddwd  vpmaddwd + vpaddd zmm: 32 16-bit products per pair (AVX-512BW CPUs), the
 *             exact non-VNNI scheme of the runtime's avx512bw kernel
 *   vpmaddwd_ymm  the same pair on ymm: 16 products (AVX2 CPUs), the scheme of the avx2 kernel
 *   vpmaddubsw_ymm  vpmaddubsw + vpmaddwd (by ones) + vpaddd ymm: 32 u8 x s8 products (AVX2
 *             CPUs); a reference only: its 16-bit pair sums saturate for 8-bit activations
 *             (2 * 255 * 128 > 32767), so it is exact only for 7-bit ones (PyTorch's dynamic
 *             Linear quantizes with reduce_range=True); the runtime does not use it
 * 24 independent accumulator chains per thread (latency x issue width with a margin; 12 on
 * ymm, which has 16 registers: the chains run through vpaddd, latency 1, so 12 still fill
 * the units); the threads run for one shared window, each timing itself, and the rates are
 * summed (as scorecard/peak.c does for the FMA peak; a shared machine makes every figure a
 * floor).
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static atomic_int go;
static double seconds = 0.3;

/* One block: ITER rounds of 24 independent accumulators (zmm8..zmm31) updated from zmm0 and
 * zmm1. Inline assembly, because compiled C keeps such accumulators partly on the stack
 * (GCC 12 did, around the clock call), which would time the stack instead of the units. */
#define ITER 1000
#define R24(OP) OP(8) OP(9) OP(10) OP(11) OP(12) OP(13) OP(14) OP(15) OP(16) OP(17) OP(18) OP(19) \
    OP(20) OP(21) OP(22) OP(23) OP(24) OP(25) OP(26) OP(27) OP(28) OP(29) OP(30) OP(31)
#define STR(x) #x
#define DPBUSD(i) "vpdpbusd %%zmm1, %%zmm0, %%zmm" STR(i) "\n\t"
#define MADDWD(i) "vpmaddwd %%zmm1, %%zmm0, %%zmm2\n\tvpaddd %%zmm2, %%zmm" STR(i) ", %%zmm" STR(i) "\n\t"
#define CLOBBERS "xmm0", "xmm1", "xmm2", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", \
    "xmm15", "xmm16", "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24",   \
    "xmm25", "xmm26", "xmm27", "xmm28", "xmm29", "xmm30", "xmm31"

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void block_vnni(void) {
    long n = ITER;
    __asm__ volatile("vpternlogd $0xff, %%zmm0, %%zmm0, %%zmm0\n\t"
                     "vpabsb %%zmm0, %%zmm1\n\t"
                     "1:\n\t" R24(DPBUSD) "dec %0\n\tjnz 1b"
                     : "+r"(n) : : CLOBBERS, "cc");
}

__attribute__((target("avx512f,avx512bw"))) static void block_vpmaddwd(void) {
    long n = ITER;
    __asm__ volatile("vpternlogd $0xff, %%zmm0, %%zmm0, %%zmm0\n\t"
                     "vpabsw %%zmm0, %%zmm1\n\t"
                     "1:\n\t" R24(MADDWD) "dec %0\n\tjnz 1b"
                     : "+r"(n) : : CLOBBERS, "cc");
}

#define R12(OP) OP(4) OP(5) OP(6) OP(7) OP(8) OP(9) OP(10) OP(11) OP(12) OP(13) OP(14) OP(15)
#define MADDWD_YMM(i) "vpmaddwd %%ymm1, %%ymm0, %%ymm2\n\tvpaddd %%ymm2, %%ymm" STR(i) ", %%ymm" STR(i) "\n\t"

__attribute__((target("avx2"))) static void block_vpmaddwd_ymm(void) {
    long n = ITER;
    __asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"
                     "vpabsw %%ymm0, %%ymm1\n\t"
                     "1:\n\t" R12(MADDWD_YMM) "dec %0\n\tjnz 1b"
                     : "+r"(n) : : "xmm0", "xmm1", "xmm2", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
}

#define MADDUBSW_YMM(i) "vpmaddubsw %%ymm1, %%ymm0, %%ymm2\n\tvpmaddwd %%ymm3, %%ymm2, %%ymm2\n\t" \
    "vpaddd %%ymm2, %%ymm" STR(i) ", %%ymm" STR(i) "\n\t"

__attribute__((target("avx2"))) static void block_vpmaddubsw_ymm(void) {
    long n = ITER;
    __asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"
                     "vpabsb %%ymm0, %%ymm1\n\t"
                     "vpabsw %%ymm0, %%ymm3\n\t"
                     "1:\n\t" R12(MADDUBSW_YMM) "dec %0\n\tjnz 1b"
                     : "+r"(n) : : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
                       "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc");
}

/* multiply-adds per block */
#define VNNI_MACS (64.0 * 24 * ITER)
#define MADDWD_MACS (32.0 * 24 * ITER)
#define MADDWD_YMM_MACS (16.0 * 12 * ITER)
#define MADDUBSW_YMM_MACS (32.0 * 12 * ITER)

static double run_for(void (*block)(void), double macs) {
    long n = 0;
    const double t0 = now();
    double t = t0;
    while (t - t0 < seconds) {
        block();
        ++n;
        t = now();
    }
    return 2.0 * macs * (double)n / (t - t0);
}

static double run_vnni(void) { return run_for(block_vnni, VNNI_MACS); }
static double run_vpmaddwd(void) { return run_for(block_vpmaddwd, MADDWD_MACS); }
static double run_vpmaddwd_ymm(void) { return run_for(block_vpmaddwd_ymm, MADDWD_YMM_MACS); }
static double run_vpmaddubsw_ymm(void) { return run_for(block_vpmaddubsw_ymm, MADDUBSW_YMM_MACS); }

typedef double (*kernel_fn)(void);
struct job {
    kernel_fn fn;
    double rate;
};

static void *worker(void *p) {
    struct job *j = p;
    while (!atomic_load(&go)) {
    }
    j->rate = j->fn();
    return NULL;
}

static double run(kernel_fn fn, int threads) {
    pthread_t tid[64];
    struct job jobs[64];
    atomic_store(&go, 0);
    for (int i = 0; i < threads; ++i) {
        jobs[i].fn = fn;
        pthread_create(&tid[i], NULL, worker, &jobs[i]);
    }
    atomic_store(&go, 1);
    double sum = 0;
    for (int i = 0; i < threads; ++i) {
        pthread_join(tid[i], NULL);
        sum += jobs[i].rate;
    }
    return sum;
}

/* Prints the best of three runs of fn on `threads` threads as "peak <kind> <threads> <GOP/s>". */
static void report(const char *kind, kernel_fn fn, int threads) {
    double best = 0;
    for (int trial = 0; trial < 3; ++trial) {
        double r = run(fn, threads);
        best = r > best ? r : best;
    }
    printf("peak %s %d %.1f\n", kind, threads, best / 1e9);
}

int main(int argc, char **argv) {
    int max_threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) seconds = atof(argv[2]);
    if (max_threads < 1 || max_threads > 64) max_threads = 1;
    __builtin_cpu_init();
    for (int t = 1; t <= max_threads; ++t) {
        if (__builtin_cpu_supports("avx512vnni")) report("vnni", run_vnni, t);
        if (__builtin_cpu_supports("avx512bw")) report("vpmaddwd", run_vpmaddwd, t);
        if (__builtin_cpu_supports("avx2")) {
            report("vpmaddwd_ymm", run_vpmaddwd_ymm, t);
            report("vpmaddubsw_ymm", run_vpmaddubsw_ymm, t);
        }
    }
    return 0;
}
