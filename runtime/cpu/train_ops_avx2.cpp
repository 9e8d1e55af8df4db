/*
 * train_ops_avx2.cpp -- the training-step loops of train_ops_kernels.h compiled with this
 * ISA's flags (the compiler vectorises them for its registers); called only after
 * run-time detection says the CPU has the ISA.
 */
#include "cpu/train_ops_kernels.h"

namespace {
void adam_avx2(float *p, const float *g, float *m, float *v, int64_t n, const tt::AdamScalars &s) {
    tt::adam_loop(p, g, m, v, n, s);
}
void add_row_avx2(float *dst, const float *src, int64_t n) { tt::add_row_loop(dst, src, n); }
void relu_avx2(const float *x, float *y, int64_t n) { tt::relu_loop(x, y, n); }
void relu_backward_avx2(const float *y, const float *g, float *gx, int64_t n) {
    tt::relu_backward_loop(y, g, gx, n);
}
}  // namespace

namespace tt {
const TrainKernels kTrainAvx2 = {"adam:avx2", "embedding:avx2", "embedding_backward:avx2",
                                 "relu:avx2", "relu_backward:avx2", adam_avx2, add_row_avx2,
                                 relu_avx2, relu_backward_avx2};
}  // namespace tt
