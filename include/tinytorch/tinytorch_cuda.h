/*
 * tinytorch_cuda.h -- the C API of libtinytorch_cuda: the CUDA SGEMM teaching ladder.
 *
 * A separate shared library (built by CMake only where nvcc is found; sources in
 * runtime/cuda/), with the conventions of libtinytorch (include/tinytorch/tinytorch.h):
 *   - every fallible call returns a tt_status (TT_OK = 0); the detail is a thread-local
 *     message, tt_cuda_last_error(). No call aborts or throws across the ABI.
 *   - no driver, no device, or a CUDA error all give TT_ERR_UNSUPPORTED (the message holds
 *     cudaGetErrorString's text); bad sizes TT_ERR_INVALID_ARGUMENT; a NULL operand
 *     TT_ERR_NULL_POINTER; a size whose bytes overflow int64 TT_ERR_OVERFLOW; a failed
 *     cudaMalloc TT_ERR_OUT_OF_MEMORY.
 *   - the path a call took is reported by tt_cuda_last_kernel_path() ("cuda_sgemm:tiled").
 * The library links the CUDA runtime statically, so it loads on a machine without a driver
 * and says so when called (Python: tinytorch.extensions.cuda_ops falls back to the CPU).
 *
 * Matrices are float32, row-major and contiguous: C[M x N] = A[M x K] B[K x N].
 * Stages (the teaching ladder, one short kernel each in sgemm_kernels.cu):
 *   0 naive       one thread per C element, threads of a warp walk down a column of C
 *                 (uncoalesced loads of A rows and stores of C)
 *   1 coalesced   the same arithmetic, threads of a warp walk along a row of C
 *   2 tiled       32 x 32 tiles of A and B staged in shared memory
 *   3 register    128 x 128 block tiles, 8 x 8 outputs per thread held in registers
 *
 * Example:
 *     float ms[3];
 *     if (tt_cuda_sgemm(TT_CUDA_STAGE_REGISTER, M, N, K, A, B, C, ms) != TT_OK)
 *         fprintf(stderr, "%s\n", tt_cuda_last_error());
 */
#ifndef TINYTORCH_CUDA_H
#define TINYTORCH_CUDA_H

#include "tinytorch/tinytorch.h"  /* tt_status */

#if defined(_WIN32)
#  define TT_CUDA_API __declspec(dllexport)
#else
#  define TT_CUDA_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum { TT_CUDA_STAGE_NAIVE = 0, TT_CUDA_STAGE_COALESCED = 1, TT_CUDA_STAGE_TILED = 2,
       TT_CUDA_STAGE_REGISTER = 3, TT_CUDA_STAGE_COUNT = 4 };

/* Version of this library (matches tt_version()). Never NULL. */
TT_CUDA_API const char *tt_cuda_version(void);

/* This thread's last error message ("" if none). Never NULL. */
TT_CUDA_API const char *tt_cuda_last_error(void);

/* Path of this thread's last successful GEMM ("cuda_sgemm:naive", ...); "" before any. */
TT_CUDA_API const char *tt_cuda_last_kernel_path(void);

/* Number of stages (TT_CUDA_STAGE_COUNT) and the name of one ("naive", "coalesced",
 * "tiled", "register"); NULL for a stage out of range. */
TT_CUDA_API int tt_cuda_stage_count(void);
TT_CUDA_API const char *tt_cuda_stage_name(int stage);

/* Number of CUDA devices in *count. No driver or no device: *count = 0 and
 * TT_ERR_UNSUPPORTED with the CUDA runtime's reason. */
TT_CUDA_API tt_status tt_cuda_device_count(int *count);

/* Name and compute capability of device 0 ("NVIDIA H200 (sm_90)") into name, at most
 * capacity bytes with the terminating NUL (capacity >= 1). */
TT_CUDA_API tt_status tt_cuda_device_name(char *name, int64_t capacity);

/* C = A B on device 0 from host memory: copies A and B in, runs stage, copies C out.
 * M, N, K >= 0 and at most 2^31 - 1; K == 0 gives C = 0. times_ms (may be NULL) receives
 * {host->device copy, kernel, device->host copy} in milliseconds (CUDA events). */
TT_CUDA_API tt_status tt_cuda_sgemm(int stage, int64_t M, int64_t N, int64_t K,
                                    const float *A, const float *B, float *C,
                                    float *times_ms);

/* The same on device pointers (no copy), on the default stream; returns when C is done.
 * kernel_ms (may be NULL) receives the kernel time in milliseconds. */
TT_CUDA_API tt_status tt_cuda_sgemm_device(int stage, int64_t M, int64_t N, int64_t K,
                                           const float *A, const float *B, float *C,
                                           float *kernel_ms);

#ifdef __cplusplus
}
#endif

#endif /* TINYTORCH_CUDA_H */
