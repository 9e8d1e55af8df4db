/*
 * tinytorch.h -- the C API of libtinytorch, and its manual.
 *
 * libtinytorch is the native runtime of TinyTorch: aligned, reference-counted
 * storage; tensor descriptors (dtype, shape, strides, offset) over that storage;
 * CPU feature detection with a run-time choice of instruction set; and the
 * kernels the Python package calls through ctypes (GEMM, fused bias + GELU,
 * FlashAttention forward and backward).
 * Python owns autograd; this library owns memory and arithmetic.
 *
 * Conventions
 *   - Every fallible function returns a tt_status. TT_OK is 0. On any other
 *     status, tt_last_error() returns a message for the calling thread that
 *     names the argument and the values ("tt_sgemm: lda=3 is smaller than K=4").
 *     The library never calls abort() or exit() and never throws across the ABI.
 *   - Sizes, strides and offsets are int64_t, counted in elements (not bytes)
 *     unless the name says bytes. Size arithmetic is overflow-checked.
 *   - Opaque handles end in _t. Constructors are tt_<noun>_create, destructors
 *     tt_<noun>_free (or _release for reference-counted storage). A handle is a
 *     token, not an address: tokens are never reused, so a freed handle passed
 *     back in is always refused with TT_ERR_INVALID_HANDLE (also after new
 *     objects were created in its memory), and so is a handle of the wrong kind
 *     (a storage where a tensor is expected). The library never dereferences a
 *     handle it does not know.
 *   - Enumerations (tt_status, tt_isa, tt_dtype) are passed in as int and
 *     validated: an out-of-range value is refused (or named "unknown"), never
 *     loaded as an enum.
 *   - Matrices are row-major. Buffers passed to kernels are plain pointers; the
 *     caller keeps them alive for the duration of the call.
 *
 * Example (link with -ltinytorch, or find_package(tinytorch) / pkg-config tinytorch):
 *
 *     #include <tinytorch/tinytorch.h>
 *     float A[2*3] = {1,2,3,4,5,6}, B[3*2] = {1,0,0,1,1,1}, C[2*2];
 *     if (tt_sgemm(0, 0, 2, 2, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2) != TT_OK)
 *         fprintf(stderr, "gemm failed: %s\n", tt_last_error());
 *     // C = {4, 5, 10, 11}
 */
#ifndef TINYTORCH_H
#define TINYTORCH_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(TT_BUILDING_LIBRARY)
#    define TT_API __declspec(dllexport)
#  else
#    define TT_API __declspec(dllimport)
#  endif
#else
#  define TT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status and errors                                                        */
/* ------------------------------------------------------------------------ */

typedef enum tt_status {
    TT_OK = 0,
    TT_ERR_NULL_POINTER = 1,     /* a required pointer argument was NULL            */
    TT_ERR_INVALID_ARGUMENT = 2, /* a value is out of its allowed range             */
    TT_ERR_SHAPE_MISMATCH = 3,   /* sizes of two arguments do not agree             */
    TT_ERR_OVERFLOW = 4,         /* a size computation would overflow int64/size_t  */
    TT_ERR_OUT_OF_MEMORY = 5,    /* the allocator returned NULL                     */
    TT_ERR_UNSUPPORTED = 6,      /* dtype, ISA or feature not available             */
    TT_ERR_INVALID_HANDLE = 7,   /* handle is unknown: never created, or freed      */
    TT_ERR_INTERNAL = 8          /* a bug in the library: please report it          */
} tt_status;

/* Name of a status ("TT_OK", "TT_ERR_SHAPE_MISMATCH", ...). Never NULL. */
TT_API const char *tt_status_string(int status);

/* Message describing the most recent failure on the calling thread ("" if
 * none). The pointer stays valid until the next tinytorch call on this thread. */
TT_API const char *tt_last_error(void);

/* Forget the calling thread's last error message. */
TT_API void tt_clear_error(void);

/* Library version, "MAJOR.MINOR.PATCH". */
TT_API const char *tt_version(void);

/* One-line JSON object describing the build and the running machine:
 *   {"version": ..., "compiler": ..., "build_type": ..., "isas_compiled": [...],
 *    "isa_detected": [...], "isa_best": ..., "isa_active": ..., "threads": N,
 *    "threads_source": "...", "max_threads": N}  (max_threads: the online CPUs)
 * The string is rebuilt on each call; it stays valid until the next call on this thread. */
TT_API const char *tt_build_info(void);

/* ------------------------------------------------------------------------ */
/* CPU features, instruction-set choice and threads                        */
/* ------------------------------------------------------------------------ */

typedef enum tt_isa {
    TT_ISA_SCALAR = 0, /* portable C++ reference kernels: always available    */
    TT_ISA_AVX2 = 1,   /* x86-64 AVX2 + FMA                                    */
    TT_ISA_AVX512 = 2, /* x86-64 AVX-512F (+ AVX2/FMA)                         */
    TT_ISA_NEON = 3    /* AArch64 Advanced SIMD                                */
} tt_isa;

/* "scalar", "avx2", "avx512", "neon"; "unknown" for anything else. */
TT_API const char *tt_isa_name(int isa);

/* 1 if this build contains kernels for isa, else 0 (also for values that are no tt_isa). */
TT_API int tt_isa_compiled(int isa);

/* 1 if the running CPU (and OS, for register state) supports isa, else 0. */
TT_API int tt_isa_supported(int isa);

/* The instruction set kernels use now. At load time it is the best one that is
 * both compiled and supported, or the one named by the environment variable
 * TINYTORCH_ISA=scalar|avx2|avx512|neon. If TINYTORCH_ISA names an ISA the CPU
 * lacks, the library stays on the best safe ISA and records the refusal, which
 * tt_isa_env_error() returns. */
TT_API tt_isa tt_isa_active(void);

/* Choose the ISA for all later kernel calls. Refuses (TT_ERR_UNSUPPORTED, with a
 * message) an ISA that is not compiled in or that the CPU lacks: the library
 * never executes an instruction the CPU does not have. */
TT_API tt_status tt_set_isa(int isa);

/* Parse "scalar", "avx2", "avx512" or "neon" (case-insensitive). */
TT_API tt_status tt_isa_from_name(const char *name, tt_isa *out);

/* Message explaining why TINYTORCH_ISA was refused at load time, or "" if it
 * was honoured or not set. */
TT_API const char *tt_isa_env_error(void);

