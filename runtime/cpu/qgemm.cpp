/*
 * qgemm.cpp -- tt_qgemm_*: the INT8 GEMM driver (public contract: tinytorch.h).
 *
 * What it owns: the kernel table and which entry runs, the weight pack (its header,
 * column sums and panels), argument and pack checks, preparing the activations (dynamic
 * quantization per row, or the caller's u8) in the kernel's A layout, the tiling over
 * panels and row blocks, and threads. What it leaves to the kernels (qgemm_kernels.h):
 * one register tile's exact int32 arithmetic, and the row code of qgemm_rows.h compiled
 * per ISA (quantization and epilogues).
 *
 * Pack layout (64-byte aligned, offsets from its start):
 *   [0, 128)            PackHeader: magic, version, kernel, flags (TT_QGEMM_REDUCE_RANGE),
 *                       K, N, geometry, total bytes, and a check word over those fields
 *                       (flags took a reserved word that older packs hold as 0, so they
 *                       still load as 8-bit packs)
 *   [128, +4 * Np)      colsum[j] = sum_k w[k][j] (int32), Np = n_panels * nr, 64-aligned
 *   then                n_panels panels of kgroups * nr * k_group bytes (qgemm_kernels.h)
 *
 * Threads: the work items are (column panel, block of rows) pairs, panel-major, so a
 * range of items reuses each panel for consecutive row blocks. Every item writes its own
 * part of the output and computes it the same way whichever thread runs it, so the result
 * does not depend on the thread count or on how parallel_for cuts the items.
 */
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "cpu/qgemm_kernels.h"
#include "cpu/qgemm_rows.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>
#endif

