/*
 * train_ops_neon.cpp -- the training-step loops of train_ops_kernels.h compiled with this
 * ISA's flags (the compiler vectorises them for its registers); called only after
 * run-time detection says the CPU has the ISA.
 */
#include "cpu/train_ops_kernels.h"

namespace {
void adam_neon(float *p, const float *g, float *m, float *v, int64_t n, const tt::AdamScalars &s) {
    tt::adam_loop(p, g, m, v, n, s);
}
void add_row_neon(float *dst, const float *src, int64_t n) { tt::add_row_loop(dst, src, n); }
void relu_neon(const float *x, float *y, int64_t n) { tt::relu_loop(x, y, n); }
void relu_backward_neon(const float *y, const float *g, float *gx, int64_t n) {
    tt::relu_backward_loop(y, g, gx, n);
}
}  // namespace

namespace tt {
const TrainKernels kTrainNeon = {"adam:neon", "embedding:neon", "embedding_backward:neon",
                                 "relu:neon", "relu_backward:neon", adam_neon, add_row_neon,
                                 relu_neon, relu_backward_neon};
}  // namespace tt