/* Threads used by kernels: 1 <= n <= TT_MAX_THREADS, else TT_ERR_INVALID_ARGUMENT.
 * The default is OMP_NUM_THREADS when it is set and positive (larger values are clamped
 * to TT_MAX_THREADS), else the CPUs of the process's affinity mask, lowered to a cgroup
 * CPU quota when there is one (rounded up: 1.5 CPUs give 2 threads). A kernel never uses
 * more than OMP_THREAD_LIMIT when that is set. tt_threads_source() names the rule that
 * chose the count, e.g. "CPU affinity mask: 2 CPUs".
 *
 * The threading model (runtime/core/thread_pool.h): the runtime keeps its own pool of
 * n - 1 worker threads. A parallel kernel cuts its work into chunks whose boundaries
 * depend on the problem alone, the calling thread and the workers claim chunks from one
 * counter, and the caller waits only for chunks a worker has claimed: a worker that is
 * asleep or descheduled (a busy machine) takes no part, so a call is never slower than on
 * one thread by more than one chunk. Results are bit-identical for every thread count and
 * schedule (reductions add per-chunk partial sums in chunk order). After a call that
 * waited over 1 ms for a preempted worker, later calls run on the caller alone for a short
 * back-off period (8 times the wait, at least 1 ms, doubling while stalls recur, up to
 * 1 s, fading after clean parallel calls; TINYTORCH_THREAD_BACKOFF=0 turns it off). A call
 * whose workers ran only on the caller's own core (the scheduler's placement when another
 * thread holds every other core: the two took turns, 1.1-1.2x one thread's time) backs off
 * the same way, its window doubling from 1 ms while it repeats. A GEMM called during a
 * back-off is cut into the chunk grid of one thread, since it will run alone.
 * Small problems run on the caller alone (each kernel family's rule is in
 * runtime/core/config.h), and a call of any kernel family whose one-thread time is estimated
 * under 150 us runs alone when every worker sleeps (waking one cost 30-60 us on a 2-vCPU
 * VM; the estimates are in runtime/core/parallel.h). A kernel called from inside a chunk,
 * or from a second thread while the pool is busy, runs on its calling thread alone. Idle
 * workers spin for TINYTORCH_SPIN_US microseconds (default 20) and then sleep. The pool is
 * rebuilt in a child after fork(). */
#define TT_MAX_THREADS 256
TT_API tt_status tt_set_num_threads(int n);
TT_API int tt_get_num_threads(void);
TT_API const char *tt_threads_source(void);

/* Counters of the thread pool since start or the last tt_thread_stats_reset (all calls
 * of the process): `jobs` parallel calls offered to the pool, `solo_jobs` run on their
 * caller alone because the pool was busy with another thread's call, `chunks_caller` and
 * `chunks_workers` chunks run by calling threads and by pool workers, `stalls` joins that
 * waited long for a claimed chunk, `backed_off_jobs` calls run alone during a back-off,
 * `one_core_jobs` calls whose workers ran only on the caller's own core (each starts a
 * back-off), `workers` the pool's threads. */
typedef struct tt_thread_stats {
    int64_t jobs, solo_jobs, chunks_caller, chunks_workers, stalls, backed_off_jobs, one_core_jobs,
        workers;
} tt_thread_stats_t;
TT_API tt_status tt_thread_stats(tt_thread_stats_t *out);
TT_API tt_status tt_thread_stats_reset(void);  /* also ends a back-off period */

/* Testing hook: the first `workers` pool workers (0 releases them) claim nothing until
 * released, as if they had lost their cores; parallel calls still complete, on the caller
 * and the other workers, with the same results. 0 <= workers <= TT_MAX_THREADS. */
TT_API tt_status tt_thread_pool_hold(int workers);

/* Testing hook: every pool worker sleeps `delay_us` microseconds after claiming a chunk and
 * before running it (0 ends it), as if it lost its core in the middle of a job. The caller's
 * join then waits on it: the call counts a stall and the pool backs off (the next calls run on
 * the caller alone, counted in backed_off_jobs, and the GEMM cuts its grid as one thread), with
 * the same results. 0 <= delay_us <= 1000000. */
TT_API tt_status tt_thread_pool_slow(int64_t delay_us);

/* ------------------------------------------------------------------------ */
/* Storage: 64-byte aligned, reference-counted buffers                      */
/* ------------------------------------------------------------------------ */

typedef struct tt_storage tt_storage_t;

/* Allocate nbytes (>= 0) of zeroed memory aligned to TT_ALIGNMENT bytes. The
 * caller owns one reference. nbytes == 0 gives a valid storage with a non-NULL,
 * aligned data pointer that must not be dereferenced.
 *
 * Who owns what: a storage counts caller references and tensor references apart.
 * tt_storage_create gives the caller one reference and tt_storage_retain one
 * more; each is given back with tt_storage_release. Tensor descriptors hold their
 * own references (tt_tensor_create, tt_tensor_from_storage and every view take
 * one; tt_tensor_free drops it). The memory is freed when no reference of
 * either kind is left, and then the handle is invalid. No other call returns a
 * reference: tt_tensor_storage lends the handle, valid while the tensor lives. */
#define TT_ALIGNMENT 64
TT_API tt_status tt_storage_create(int64_t nbytes, tt_storage_t **out);

/* Add / give back one caller reference. Releasing a storage on which the caller
 * holds no reference (for example one only lent by tt_tensor_storage) is refused
 * with TT_ERR_INVALID_ARGUMENT, so it can never free memory a tensor still uses. */
TT_API tt_status tt_storage_retain(tt_storage_t *storage);
TT_API tt_status tt_storage_release(tt_storage_t *storage);

TT_API tt_status tt_storage_data(const tt_storage_t *storage, void **out);
TT_API tt_status tt_storage_nbytes(const tt_storage_t *storage, int64_t *out);
/* All references: the caller's plus one per tensor descriptor over it. */
TT_API tt_status tt_storage_refcount(const tt_storage_t *storage, int64_t *out);

/* Process-wide counters over storage allocations (thread-safe). */
typedef struct tt_memory_stats {
    int64_t bytes_in_use;  /* bytes held by live storages                 */
    int64_t peak_bytes;    /* maximum of bytes_in_use since the last reset */
    int64_t allocations;   /* storages created since the process started  */
    int64_t frees;         /* storages freed since the process started    */
} tt_memory_stats;

TT_API tt_status tt_memory_stats_get(tt_memory_stats *out);

/* Set peak_bytes to the current bytes_in_use. */
TT_API void tt_memory_reset_peak(void);

/* ------------------------------------------------------------------------ */
/* Tensor descriptors                                                       */
/* ------------------------------------------------------------------------ */

typedef enum tt_dtype {
    TT_F32 = 0,
    TT_F64 = 1,
    TT_F16 = 2,
    TT_I32 = 3,
    TT_I64 = 4
} tt_dtype;

#define TT_MAX_DIMS 8

typedef struct tt_tensor tt_tensor_t;

/* Bytes per element of dtype (0 for an unknown dtype); its name ("unknown"). */
TT_API int64_t tt_dtype_size(int dtype);
TT_API const char *tt_dtype_name(int dtype);

/* New contiguous, zero-filled tensor with its own storage.
 * 0 <= ndim <= TT_MAX_DIMS; every shape[i] >= 0; shape may be NULL when ndim == 0.
 * The product of the sizes, each counted as at least 1, times the element size must
 * fit in int64 (else TT_ERR_OVERFLOW): {0, 2^62, 4} is refused like {2^62, 4, 0},
 * since its strides would overflow. The same rule holds for every shape below. */
TT_API tt_status tt_tensor_create(int dtype, int ndim, const int64_t *shape,
                                  tt_tensor_t **out);

/* Descriptor over existing storage (the storage gains a tensor reference).
 * strides == NULL means contiguous row-major. Every element the descriptor can
 * address must lie inside the storage, else TT_ERR_INVALID_ARGUMENT; a view with
 * no elements must still have offset * itemsize <= the storage's bytes. The span
 * offset + sum of (shape[i] - 1) * strides[i] over the non-empty dimensions, in
 * bytes, must fit in int64 (TT_ERR_OVERFLOW). Negative strides are not supported. */
TT_API tt_status tt_tensor_from_storage(tt_storage_t *storage, int dtype, int ndim,
                                        const int64_t *shape, const int64_t *strides,
                                        int64_t offset, tt_tensor_t **out);

