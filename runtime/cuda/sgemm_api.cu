/*
 * sgemm_api.cu -- the C ABI of libtinytorch_cuda (declared and documented in
 * tinytorch_cuda.h): argument checks, device discovery, copies, timing, and the
 * thread-local last error and path report.
 *
 * Owns: every exported tt_cuda_* function. Never aborts or throws: a CUDA error becomes a
 * tt_status with cudaGetErrorName/String in tt_cuda_last_error(); device memory is freed on
 * every path (the Buffers guard). Without a driver or a device the checks of the arguments
 * still run, and an empty product (M, N or K zero) is answered without touching a device.
 */
#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "sgemm_internal.h"
#include "tinytorch/tinytorch_cuda.h"

namespace {

thread_local char g_last_error[512] = "";
thread_local char g_kernel_path[64] = "";

const char *const kStageNames[TT_CUDA_STAGE_COUNT] = {"naive", "coalesced", "tiled", "register"};
constexpr int64_t kMaxRowsCols = 65535LL * 32;  /* the smallest grid limit of any stage */
constexpr int64_t kMaxInt = 2147483647LL;

tt_status fail(tt_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
tt_status fail(tt_status status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(g_last_error, sizeof g_last_error, fmt, args);
    va_end(args);
    return status;
}

tt_status cuda_fail(cudaError_t err, const char *what) {
    cudaGetLastError();  /* clear the sticky-free error so the next call starts clean */
    const tt_status status = err == cudaErrorMemoryAllocation ? TT_ERR_OUT_OF_MEMORY : TT_ERR_UNSUPPORTED;
    return fail(status, "%s: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

void set_path(const char *stage) { std::snprintf(g_kernel_path, sizeof g_kernel_path, "cuda_sgemm:%s", stage); }

/* The checks every GEMM entry point shares, in order: stage, sizes, pointers, byte counts. */
tt_status check_args(const char *fn, int stage, int64_t M, int64_t N, int64_t K, const float *A,
                     const float *B, const float *C) {
    if (stage < 0 || stage >= TT_CUDA_STAGE_COUNT)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: stage=%d is not one of 0..%d (naive, coalesced, tiled, register)",
                    fn, stage, TT_CUDA_STAGE_COUNT - 1);
    if (M < 0 || N < 0 || K < 0)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: sizes must be >= 0, got M=%lld N=%lld K=%lld", fn,
                    (long long)M, (long long)N, (long long)K);
    if (M > kMaxRowsCols || N > kMaxRowsCols || K > kMaxInt)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: M=%lld N=%lld K=%lld exceed the kernels' limits "
                    "(M, N <= %lld, K <= %lld)", fn, (long long)M, (long long)N, (long long)K,
                    (long long)kMaxRowsCols, (long long)kMaxInt);
    int64_t elems = 0;
    if (__builtin_mul_overflow(M, K, &elems) || __builtin_mul_overflow(elems, (int64_t)4, &elems) ||
        __builtin_mul_overflow(K, N, &elems) || __builtin_mul_overflow(elems, (int64_t)4, &elems) ||
        __builtin_mul_overflow(M, N, &elems) || __builtin_mul_overflow(elems, (int64_t)4, &elems))
        return fail(TT_ERR_OVERFLOW, "%s: the bytes of a %lld x %lld x %lld product overflow int64", fn,
                    (long long)M, (long long)N, (long long)K);
    if (M > 0 && N > 0) {
        if (C == nullptr) return fail(TT_ERR_NULL_POINTER, "%s: argument 'C' is NULL", fn);
        if (K > 0 && A == nullptr) return fail(TT_ERR_NULL_POINTER, "%s: argument 'A' is NULL", fn);
        if (K > 0 && B == nullptr) return fail(TT_ERR_NULL_POINTER, "%s: argument 'B' is NULL", fn);
    }
    return TT_OK;
}

tt_status require_device(const char *fn) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        cudaGetLastError();
        const char *hint = err == cudaErrorInsufficientDriver
                               ? "; no NVIDIA driver is installed, or it is older than this CUDA runtime" : "";
        return fail(TT_ERR_UNSUPPORTED, "%s: no usable CUDA device: %s (%s)%s", fn, cudaGetErrorName(err),
                    cudaGetErrorString(err), hint);
    }
    if (count == 0) return fail(TT_ERR_UNSUPPORTED, "%s: the CUDA driver reports no device", fn);
    return TT_OK;
}

