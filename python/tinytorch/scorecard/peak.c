/*
 * peak.c -- the machine's fp32 FMA ceiling for 1..T threads, from a register-only loop.
 *
 *     cc -O2 -o peak python/tinytorch/scorecard/peak.c -lpthread   (no -m flags: see the target attributes)
 *     ./peak [max_threads [seconds_per_trial [trials]]]
 *
 * Built and run by tinytorch/scorecard/peak.py (fma_peaks): `tinytorch scorecard` and the
 * benchmarks (bench_gemm.py, bench_attention.py) state their speeds as "% of FMA peak".
 * For every vector ISA the CPU and the OS enable (avx2+fma, avx512f) and every thread count
 * t = 1..max_threads it prints one line per placement / clock:
 *
 *     peak <isa> <t> <placement> <GFLOP/s>
 *
 *   free            threads left to the scheduler, rate per wall-clock second;
 *   pinned          thread i on the i-th CPU of the process's affinity mask (one CPU per
 *                   physical core first, SMT siblings last), rate per wall-clock second;
 *   pinned-cputime  the same run, rate per second of CPU time each thread was given (only
 *                   where t <= CPUs, so that no two of our threads take turns on one CPU).
 * The caller takes the best line: the ceiling is what the machine can do, not what one
 * placement got while other processes were running.
 *
 * Why it is built this way. The first version timed a fixed iteration count from pthread_create
 * to pthread_join, on the benchmark's thread count only; on a 2-vCPU AVX-512 Xeon it reported
 * 174 GFLOP/s for two threads while OpenBLAS ran at 311. Each point below removes one way such
 * a loop under-reports:
 *   - A fixed time window (default 0.25 s), not a fixed count: a fast AVX-512 core finished the old
 *     count in ~80 ms, where one hypervisor preemption or the clock's ramp-up costs a large share.
 *   - Threads start together and stop together: all are created and parked first (creation is
 *     not timed), one flag releases them, and every thread runs until one shared deadline and
 *     times its own window. The sum of the per-thread rates is then the concurrent throughput: two
 *     threads time-sliced on one CPU show as two half rates, never as two full ones, and a thread
 *     that started late does not stretch everybody's time the way a join-based wall clock does.
 *   - CPU time as well as wall time. On a shared machine another process takes turns with one
 *     of our threads, and every wall-clock rate drops with it: with the load of a concurrent
 *     build, two AVX2 threads measured 93-115 GFLOP/s per wall second and 287 per CPU second,
 *     the quiet machine's figure (2-vCPU Zen 5, 2 x 143). Pinned threads, one per CPU, cannot
 *     take turns with each other, so per CPU second their sum is the rate of t CPUs running at
 *     once. It can only over-read where two SMT siblings are pinned and an outside process
 *     evicts one of them for a while (the other then runs alone on the core): an error on the
 *     safe side for a ceiling.
 *   - Enough independent chains: an FMA unit accepts a new FMA every cycle but a chain waits for
 *     its previous result (4-5 cycles), so latency x FMA pipes (2) = 8-10 chains are needed per
 *     thread. AVX2 has 16 vector registers: 12 chains plus the two constants. AVX-512 has 32: 24
 *     chains, a margin for cores with longer latency.
 *   - AVX-512 where the CPU has it and the OS saves its state (__builtin_cpu_supports checks
 *     XCR0): a BLAS that uses 512-bit FMAs must be held against the 512-bit ceiling.
 *   - A warm-up window per ISA, then the best of several trials per (ISA, threads, placement),
 *     the trials spread over the whole run (the outer loop), so a burst of load from another
 *     process on a shared machine costs one trial of each configuration, not all of one.
 *   - Both placements: pinning to one CPU per core avoids two threads sharing one core's FMA
 *     units when the scheduler (or a hypervisor's vCPU layout) would put them there; leaving the
 *     threads free avoids a bad pin when the topology files lie.
 * The chains compute a = a * 0.999999 + 1e-7, which settles near 0.1: no overflow and no
 * subnormals (those would take a slow path); every chain starts from its own value.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_THREADS 256
#define CHUNK 20000 /* iterations between clock reads: ~30-60 us, so the deadline is kept closely */

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double now(void) { return clock_s(CLOCK_MONOTONIC); }