/* Views share storage and never copy. */
/* Reshape: the element count must match, and the source must be contiguous. */
TT_API tt_status tt_tensor_reshape(const tt_tensor_t *t, int ndim, const int64_t *shape,
                                   tt_tensor_t **out);
/* Swap two dimensions. */
TT_API tt_status tt_tensor_transpose(const tt_tensor_t *t, int dim0, int dim1,
                                     tt_tensor_t **out);
/* Python-style slice start:stop:step of one dimension, 0 <= start <= stop <= size,
 * step >= 1 (bounds are not clamped: out of range is an error). The new size is
 * ceil((stop - start) / step) for any step, up to INT64_MAX; the new stride is
 * stride * step, except that a dimension of size <= 1 keeps the old stride. A view
 * with no elements keeps the source's offset. */
TT_API tt_status tt_tensor_slice(const tt_tensor_t *t, int dim, int64_t start, int64_t stop,
                                 int64_t step, tt_tensor_t **out);

/* Free a descriptor (drops its storage reference). NULL is accepted and ignored. */
TT_API tt_status tt_tensor_free(tt_tensor_t *t);

/* 1 if the elements are laid out row-major without gaps; a tensor with no elements is
 * always contiguous (its reshape needs no copy). */
TT_API tt_status tt_tensor_is_contiguous(const tt_tensor_t *t, int *out);
TT_API tt_status tt_tensor_ndim(const tt_tensor_t *t, int *out);
TT_API tt_status tt_tensor_dtype(const tt_tensor_t *t, tt_dtype *out);
/* Copy ndim values into out (the caller provides TT_MAX_DIMS slots is always safe). */
TT_API tt_status tt_tensor_shape(const tt_tensor_t *t, int64_t *out);
TT_API tt_status tt_tensor_strides(const tt_tensor_t *t, int64_t *out);
TT_API tt_status tt_tensor_offset(const tt_tensor_t *t, int64_t *out);
TT_API tt_status tt_tensor_numel(const tt_tensor_t *t, int64_t *out);
/* Address of element [0, 0, ...] (storage data + offset * itemsize). */
TT_API tt_status tt_tensor_data(const tt_tensor_t *t, void **out);
/* The storage under t, lent without a reference: valid while t lives. Call
 * tt_storage_retain to keep it (and tt_storage_release for that reference). */
TT_API tt_status tt_tensor_storage(const tt_tensor_t *t, tt_storage_t **out);

/* ------------------------------------------------------------------------ */
/* Kernels                                                                  */
/* ------------------------------------------------------------------------ */

/* Single-precision GEMM, BLAS semantics on row-major matrices:
 *   C = alpha * op(A) @ op(B) + beta * C
 * op(A) is M x K: A is stored M x K (lda >= K) when transA == 0, or K x M
 * (lda >= M) when transA != 0. op(B) is K x N: B is K x N (ldb >= N) or N x K
 * (ldb >= K). C is M x N with ldc >= N. (So a leading dimension may be 0 when the
 * matrix has 0 columns.) When beta == 0, C is not read (NaN in
 * C does not propagate). M, N or K == 0 is valid (K == 0 scales C by beta).
 * Pointers may be NULL only when the matrix they describe has no elements.
 * Uses the active ISA and the configured thread count. */
TT_API tt_status tt_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K,
                          float alpha, const float *A, int64_t lda,
                          const float *B, int64_t ldb,
                          float beta, float *C, int64_t ldc);

/* The portable triple-loop reference with the same contract, single-threaded,
 * accumulating in float. Tests compare the fast path against it. */
TT_API tt_status tt_sgemm_reference(int transA, int transB, int64_t M, int64_t N, int64_t K,
                                    float alpha, const float *A, int64_t lda,
                                    const float *B, int64_t ldb,
                                    float beta, float *C, int64_t ldc);

/* batch independent GEMMs; matrix i uses A + i*strideA, B + i*strideB,
 * C + i*strideC (strides in elements, >= 0; the C matrices must not overlap).
 * The last matrix of each non-empty operand must be addressable in int64 bytes
 * (TT_ERR_OVERFLOW); an operand with no elements (K == 0 for A and B) is never
 * read and its stride is not used. */
TT_API tt_status tt_sgemm_strided_batched(int transA, int transB, int64_t M, int64_t N,
                                          int64_t K, float alpha,
                                          const float *A, int64_t lda, int64_t strideA,
                                          const float *B, int64_t ldb, int64_t strideB,
                                          float beta, float *C, int64_t ldc, int64_t strideC,
                                          int64_t batch);

/* Fused bias + GELU, tanh approximation:
 *   u = x + bias[j]      (bias may be NULL: u = x)
 *   y = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
 * x and y are rows x cols, contiguous (y may equal x, but not partly overlap it);
 * bias has cols entries and must not overlap y (TT_ERR_INVALID_ARGUMENT): y is
 * written while later rows still read bias. The reference checks the same. */
TT_API tt_status tt_bias_gelu_forward(const float *x, const float *bias, float *y,
                                      int64_t rows, int64_t cols);

/* Backward of the above: grad_x = grad_y * gelu'(u);
 * grad_bias[j] = sum over rows of grad_x[:, j] (grad_bias may be NULL; it is
 * overwritten, not accumulated). grad_x may equal grad_y or x, but not partly
 * overlap either, and must not overlap bias; grad_bias must overlap none of x,
 * bias, grad_y and grad_x (TT_ERR_INVALID_ARGUMENT). */
TT_API tt_status tt_bias_gelu_backward(const float *x, const float *bias, const float *grad_y,
                                       float *grad_x, float *grad_bias,
                                       int64_t rows, int64_t cols);

/* Scalar double-precision-internal reference versions of the two above. */
TT_API tt_status tt_bias_gelu_forward_reference(const float *x, const float *bias, float *y,
                                                int64_t rows, int64_t cols);
TT_API tt_status tt_bias_gelu_backward_reference(const float *x, const float *bias,
                                                 const float *grad_y, float *grad_x,
                                                 float *grad_bias, int64_t rows, int64_t cols);

/* Half-precision GEMM for mixed-precision training: A, B and C hold IEEE 754
 * binary16 values (as uint16_t bits); arithmetic is float32. Same shapes, flags and
 * argument rules as tt_sgemm:
 *   C = round_to_f16(alpha * op(A) @ op(B) + beta * C)
 * op(A) and op(B) are widened to float32 once (F16C when the CPU has it), the float32
 * GEMM runs on them, and the result is rounded to nearest even. Uses one float32 copy
 * of each operand as scratch. tt_hgemm_reference uses the scalar converters and the
 * reference GEMM. */
TT_API tt_status tt_hgemm(int transA, int transB, int64_t M, int64_t N, int64_t K,
                          float alpha, const uint16_t *A, int64_t lda,
                          const uint16_t *B, int64_t ldb,
                          float beta, uint16_t *C, int64_t ldc);
TT_API tt_status tt_hgemm_reference(int transA, int transB, int64_t M, int64_t N, int64_t K,
                                    float alpha, const uint16_t *A, int64_t lda,
                                    const uint16_t *B, int64_t ldb,
                                    float beta, uint16_t *C, int64_t ldc);

/* Convert n values between binary16 (uint16_t bits) and float32, rounding to
 * nearest even; NaN stays NaN, overflow becomes infinity. */
TT_API tt_status tt_f16_to_f32(const uint16_t *src, float *dst, int64_t n);
TT_API tt_status tt_f32_to_f16(const float *src, uint16_t *dst, int64_t n);