/* Device allocations and events of one call, released however the call ends. */
struct Buffers {
    float *a = nullptr, *b = nullptr, *c = nullptr;
    cudaEvent_t ev[4] = {nullptr, nullptr, nullptr, nullptr};
    ~Buffers() {
        cudaFree(a);
        cudaFree(b);
        cudaFree(c);
        for (cudaEvent_t e : ev)
            if (e) cudaEventDestroy(e);
    }
    cudaError_t make_events(int n) {
        for (int i = 0; i < n; ++i) {
            const cudaError_t err = cudaEventCreate(&ev[i]);
            if (err != cudaSuccess) return err;
        }
        return cudaSuccess;
    }
};

#define TT_CUDA_TRY(call, what)                            \
    do {                                                   \
        const cudaError_t err_ = (call);                   \
        if (err_ != cudaSuccess) return cuda_fail(err_, what); \
    } while (0)

}  // namespace

extern "C" {

TT_CUDA_API const char *tt_cuda_version(void) { return TT_VERSION_STRING; }

TT_CUDA_API const char *tt_cuda_last_error(void) { return g_last_error; }

TT_CUDA_API const char *tt_cuda_last_kernel_path(void) { return g_kernel_path; }

TT_CUDA_API int tt_cuda_stage_count(void) { return TT_CUDA_STAGE_COUNT; }

TT_CUDA_API const char *tt_cuda_stage_name(int stage) {
    return (stage >= 0 && stage < TT_CUDA_STAGE_COUNT) ? kStageNames[stage] : nullptr;
}

TT_CUDA_API tt_status tt_cuda_device_count(int *count) {
    if (count == nullptr) return fail(TT_ERR_NULL_POINTER, "tt_cuda_device_count: argument 'count' is NULL");
    *count = 0;
    const tt_status st = require_device("tt_cuda_device_count");
    if (st != TT_OK) return st;
    TT_CUDA_TRY(cudaGetDeviceCount(count), "tt_cuda_device_count");
    return TT_OK;
}

TT_CUDA_API tt_status tt_cuda_device_name(char *name, int64_t capacity) {
    if (name == nullptr) return fail(TT_ERR_NULL_POINTER, "tt_cuda_device_name: argument 'name' is NULL");
    if (capacity < 1) return fail(TT_ERR_INVALID_ARGUMENT, "tt_cuda_device_name: capacity=%lld must be >= 1",
                                  (long long)capacity);
    name[0] = '\0';
    const tt_status st = require_device("tt_cuda_device_name");
    if (st != TT_OK) return st;
    cudaDeviceProp prop;
    TT_CUDA_TRY(cudaGetDeviceProperties(&prop, 0), "tt_cuda_device_name");
    std::snprintf(name, (size_t)capacity, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    return TT_OK;
}

TT_CUDA_API tt_status tt_cuda_sgemm(int stage, int64_t M, int64_t N, int64_t K, const float *A,
                                    const float *B, float *C, float *times_ms) {
    const char *fn = "tt_cuda_sgemm";
    tt_status st = check_args(fn, stage, M, N, K, A, B, C);
    if (st != TT_OK) return st;
    if (times_ms) times_ms[0] = times_ms[1] = times_ms[2] = 0.0f;
    if (M == 0 || N == 0) { set_path("empty"); return TT_OK; }
    if (K == 0) { std::memset(C, 0, (size_t)(M * N) * sizeof(float)); set_path("empty"); return TT_OK; }
    if ((st = require_device(fn)) != TT_OK) return st;
    Buffers buf;
    const size_t bytes_a = (size_t)(M * K) * 4, bytes_b = (size_t)(K * N) * 4, bytes_c = (size_t)(M * N) * 4;
    TT_CUDA_TRY(cudaMalloc(&buf.a, bytes_a), "tt_cuda_sgemm: cudaMalloc(A)");
    TT_CUDA_TRY(cudaMalloc(&buf.b, bytes_b), "tt_cuda_sgemm: cudaMalloc(B)");
    TT_CUDA_TRY(cudaMalloc(&buf.c, bytes_c), "tt_cuda_sgemm: cudaMalloc(C)");
    TT_CUDA_TRY(buf.make_events(4), "tt_cuda_sgemm: cudaEventCreate");
    TT_CUDA_TRY(cudaEventRecord(buf.ev[0]), "tt_cuda_sgemm: cudaEventRecord");
    TT_CUDA_TRY(cudaMemcpy(buf.a, A, bytes_a, cudaMemcpyHostToDevice), "tt_cuda_sgemm: copy A to the device");
    TT_CUDA_TRY(cudaMemcpy(buf.b, B, bytes_b, cudaMemcpyHostToDevice), "tt_cuda_sgemm: copy B to the device");
    TT_CUDA_TRY(cudaEventRecord(buf.ev[1]), "tt_cuda_sgemm: cudaEventRecord");
    TT_CUDA_TRY(ttcuda::launch_sgemm_stage(stage, (int)M, (int)N, (int)K, buf.a, buf.b, buf.c),
                "tt_cuda_sgemm: kernel launch");
    TT_CUDA_TRY(cudaEventRecord(buf.ev[2]), "tt_cuda_sgemm: cudaEventRecord");
    TT_CUDA_TRY(cudaMemcpy(C, buf.c, bytes_c, cudaMemcpyDeviceToHost), "tt_cuda_sgemm: copy C to the host");
    TT_CUDA_TRY(cudaEventRecord(buf.ev[3]), "tt_cuda_sgemm: cudaEventRecord");
    TT_CUDA_TRY(cudaEventSynchronize(buf.ev[3]), "tt_cuda_sgemm: kernel execution");
    if (times_ms) {
        for (int i = 0; i < 3; ++i)
            TT_CUDA_TRY(cudaEventElapsedTime(&times_ms[i], buf.ev[i], buf.ev[i + 1]), "tt_cuda_sgemm: timing");
    }
    set_path(kStageNames[stage]);
    return TT_OK;
}

TT_CUDA_API tt_status tt_cuda_sgemm_device(int stage, int64_t M, int64_t N, int64_t K, const float *A,
                                           const float *B, float *C, float *kernel_ms) {
    const char *fn = "tt_cuda_sgemm_device";
    tt_status st = check_args(fn, stage, M, N, K, A, B, C);
    if (st != TT_OK) return st;
    if (kernel_ms) *kernel_ms = 0.0f;
    if (M == 0 || N == 0) { set_path("empty"); return TT_OK; }
    if ((st = require_device(fn)) != TT_OK) return st;
    if (K == 0) {
        TT_CUDA_TRY(cudaMemset(C, 0, (size_t)(M * N) * sizeof(float)), "tt_cuda_sgemm_device: cudaMemset(C)");
        TT_CUDA_TRY(cudaDeviceSynchronize(), "tt_cuda_sgemm_device: cudaMemset(C)");
        set_path("empty");
        return TT_OK;
    }
    Buffers buf;
    TT_CUDA_TRY(buf.make_events(2), "tt_cuda_sgemm_device: cudaEventCreate");
    TT_CUDA_TRY(cudaEventRecord(buf.ev[0]), "tt_cuda_sgemm_device: cudaEventRecord");
    TT_CUDA_TRY(ttcuda::launch_sgemm_stage(stage, (int)M, (int)N, (int)K, A, B, C),
                "tt_cuda_sgemm_device: kernel launch");
    TT_CUDA_TRY(cudaEventRecord(buf.ev[1]), "tt_cuda_sgemm_device: cudaEventRecord");
    TT_CUDA_TRY(cudaEventSynchronize(buf.ev[1]), "tt_cuda_sgemm_device: kernel execution");
    if (kernel_ms) TT_CUDA_TRY(cudaEventElapsedTime(kernel_ms, buf.ev[0], buf.ev[1]), "tt_cuda_sgemm_device: timing");
    set_path(kStageNames[stage]);
    return TT_OK;
}

}  // extern "C"
