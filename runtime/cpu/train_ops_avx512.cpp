/*
 * train_ops_avx512.cpp -- the training-step loops of train_ops_kernels.h compiled with this
 * ISA's flags (the compiler vectorises them for its registers); called only after
 * run-time detection says the CPU has the ISA.
 */
#include "cpu/train_ops_kernels.h"

namespace {
void adam_avx512(float *p, const float *g, float *m, float *v, int64_t n, const tt::AdamScalars &s) {
    tt::adam_loop(p, g, m, v, n, s);
}
void add_row_avx512(float *dst, const float *src, int64_t n) { tt::add_row_loop(dst, src, n); }
void relu_avx512(const float *x, float *y, int64_t n) { tt::relu_loop(x, y, n); }
void relu_backward_avx512(const float *y, const float *g, float *gx, int64_t n) {
    tt::relu_backward_loop(y, g, gx, n);
}
}  // namespace

namespace tt {
const TrainKernels kTrainAvx512 = {"adam:avx512", "embedding:avx512", "embedding_backward:avx512",
                                 "relu:avx512", "relu_backward:avx512", adam_avx512, add_row_avx512,
                                 relu_avx512, relu_backward_avx512};
}  // namespace tt