namespace tt {
namespace {

/* ------------------------------------------------------------------------ */
/* Kernel table                                                             */
/* ------------------------------------------------------------------------ */

/* CPUID leaf 7 bits the avx512 entries need beyond AVX-512F (which the active ISA
 * avx512 already guarantees, with the OS saving the zmm state). */
struct X86Extras {
    bool avx512bw = false, avx512_vnni = false;
};

const X86Extras &x86_extras() {
    static const X86Extras extras = [] {
        X86Extras e;
#if defined(__x86_64__) || defined(_M_X64)
        unsigned int eax, ebx, ecx, edx;
        if (__get_cpuid_max(0, nullptr) >= 7) {
            __cpuid_count(7, 0, eax, ebx, ecx, edx);
            e.avx512bw = (ebx >> 30) & 1;
            e.avx512_vnni = e.avx512bw && ((ecx >> 11) & 1);
        }
#endif
        return e;
    }();
    return extras;
}

const QgemmKernel *kernel_by_id(int id) {
    switch (id) {
        case TT_QGEMM_SCALAR: return &kQgemmScalar;
#if defined(TT_HAVE_AVX2_KERNELS)
        case TT_QGEMM_AVX2: return &kQgemmAvx2;
        case TT_QGEMM_AVX2_U7: return &kQgemmAvx2U7;
#endif
#if defined(TT_HAVE_AVX512_KERNELS)
        case TT_QGEMM_AVX512BW: return &kQgemmAvx512bw;
        case TT_QGEMM_AVX512_VNNI: return &kQgemmAvx512Vnni;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_QGEMM_NEON:
        case TT_QGEMM_NEON_DOT: return kQgemmNeon.id == id ? &kQgemmNeon : nullptr;
#endif
        default: return nullptr;
    }
}

/* The instructions beyond the entry's ISA are present. */
bool cpu_has_extras(const QgemmKernel &k) {
    if (k.id == TT_QGEMM_AVX512BW) return x86_extras().avx512bw;
    if (k.id == TT_QGEMM_AVX512_VNNI) return x86_extras().avx512_vnni;
    return true;
}

bool usable(const QgemmKernel &k) {
    return k.id == TT_QGEMM_SCALAR || (k.isa == active_isa() && cpu_has_extras(k));
}

/* The kernel AUTO means for a pack with `flags`: on AVX2 the 7-bit range admits the
 * vpmaddubsw kernel; every other ISA's kernel is exact for any u8 and keeps its kernel. */
int kernel_for_flags(int flags) {
    switch (active_isa()) {
        case TT_ISA_AVX512:
            if (x86_extras().avx512_vnni) return TT_QGEMM_AVX512_VNNI;
            return x86_extras().avx512bw ? TT_QGEMM_AVX512BW : TT_QGEMM_SCALAR;
        case TT_ISA_AVX2:
            return (flags & TT_QGEMM_REDUCE_RANGE) ? TT_QGEMM_AVX2_U7 : TT_QGEMM_AVX2;
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_ISA_NEON: return kQgemmNeon.id;
#endif
        default: return TT_QGEMM_SCALAR;
    }
}

/* ------------------------------------------------------------------------ */
/* The pack                                                                 */
/* ------------------------------------------------------------------------ */

constexpr uint32_t kPackMagic = 0x51475454u; /* "TTGQ" */
constexpr uint32_t kPackVersion = 1;
constexpr int64_t kHeaderBytes = 128;

struct PackHeader {
    uint32_t magic, version;
    int32_t kernel, nr, k_group, flags;
    int64_t K, N, kgroups, n_panels, panel_bytes, colsum_offset, panels_offset, bytes;
    uint64_t check;
};
static_assert(sizeof(PackHeader) <= kHeaderBytes, "the pack header must fit its slot");

uint64_t header_check(const PackHeader &h) {
    /* FNV-1a over every field before `check`: a stray buffer is refused, not read. */
    const unsigned char *p = reinterpret_cast<const unsigned char *>(&h);
    uint64_t x = 1469598103934665603ull;
    for (size_t i = 0; i < offsetof(PackHeader, check); ++i) x = (x ^ p[i]) * 1099511628211ull;
    return x;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* body(begin, end, slot) over [0, count) on up to nt threads, in chunks of about `grain`
 * items claimed from the pool. Bodies here write disjoint output and never depend on the
 * split: every thread count gives the same bits. */
template <class Body>
void run_ranges(int64_t count, int64_t grain, int nt, Body body) {
    parallel_for(count, grain, nt, body);
}

inline int64_t align64(int64_t n) { return (n + 63) & ~int64_t{63}; }

PackHeader geometry(const QgemmKernel &k, int flags, int64_t K, int64_t N) {
    PackHeader h{};
    h.magic = kPackMagic;
    h.version = kPackVersion;
    h.kernel = k.id;
    h.flags = flags;
    h.nr = k.nr;
    h.k_group = k.k_group;
    h.K = K;
    h.N = N;
    h.kgroups = ceil_div(K, k.k_group);
    h.n_panels = ceil_div(N, k.nr);
    h.panel_bytes = h.kgroups * k.nr * k.k_group;
    h.colsum_offset = kHeaderBytes;
    h.panels_offset = kHeaderBytes + align64(h.n_panels * k.nr * 4);
    h.bytes = h.panels_offset + h.n_panels * h.panel_bytes;
    h.check = header_check(h);
    return h;
}

tt_status check_k_n(const char *fn, int64_t K, int64_t N) {
    if (K < 0 || N < 0)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: K=%lld and N=%lld must be >= 0", fn,
                    (long long)K, (long long)N);
    if (K > TT_QGEMM_MAX_K)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: K=%lld exceeds TT_QGEMM_MAX_K=%d, the largest K whose int32 sums "
                    "(up to K * 255 * 128) are exact",
                    fn, (long long)K, TT_QGEMM_MAX_K);
    /* N * (4 + K) bytes at K <= 65793 overflows int64 only for absurd N. */
    if (N > (int64_t{1} << 40))
        return fail(TT_ERR_OVERFLOW, "%s: N=%lld is too large for a pack", fn, (long long)N);
    return TT_OK;
}

/* The largest activation a pack with `flags` admits. */
inline int flags_qmax(int flags) { return (flags & TT_QGEMM_REDUCE_RANGE) ? 127 : 255; }

/* A kernel that is exact only for 7-bit activations needs a pack that promises them. */
tt_status check_kernel_flags(const char *fn, const QgemmKernel &k, int flags) {
    if (k.qmax < flags_qmax(flags))
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: the %s kernel is exact only for activations <= %d and needs a "
                    "TT_QGEMM_REDUCE_RANGE pack",
                    fn, k.name, k.qmax);
    return TT_OK;
}

