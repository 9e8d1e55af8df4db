/*
 * threads.cpp -- how many threads the kernels use, and the pool that runs them.
 *
 * Thread count: tt_set_num_threads, else OMP_NUM_THREADS, else what the process may really
 * use: the CPUs of its affinity mask, lowered to a cgroup CPU quota (cgroup v2 cpu.max or
 * v1 cpu.cfs_quota_us; a container limited to 1.5 CPUs gets 2 threads, to 1 CPU gets 1).
 * OMP_THREAD_LIMIT caps it, as it always did. tt_threads_source() says which rule decided.
 *
 * The pool (the model is in thread_pool.h): one job at a time, published through a 64-bit
 * ticket = (generation << 36) | next chunk. A thread claims chunk i of generation g by a
 * compare-and-swap of (g, i) to (g, i + 1); the job's fields are read before that swap and
 * are valid exactly when it succeeds, because the caller stores (g + 1, CLOSED) before it
 * writes the next job's fields. `done` counts finished chunks of the current job; the
 * caller cannot publish the next job before done == chunks, so a late worker never touches
 * a finished job. Every atomic is sequentially consistent: the handshakes (sleep/wake,
 * the caller's wait) are Dekker-style and need it, and none of it is on a hot path.
 */
#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif
#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TT_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TT_CPU_RELAX() asm volatile("yield")
#else
#define TT_CPU_RELAX() ((void)0)
#endif

#include "core/error.h"
#include "tinytorch/tinytorch.h"

namespace {

/* ---------------------------------------------------------------------- */
/* Thread count                                                           */
/* ---------------------------------------------------------------------- */

char g_source[160] = "";

long env_long(const char *name) {
    const char *env = std::getenv(name);
    return env ? std::strtol(env, nullptr, 10) : 0;  // "4,2" (an OpenMP nested list) reads as 4
}

int affinity_cpus() {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 0 ? (int)hw : 1;
}

/* CPUs allowed by a cgroup quota, or 0 when there is none. TINYTORCH_CGROUP_ROOT replaces
 * /sys/fs/cgroup (tests point it at a folder holding a cpu.max of their own). */
double cgroup_quota_cpus() {
#if defined(__linux__)
    const char *root = std::getenv("TINYTORCH_CGROUP_ROOT");
    if (root == nullptr || *root == '\0') root = "/sys/fs/cgroup";
    char path[512];
    std::snprintf(path, sizeof path, "%s/cpu.max", root);
    if (FILE *f = std::fopen(path, "r")) {  // cgroup v2: "max 100000" or "150000 100000"
        char quota[32] = "";
        long long period = 0;
        const int got = std::fscanf(f, "%31s %lld", quota, &period);
        std::fclose(f);
        if (got == 2 && std::strcmp(quota, "max") != 0 && period > 0) {
            const double q = std::atof(quota);
            if (q > 0) return q / (double)period;
        }
        return 0;
    }
    long long quota = 0, period = 0;
    std::snprintf(path, sizeof path, "%s/cpu/cpu.cfs_quota_us", root);
    if (FILE *f = std::fopen(path, "r")) {
        if (std::fscanf(f, "%lld", &quota) != 1) quota = 0;
        std::fclose(f);
    }
    std::snprintf(path, sizeof path, "%s/cpu/cpu.cfs_period_us", root);
    if (FILE *f = std::fopen(path, "r")) {
        if (std::fscanf(f, "%lld", &period) != 1) period = 0;
        std::fclose(f);
    }
    if (quota > 0 && period > 0) return (double)quota / (double)period;
#endif
    return 0;
}

int default_threads() {
    const long env = env_long("OMP_NUM_THREADS");
    if (env > 0) {
        const int n = env > TT_MAX_THREADS ? TT_MAX_THREADS : (int)env;
        std::snprintf(g_source, sizeof g_source, "OMP_NUM_THREADS=%ld%s", env,
                      env > TT_MAX_THREADS ? " (clamped to TT_MAX_THREADS)" : "");
        return n;
    }
    int n = affinity_cpus();
    const double quota = cgroup_quota_cpus();
    const int by_quota = quota > 0 ? std::max(1, (int)(quota + 0.999)) : 0;
    if (by_quota > 0 && by_quota < n) {
        std::snprintf(g_source, sizeof g_source, "cgroup CPU quota %.2f CPUs (affinity allows %d)",
                      quota, n);
        n = by_quota;
    } else {
        std::snprintf(g_source, sizeof g_source, "CPU affinity mask: %d CPU%s", n, n == 1 ? "" : "s");
    }
    return std::min(n, TT_MAX_THREADS);
}

std::atomic<int> &threads_slot() {
    static std::atomic<int> slot{default_threads()};
    return slot;
}

/* ---------------------------------------------------------------------- */
/* The pool                                                               */
/* ---------------------------------------------------------------------- */

constexpr int kChunkBits = 36;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
constexpr uint64_t kClosed = kChunkMask;  // the chunk index of a ticket between jobs
constexpr int64_t kMaxChunks = (int64_t)kChunkMask - 1;

inline uint64_t gen_of(uint64_t t) { return t >> kChunkBits; }
inline int64_t chunk_of(uint64_t t) { return (int64_t)(t & kChunkMask); }

using Clock = std::chrono::steady_clock;
inline int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now().time_since_epoch()).count();
}