/* Attention (FlashAttention: tiled, online softmax, nothing of size sq x sk in memory).
 *
 * Causal masking, passed as int to the two functions below:
 *   TT_ATTENTION_FULL        every query sees every key
 *   TT_ATTENTION_CAUSAL      query i sees keys j <= i (top-left aligned: PyTorch's
 *                            is_causal; with sq > sk the later queries see every key)
 *   TT_ATTENTION_CAUSAL_END  query i sees keys j <= i + sk - sq (bottom-right aligned: the
 *                            queries are the last sq positions, as in KV-cache decoding) */
typedef enum tt_attention_causal {
    TT_ATTENTION_FULL = 0,
    TT_ATTENTION_CAUSAL = 1,
    TT_ATTENTION_CAUSAL_END = 2
} tt_attention_causal;

/* Scaled dot-product attention for batch x heads independent problems:
 *   O   = softmax(scale * Q K^T, masked) V          Q, O: sq x d;  K, V: sk x d
 *   lse = log sum_j exp(scale * q_i . k_j)          over the keys query i sees
 * Layout: element (b, h, row, c) of an operand X lives at X[b*s[0] + h*s[1] + row*s[2] + c],
 *   s being that operand's strides argument (3 int64 in elements, each >= 0; NULL means
 *   contiguous [batch][heads][rows][d]). The last dimension is contiguous. A stride of 0
 *   broadcasts (one K/V head shared by several query heads, say). lse is batch*heads*sq
 *   contiguous floats ([b][h][i], natural log) or NULL when no backward will follow.
 * A query that sees no key (sk == 0, or CAUSAL_END with i + sk - sq < 0) gets a zero output
 *   row and lse = -inf. With d == 0 nothing is computed: o has no elements and lse (if given)
 *   is log of the number of keys each query sees (every score is 0); the call returns at
 *   once whatever sq and sk are. NaN in a query, or in a key or value the query sees, makes that
 *   query's row NaN (as the naive formula does); positions masked out by causal are not
 *   read at all where a whole 64 x 64 block is masked.
 * Rules: batch, heads, sq, sk, d >= 0 (TT_ERR_INVALID_ARGUMENT), causal one of the above,
 *   scale finite; pointers may be NULL only for operands without elements; every operand's
 *   span must fit int64 bytes (TT_ERR_OVERFLOW); o must not alias itself (no two elements
 *   at one address) and neither o nor lse may overlap q, k, v or each other (compared by
 *   the address range from first to last element). Inputs may alias each other.
 * Works on blocks of 64 queries x 64 keys (sized for L1/L2): scores are kept transposed,
 *   queries along the SIMD lanes of the active ISA, with a running max m_i, sum l_i and a
 *   rescaled accumulator per query; causal key blocks a query block cannot see are
 *   skipped. Threads over (batch*head, query block). Workspace (counted by
 *   tt_memory_stats) is (2d + 67) x 64 floats per thread. Path "attention_forward:<isa>".
 * Few queries (1 <= sq <= lanes / 2: 4 on AVX2, 8 on AVX-512, 2 on NEON; decoding with a KV
 *   cache) would leave most lanes empty, so each query row goes alone instead: scores by dot
 *   products along d, the same online softmax per 64 keys, exp from libm; threads over
 *   (batch*head, query), 64 + d floats of workspace per thread, path
 *   "attention_forward:<isa>:rows". Either way the bits do not depend on the thread count. */
TT_API tt_status tt_attention_forward(const float *q, const int64_t *q_strides,
                                      const float *k, const int64_t *k_strides,
                                      const float *v, const int64_t *v_strides,
                                      float *o, const int64_t *o_strides, float *lse,
                                      int64_t batch, int64_t heads, int64_t sq, int64_t sk,
                                      int64_t d, float scale, int causal);

/* Gradients of tt_attention_forward (FlashAttention-2 backward), from its inputs, its o
 * and lse, and grad_o = dL/dO; scores and probabilities are recomputed block by block:
 *   P = exp(scale Q K^T - lse),  D_i = sum_c grad_o[i][c] o[i][c],  dV = P^T grad_o,
 *   dP = grad_o V^T,  dS = P * (dP - D),  dQ = scale dS K,  dK = scale dS^T Q
 * grad_q, grad_k and grad_v are overwritten (not accumulated); any of them may be NULL
 * (not computed; its strides are then ignored). Layout and rules as in the forward, with q,
 * k, v, o, grad_o and lse the inputs (lse required when there are queries) and the three
 * gradients the outputs: each must not alias itself nor overlap an input or another
 * gradient. Keys no query sees get zero gradients. Threads over heads, or over key blocks
 * of a head when there are fewer heads than threads (dQ then summed per thread, in thread
 * order: deterministic for a thread count). Workspace (counted by tt_memory_stats) is
 * about 2 (sq + 64)(d + 1) + 128 (64 + d) floats per thread, plus 2 sq d per thread when
 * heads are split. Path "attention_backward:<isa>". */
TT_API tt_status tt_attention_backward(const float *q, const int64_t *q_strides,
                                       const float *k, const int64_t *k_strides,
                                       const float *v, const int64_t *v_strides,
                                       const float *o, const int64_t *o_strides,
                                       const float *grad_o, const int64_t *grad_o_strides,
                                       const float *lse,
                                       float *grad_q, const int64_t *grad_q_strides,
                                       float *grad_k, const int64_t *grad_k_strides,
                                       float *grad_v, const int64_t *grad_v_strides,
                                       int64_t batch, int64_t heads, int64_t sq, int64_t sk,
                                       int64_t d, float scale, int causal);

/* Row-wise normalisations over the last axis of a contiguous rows x cols float matrix
 * (runtime/cpu/rownorm*.cpp: a scalar, an AVX2, an AVX-512 and a NEON row kernel chosen
 * by the active ISA). Rows are split across
 * threads above 2^16 elements; every result is deterministic for a given thread count.
 * Every function checks rows, cols >= 0 (and rows x cols floats fit in int64 bytes);
 * pointers may be NULL only when the text says so or there is nothing to touch.
 *
 * Layer norm: mean_i = sum_j x_ij / cols, var_i = sum_j (x_ij - mean_i)^2 / cols (biased),
 *   rstd_i = 1 / sqrt(var_i + eps),  y_ij = (x_ij - mean_i) rstd_i gamma_j + beta_j.
 * gamma and beta (cols entries each) may be NULL (weight 1, bias 0); mean and rstd (rows
 * entries each) may be NULL when not wanted. The statistics are one pass over the row
 * (sum and sum of squares of x - x_i0 per SIMD lane, combined in double), and y is formed
 * from the same shift, ((x_ij - x_i0) - (mean_i - x_i0)) rstd_i, so a row whose |mean| is
 * far above its spread (1.7e9 +- 1e4) keeps it. The saved mean is rounded to float, so
 * tt_layernorm_backward's xhat loses such a row's spread (a known limit). eps must be
 * finite and >= 0. y may equal x (not partly overlap it); y must not overlap gamma, beta,
 * mean or rstd. cols == 0 gives mean 0, rstd 1/sqrt(eps). Path "layernorm_forward:<isa>". */
TT_API tt_status tt_layernorm_forward(const float *x, const float *gamma, const float *beta,
                                      float *y, float *mean, float *rstd,
                                      int64_t rows, int64_t cols, float eps);