tt_status check_flags(const char *fn, int flags) {
    if (flags & ~TT_QGEMM_REDUCE_RANGE)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: flags=%d has bits other than TT_QGEMM_REDUCE_RANGE", fn, flags);
    return TT_OK;
}

tt_status resolve_kernel(const char *fn, int kernel, int flags, const QgemmKernel **out) {
    tt_status st = check_flags(fn, flags);
    if (st != TT_OK) return st;
    if (kernel == TT_QGEMM_AUTO) kernel = kernel_for_flags(flags);
    if (kernel < TT_QGEMM_SCALAR || kernel > TT_QGEMM_AVX2_U7)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: kernel=%d is not a tt_qgemm_kernel value", fn,
                    kernel);
    *out = kernel_by_id(kernel);
    if (*out == nullptr)
        return fail(TT_ERR_UNSUPPORTED, "%s: this build has no %s INT8 kernel", fn,
                    tt_qgemm_kernel_name(kernel));
    return check_kernel_flags(fn, **out, flags);
}

/* The pack's header after every check a GEMM call makes; on failure a recorded error. */
tt_status check_pack(const char *fn, const void *packed, int64_t packed_bytes, int64_t K,
                     int64_t N, const PackHeader **out, const QgemmKernel **kernel) {
    if (packed == nullptr) return fail(TT_ERR_NULL_POINTER, "%s: packed is NULL", fn);
    if (reinterpret_cast<uintptr_t>(packed) % 64 != 0)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: packed is not 64-byte aligned (address %% 64 = %d); a pack must stay "
                    "where tt_qgemm_pack wrote it",
                    fn, (int)(reinterpret_cast<uintptr_t>(packed) % 64));
    if (packed_bytes < kHeaderBytes)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: packed_bytes=%lld is smaller than a pack header",
                    fn, (long long)packed_bytes);
    const PackHeader *h = static_cast<const PackHeader *>(packed);
    if (h->magic != kPackMagic || h->version != kPackVersion || h->check != header_check(*h))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: packed does not hold a tt_qgemm_pack result", fn);
    if (h->bytes > packed_bytes)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: the pack needs %lld bytes but packed_bytes=%lld", fn, (long long)h->bytes,
                    (long long)packed_bytes);
    if (h->K != K || h->N != N)
        return fail(TT_ERR_SHAPE_MISMATCH, "%s: the pack holds a %lld x %lld weight, the call has K=%lld, N=%lld",
                    fn, (long long)h->K, (long long)h->N, (long long)K, (long long)N);
    const QgemmKernel *k = kernel_by_id(h->kernel);
    if (k == nullptr)
        return fail(TT_ERR_UNSUPPORTED, "%s: the pack is for the %s kernel, which this build lacks",
                    fn, tt_qgemm_kernel_name(h->kernel));
    tt_status st = check_flags(fn, h->flags);
    if (st == TT_OK) st = check_kernel_flags(fn, *k, h->flags);
    if (st != TT_OK) return st;
    if (!usable(*k))
        return fail(TT_ERR_UNSUPPORTED,
                    "%s: the pack is for the %s kernel, which cannot run now (active ISA %s); "
                    "repack for tt_qgemm_kernel_for(%d) = %s",
                    fn, k->name, tt_isa_name(active_isa()), h->flags,
                    tt_qgemm_kernel_name(kernel_for_flags(h->flags)));
    *out = h;
    *kernel = k;
    return TT_OK;
}