/* One ISA's inner loop: CHUNK iterations of every chain. The chains live in registers inside
 * the loop and in `chains` (lanes x CHAINS floats) between calls: one load and one store per
 * chain every CHUNK iterations, nothing against ~10^5 FMAs. */
typedef struct {
    const char *name;
    void (*chunk)(float *chains);
    int floats;        /* lanes x chains */
} isa_t;

typedef struct {
    const isa_t *isa;
    int cpu;           /* CPU to pin to, or -1 for the scheduler's choice */
    double start, end; /* this thread's own window, wall clock */
    double cpu_time;   /* and the CPU time it got inside it */
    long chunks;       /* CHUNK iterations done */
    float chains[16 * 24] __attribute__((aligned(64)));
} worker_t;

static atomic_int ready, go;
static double deadline;

/* Park until every thread exists, start on one flag, run to the shared deadline. */
static void *worker(void *arg) {
    worker_t *w = arg;
    for (int i = 0; i < w->isa->floats; ++i) w->chains[i] = 0.05f + 0.001f * i;
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    atomic_fetch_add(&ready, 1);
    while (!atomic_load(&go)) sched_yield(); /* yield: more threads than CPUs must still start */
    const double cpu0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    w->start = now();
    long chunks = 0;
    do {
        w->isa->chunk(w->chains);
        ++chunks;
    } while (now() < deadline);
    w->end = now();
    w->cpu_time = clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu0;
    w->chunks = chunks;
    return NULL;
}

/* Named accumulators (an X-macro list), not an array, so every chain stays in a register. */
#define CHAINS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS24(X) CHAINS12(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)

#define YMM_LOAD(i) __m256 a##i = _mm256_load_ps(chains + 8 * (i));
#define YMM_STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define YMM_STORE(i) _mm256_store_ps(chains + 8 * (i), a##i);

__attribute__((target("avx2,fma"))) static void ymm_chunk(float *chains) {
    const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
    CHAINS12(YMM_LOAD)
    for (int it = 0; it < CHUNK; ++it) { CHAINS12(YMM_STEP) }
    CHAINS12(YMM_STORE)
}
static const isa_t AVX2 = {"avx2", ymm_chunk, 8 * 12};

#if defined(__GNUC__) && !defined(NO_AVX512)
#define ZMM_LOAD(i) __m512 a##i = _mm512_load_ps(chains + 16 * (i));
#define ZMM_STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define ZMM_STORE(i) _mm512_store_ps(chains + 16 * (i), a##i);

__attribute__((target("avx512f"))) static void zmm_chunk(float *chains) {
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    CHAINS24(ZMM_LOAD)
    for (int it = 0; it < CHUNK; ++it) { CHAINS24(ZMM_STEP) }
    CHAINS24(ZMM_STORE)
}
static const isa_t AVX512 = {"avx512", zmm_chunk, 16 * 24};
#endif

/* The CPUs this process may run on, one per physical core first (an SMT sibling's rank is the
 * number of lower-numbered CPUs in its thread_siblings_list), so pinned threads spread out. */
static int cpu_order(int *order) {
    cpu_set_t set;
    int n = 0, rank[MAX_THREADS];
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < MAX_THREADS; ++cpu) {
        if (!CPU_ISSET(cpu, &set)) continue;
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", cpu);
        int r = 0, lo, hi;
        FILE *f = fopen(path, "r");
        if (f) { /* "0,4" or "0-1" or "3" */
            while (fscanf(f, "%d", &lo) == 1) {
                hi = lo;
                int ch = fgetc(f);
                if (ch == '-' && fscanf(f, "%d", &hi) == 1) ch = fgetc(f);
                for (int s = lo; s <= hi; ++s) r += s < cpu;
                if (ch != ',') break;
            }
            fclose(f);
        }
        order[n] = cpu;
        rank[n++] = r;
    }
    for (int i = 1; i < n; ++i) /* stable insertion sort by rank */
        for (int j = i; j > 0 && rank[j] < rank[j - 1]; --j) {
            int t = rank[j]; rank[j] = rank[j - 1]; rank[j - 1] = t;
            t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    return n;
}