/* Gradients of tt_layernorm_forward from its x, gamma, saved mean and rstd, and
 * grad_y = dL/dy: with xhat = (x - mean) rstd and g = grad_y gamma (grad_y if gamma is NULL),
 *   grad_x_ij     = rstd_i (g_ij - mean_j(g_i.) - xhat_ij mean_j(g_i. xhat_i.)),
 *   grad_gamma_j  = sum_i grad_y_ij xhat_ij,   grad_beta_j = sum_i grad_y_ij.
 * grad_x, grad_gamma and grad_beta may each be NULL (not computed); grad_gamma and
 * grad_beta are overwritten, summed per thread in float over chunks of 64 rows, then in
 * double, in thread order (deterministic). grad_x may equal grad_y or x; grad_gamma and
 * grad_beta overlap nothing. Path "layernorm_backward:<isa>". */
TT_API tt_status tt_layernorm_backward(const float *x, const float *gamma, const float *mean,
                                       const float *rstd, const float *grad_y, float *grad_x,
                                       float *grad_gamma, float *grad_beta,
                                       int64_t rows, int64_t cols);

/* Softmax and log-softmax of each row: m_i = max_j x_ij, lse_i = m_i + log sum_j exp(x_ij - m_i),
 *   softmax: y_ij = exp(x_ij - m_i) / sum_j exp(x_ij - m_i),   log-softmax: y_ij = x_ij - lse_i.
 * lse (rows entries) may be NULL; y may equal x (not partly overlap it); lse must not
 * overlap x or y. A row holding NaN, or +inf, or only -inf gives NaN (as PyTorch).
 * Paths "softmax_forward:<isa>", "log_softmax_forward:<isa>". */
TT_API tt_status tt_softmax_forward(const float *x, float *y, float *lse, int64_t rows,
                                    int64_t cols);
TT_API tt_status tt_log_softmax_forward(const float *x, float *y, float *lse, int64_t rows,
                                        int64_t cols);

/* Backward from the forward's output y and grad_y:
 *   softmax:     grad_x = y (grad_y - sum_j grad_y_ij y_ij)
 *   log-softmax: grad_x = grad_y - exp(y) sum_j grad_y_ij
 * grad_x may equal grad_y or y (not partly overlap either). Paths "softmax_backward:<isa>",
 * "log_softmax_backward:<isa>". */
TT_API tt_status tt_softmax_backward(const float *y, const float *grad_y, float *grad_x,
                                     int64_t rows, int64_t cols);
TT_API tt_status tt_log_softmax_backward(const float *y, const float *grad_y, float *grad_x,
                                         int64_t rows, int64_t cols);

/* Cross-entropy of each row of logits (rows x cols, contiguous) against an int64 class
 * target per row, from the row's log-sum-exp (the log-softmax is never stored):
 *   lse_i = log sum_j exp(logits_ij),  loss_i = lse_i - logits_i,target_i,
 * and loss_i = 0 where target_i == ignore_index (lse_i is still written). Every other
 * target must lie in [0, cols) (TT_ERR_INVALID_ARGUMENT naming the row). lse may be NULL;
 * loss and lse overlap nothing else. Path "cross_entropy_forward:<isa>". */
TT_API tt_status tt_cross_entropy_forward(const float *logits, const int64_t *target,
                                          float *loss, float *lse, int64_t rows, int64_t cols,
                                          int64_t ignore_index);

/* Gradient of sum_i grad_loss_i loss_i:
 *   grad_logits_ij = grad_loss_i (softmax(logits_i)_j - [j == target_i]),
 * rows whose target is ignore_index get 0. The softmax is recomputed shifted by the row
 * maximum, exact under shift (exp(logits_ij - lse_i) would round log(sum) away once
 * |logits| >> 1: tied logits of 1e7 would get probability 1 each); lse, the forward's, is
 * checked like the other inputs but not needed. grad_logits may equal logits (not partly overlap
 * it). Path "cross_entropy_backward:<isa>". */
TT_API tt_status tt_cross_entropy_backward(const float *logits, const int64_t *target,
                                           const float *lse, const float *grad_loss,
                                           float *grad_logits, int64_t rows, int64_t cols,
                                           int64_t ignore_index);

/* ------------------------------------------------------------------------ */
/* Training-step kernels: optimizer update and embedding lookup              */
/* ------------------------------------------------------------------------ */

/* Adam (decoupled == 0) or AdamW (decoupled != 0) over `count` float32 tensors in one
 * call, PyTorch's rule, in place; tensor t has numel[t] contiguous elements in params[t],
 * its gradient grads[t] and its moments exp_avg[t], exp_avg_sq[t], and steps[t] is its
 * step count *after* this update (>= 1: the first update passes 1):
 *     AdamW: p *= 1 - lr wd        Adam: g += wd p
 *     m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
 *     p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 * The hyper-parameters are doubles (the bias corrections and 1 - beta are formed in double,
 * as PyTorch does); the update itself runs in float32, one pass over p, g, m, v, with all
 * tensors' elements split across threads as one range.
 * lr, eps, weight_decay finite and >= 0, betas in [0, 1). Buffers must not overlap.
 * Path "adam:<isa>". */
TT_API tt_status tt_adam_step(int64_t count, float *const *params, const float *const *grads,
                              float *const *exp_avg, float *const *exp_avg_sq,
                              const int64_t *numel, const int64_t *steps, double lr,
                              double beta1, double beta2, double eps, double weight_decay,
                              int decoupled);

/* Embedding lookup: out[i, :] = weight[ids[i], :] for i < n; weight is vocab x dim and out
 * n x dim, both contiguous. Every id must lie in [0, vocab) (TT_ERR_INVALID_ARGUMENT naming
 * the first one that does not; nothing is written then). Path "embedding:<isa>". */
TT_API tt_status tt_embedding_forward(const float *weight, int64_t vocab, int64_t dim,
                                      const int64_t *ids, int64_t n, float *out);

/* Its gradient: grad_weight[ids[i], :] += grad_out[i, :] for i < n, after zeroing
 * grad_weight (vocab x dim) unless accumulate != 0. Repeated ids add up in id order (the
 * result equals NumPy's np.add.at); ids are checked first, as in the forward. Path
 * "embedding_backward:<isa>". */
TT_API tt_status tt_embedding_backward(const float *grad_out, const int64_t *ids, int64_t n,
                                       int64_t dim, float *grad_weight, int64_t vocab,
                                       int accumulate);

/* ReLU over n contiguous floats: y = max(x, 0), NaN stays NaN (y may equal x), and its
 * gradient from the forward's output: grad_x = 0 where y <= 0, else grad_y (a NaN passes its
 * gradient, as PyTorch's; grad_x may equal grad_y). Paths "relu:<isa>", "relu_backward:<isa>". */
TT_API tt_status tt_relu_forward(const float *x, float *y, int64_t n);
TT_API tt_status tt_relu_backward(const float *y, const float *grad_y, float *grad_x,
                                  int64_t n);

/* Convolution's unfold, NCHW float32, contiguous: x is N x C x H x W, kernel KH x KW,
 * strides sh, sw >= 1, zero padding ph, pw >= 0 on each side; OH = (H + 2ph - KH)/sh + 1,
 * OW likewise (the padded input must hold one window). cols is (C*KH*KW) x (N*OH*OW):
 *     cols[(c*KH + i)*KW + j][(n*OH + oh)*OW + ow] = x[n][c][oh*sh + i - ph][ow*sw + j - pw]
 * (0 outside the image), so a convolution is W (OC x C*KH*KW) times cols. Sizes < 0, a
 * kernel or stride < 1 or padding < 0 give TT_ERR_INVALID_ARGUMENT, a padded input smaller
 * than the kernel TT_ERR_SHAPE_MISMATCH; H, W, KH, KW, ph or pw above 2^31 - 1, or any
 * tensor whose bytes overflow int64, TT_ERR_OVERFLOW. Path "im2col:cpu". */
