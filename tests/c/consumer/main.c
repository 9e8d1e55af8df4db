/* Links the installed libtinytorch, multiplies two small matrices with the
 * reference and the dispatched sgemm, and checks the result against a plain loop. */
#include <math.h>
#include <stdio.h>
#include <tinytorch/tinytorch.h>

int main(void) {
    enum { M = 3, N = 5, K = 4 };
    float A[M * K], B[K * N], C[M * N], R[M * N];
    for (int i = 0; i < M * K; ++i) A[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < K * N; ++i) B[i] = 0.5f * (float)(i % 5) - 1.0f;
    if (tt_sgemm_reference(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, R, N) != TT_OK ||
        tt_sgemm(0, 0, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N) != TT_OK) {
        fprintf(stderr, "sgemm failed: %s\n", tt_last_error());
        return 1;
    }
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            double want = 0;
            for (int k = 0; k < K; ++k) want += (double)A[i * K + k] * B[k * N + j];
            if (fabs(want - R[i * N + j]) > 1e-5 || fabs(want - C[i * N + j]) > 1e-5) {
                fprintf(stderr, "mismatch at (%d,%d): %f %f %f\n", i, j, want, R[i * N + j], C[i * N + j]);
                return 1;
            }
        }
    printf("tinytorch %s: sgemm ok (%s)\n", tt_version(), tt_last_kernel_path());
    return 0;
}
