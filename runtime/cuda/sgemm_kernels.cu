/*
 * sgemm_kernels.cu -- the CUDA SGEMM teaching ladder: four kernels for C = A B (float32,
 * row-major, contiguous; A is M x K, B is K x N), from the textbook loop to register tiles.
 *
 * Owns: the kernels and launch_sgemm_stage(), which picks a stage's launch shape. It
 * assumes valid, non-empty sizes that fit int and device pointers (sgemm_api.cu checks them)
 * and launches on the default stream without synchronising. Every kernel guards its edges,
 * so any M, N, K works (odd, prime, smaller than a tile). Arithmetic: one float FMA chain
 * per output, in k order within a tile.
 */
#include <cuda_runtime.h>

#include "sgemm_internal.h"

namespace {

/* Stage 0, naive: one thread per C element. threadIdx.x runs down a column of C, so the 32
 * threads of a warp read 32 different rows of A (addresses K floats apart: 32 memory
 * transactions per load) and store 32 different rows of C. Correct, and memory-bound on
 * wasted transactions: the baseline every later stage is measured against. */
__global__ void sgemm_naive(int M, int N, int K, const float *A, const float *B, float *C) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}

/* Stage 1, coalesced: the same loop with the thread mapping swapped. threadIdx.x now runs
 * along a row of C: a warp reads one A element (a broadcast) and 32 consecutive B elements
 * (one 128-byte transaction), and stores 32 consecutive C elements. Same FLOPs, far fewer
 * memory transactions. */
__global__ void sgemm_coalesced(int M, int N, int K, const float *A, const float *B, float *C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc += A[(size_t)row * K + k] * B[(size_t)k * N + col];
    C[(size_t)row * N + col] = acc;
}

/* Stage 2, shared-memory tiles: a 32 x 32 block of threads computes a 32 x 32 tile of C.
 * For each step of 32 along K, the block loads one tile of A and one of B into shared
 * memory (each element read from DRAM once per block instead of once per thread), waits,
 * and every thread runs 32 FMAs out of shared memory. DRAM traffic drops 32x; the limit
 * becomes shared-memory bandwidth (two shared loads per FMA). */
constexpr int TILE = 32;
__global__ void sgemm_tiled(int M, int N, int K, const float *A, const float *B, float *C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE + 1];  /* +1: no bank conflicts on the column reads */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

/* Stage 3, register tiles (2-D thread tiles): 256 threads compute a 128 x 128 tile of C,
 * each thread an 8 x 8 block of it kept in 64 registers. Per step of 8 along K the block
 * stages a 128 x 8 slice of A (transposed, so a column of A is contiguous) and an 8 x 128
 * slice of B in shared memory; then, per k, a thread loads 8 values of A and 8 of B into
 * registers and does 64 FMAs with them: 16 shared loads per 64 FMAs instead of 2 per 1.
 * A thread's rows and columns are strided by 16 (row = ty + 16 i, col = tx + 16 j) so that
 * neighbouring threads read neighbouring shared words (no bank conflicts) and store
 * neighbouring C elements (coalesced). */
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int RT_THREADS = (BM / TM) * (BN / TN);  /* 256 */
__global__ void __launch_bounds__(RT_THREADS)
sgemm_register(int M, int N, int K, const float *A, const float *B, float *C) {
    __shared__ float As[BK][BM];
    __shared__ float Bs[BK][BN];
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float a_reg[TM], b_reg[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int e = tid; e < BM * BK; e += RT_THREADS) {  /* 4 elements of A per thread */
            const int r = e / BK, c = e % BK;
            const int gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[(size_t)gr * K + gc] : 0.0f;
        }
#pragma unroll
        for (int e = tid; e < BK * BN; e += RT_THREADS) {  /* 4 elements of B per thread */
            const int r = e / BN, c = e % BN;
            const int gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(size_t)gr * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a_reg[i] = As[k][ty + 16 * i];
#pragma unroll
            for (int j = 0; j < TN; ++j) b_reg[j] = Bs[k][tx + 16 * j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int r = row0 + ty + 16 * i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int c = col0 + tx + 16 * j;
            if (c < N) C[(size_t)r * N + c] = acc[i][j];
        }
    }
}

unsigned blocks_for(int n, int per_block) { return (unsigned)((n + per_block - 1) / per_block); }

}  // namespace

namespace ttcuda {

cudaError_t launch_sgemm_stage(int stage, int M, int N, int K, const float *A, const float *B,
                               float *C) {
    switch (stage) {
        case 0:
            sgemm_naive<<<dim3(blocks_for(M, 32), blocks_for(N, 32)), dim3(32, 32)>>>(M, N, K, A, B, C);
            break;
        case 1:
            sgemm_coalesced<<<dim3(blocks_for(N, 32), blocks_for(M, 32)), dim3(32, 32)>>>(M, N, K, A, B, C);
            break;
        case 2:
            sgemm_tiled<<<dim3(blocks_for(N, TILE), blocks_for(M, TILE)), dim3(TILE, TILE)>>>(M, N, K, A, B, C);
            break;
        default:
            sgemm_register<<<dim3(blocks_for(N, BN), blocks_for(M, BM)), RT_THREADS>>>(M, N, K, A, B, C);
            break;
    }
    return cudaGetLastError();
}

}  // namespace ttcuda
