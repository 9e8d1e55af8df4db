/*
 * build_info.cpp -- tt_build_info(): one JSON line describing the build and the
 * machine it runs on, for `tinytorch info` and for benchmark reports.
 */
#include "core/error.h"
#include "core/isa.h"
#include "core/thread_pool.h"

#include <cstdio>
#include <string>
#include <thread>

namespace {
thread_local std::string g_info;

std::string isa_list(int (*pred)(int)) {
    std::string out = "[";
    const tt_isa all[] = {TT_ISA_SCALAR, TT_ISA_AVX2, TT_ISA_AVX512, TT_ISA_NEON};
    bool first = true;
    for (tt_isa isa : all)
        if (pred(isa)) {
            out += first ? "\"" : ", \"";
            out += tt_isa_name(isa);
            out += "\"";
            first = false;
        }
    return out + "]";
}

std::string compiler() {
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown";
#endif
}

int supported_and_compiled(tt_isa isa) { return tt_isa_compiled(isa) && tt_isa_supported(isa); }
}  // namespace

extern "C" TT_API const char *tt_build_info(void) {
    char buf[1024];
    const unsigned cpus = std::thread::hardware_concurrency();
    const int max_threads = cpus > 0 ? (int)cpus : 1;
    tt_isa best = TT_ISA_SCALAR;
    const tt_isa order[] = {TT_ISA_AVX512, TT_ISA_AVX2, TT_ISA_NEON};
    for (tt_isa isa : order)
        if (supported_and_compiled(isa)) {
            best = isa;
            break;
        }
    std::snprintf(buf, sizeof buf,
                  "{\"version\": \"%s\", \"compiler\": \"%s\", \"build_type\": \"%s\", "
                  "\"isas_compiled\": %s, \"isa_detected\": %s, \"isa_best\": \"%s\", "
                  "\"isa_active\": \"%s\", \"isa_env_error\": \"%s\", \"threads\": %d, "
                  "\"threads_source\": \"%s\", \"max_threads\": %d}",
                  tt_version(), compiler().c_str(), TT_BUILD_TYPE, isa_list(tt_isa_compiled).c_str(),
                  isa_list(tt_isa_supported).c_str(), tt_isa_name(best), tt_isa_name(tt_isa_active()),
                  tt_isa_env_error(), tt::num_threads(), tt_threads_source(), max_threads);
    g_info = buf;
    return g_info.c_str();
}
