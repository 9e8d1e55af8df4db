/*
 * mps_unavailable.cpp -- tt_mps_* where the Metal bridge is not built: every platform but
 * Apple, and Apple builds configured with TT_METAL=OFF. The functions exist everywhere so
 * the ABI is the same on every platform; they only say why MPS cannot run.
 *
 * Owns: tt_mps_available and tt_mps_sgemm for those builds (runtime/metal/mps_gemm.mm is the real
 * implementation). Arguments are not inspected: nothing runs.
 */
#include "core/error.h"

namespace {
#if defined(__APPLE__)
const char *const kWhy = "this libtinytorch was built without Metal (configure with -DTT_METAL=ON)";
#else
const char *const kWhy = "Apple Metal (MPS) exists only on Apple platforms; this libtinytorch was built for another OS";
#endif
}  // namespace

extern "C" {

TT_API int tt_mps_available(void) {
    tt::fail(TT_ERR_UNSUPPORTED, "tt_mps_available: %s", kWhy);
    return 0;
}

TT_API tt_status tt_mps_sgemm(int64_t M, int64_t N, int64_t K, const float *A, const float *B, float *C,
                              int *copied) {
    return tt::fail(TT_ERR_UNSUPPORTED, "tt_mps_sgemm: %s", kWhy);
}

}  // extern "C"