/* How long an idle worker spins before it sleeps, and how long a caller spins before it
 * waits passively (microseconds; TINYTORCH_SPIN_US overrides the first). Short on purpose:
 * on a 2-core machine with one busy core a spinning worker steals the time slice the
 * caller's own chunks need; 20 us beat 100 us under that load (bench_contention.py). */
constexpr int64_t kWorkerSpinUs = 20;
constexpr int64_t kCallerSpinUs = 20;
/* A join that waits longer than this and than two of the caller's own chunks for claimed
 * chunks is a stall: a worker lost its core mid-chunk to another runnable thread, which
 * costs a scheduler slice (measured under one busy core of two: mostly 1-8 ms). Shorter
 * waits are hiccups (a vCPU descheduled by the host for 150-400 us, a cold chunk): they
 * happen on a quiet machine too, cost less than a millisecond once, and are not worth a
 * back-off (counting them from 150 us ran a quiet machine's calls alone much of the time). */
constexpr int64_t kStallMinUs = 1000;
/* A caller that ran no chunk itself (workers claimed every one) cannot judge a chunk's
 * length, so only a wait past this counts as a stall then: 50 ms, longer than any one
 * kernel call's chunk here, about 10 scheduler slices. */
constexpr int64_t kStallNoChunkUs = 50000;
/* Back-off after a stall: calls run on the caller alone for a while. The window is at
 * least 8 times the wait just suffered (a lost slice says another thread is runnable on
 * the worker's core, and such load usually lasts longer than the slice) and doubles while
 * stalls repeat, up to 1 s; each clean parallel call shrinks the remembered window by
 * 1/256. So stalls closer than ~180 parallel calls apart (a lasting load) grow it to a
 * second and cost about one stall a second, while a rare one costs one short window.
 * (A fixed 20 ms window fading by 1/16 let a lasting load fall back to the minimum between
 * stalls; 2 times the wait let the small calls' p99 under load take a slice every few
 * hundred calls.) TINYTORCH_THREAD_BACKOFF=0 turns it off. */
constexpr int64_t kBackoffMinUs = 1000, kBackoffMaxUs = 1000000, kBackoffPerWait = 8;
constexpr int kBackoffDecayShift = 8;
/* A call whose one-thread estimate is below this runs alone when every worker sleeps.
 * Waking a sleeping worker cost 30-60 us on the 2-vCPU Zen 3 VM (an idle vCPU's wake-up);
 * GEMMs 200 us of Python apart, 2 / 1 thread time (medians of 3 alternating runs, two
 * sessions): 1.24-1.36x at 2M multiply-adds (~50 us alone), 1.01-1.18x at 4M, 0.87-0.96x
 * at 8M (benchmarks/results/no_load_pool_before_after.md, follow-up). */
constexpr double kWakeWorthUs = 150;
/* A job whose workers all ran their chunks on the caller's own core gained nothing: the
 * caller and the worker took turns on one core while another thread held the other. The
 * scheduler does this under load (it wakes the worker where its waker runs when no core is
 * idle) and keeps it for hundreds of calls at a time. Measured under one busy core of two,
 * bias + GELU 512 x 1024 on two threads, per call (2-vCPU Zen 3; benchmarks/bench_wakeup.py):
 * worker on another core 0.23-0.27 ms, on the caller's core 0.48-0.49 ms, one thread
 * 0.42-0.43 ms (two runs). Such a job backs off
 * like a stall (the window doubles from kBackoffMinUs while it repeats), so a lasting
 * placement costs one such job now and then instead of 17 % on every call. */

