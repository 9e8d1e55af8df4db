/*
 * sgemm_internal.h -- private: what the C API (sgemm_api.cu) needs from the kernels file.
 */
#pragma once
#include <cuda_runtime.h>

namespace ttcuda {

/* Launch stage 0..3 (TT_CUDA_STAGE_*) for C = A B on device pointers, default stream, no
 * synchronisation; sizes are > 0 and fit int. Returns the launch error, if any. */
cudaError_t launch_sgemm_stage(int stage, int M, int N, int K, const float *A, const float *B,
                               float *C);

}  // namespace ttcuda