/* ------------------------------------------------------------------------ */
/* Prepared activations                                                     */
/* ------------------------------------------------------------------------ */

/* A 64-byte-aligned byte buffer that only grows; one per thread per role. */
class ScratchBuffer {
public:
    ~ScratchBuffer() { std::free(data_); }
    void *reserve(int64_t bytes) {
        if (bytes > capacity_ || data_ == nullptr) {
            std::free(data_);
            data_ = std::aligned_alloc(64, (size_t)align64(std::max<int64_t>(bytes, 64)));
            capacity_ = data_ ? bytes : 0;
        }
        return data_;
    }

private:
    void *data_ = nullptr;
    int64_t capacity_ = 0;
};

thread_local ScratchBuffer tls_a;
thread_local ScratchBuffer tls_rows;

/* The first column of the u8 row src[0..K) above qmax, or -1. */
int64_t first_above(const uint8_t *src, int64_t K, int qmax) {
    for (int64_t j = 0; j < K; ++j)
        if (src[j] > qmax) return j;
    return -1;
}

/* The caller's u8 row into the kernel's A layout (zero padded). */
void copy_u8_row(const QgemmKernel &k, const uint8_t *src, int64_t K, int64_t kgroups,
                 uint8_t *dst) {
    const int64_t padded = kgroups * k.k_group;
    if (k.k_group == 2) { /* u16 */
        uint16_t *d = reinterpret_cast<uint16_t *>(dst);
        for (int64_t j = 0; j < K; ++j) d[j] = src[j];
        for (int64_t j = K; j < padded; ++j) d[j] = 0;
        return;
    }
    if (k.a_shift) {
        for (int64_t j = 0; j < K; ++j) dst[j] = (uint8_t)(src[j] ^ 0x80); /* a - 128 as s8 */
    } else {
        std::memcpy(dst, src, (size_t)K);
    }
    std::memset(dst + K, 0, (size_t)(padded - K));
}

/* ------------------------------------------------------------------------ */
/* The tiled product                                                        */
/* ------------------------------------------------------------------------ */

struct Output {
    /* float path (y != nullptr) or int32 path (c != nullptr) */
    float *y;
    int64_t ldy;
    const float *w_scale, *bias, *sx;
    int activation;
    int32_t *c;
    int64_t ldc;
    const int32_t *z; /* per row: zero point minus the kernel's A shift */
};

/* Row blocks of this many register tiles make one work item with a panel. */
constexpr int kTilesPerItem = 8;

void run_tiles(const QgemmKernel &k, const PackHeader &h, int64_t M, const uint8_t *a,
               int64_t a_stride, const Output &out) {
    const unsigned char *base = reinterpret_cast<const unsigned char *>(&h);
    const int32_t *colsum = reinterpret_cast<const int32_t *>(base + h.colsum_offset);
    const int8_t *panels = reinterpret_cast<const int8_t *>(base + h.panels_offset);
    const int64_t block_rows = (int64_t)k.mr * kTilesPerItem;
    const int64_t m_blocks = ceil_div(M, block_rows);
    const int64_t items = h.n_panels * m_blocks;
    const double work = (double)M * (double)h.N * (double)h.K;
    int nt = (int)std::min<double>(num_threads(), work / (double)TT_GEMM_MIN_FLOPS_PER_THREAD);
    nt = threads_now((int)std::max<int64_t>(1, std::min<int64_t>(nt, items)),
                     work / solo_cost::kGemmMacsPerUs);
    run_ranges(items, std::max<int64_t>(1, items / (4 * (int64_t)nt)), nt, [&](int64_t begin, int64_t end, int) {
        alignas(64) int32_t acc[kQgemmMaxMR * kQgemmMaxNR];
        for (int64_t item = begin; item < end; ++item) {
            const int64_t q = item / m_blocks, rb = item % m_blocks;
            const int64_t j0 = q * k.nr;
            const int cols = (int)std::min<int64_t>(k.nr, h.N - j0);
            const int8_t *panel = panels + q * h.panel_bytes;
            const int64_t r_end = std::min(M, (rb + 1) * block_rows);
            for (int64_t i0 = rb * block_rows; i0 < r_end; i0 += k.mr) {
                const int rows = (int)std::min<int64_t>(k.mr, r_end - i0);
                k.fn(h.kgroups, a + i0 * a_stride, a_stride, rows, panel, acc);
                if (out.y)
                    k.epilogue_f32(acc, k.nr, rows, cols, out.z + i0, out.sx + i0, colsum + j0,
                                   out.w_scale + j0, out.bias ? out.bias + j0 : nullptr,
                                   out.activation, out.y + i0 * out.ldy + j0, out.ldy);
                else
                    k.epilogue_i32(acc, k.nr, rows, cols, out.z + i0, colsum + j0,
                                   out.c + i0 * out.ldc + j0, out.ldc);
            }
        }
    });
}