thread_local bool t_inside = false;  // a pool worker, or a caller inside a job

/* The core the calling thread runs on now, or -1 where the system cannot say. */
int current_cpu() {
#if defined(__linux__)
    return sched_getcpu();
#else
    return -1;
#endif
}

struct Pool {
    std::mutex submit;                  // held by the caller of the running job
    std::atomic<uint64_t> ticket{kClosed};
    std::atomic<int64_t> chunks{0}, done{0};
    std::atomic<tt::ChunkFn> fn{nullptr};
    std::atomic<void *> ctx{nullptr};
    std::atomic<int> helpers{0};        // workers with index < helpers may join
    std::atomic<int> caller_cpu{-1};    // the core the job's caller started on
    std::atomic<bool> off_core{false};  // a worker ran a chunk of this job on another core
    std::atomic<int> sleeping{0}, caller_sleeping{0}, held{0};
    std::atomic<int64_t> slow_us{0};    // tt_thread_pool_slow: a worker's delay per claimed chunk
    std::atomic<bool> stop{false};
    std::mutex m;
    std::condition_variable work_cv, done_cv;
    std::vector<std::thread> workers;   // guarded by `submit`
    uint64_t generation = 0;            // guarded by `submit`
    int64_t backoff_us = 0, solo_until_us = 0;  // guarded by `submit`
    int64_t spin_us = kWorkerSpinUs;
    bool backoff_enabled = true;
    std::atomic<int64_t> stat[8] = {};  // tt_thread_stats fields, in order

    Pool() {
        const char *spin = std::getenv("TINYTORCH_SPIN_US");
        if (spin && *spin) spin_us = std::max(0L, std::strtol(spin, nullptr, 10));
        const char *backoff = std::getenv("TINYTORCH_THREAD_BACKOFF");
        backoff_enabled = !(backoff && std::strcmp(backoff, "0") == 0);
    }
};

enum Stat { JOBS, SOLO, CHUNKS_CALLER, CHUNKS_WORKERS, STALLS, BACKED_OFF, ONE_CORE, WORKERS };

Pool *g_pool = nullptr;
std::once_flag g_pool_once;

void reset_after_fork() {
    /* The child has none of the parent's threads (and maybe a locked mutex): start a new
     * pool, empty, and leave the old one alone. */
    g_pool = new (std::nothrow) Pool();
}

Pool &pool() {
    std::call_once(g_pool_once, [] {
        g_pool = new Pool();  // never destroyed: workers may outlive static destructors
#if defined(__unix__) || defined(__APPLE__)
        pthread_atfork(nullptr, nullptr, reset_after_fork);
#endif
    });
    return *g_pool;
}

/* Claim and run chunks of generation `gen` until none is left. Returns how many ran. */
int64_t claim_and_run(Pool &p, uint64_t gen, int slot) {
    int64_t ran = 0;
    for (;;) {
        uint64_t t = p.ticket.load();
        if (gen_of(t) != gen) return ran;
        const int64_t c = chunk_of(t);
        const int64_t n = p.chunks.load();
        const tt::ChunkFn fn = p.fn.load();
        void *ctx = p.ctx.load();
        if (c >= n) return ran;
        if (!p.ticket.compare_exchange_weak(t, t + 1)) continue;
        if (slot != 0) {  /* the testing hook: a worker descheduled after its claim */
            const int64_t delay = p.slow_us.load();
            if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
            if (!p.off_core.load(std::memory_order_relaxed) && current_cpu() != p.caller_cpu.load())
                p.off_core.store(true);
        }
        fn(ctx, c, slot);
        ++ran;
        /* Counted before the chunk is marked done, so a job's counters are complete when
         * its caller returns (a late worker add would land in the next call's counts). */
        p.stat[slot == 0 ? CHUNKS_CALLER : CHUNKS_WORKERS].fetch_add(1);
        if (p.done.fetch_add(1) + 1 == n && p.caller_sleeping.load()) {
            std::lock_guard<std::mutex> lock(p.m);
            p.done_cv.notify_all();
        }
    }
}