/* One window on `threads` threads: GFLOP/s summed over the threads, per wall-clock second of
 * each thread's window ([0]) and per second of CPU time it was given ([1]). */
typedef struct { double wall, cpu; } rate_t;

static rate_t window(const isa_t *isa, int threads, const int *cpus, double seconds) {
    pthread_t tid[MAX_THREADS];
    static worker_t w[MAX_THREADS];
    atomic_store(&ready, 0);
    atomic_store(&go, 0);
    for (int t = 0; t < threads; ++t) {
        w[t].isa = isa;
        w[t].cpu = cpus ? cpus[t] : -1;
        pthread_create(&tid[t], NULL, worker, &w[t]);
    }
    while (atomic_load(&ready) < threads) sched_yield();
    deadline = now() + seconds; /* written before the release below, which publishes it */
    atomic_store(&go, 1);
    rate_t r = {0, 0};
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
        const double gflop = 2.0 * isa->floats * CHUNK * w[t].chunks / 1e9;
        r.wall += gflop / (w[t].end - w[t].start);
        r.cpu += gflop / w[t].cpu_time;
    }
    return r;
}

static const char *PLACEMENT[3] = {"free", "pinned", "pinned-cputime"};

int main(int argc, char **argv) {
    int max_threads = argc > 1 ? atoi(argv[1]) : 1;
    double seconds = argc > 2 ? atof(argv[2]) : 0.25;
    int trials = argc > 3 ? atoi(argv[3]) : 3;
    if (max_threads < 1 || max_threads > MAX_THREADS) max_threads = 1;
    if (seconds <= 0) seconds = 0.25;
    if (trials < 1) trials = 1;
    int order[MAX_THREADS], cpus[MAX_THREADS];
    int ncpu = cpu_order(order);
    printf("cpus %d order", ncpu);
    for (int i = 0; i < ncpu; ++i) printf(" %d", order[i]);
    printf("\n");

    const isa_t *isas[2];
    int nisa = 0;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) isas[nisa++] = &AVX2;
#if defined(__GNUC__) && !defined(NO_AVX512)
    if (__builtin_cpu_supports("avx512f")) isas[nisa++] = &AVX512;
#endif
    /* Trials are the outer loop: a burst of load from another process then costs one trial of
     * every configuration, not all trials of one (the best of each is kept). */
    static double best[2][MAX_THREADS + 1][3];
    for (int k = 0; k < trials; ++k)
        for (int i = 0; i < nisa; ++i) {
            if (k == 0) window(isas[i], 1, NULL, seconds); /* warm-up: clocks ramp, pages fault in */
            for (int t = 1; t <= max_threads; ++t) {
                rate_t free_run = window(isas[i], t, NULL, seconds);
                if (free_run.wall > best[i][t][0]) best[i][t][0] = free_run.wall;
                if (ncpu == 0) continue;
                for (int j = 0; j < t; ++j) cpus[j] = order[j % ncpu];
                rate_t pinned = window(isas[i], t, cpus, seconds);
                if (pinned.wall > best[i][t][1]) best[i][t][1] = pinned.wall;
                /* CPU time only where each thread has a CPU of its own: two of our threads
                 * taking turns on one CPU would each count that CPU's full rate. */
                if (t <= ncpu && pinned.cpu > best[i][t][2]) best[i][t][2] = pinned.cpu;
            }
        }
    for (int i = 0; i < nisa; ++i)
        for (int t = 1; t <= max_threads; ++t)
            for (int p = 0; p < 3; ++p)
                if (best[i][t][p] > 0)
                    printf("peak %s %d %s %.1f\n", isas[i]->name, t, PLACEMENT[p], best[i][t][p]);
    return 0;
}
