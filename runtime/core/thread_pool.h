/*
 * thread_pool.h -- private: the runtime's one way of running work on several threads.
 *
 * What it owns: a small pool of worker threads and the rule by which a parallel call uses
 * them. What it assumes: the work of a call is cut into chunks whose boundaries depend on
 * the problem alone (never on how many threads take part), and every chunk writes its own
 * part of the result; parallel.h builds the kernels' loops on top of this.
 *
 * The model (a busy machine must never make a call slower than one thread):
 *   - the caller publishes the job, then claims chunks itself from the same counter the
 *     workers claim from; a worker that is asleep or descheduled simply claims nothing;
 *   - the caller waits only for chunks some worker has actually claimed and not finished,
 *     never for a worker that has not started;
 *   - workers spin briefly after a job (back-to-back kernels find them awake), then sleep;
 *     the caller's own wait is short spin then a passive wait, so its core goes idle and the
 *     scheduler can run the preempted worker there;
 *   - when a join waited long for a claimed chunk (a worker lost its core mid-chunk), later
 *     calls run on the caller alone for a back-off period that doubles while stalls repeat
 *     and shrinks again after clean calls: under lasting contention the kernels run at one
 *     thread's speed instead of stalling again and again;
 *   - a job whose workers ran only on the caller's own core (the scheduler put them there
 *     because another thread holds every other core) gained nothing and backs off the same
 *     way;
 *   - nested calls (a chunk that calls a kernel) and calls from a second thread while the
 *     pool is busy run on their caller alone, so nothing ever waits on itself.
 * Results never depend on any of this: chunk c is the same computation whoever runs it.
 */
#pragma once
#include <cstdint>

namespace tt {

/* fn(ctx, chunk, slot) for every chunk in [0, chunks), on the caller and up to
 * max_threads - 1 pool workers. `slot` is in [0, max_threads): the caller is slot 0 and a
 * slot is never used by two threads at once, so per-slot scratch needs no locking.
 * Returns when every chunk has run. */
using ChunkFn = void (*)(void *ctx, int64_t chunk, int slot);
void run_chunks(int64_t chunks, int max_threads, ChunkFn fn, void *ctx);

/* How many threads a call of nt threads will really use: nt, or 1 while the pool is in a
 * back-off (its calls run on their caller alone), or 1 when every worker is asleep and the
 * call's estimated one-thread time `solo_us` is too short to pay for waking one (a sleeping
 * worker takes tens of microseconds to start: kernels called from Python a little apart
 * find the workers asleep; back to back, still spinning). A kernel that shapes its work by
 * its thread count (the GEMM's chunk grid) asks first, so a call that will run alone is
 * cut as on one thread. */
int threads_now(int nt, double solo_us);

/* Threads the kernels should use (1..TT_MAX_THREADS, within OMP_THREAD_LIMIT). */
int num_threads();

}  // namespace tt