void worker_main(Pool *pp, int index) {
    Pool &p = *pp;
    t_inside = true;
    uint64_t seen = gen_of(p.ticket.load());
    while (!p.stop.load()) {
        const uint64_t t = p.ticket.load();
        if (gen_of(t) != seen && chunk_of(t) != (int64_t)kClosed) {
            seen = gen_of(t);
            if (index < p.helpers.load() && index >= p.held.load()) {
                claim_and_run(p, seen, index + 1);
            }
            continue;
        }
        /* Idle: spin a little (the next kernel usually follows at once), then sleep. */
        const int64_t until = now_us() + p.spin_us;
        bool woke = false;
        while (now_us() < until) {
            for (int i = 0; i < 64; ++i) TT_CPU_RELAX();
            const uint64_t u = p.ticket.load();
            if (gen_of(u) != seen && chunk_of(u) != (int64_t)kClosed) { woke = true; break; }
        }
        if (woke) continue;
        std::unique_lock<std::mutex> lock(p.m);
        p.sleeping.fetch_add(1);
        p.work_cv.wait(lock, [&] {
            const uint64_t u = p.ticket.load();
            return p.stop.load() || (gen_of(u) != seen && chunk_of(u) != (int64_t)kClosed);
        });
        p.sleeping.fetch_sub(1);
    }
}

/* Start workers until there are `want` (fewer if the system refuses threads). */
void grow(Pool &p, int want) {
    while ((int)p.workers.size() < want) {
        try {
            p.workers.emplace_back(worker_main, &p, (int)p.workers.size());
        } catch (...) {
            break;  // no more threads: the caller runs what nobody claims
        }
    }
    p.stat[WORKERS].store((int64_t)p.workers.size());
}

void run_inline(int64_t chunks, tt::ChunkFn fn, void *ctx) {
    for (int64_t c = 0; c < chunks; ++c) fn(ctx, c, 0);
}

}  // namespace

namespace tt {

int num_threads() {
    const int n = threads_slot().load(std::memory_order_relaxed);
    const long limit = env_long("OMP_THREAD_LIMIT");  // an existing cap users may have set
    return limit > 0 && n > limit ? (int)limit : n;
}

int threads_now(int nt, double solo_us) {
    if (nt <= 1) return nt;
    Pool &p = pool();
    if (t_inside) return nt;
    std::unique_lock<std::mutex> owner(p.submit, std::try_to_lock);
    if (!owner.owns_lock()) return nt;  // another thread's call is running: run_chunks decides
    if (solo_us < kWakeWorthUs && !p.workers.empty() &&
        p.sleeping.load() >= (int)p.workers.size())
        return 1;  // not worth a wake-up (a worker falling asleep right now is a near miss)
    if (!p.backoff_enabled || now_us() >= p.solo_until_us) return nt;
    p.stat[BACKED_OFF].fetch_add(1);
    return 1;
}

void run_chunks(int64_t chunks, int max_threads, ChunkFn fn, void *ctx) {
    if (chunks <= 0) return;
    Pool &p = pool();
    if (max_threads <= 1 || chunks == 1 || t_inside || chunks > kMaxChunks) {
        run_inline(chunks, fn, ctx);
        return;
    }
    std::unique_lock<std::mutex> owner(p.submit, std::try_to_lock);
    if (!owner.owns_lock()) {  // another thread's job is running: this one runs alone
        p.stat[SOLO].fetch_add(1);
        run_inline(chunks, fn, ctx);
        return;
    }
    const int64_t start = now_us();
    if (p.backoff_enabled && start < p.solo_until_us) {
        p.stat[BACKED_OFF].fetch_add(1);
        t_inside = true;
        run_inline(chunks, fn, ctx);
        t_inside = false;
        return;
    }
    const int helpers = std::min<int64_t>(max_threads, TT_MAX_THREADS) - 1;
    grow(p, helpers);
    p.stat[JOBS].fetch_add(1);

    const uint64_t gen = ++p.generation & ((uint64_t{1} << (64 - kChunkBits)) - 1);
    p.ticket.store((gen << kChunkBits) | kClosed);
    p.chunks.store(chunks);
    p.fn.store(fn);
    p.ctx.store(ctx);
    p.helpers.store(helpers);
    p.done.store(0);
    const int caller_cpu = current_cpu();
    p.caller_cpu.store(caller_cpu);
    p.off_core.store(caller_cpu < 0);  // where the core is unknown, assume the worker's differs
    p.ticket.store(gen << kChunkBits);
    if (p.sleeping.load() > 0) {
        std::lock_guard<std::mutex> lock(p.m);
        p.work_cv.notify_all();
    }

    t_inside = true;
    const int64_t mine = claim_and_run(p, gen, 0);
    t_inside = false;
    const int64_t caller_done = now_us();

    /* Wait for the chunks workers claimed: spin briefly, then passively. */
    if (p.done.load() < chunks) {
        const int64_t until = caller_done + kCallerSpinUs;
        while (p.done.load() < chunks && now_us() < until) TT_CPU_RELAX();
        if (p.done.load() < chunks) {
            std::unique_lock<std::mutex> lock(p.m);
            p.caller_sleeping.store(1);
            p.done_cv.wait(lock, [&] { return p.done.load() >= chunks; });
            p.caller_sleeping.store(0);
        }
    }
    const int64_t end = now_us();
    /* Stall: the join waited long, and longer than a few of the caller's own chunks. */
    const int64_t waited = end - caller_done;
    const int64_t per_chunk = mine > 0 ? (caller_done - start) / mine : kStallNoChunkUs;
    if (waited > std::max<int64_t>(kStallMinUs, 2 * per_chunk)) {
        p.stat[STALLS].fetch_add(1);
        p.backoff_us = std::min(kBackoffMaxUs,
                                std::max({kBackoffMinUs, 2 * p.backoff_us, kBackoffPerWait * waited}));
        p.solo_until_us = end + p.backoff_us;
    } else if (mine < chunks && !p.off_core.load()) {  // helpers ran only on the caller's core
        p.stat[ONE_CORE].fetch_add(1);
        p.backoff_us = std::min(kBackoffMaxUs, std::max(kBackoffMinUs, 2 * p.backoff_us));
        p.solo_until_us = end + p.backoff_us;
    } else if (mine < chunks) {  // helpers took part and nobody stalled
        p.backoff_us -= p.backoff_us >> kBackoffDecayShift;
    }
}

}  // namespace tt