tt_status check_matrix(const char *fn, const char *name, const void *p, int64_t rows, int64_t cols,
                       int64_t ld, const char *ld_name) {
    if (ld < cols)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s=%lld is smaller than the %lld columns of %s",
                    fn, ld_name, (long long)ld, (long long)cols, name);
    int64_t span = 0;
    if (rows > 0 && cols > 0 &&
        (mul_overflows(rows - 1, ld, &span) || add_overflows(span, cols, &span) ||
         mul_overflows(span, int64_t{4}, &span)))
        return fail(TT_ERR_OVERFLOW, "%s: %s (%lld x %lld, %s=%lld) overflows int64 bytes", fn, name,
                    (long long)rows, (long long)cols, ld_name, (long long)ld);
    if (p == nullptr && rows > 0 && cols > 0)
        return fail(TT_ERR_NULL_POINTER, "%s: %s is NULL but has %lld x %lld elements", fn, name,
                    (long long)rows, (long long)cols);
    return TT_OK;
}

tt_status out_of_memory(const char *fn, int64_t M, int64_t K) {
    return fail(TT_ERR_OUT_OF_MEMORY, "%s: could not allocate the prepared activations (M=%lld, K=%lld)",
                fn, (long long)M, (long long)K);
}

/* Quantizes the rows of x with `quantize` (one kernel's or the plain u8 one), in parallel
 * when large; returns the first row holding inf or NaN, or -1. */
template <class Quantize>
int64_t quantize_rows(int64_t M, int64_t K, Quantize quantize) {
    std::atomic<int64_t> bad{-1};
    const int nt = memory_bound_threads((double)M * (double)K, M);
    run_ranges(M, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(K, 1)), nt, [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) {
            if (quantize(i)) continue;
            int64_t seen = bad.load();
            while ((seen < 0 || i < seen) && !bad.compare_exchange_weak(seen, i)) {
            }
        }
    });
    return bad.load();
}

/* The bodies of the public pack and quantize calls, each shared by its plain form and its
 * _ex form (flags 0 and the caller's flags). */
tt_status pack_size_impl(const char *fn, int64_t K, int64_t N, int kernel, int flags,
                         int64_t *bytes) {
    TT_CHECK_NOT_NULL(fn, bytes);
    tt_status st = tt::check_k_n(fn, K, N);
    const tt::QgemmKernel *k = nullptr;
    if (st == TT_OK) st = tt::resolve_kernel(fn, kernel, flags, &k);
    if (st != TT_OK) return st;
    *bytes = tt::geometry(*k, flags, K, N).bytes;
    return TT_OK;
}

