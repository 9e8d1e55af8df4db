/*
 * cpu_features.cpp -- what the CPU can do, and which ISA the kernels use (threads: threads.cpp).
 *
 * Detection uses CPUID and XGETBV on x86 (the OS must also save the wider
 * registers: AVX needs XCR0 bits 1-2, AVX-512 bits 5-7) and is compile-time on
 * AArch64 (NEON is mandatory there). The active ISA starts as the best one that
 * is compiled and supported, or TINYTORCH_ISA when that names a supported one;
 * an unsupported request is refused and remembered for tt_isa_env_error().
 *
 * Never executes an instruction the CPU lacks: this file is built with the
 * baseline flags, and the active ISA can only be set to a supported one.
 */
#include "core/error.h"
#include "core/isa.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#include <cpuid.h>
#define TT_X86 1
#endif

namespace {

struct Features {
    bool avx2 = false, fma = false, avx512f = false, f16c = false, neon = false;
};

#ifdef TT_X86
unsigned long long read_xcr0() {
    unsigned int eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((unsigned long long)edx << 32) | eax;
}
#endif

Features detect() {
    Features f;
#ifdef TT_X86
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
    bool osxsave = (ecx >> 27) & 1, avx = (ecx >> 28) & 1;
    f.fma = (ecx >> 12) & 1;
    f.f16c = (ecx >> 29) & 1;
    unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
    bool os_ymm = (xcr0 & 0x6) == 0x6;
    bool os_zmm = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_max(0, nullptr) >= 7) {
        __cpuid_count(7, 0, eax, ebx, ecx, edx);
        f.avx2 = avx && os_ymm && ((ebx >> 5) & 1);
        f.avx512f = os_zmm && ((ebx >> 16) & 1);
    }
    f.fma = f.fma && os_ymm;
    f.f16c = f.f16c && os_ymm;
#elif defined(__aarch64__)
    f.neon = true;
#endif
    return f;
}

const Features &features() {
    static const Features f = detect();
    return f;
}

bool compiled(int isa) {
    switch (isa) {
        case TT_ISA_SCALAR: return true;
#ifdef TT_HAVE_AVX2_KERNELS
        case TT_ISA_AVX2: return true;
#endif
#ifdef TT_HAVE_AVX512_KERNELS
        case TT_ISA_AVX512: return true;
#endif
#ifdef TT_HAVE_NEON_KERNELS
        case TT_ISA_NEON: return true;
#endif
        default: return false;
    }
}

bool supported(int isa) {
    const Features &f = features();
    switch (isa) {
        case TT_ISA_SCALAR: return true;
        case TT_ISA_AVX2: return f.avx2 && f.fma;
        case TT_ISA_AVX512: return f.avx512f && f.avx2 && f.fma;
        case TT_ISA_NEON: return f.neon;
    }
    return false;
}

tt_isa best_isa() {
    const tt_isa order[] = {TT_ISA_AVX512, TT_ISA_AVX2, TT_ISA_NEON};
    for (tt_isa isa : order)
        if (compiled(isa) && supported(isa)) return isa;
    return TT_ISA_SCALAR;
}

char g_env_error[256] = "";

tt_isa initial_isa() {
    const char *raw = std::getenv("TINYTORCH_ISA");
    tt_isa best = best_isa();
    if (!raw || !*raw) return best;
    // The value is echoed in messages and in tt_build_info()'s JSON: keep it printable and
    // free of quotes and backslashes.
    char env[32];
    size_t n = 0;
    for (; raw[n] && n + 1 < sizeof env; ++n)
        env[n] = (std::isalnum((unsigned char)raw[n]) || raw[n] == '_' || raw[n] == '-') ? raw[n] : '?';
    env[n] = '\0';
    tt_isa want;
    if (tt_isa_from_name(env, &want) != TT_OK) {
        std::snprintf(g_env_error, sizeof g_env_error,
                      "TINYTORCH_ISA='%s' is not one of scalar, avx2, avx512, neon; using %s", env,
                      tt_isa_name(best));
        return best;
    }
    if (!compiled(want) || !supported(want)) {
        std::snprintf(g_env_error, sizeof g_env_error,
                      "TINYTORCH_ISA=%s refused: %s; using %s", env,
                      !compiled(want) ? "this build has no kernels for it"
                                      : "this CPU does not support it",
                      tt_isa_name(best));
        return best;
    }
    return want;
}

std::atomic<int> &active_slot() {
    static std::atomic<int> slot{(int)initial_isa()};
    return slot;
}

}  // namespace

namespace tt {
tt_isa active_isa() { return (tt_isa)active_slot().load(std::memory_order_relaxed); }

bool cpu_has_f16c() { return features().f16c; }
}  // namespace tt

extern "C" {

TT_API const char *tt_isa_name(int isa) {
    switch (isa) {
        case TT_ISA_SCALAR: return "scalar";
        case TT_ISA_AVX2: return "avx2";
        case TT_ISA_AVX512: return "avx512";
        case TT_ISA_NEON: return "neon";
    }
    return "unknown";
}

TT_API int tt_isa_compiled(int isa) { return compiled(isa) ? 1 : 0; }
TT_API int tt_isa_supported(int isa) { return supported(isa) ? 1 : 0; }
TT_API tt_isa tt_isa_active(void) { return tt::active_isa(); }

TT_API tt_status tt_isa_from_name(const char *name, tt_isa *out) {
    TT_CHECK_NOT_NULL("tt_isa_from_name", name);
    TT_CHECK_NOT_NULL("tt_isa_from_name", out);
    char lower[16];
    size_t n = 0;
    for (; name[n] && n + 1 < sizeof lower; ++n) lower[n] = (char)std::tolower((unsigned char)name[n]);
    lower[n] = '\0';
    if (name[n] == '\0') {
        const tt_isa all[] = {TT_ISA_SCALAR, TT_ISA_AVX2, TT_ISA_AVX512, TT_ISA_NEON};
        for (tt_isa isa : all)
            if (std::strcmp(lower, tt_isa_name(isa)) == 0) {
                *out = isa;
                return TT_OK;
            }
    }
    return tt::fail(TT_ERR_INVALID_ARGUMENT,
                    "tt_isa_from_name: '%.32s' is not one of scalar, avx2, avx512, neon", name);
}

TT_API tt_status tt_set_isa(int isa) {
    if (isa < TT_ISA_SCALAR || isa > TT_ISA_NEON)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "tt_set_isa: isa=%d is not a tt_isa value", isa);
    if (!compiled(isa))
        return tt::fail(TT_ERR_UNSUPPORTED, "tt_set_isa: this build has no %s kernels",
                        tt_isa_name(isa));
    if (!supported(isa))
        return tt::fail(TT_ERR_UNSUPPORTED, "tt_set_isa: this CPU does not support %s",
                        tt_isa_name(isa));
    active_slot().store(isa);
    return TT_OK;
}

TT_API const char *tt_isa_env_error(void) {
    (void)active_slot();  // make sure the environment has been read
    return g_env_error;
}

}  // extern "C"