TT_API tt_status tt_im2col(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                           int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                           float *cols);

/* Its adjoint: grad_x (N x C x H x W, overwritten) = the sum, over every cols entry, of
 * that entry into the input pixel it was copied from (overlapping windows add up; padding
 * entries are dropped). Same geometry arguments and the same errors (TT_ERR_OVERFLOW for
 * dimensions above 2^31 - 1 included). Path "col2im:cpu". */
TT_API tt_status tt_col2im(const float *cols, int64_t n, int64_t c, int64_t h, int64_t w,
                           int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                           float *grad_x);

/* Max pooling, geometry as tt_im2col (padding is -inf: it never wins). x is N x C planes
 * of H x W contiguous floats, plane (n, c) starting at x + n*stride_n + c*stride_c
 * (stride_n = C*H*W, stride_c = H*W for NCHW; (C, N, H, W) storage seen as NCHW works too).
 * y (N x C x OH x OW, contiguous) holds each window's maximum and argmax the index
 * (ih*W + iw, within its plane) of the first maximum in window order; a NaN in a window
 * wins and propagates (as PyTorch). Path "maxpool2d_forward:cpu". */
TT_API tt_status tt_maxpool2d_forward(const float *x, int64_t n, int64_t c, int64_t h, int64_t w,
                                      int64_t stride_n, int64_t stride_c, int64_t kh, int64_t kw,
                                      int64_t sh, int64_t sw, int64_t ph, int64_t pw, float *y,
                                      int64_t *argmax);

/* Its gradient: grad_x (N x C planes of H x W, overwritten; plane (n, c) at
 * grad_x + n*stride_n + c*stride_c, like the forward's input) = 0 plus grad_y[n][c][q]
 * added at argmax[n][c][q] of its plane (-1 entries are skipped; any other index outside
 * [0, H*W) is refused before anything is written, also when H*W = 0, where only -1 is
 * valid). grad_y and argmax are contiguous
 * N x C x OH x OW. Path "maxpool2d_backward:cpu". */
TT_API tt_status tt_maxpool2d_backward(const float *grad_y, const int64_t *argmax, int64_t n,
                                       int64_t c, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                       float *grad_x, int64_t stride_n, int64_t stride_c);

/* ------------------------------------------------------------------------ */
/* INT8 GEMM: u8 activations x s8 weights, exact int32 accumulation          */
/* ------------------------------------------------------------------------ */

/* The product behind int8 inference (a quantized Linear layer):
 *   acc[i][j] = sum_{k < K} a[i][k] * w[k][j]     a in u8 [0, 255], w in s8 [-128, 127]
 * accumulated in int32 without rounding or saturation on every kernel (the scheme of
 * each ISA and its proof: docs/int8.md). Exact for K <= TT_QGEMM_MAX_K, where
 * K * 255 * 128 < 2^31; larger K is refused (TT_ERR_INVALID_ARGUMENT), never wrapped.
 *
 * The weights are packed once (tt_qgemm_pack) into a caller-owned, 64-byte-aligned buffer
 * laid out for one kernel; the pack also holds each column's sum of w, which folds the
 * activations' zero point into the epilogue. A kernel is a tt_qgemm_kernel value:
 * TT_QGEMM_AUTO (pack and size calls only) means tt_qgemm_kernel_for(the pack's flags).
 * A pack runs only where its kernel can run now: the scalar kernel always, any other one
 * while the active ISA is its ISA and the CPU has its instructions (avx512bw and
 * avx512_vnni under avx512, avx2 and avx2_u7 under avx2, neon / neon_dot under neon);
 * otherwise the GEMM calls refuse it with TT_ERR_UNSUPPORTED (repack for
 * tt_qgemm_kernel_for(flags)). A buffer that is
 * misaligned, too small, or not a pack for the call's K and N is refused too
 * (TT_ERR_INVALID_ARGUMENT / TT_ERR_SHAPE_MISMATCH). tt_last_kernel_path() reports
 * "qgemm:<kernel name>". Threads split the output into disjoint column panels and row
 * blocks: results are bit-identical for every thread count. */
#define TT_QGEMM_MAX_K 65793
typedef enum tt_qgemm_kernel {
    TT_QGEMM_AUTO = 0,        /* the best kernel for the active ISA                  */
    TT_QGEMM_SCALAR = 1,      /* portable int32 loops (the reference)                */
    TT_QGEMM_AVX2 = 2,        /* vpmaddwd on widened 16-bit values                   */
    TT_QGEMM_AVX512BW = 3,    /* vpmaddwd on widened 16-bit values, 512-bit          */
    TT_QGEMM_AVX512_VNNI = 4, /* vpdpbusd: u8 x s8 dot products of 4                 */
    TT_QGEMM_NEON = 5,        /* widened int32 loops                                 */
    TT_QGEMM_NEON_DOT = 6,    /* sdot on shifted activations                         */
    TT_QGEMM_AVX2_U7 = 7      /* vpmaddubsw on 7-bit activations (reduce_range packs
                                 only; the AVX2 kernel AUTO picks for them)          */
} tt_qgemm_kernel;

/* Flags of a pack (tt_qgemm_pack_ex), fixed when it is made and kept in its header.
 *
 * TT_QGEMM_REDUCE_RANGE: 7-bit activations, PyTorch's reduce_range=True. tt_qgemm_f32
 * quantizes each row onto [0, 127] instead of [0, 255] (tt_qgemm_quantize_rows_ex's
 * formula with qmax 127), and tt_qgemm_u8s8s32 refuses any activation above 127
 * (TT_ERR_INVALID_ARGUMENT, nothing written), never a saturated result. Why: on AVX2
 * without VNNI the 7-bit range makes vpmaddubsw exact (|a * w| <= 127 * 128, a pair at
 * most 32512 < 32767), about 1.4x the multiply rate of the exact 8-bit scheme; it costs
 * one bit of activation precision. Every kernel computes the same exact int32 on such a
 * pack (the others are exact for any u8), so results do not depend on the ISA. */
#define TT_QGEMM_REDUCE_RANGE 1

/* Fused activations of tt_qgemm_f32. */
typedef enum tt_qgemm_activation {
    TT_QGEMM_ACT_NONE = 0,
    TT_QGEMM_ACT_RELU = 1, /* max(y, 0)                                                */
    TT_QGEMM_ACT_GELU = 2  /* the tanh GELU of tt_bias_gelu_forward, same code         */
} tt_qgemm_activation;

/* The kernel TT_QGEMM_AUTO means now: on x86 avx512_vnni, else avx512bw under avx512
 * (scalar when the CPU lacks AVX-512BW), avx2 under avx2; on AArch64 neon_dot or neon
 * (which one the build compiled); scalar under scalar. */
TT_API int tt_qgemm_kernel_active(void);

/* The kernel TT_QGEMM_AUTO means now for a pack with `flags` (TT_QGEMM_REDUCE_RANGE or
 * 0): avx2_u7 under avx2 for a reduce_range pack, else tt_qgemm_kernel_active(). Unknown
 * flag bits give TT_QGEMM_AUTO (0), which no pack has. */