tt_status pack_impl(const char *kFn, int kernel, int flags, int64_t K, int64_t N,
                    const int8_t *w, int64_t ldw, void *packed, int64_t bytes) {
    tt_status st = tt::check_k_n(kFn, K, N);
    const tt::QgemmKernel *k = nullptr;
    if (st == TT_OK) st = tt::resolve_kernel(kFn, kernel, flags, &k);
    if (st == TT_OK) st = tt::check_matrix(kFn, "w", w, K, N, ldw, "ldw");
    if (st != TT_OK) return st;
    TT_CHECK_NOT_NULL(kFn, packed);
    if (reinterpret_cast<uintptr_t>(packed) % 64 != 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: packed must be 64-byte aligned", kFn);
    const tt::PackHeader h = tt::geometry(*k, flags, K, N);
    if (bytes < h.bytes)
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: bytes=%lld is smaller than the %lld bytes of tt_qgemm_pack_size", kFn,
                        (long long)bytes, (long long)h.bytes);
    unsigned char *base = static_cast<unsigned char *>(packed);
    const unsigned char *w_bytes = reinterpret_cast<const unsigned char *>(w);
    if (K > 0 && N > 0 && w_bytes < base + h.bytes && base < w_bytes + (K - 1) * ldw + N)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: packed overlaps w", kFn);
    std::memset(base, 0, (size_t)h.bytes);
    std::memcpy(base, &h, sizeof h);
    int32_t *colsum = reinterpret_cast<int32_t *>(base + h.colsum_offset);
    int8_t *panels = reinterpret_cast<int8_t *>(base + h.panels_offset);
    const int nr = k->nr, G = k->k_group;
    for (int64_t kk = 0; kk < K; ++kk) {
        const int8_t *row = w + kk * ldw;
        const int64_t g = kk / G, t = kk % G;
        for (int64_t j = 0; j < N; ++j) {
            const int64_t q = j / nr, jj = j % nr;
            panels[q * h.panel_bytes + (g * nr + jj) * G + t] = row[j];
            colsum[j] += row[j];
        }
    }
    tt::set_kernel_path(k->path);
    return TT_OK;
}

tt_status quantize_rows_impl(const char *kFn, int64_t M, int64_t K, const float *x,
                             int64_t ldx, uint8_t *q, int64_t ldq, float *scale,
                             int32_t *zero_point, int flags) {
    const int qmax = flags_qmax(flags);
    if (M < 0 || K < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: M=%lld and K=%lld must be >= 0", kFn,
                        (long long)M, (long long)K);
    tt_status st = check_flags(kFn, flags);
    if (st == TT_OK) st = tt::check_matrix(kFn, "x", x, M, K, ldx, "ldx");
    if (st == TT_OK) st = tt::check_matrix(kFn, "q", q, M, K, ldq, "ldq");
    if (st != TT_OK) return st;
    if (M > 0 && (scale == nullptr || zero_point == nullptr))
        return tt::fail(TT_ERR_NULL_POINTER, "%s: scale and zero_point must hold M=%lld values",
                        kFn, (long long)M);
    const int64_t bad = quantize_rows(M, K, [&](int64_t i) {
        return tt::qrows::quantize_row<tt::qrows::ALayout::U8>(x + i * ldx, K, K, qmax,
                                                              q + i * ldq, scale + i,
                                                              zero_point + i);
    });
    tt::set_kernel_path("qgemm_quantize_rows");
    if (bad >= 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: row %lld of x holds inf or NaN", kFn,
                        (long long)bad);
    return TT_OK;
}
}  // namespace
}  // namespace tt

/* ------------------------------------------------------------------------ */
/* Public entry points                                                      */
/* ------------------------------------------------------------------------ */