extern "C" {

TT_API tt_status tt_set_num_threads(int n) {
    if (n < 1 || n > TT_MAX_THREADS)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_set_num_threads: n=%d is outside 1..%d", n,
                        TT_MAX_THREADS);
    (void)threads_slot();  // read the default first, so the source below is not overwritten
    threads_slot().store(n);
    std::snprintf(g_source, sizeof g_source, "tt_set_num_threads(%d)", n);
    return TT_OK;
}

TT_API int tt_get_num_threads(void) { return tt::num_threads(); }

TT_API const char *tt_threads_source(void) {
    (void)threads_slot();
    return g_source;
}

TT_API tt_status tt_thread_stats(tt_thread_stats_t *out) {
    if (out == nullptr) return tt::fail(TT_ERR_NULL_POINTER, "tt_thread_stats: out is NULL");
    Pool &p = pool();
    out->jobs = p.stat[JOBS].load();
    out->solo_jobs = p.stat[SOLO].load();
    out->chunks_caller = p.stat[CHUNKS_CALLER].load();
    out->chunks_workers = p.stat[CHUNKS_WORKERS].load();
    out->stalls = p.stat[STALLS].load();
    out->backed_off_jobs = p.stat[BACKED_OFF].load();
    out->one_core_jobs = p.stat[ONE_CORE].load();
    out->workers = p.stat[WORKERS].load();
    return TT_OK;
}

TT_API tt_status tt_thread_stats_reset(void) {
    Pool &p = pool();
    for (int i = 0; i < WORKERS; ++i) p.stat[i].store(0);
    std::lock_guard<std::mutex> owner(p.submit);
    p.backoff_us = 0;
    p.solo_until_us = 0;
    return TT_OK;
}

TT_API tt_status tt_thread_pool_slow(int64_t delay_us) {
    if (delay_us < 0 || delay_us > 1000000)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_thread_pool_slow: delay_us=%lld is outside 0..1000000",
                        (long long)delay_us);
    pool().slow_us.store(delay_us);
    return TT_OK;
}

TT_API tt_status tt_thread_pool_hold(int workers) {
    if (workers < 0 || workers > TT_MAX_THREADS)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_thread_pool_hold: workers=%d is outside 0..%d",
                        workers, TT_MAX_THREADS);
    Pool &p = pool();
    /* Held workers claim nothing: to the pool they look like threads that lost their core
     * before a job began. Taking `submit` makes the change land between jobs. */
    std::lock_guard<std::mutex> owner(p.submit);
    p.held.store(workers);
    return TT_OK;
}

}  // extern "C"