TT_API int tt_qgemm_kernel_for(int flags);

/* "scalar", "avx2", "avx512bw", "avx512_vnni", "neon", "neon_dot", "avx2_u7", "auto" or
 * "unknown". */
TT_API const char *tt_qgemm_kernel_name(int kernel);

/* 1 when a pack for `kernel` runs now (rules above), else 0 (also for AUTO and unknown). */
TT_API int tt_qgemm_kernel_usable(int kernel);

/* Bytes of a pack of a K x N weight for `kernel` (K <= TT_QGEMM_MAX_K, N >= 0). A kernel
 * this build lacks gives TT_ERR_UNSUPPORTED; avx2_u7 (which needs TT_QGEMM_REDUCE_RANGE)
 * gives TT_ERR_INVALID_ARGUMENT: use tt_qgemm_pack_size_ex. */
TT_API tt_status tt_qgemm_pack_size(int64_t K, int64_t N, int kernel, int64_t *bytes);

/* tt_qgemm_pack_size for a pack with `flags` (TT_QGEMM_REDUCE_RANGE or 0): TT_QGEMM_AUTO
 * resolves as tt_qgemm_kernel_for(flags), so pair it with tt_qgemm_pack_ex of the same
 * flags. avx2_u7 without TT_QGEMM_REDUCE_RANGE, and unknown flag bits, give
 * TT_ERR_INVALID_ARGUMENT. */
TT_API tt_status tt_qgemm_pack_size_ex(int64_t K, int64_t N, int kernel, int flags,
                                       int64_t *bytes);

/* Pack w (K x N row-major s8, ldw >= N) for `kernel` into packed: `bytes` bytes from
 * tt_qgemm_pack_size, 64-byte aligned, not overlapping w. Packing for a kernel that
 * cannot run on this machine is allowed (the GEMM calls then refuse the pack). */
TT_API tt_status tt_qgemm_pack(int kernel, int64_t K, int64_t N, const int8_t *w, int64_t ldw,
                               void *packed, int64_t bytes);

/* tt_qgemm_pack with `flags` stored in the pack (TT_QGEMM_REDUCE_RANGE or 0; tt_qgemm_pack
 * is this with 0). TT_QGEMM_AUTO resolves as tt_qgemm_kernel_for(flags); `bytes` comes from
 * tt_qgemm_pack_size_ex with the same kernel and flags. avx2_u7 without
 * TT_QGEMM_REDUCE_RANGE, and unknown flag bits, give TT_ERR_INVALID_ARGUMENT. */
TT_API tt_status tt_qgemm_pack_ex(int kernel, int flags, int64_t K, int64_t N, const int8_t *w,
                                  int64_t ldw, void *packed, int64_t bytes);

/* Dynamic asymmetric quantization of each row of x (M x K float32, ldx >= K), the one
 * tt_qgemm_f32 applies, in float32 with round half to even:
 *   lo = min(0, min_k x), hi = max(0, max_k x), scale = hi / 255 - lo / 255 (1 if 0),
 *   zp = clamp(round(-lo / scale), 0, 255) (as -lo * (1 / scale)),
 *   q[k] = clamp(round(x[k] * (1 / scale)) + zp, 0, 255).
 * q is M x K u8 (ldq >= K); scale and zero_point get M values. A row holding inf or NaN
 * gives TT_ERR_INVALID_ARGUMENT naming the first such row. */
TT_API tt_status tt_qgemm_quantize_rows(int64_t M, int64_t K, const float *x, int64_t ldx,
                                        uint8_t *q, int64_t ldq, float *scale,
                                        int32_t *zero_point);

/* tt_qgemm_quantize_rows with `flags`: TT_QGEMM_REDUCE_RANGE quantizes onto [0, 127], the
 * formula above with 127 in place of 255 in every step (scale = hi / 127 - lo / 127, zp and
 * q clamped to [0, 127]): what tt_qgemm_f32 applies on a reduce_range pack. 0 is
 * tt_qgemm_quantize_rows; unknown flag bits give TT_ERR_INVALID_ARGUMENT. */
TT_API tt_status tt_qgemm_quantize_rows_ex(int64_t M, int64_t K, const float *x, int64_t ldx,
                                           uint8_t *q, int64_t ldq, float *scale,
                                           int32_t *zero_point, int flags);

/* c = a @ w exactly in int32: a is M x K u8 (lda >= K), w the K x N weight of `packed`
 * (packed_bytes: the size of the caller's buffer), c M x N (ldc >= N). On a
 * TT_QGEMM_REDUCE_RANGE pack an a above 127 gives TT_ERR_INVALID_ARGUMENT naming its row
 * and column (c untouched). */
TT_API tt_status tt_qgemm_u8s8s32(int64_t M, int64_t N, int64_t K, const uint8_t *a,
                                  int64_t lda, const void *packed, int64_t packed_bytes,
                                  int32_t *c, int64_t ldc);

/* The quantized Linear layer in one call: each row of x (M x K float32, ldx >= K) is
 * quantized as tt_qgemm_quantize_rows_ex does with the pack's flags (scale sx[i], zero
 * point zx[i]; [0, 127] on a TT_QGEMM_REDUCE_RANGE pack, else [0, 255]), multiplied
 * by the packed weight exactly, and
 *   pre[i][j] = float(sum_k (q[i][k] - zx[i]) w[k][j]) * (sx[i] * w_scale[j])
 *   y[i][j]   = pre + bias[j]                  (TT_QGEMM_ACT_NONE)
 *             = max(pre + bias[j], 0)          (TT_QGEMM_ACT_RELU)
 *             = gelu(pre + bias[j])            (TT_QGEMM_ACT_GELU, tt_bias_gelu_forward's)
 * w_scale has N per-output-channel scales; bias has N values or is NULL; y is M x N
 * float32 (ldy >= N) and must not overlap x. A row of x holding inf or NaN gives
 * TT_ERR_INVALID_ARGUMENT (y is then unspecified). */
TT_API tt_status tt_qgemm_f32(int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx,
                              const void *packed, int64_t packed_bytes, const float *w_scale,
                              const float *bias, int activation, float *y, int64_t ldy);

/* ------------------------------------------------------------------------ */
/* Fusion: elementwise programs run as one pass over memory                 */
/* ------------------------------------------------------------------------ */

/* A fusion program is a small DAG of elementwise ops with NumPy broadcasting plus
 * reductions over the last axis, over one domain of rank 1..TT_MAX_DIMS. It is
 * serialized as int64 words plus one double immediate per node; the format (op codes,
 * operand rules, ACCUMULATE outputs) is specified in runtime/fusion/README.md:
 *
 *   magic 0x54544655, version 1, R, shape[R], N_IN, dtype[N_IN], N,
 *   N x {op, dtype, a, b, c}, N_OUT, N_OUT x {node, flags}
 *
 * Operands are earlier node indices (the list is topological) or -1 where unused.
 * The program runs in one pass over memory: every intermediate stays in a per-thread
 * scratch tile of at most 1024 columns, never in DRAM.
 *
 * Example: y = (x + bias) * scale over a 4 x 8 float32 domain, bias a row vector.
 *
 *     int64_t w[] = {0x54544655, 1, 2, 4, 8,  3, TT_F32, TT_F32, TT_F32,
 *                    5, 0,0,0,-1,-1,  0,0,1,-1,-1,  0,0,2,-1,-1,
 *                       20,0,0,1,-1,  22,0,3,2,-1,   1, 4, 0};
 *     double imm[5] = {0};
 *     tt_fusion_t *prog;
 *     tt_fusion_create(w, sizeof w / sizeof w[0], imm, 5, &prog);
 *     const void *in[3] = {x, bias, scale};
 *     int64_t in_strides[6] = {8, 1,  0, 1,  8, 1};    // bias: stride 0 on axis 0
 *     void *out[1] = {y};  int64_t out_strides[2] = {8, 1};
 *     tt_fusion_run(prog, in, in_strides, out, out_strides);
 *     tt_fusion_free(prog);
 */