extern "C" {

TT_API int tt_qgemm_kernel_active(void) { return tt::kernel_for_flags(0); }

TT_API int tt_qgemm_kernel_for(int flags) {
    if (flags & ~TT_QGEMM_REDUCE_RANGE) return TT_QGEMM_AUTO;
    return tt::kernel_for_flags(flags);
}

TT_API const char *tt_qgemm_kernel_name(int kernel) {
    switch (kernel) {
        case TT_QGEMM_AUTO: return "auto";
        case TT_QGEMM_SCALAR: return "scalar";
        case TT_QGEMM_AVX2: return "avx2";
        case TT_QGEMM_AVX512BW: return "avx512bw";
        case TT_QGEMM_AVX512_VNNI: return "avx512_vnni";
        case TT_QGEMM_NEON: return "neon";
        case TT_QGEMM_NEON_DOT: return "neon_dot";
        case TT_QGEMM_AVX2_U7: return "avx2_u7";
    }
    return "unknown";
}

TT_API int tt_qgemm_kernel_usable(int kernel) {
    const tt::QgemmKernel *k = tt::kernel_by_id(kernel);
    return k != nullptr && tt::usable(*k) ? 1 : 0;
}


TT_API tt_status tt_qgemm_pack_size(int64_t K, int64_t N, int kernel, int64_t *bytes) {
    return tt::pack_size_impl("tt_qgemm_pack_size", K, N, kernel, 0, bytes);
}

TT_API tt_status tt_qgemm_pack_size_ex(int64_t K, int64_t N, int kernel, int flags,
                                       int64_t *bytes) {
    return tt::pack_size_impl("tt_qgemm_pack_size_ex", K, N, kernel, flags, bytes);
}

TT_API tt_status tt_qgemm_pack(int kernel, int64_t K, int64_t N, const int8_t *w, int64_t ldw,
                               void *packed, int64_t bytes) {
    return tt::pack_impl("tt_qgemm_pack", kernel, 0, K, N, w, ldw, packed, bytes);
}

TT_API tt_status tt_qgemm_pack_ex(int kernel, int flags, int64_t K, int64_t N, const int8_t *w,
                                  int64_t ldw, void *packed, int64_t bytes) {
    return tt::pack_impl("tt_qgemm_pack_ex", kernel, flags, K, N, w, ldw, packed, bytes);
}

TT_API tt_status tt_qgemm_quantize_rows(int64_t M, int64_t K, const float *x, int64_t ldx,
                                        uint8_t *q, int64_t ldq, float *scale,
                                        int32_t *zero_point) {
    return tt::quantize_rows_impl("tt_qgemm_quantize_rows", M, K, x, ldx, q, ldq, scale,
                                  zero_point, 0);
}

TT_API tt_status tt_qgemm_quantize_rows_ex(int64_t M, int64_t K, const float *x, int64_t ldx,
                                           uint8_t *q, int64_t ldq, float *scale,
                                           int32_t *zero_point, int flags) {
    return tt::quantize_rows_impl("tt_qgemm_quantize_rows_ex", M, K, x, ldx, q, ldq, scale,
                                  zero_point, flags);
}

TT_API tt_status tt_qgemm_u8s8s32(int64_t M, int64_t N, int64_t K, const uint8_t *a,
                                  int64_t lda, const void *packed, int64_t packed_bytes,
                                  int32_t *c, int64_t ldc) {
    static const char *kFn = "tt_qgemm_u8s8s32";
    if (M < 0) return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: M=%lld is negative", kFn, (long long)M);
    tt_status st = tt::check_k_n(kFn, K, N);
    if (st == TT_OK) st = tt::check_matrix(kFn, "a", a, M, K, lda, "lda");
    if (st == TT_OK) st = tt::check_matrix(kFn, "c", c, M, N, ldc, "ldc");
    const tt::PackHeader *h = nullptr;
    const tt::QgemmKernel *k = nullptr;
    if (st == TT_OK) st = tt::check_pack(kFn, packed, packed_bytes, K, N, &h, &k);
    if (st != TT_OK) return st;
    const int qmax = tt::flags_qmax(h->flags);
    for (int64_t i = 0; qmax < 255 && i < M; ++i) {
        const int64_t j = tt::first_above(a + i * lda, K, qmax);
        if (j >= 0)
            return tt::fail(TT_ERR_INVALID_ARGUMENT,
                            "%s: a[%lld][%lld] = %d is above %d, the largest activation of a "
                            "TT_QGEMM_REDUCE_RANGE pack",
                            kFn, (long long)i, (long long)j, (int)a[i * lda + j], qmax);
    }
    tt::set_kernel_path(k->path);
    if (M == 0 || N == 0) return TT_OK;
    const int64_t a_stride = h->kgroups * 4;
    uint8_t *prepared = static_cast<uint8_t *>(tt::tls_a.reserve(M * a_stride));
    int32_t *z = static_cast<int32_t *>(tt::tls_rows.reserve(M * 4));
    if (prepared == nullptr || z == nullptr) return tt::out_of_memory(kFn, M, K);
    for (int64_t i = 0; i < M; ++i) {
        tt::copy_u8_row(*k, a + i * lda, K, h->kgroups, prepared + i * a_stride);
        z[i] = -k->a_shift; /* c = acc + shift * colsum */
    }
    tt::Output out{nullptr, 0, nullptr, nullptr, nullptr, 0, c, ldc, z};
    tt::run_tiles(*k, *h, M, prepared, a_stride, out);
    return TT_OK;
}

TT_API tt_status tt_qgemm_f32(int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx,
                              const void *packed, int64_t packed_bytes, const float *w_scale,
                              const float *bias, int activation, float *y, int64_t ldy) {
    static const char *kFn = "tt_qgemm_f32";
    if (M < 0) return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: M=%lld is negative", kFn, (long long)M);
    if (activation < TT_QGEMM_ACT_NONE || activation > TT_QGEMM_ACT_GELU)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: activation=%d is not a tt_qgemm_activation",
                        kFn, activation);
    tt_status st = tt::check_k_n(kFn, K, N);
    if (st == TT_OK) st = tt::check_matrix(kFn, "x", x, M, K, ldx, "ldx");
    if (st == TT_OK) st = tt::check_matrix(kFn, "y", y, M, N, ldy, "ldy");
    const tt::PackHeader *h = nullptr;
    const tt::QgemmKernel *k = nullptr;
    if (st == TT_OK) st = tt::check_pack(kFn, packed, packed_bytes, K, N, &h, &k);
    if (st != TT_OK) return st;
    if (N > 0 && M > 0 && w_scale == nullptr)
        return tt::fail(TT_ERR_NULL_POINTER, "%s: w_scale is NULL (it needs N=%lld values)", kFn,
                        (long long)N);
    if (M > 0 && N > 0) {
        const char *xb = reinterpret_cast<const char *>(x), *yb = reinterpret_cast<const char *>(y);
        const int64_t x_span = ((M - 1) * ldx + K) * 4, y_span = ((M - 1) * ldy + N) * 4;
        if (K > 0 && xb < yb + y_span && yb < xb + x_span)
            return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: y overlaps x", kFn);
    }
    tt::set_kernel_path(k->path);
    if (M == 0 || N == 0) return TT_OK;
    const int64_t a_stride = h->kgroups * 4;
    uint8_t *prepared = static_cast<uint8_t *>(tt::tls_a.reserve(M * a_stride));
    char *rows = static_cast<char *>(tt::tls_rows.reserve(M * 8));
    if (prepared == nullptr || rows == nullptr) return tt::out_of_memory(kFn, M, K);
    int32_t *z = reinterpret_cast<int32_t *>(rows);
    float *sx = reinterpret_cast<float *>(rows + M * 4);
    const int qmax = tt::flags_qmax(h->flags);
    const int64_t bad = tt::quantize_rows(M, K, [&](int64_t i) {
        int32_t zp = 0;
        const bool ok = k->quantize_row(x + i * ldx, K, h->kgroups, qmax, prepared + i * a_stride,
                                        sx + i, &zp);
        z[i] = zp - k->a_shift;
        return ok;
    });
    if (bad >= 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: row %lld of x holds inf or NaN", kFn,
                        (long long)bad);
    tt::Output out{y, ldy, w_scale, bias, sx, activation, nullptr, 0, z};
    tt::run_tiles(*k, *h, M, prepared, a_stride, out);
    return TT_OK;
}

}  // extern "C"
