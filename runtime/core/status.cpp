/*
 * status.cpp -- status names, the thread-local last-error message, the
 * thread-local "which kernel path ran" report, and the version string.
 *
 * Owns: tt_status_string, tt_last_error, tt_clear_error, tt_version,
 * tt_last_kernel_path, and tt::fail / tt::set_kernel_path for the rest of the
 * runtime. Messages are formatted into a fixed thread-local buffer so reporting
 * an error can itself never fail or allocate.
 */
#include "core/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace {
thread_local char g_last_error[512] = "";
thread_local char g_kernel_path[64] = "";
}  // namespace

namespace tt {

tt_status fail(tt_status status, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(g_last_error, sizeof g_last_error, fmt, args);
    va_end(args);
    return status;
}

void clear_error() { g_last_error[0] = '\0'; }

void set_kernel_path(const char *path) {
    std::snprintf(g_kernel_path, sizeof g_kernel_path, "%s", path ? path : "");
}

}  // namespace tt

extern "C" {

TT_API const char *tt_status_string(int status) {
    switch (status) {
        case TT_OK: return "TT_OK";
        case TT_ERR_NULL_POINTER: return "TT_ERR_NULL_POINTER";
        case TT_ERR_INVALID_ARGUMENT: return "TT_ERR_INVALID_ARGUMENT";
        case TT_ERR_SHAPE_MISMATCH: return "TT_ERR_SHAPE_MISMATCH";
        case TT_ERR_OVERFLOW: return "TT_ERR_OVERFLOW";
        case TT_ERR_OUT_OF_MEMORY: return "TT_ERR_OUT_OF_MEMORY";
        case TT_ERR_UNSUPPORTED: return "TT_ERR_UNSUPPORTED";
        case TT_ERR_INVALID_HANDLE: return "TT_ERR_INVALID_HANDLE";
        case TT_ERR_INTERNAL: return "TT_ERR_INTERNAL";
    }
    return "TT_ERR_UNKNOWN_STATUS";
}

TT_API const char *tt_last_error(void) { return g_last_error; }

TT_API void tt_clear_error(void) { tt::clear_error(); }

TT_API const char *tt_version(void) { return TT_VERSION_STRING; }

TT_API const char *tt_last_kernel_path(void) { return g_kernel_path; }

}  // extern "C"