typedef struct tt_fusion tt_fusion_t;

/* Validate and build a program. Every malformed program is refused with
 * TT_ERR_INVALID_ARGUMENT and a message naming the word, node or output and the rule
 * (bad magic or version, rank outside 1..8, negative shape, unknown op or dtype, an
 * operand that is not an earlier node (a cycle), an unused operand that is not -1,
 * a dtype mismatch, a reduction of a row value, an accumulated row value, unknown
 * output flags, no nodes or no outputs, n_words or n_imm not the exact length);
 * a domain whose bytes overflow int64 gives TT_ERR_OVERFLOW; words or imm NULL with a
 * non-zero length, or out NULL, gives TT_ERR_NULL_POINTER. It never reads outside
 * words[0 .. n_words) and imm[0 .. n_imm). */
TT_API tt_status tt_fusion_create(const int64_t *words, int64_t n_words, const double *imm,
                                  int64_t n_imm, tt_fusion_t **out);

/* Free a program (NULL is a no-op; a freed handle gives TT_ERR_INVALID_HANDLE). */
TT_API tt_status tt_fusion_free(tt_fusion_t *program);

/* The program's input count, output count and domain rank (each out pointer may be NULL). */
TT_API tt_status tt_fusion_info(const tt_fusion_t *program, int64_t *n_inputs,
                                int64_t *n_outputs, int64_t *rank);

/* Run the program with the tile interpreter. inputs[i] and outputs[j] are data pointers
 * (of the input's / output node's dtype); strides are in ELEMENTS, R per operand, row-major
 * by operand (input_strides[i*R + d]); any value (0 broadcasts, negative walks backwards).
 * A row output (a reduction or a value computed from reductions) is written once per row,
 * its last-axis stride ignored. An output may be the very buffer of an input (same
 * strides); it must not partly overlap any operand. Refused: a NULL buffer the run would
 * touch (TT_ERR_NULL_POINTER), strides whose span overflows int64 bytes (TT_ERR_OVERFLOW), a
 * zero stride on an axis of size > 1 of an output without ACCUMULATE (TT_ERR_INVALID_ARGUMENT:
 * a write race). ACCUMULATE outputs receive the sum over every domain point mapping to each
 * element (zeroed first; per-thread partial sums in double, added in thread order).
 * Threads: the runtime's count (tt_set_num_threads), one below 65536 domain points.
 * The same program may run on several threads at once. Path "fusion:interp:<isa>". */
TT_API tt_status tt_fusion_run(const tt_fusion_t *program, const void *const *inputs,
                               const int64_t *input_strides, void *const *outputs,
                               const int64_t *output_strides);

/* The program as one self-contained C11 file defining
 *     int tt_fused_kernel(const void *const *inputs, const int64_t *input_strides,
 *                         void *const *outputs, const int64_t *output_strides);
 *     const int64_t tt_fused_domain[2];   (rows, cols of the domain)
 * with tt_fusion_run's arguments (the domain shape is baked in; it returns 0), and, when the
 * program has no ACCUMULATE output,
 *     int tt_fused_rows(..., int64_t row_begin, int64_t row_end);   (tt_fused_rows_fn)
 * which computes rows [row_begin, row_end) only: tt_fusion_run_rows runs it on the
 * runtime's threads (the file itself starts none). It compiles with
 * cc -std=c11 -O3 -Wall -Werror -fPIC -shared and is emitted only from the validated node
 * list. *needed receives the size in bytes including the NUL (needed may be NULL); buf may
 * be NULL when cap == 0, a size query that returns TT_OK; any other cap smaller than needed
 * gives TT_ERR_INVALID_ARGUMENT (and still sets *needed). The kernel does not repeat
 * tt_fusion_run's checks of the buffers and strides. A program with an ACCUMULATE output
 * runs its rows on one thread and its kernel returns -1 if its sums cannot be allocated. */
TT_API tt_status tt_fusion_source(const tt_fusion_t *program, char *buf, int64_t cap,
                                  int64_t *needed);

/* Run a compiled tt_fused_rows over rows x cols (tt_fused_domain) on the runtime's threads,
 * in chunks of rows, by the rules of tt_fusion_run (one thread below 65536 points). The
 * arguments are passed to rows_fn unchecked, as tt_fused_kernel takes them. A non-zero
 * return of rows_fn gives TT_ERR_INTERNAL. Path "fusion:compiled". */
typedef int (*tt_fused_rows_fn)(const void *const *inputs, const int64_t *input_strides,
                                void *const *outputs, const int64_t *output_strides,
                                int64_t row_begin, int64_t row_end);
TT_API tt_status tt_fusion_run_rows(tt_fused_rows_fn rows_fn, const void *const *inputs,
                                    const int64_t *input_strides, void *const *outputs,
                                    const int64_t *output_strides, int64_t rows, int64_t cols);

/* Name of the code path the calling thread's most recent kernel call took, e.g.
 * "sgemm:avx2", "sgemm:reference", "bias_gelu_forward:avx512". Tests use it to
 * prove the fast path ran. "" before any kernel call. */
TT_API const char *tt_last_kernel_path(void);

/* ------------------------------------------------------------------------ */
/* MPS: GEMM on an Apple GPU (Metal Performance Shaders)                    */
/* ------------------------------------------------------------------------ */
/* Built from runtime/metal/mps_gemm.mm on Apple platforms (TT_METAL=ON, the default there). On
 * every other build the functions exist and refuse: tt_mps_available() returns 0 and
 * tt_mps_sgemm returns TT_ERR_UNSUPPORTED, both with the reason in tt_last_error(). */

/* 1 when a Metal device that MPS supports was found (created once, then reused); 0
 * otherwise, with the reason in tt_last_error(). */
TT_API int tt_mps_available(void);

/* C = A B on the GPU with MPSMatrixMultiplication; float32, row-major, contiguous:
 * A is M x K, B is K x N, C is M x N (C must not overlap A or B). M, N, K >= 0
 * (TT_ERR_INVALID_ARGUMENT); K == 0 gives C = 0; byte counts must fit int64
 * (TT_ERR_OVERFLOW); NULL operands with elements are TT_ERR_NULL_POINTER.
 * Memory: an operand whose address is page-aligned is wrapped in place
 * (newBufferWithBytesNoCopy, no copy); any other is copied once into a Metal buffer (C is
 * copied back after the GPU finishes). *copied (may be NULL) receives a bit mask of the
 * operands that were copied: 1 = A, 2 = B, 4 = C. No device, or a Metal error:
 * TT_ERR_UNSUPPORTED with the reason. Path "mps_sgemm:nocopy" when nothing was copied,
 * else "mps_sgemm:copy". Blocks until C is written. */
TT_API tt_status tt_mps_sgemm(int64_t M, int64_t N, int64_t K, const float *A, const float *B,
                              float *C, int *copied);

#ifdef __cplusplus
}
#endif

#endif /* TINYTORCH_H */
