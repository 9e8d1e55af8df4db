/*
 * gemm.cpp -- tt_sgemm and tt_sgemm_strided_batched: the portable BLIS-style driver.
 *
 * What it owns: argument checking, cache blocking, packing, edge tiles and threads.
 * What it leaves to others: the arithmetic of one MR x NR register tile, done by the
 * micro-kernel of the active ISA (gemm_kernels.h), and the block sizes (core/config.h).
 *
 * Loop nest (BLIS naming), C = alpha op(A) op(B) + beta C, all row-major:
 *
 *   for jc in N step NC            -- a column block of C and of op(B)
 *     for pc in K step KC          -- a rank-KC update
 *       pack op(B)[pc:, jc:] into KC x NC, NR-wide panels        (shared, L3/L2)
 *       for ic in M step MC        -- this thread's rows
 *         pack op(A)[ic:, pc:] into MC x KC, MR-tall panels       (per thread, L2)
 *         for jr in NC step NR     -- one KC x NR sliver of B stays in L1 ...
 *           for ir in MC step MR   -- ... while the A slivers stream past it
 *             micro-kernel(MR x NR tile of C)
 *
 * Transposes are absorbed by the packing routines (they read op(A)/op(B) in whichever
 * order the storage has), so nothing is ever transposed separately; a kernel may supply
 * vector transposing packers for the two "rows contiguous in k" cases. While the A
 * slivers of one jr step stream past, the next B sliver is prefetched from L3. Packed panels are
 * zero-padded to full MR / NR, and partial tiles of C go through a scratch tile, so the
 * micro-kernels have no edge code. The first K block applies the caller's beta, later
 * ones accumulate (beta = 1); beta == 0 never reads C.
 *
 * Threads (the runtime's pool, core/parallel.h): per (jc, pc) step the threads pack the
 * shared B block in chunks of panels, then claim compute chunks (row blocks x column
 * groups, make_grid); a thread that never gets a core takes no chunk and holds nobody
 * up. Each thread gets at least TT_GEMM_MIN_FLOPS_PER_THREAD multiply-adds, so small
 * problems use fewer threads (often one, which never touches the pool). A kernel-table entry may carry
 * a narrow kernel (as BLIS keeps "sup" kernels apart from the framework): results at
 * most narrow_max_n columns wide then skip packing and tiles altogether. The driver
 * knows no ISA by name: kernel_for() picks the table entry, and every path name comes
 * from it. Batched GEMMs with at least as many matrices as threads run one matrix per
 * chunk instead. Packing buffers are cached per thread (grown, never shrunk).
 */
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "cpu/gemm_kernels.h"


namespace tt {

/* ------------------------------------------------------------------------ */
/* Argument checks                                                          */
/* ------------------------------------------------------------------------ */

bool gemm_matrix_extent(int64_t rows, int64_t cols, int64_t ld, int64_t *out) {
    if (rows == 0 || cols == 0) {
        *out = 0;
        return true;
    }
    int64_t span = 0, bytes = 0;
    if (mul_overflows(rows - 1, ld, &span) || add_overflows(span, cols, &span) ||
        mul_overflows(span, (int64_t)sizeof(float), &bytes))
        return false;
    *out = span;
    return true;
}

namespace {

tt_status check_one_matrix(const char *fn, const char *name, const void *ptr, int64_t rows,
                           int64_t cols, int64_t ld, const char *ld_name, const char *shape_note) {
    const int64_t min_ld = cols;  // the header's rule: ld >= cols (so 0 is fine for 0 columns)
    if (ld < min_ld)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: %s=%lld is too small: %s is stored %lld x %lld (%s), so %s must be >= %lld",
                    fn, ld_name, (long long)ld, name, (long long)rows, (long long)cols, shape_note,
                    ld_name, (long long)min_ld);
    int64_t extent = 0;
    if (!gemm_matrix_extent(rows, cols, ld, &extent))
        return fail(TT_ERR_OVERFLOW,
                    "%s: %s spans (%lld - 1) * %s=%lld + %lld elements, which overflows int64 bytes",
                    fn, name, (long long)rows, ld_name, (long long)ld, (long long)cols);
    if (ptr == nullptr && rows > 0 && cols > 0)
        return fail(TT_ERR_NULL_POINTER, "%s: %s is NULL but is stored %lld x %lld (%s)", fn, name,
                    (long long)rows, (long long)cols, shape_note);
    return TT_OK;
}

}  // namespace

tt_status gemm_check_args(const char *fn, const GemmArgs &g) {
    if (g.M < 0) return fail(TT_ERR_INVALID_ARGUMENT, "%s: M=%lld is negative", fn, (long long)g.M);
    if (g.N < 0) return fail(TT_ERR_INVALID_ARGUMENT, "%s: N=%lld is negative", fn, (long long)g.N);
    if (g.K < 0) return fail(TT_ERR_INVALID_ARGUMENT, "%s: K=%lld is negative", fn, (long long)g.K);
    tt_status st = check_one_matrix(fn, "A", g.A, g.trans_a ? g.K : g.M, g.trans_a ? g.M : g.K,
                                    g.lda, "lda", g.trans_a ? "transA=1: K x M" : "transA=0: M x K");
    if (st != TT_OK) return st;
    st = check_one_matrix(fn, "B", g.B, g.trans_b ? g.N : g.K, g.trans_b ? g.K : g.N, g.ldb, "ldb",
                          g.trans_b ? "transB=1: N x K" : "transB=0: K x N");
    if (st != TT_OK) return st;
    return check_one_matrix(fn, "C", g.C, g.M, g.N, g.ldc, "ldc", "M x N");
}

void gemm_scale_c(int64_t M, int64_t N, float beta, float *C, int64_t ldc) {
    for (int64_t i = 0; i < M; ++i) {
        float *row = C + i * ldc;
        if (beta == 0.0f) {
            std::memset(row, 0, (size_t)N * sizeof(float));
        } else if (beta != 1.0f) {
            for (int64_t j = 0; j < N; ++j) row[j] *= beta;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Kernel choice and per-thread packing buffers                             */
/* ------------------------------------------------------------------------ */

namespace {

const GemmMicroKernel *kernel_for(tt_isa isa) {
    switch (isa) {
#if defined(TT_HAVE_AVX512_KERNELS)
        case TT_ISA_AVX512: return &kGemmKernelAvx512;
#endif
#if defined(TT_HAVE_AVX2_KERNELS)
        case TT_ISA_AVX2: return &kGemmKernelAvx2;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_ISA_NEON: return &kGemmKernelNeon;
#endif
        default: return &kGemmKernelScalar;
    }
}

/* A 64-byte-aligned float buffer that only grows; one per thread per role. */
class PackBuffer {
public:
    ~PackBuffer() { std::free(data_); }
    float *reserve(int64_t count) {
        if (count > capacity_) {
            std::free(data_);
            const size_t bytes = ((size_t)count * sizeof(float) + 63) & ~(size_t)63;
            data_ = static_cast<float *>(std::aligned_alloc(64, bytes));
            capacity_ = data_ ? count : 0;
        }
        return data_;
    }

private:
    float *data_ = nullptr;
    int64_t capacity_ = 0;
};

thread_local PackBuffer tls_pack_a;
thread_local PackBuffer tls_pack_b;

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* ------------------------------------------------------------------------ */
/* Packing: op(A) and op(B) into zero-padded, k-major micro-panels          */
/* ------------------------------------------------------------------------ */

/* Portable transpose of one panel (contract of GemmPackRowsFn in gemm_kernels.h). */
void pack_rows_portable(const float *src, int64_t ld, int rows, int width, int64_t klen,
                        float *dst) {
    for (int r = 0; r < rows; ++r) {
        const float *s = src + r * ld;
        for (int64_t k = 0; k < klen; ++k) dst[k * width + r] = s[k];
    }
    for (int r = rows; r < width; ++r)
        for (int64_t k = 0; k < klen; ++k) dst[k * width + r] = 0.0f;
}

/* dst[k * W + c] = src[k * ld + c] for c < cols, zero for cols <= c < W: one panel whose
 * source rows are contiguous across the panel (op(A) with transA, op(B) without transB).
 * W is a compile-time constant so the row copy becomes a few vector moves. */
template <int W>
void pack_cols_fixed(const float *src, int64_t ld, int cols, int64_t klen, float *dst) {
    if (cols == W) {
        for (int64_t k = 0; k < klen; ++k) std::memcpy(dst + k * W, src + k * ld, W * sizeof(float));
        return;
    }
    for (int64_t k = 0; k < klen; ++k) {
        for (int c = 0; c < cols; ++c) dst[k * W + c] = src[k * ld + c];
        for (int c = cols; c < W; ++c) dst[k * W + c] = 0.0f;
    }
}

void pack_cols(const float *src, int64_t ld, int cols, int width, int64_t klen, float *dst) {
    switch (width) {
        case 4: return pack_cols_fixed<4>(src, ld, cols, klen, dst);
        case 6: return pack_cols_fixed<6>(src, ld, cols, klen, dst);
        case 8: return pack_cols_fixed<8>(src, ld, cols, klen, dst);
        case 12: return pack_cols_fixed<12>(src, ld, cols, klen, dst);
        case 16: return pack_cols_fixed<16>(src, ld, cols, klen, dst);
        case 32: return pack_cols_fixed<32>(src, ld, cols, klen, dst);
        default:
            for (int64_t k = 0; k < klen; ++k) {
                for (int c = 0; c < cols; ++c) dst[k * width + c] = src[k * ld + c];
                for (int c = cols; c < width; ++c) dst[k * width + c] = 0.0f;
            }
    }
}

/* Source rows are read in chunks of this many k so that a strided sweep over many panels
 * walks each source row sequentially (hardware prefetchers stop at 4 KiB pages; one
 * panel at a time would touch a new page for every k when ld is large). */
constexpr int64_t kPackChunkK = 8;

/* op(A)[i0 : i0+mlen, p0 : p0+klen] -> ceil(mlen/mr) panels of klen x mr. */
void pack_a(const GemmArgs &g, const GemmMicroKernel &uk, int64_t i0, int64_t mlen, int64_t p0,
            int64_t klen, float *dst) {
    const int mr = uk.mr;
    if (!g.trans_a) {
        /* A row-major M x K: every panel is a transpose of mr rows that are contiguous in k. */
        for (int64_t ip = 0; ip < mlen; ip += mr) {
            const int rows = (int)std::min<int64_t>(mr, mlen - ip);
            const float *src = g.A + (i0 + ip) * g.lda + p0;
            if (uk.pack_a_rows)
                uk.pack_a_rows(src, g.lda, rows, klen, dst + ip * klen);
            else
                pack_rows_portable(src, g.lda, rows, mr, klen, dst + ip * klen);
        }
        return;
    }
    /* A stored K x M: op(A)[i][k] = A[k][i], so each k row is contiguous across the panels. */
    for (int64_t k0 = 0; k0 < klen; k0 += kPackChunkK) {
        const int64_t kn = std::min(kPackChunkK, klen - k0);
        for (int64_t ip = 0; ip < mlen; ip += mr) {
            const int rows = (int)std::min<int64_t>(mr, mlen - ip);
            pack_cols(g.A + (p0 + k0) * g.lda + i0 + ip, g.lda, rows, mr, kn,
                      dst + ip * klen + k0 * mr);
        }
    }
}

/* Panels [q0, q1) of op(B)[p0 : p0+klen, j0 : j0+nlen], each klen x nr. */
void pack_b(const GemmArgs &g, const GemmMicroKernel &uk, int64_t p0, int64_t klen, int64_t j0,
            int64_t nlen, int64_t q0, int64_t q1, float *dst) {
    const int nr = uk.nr;
    if (g.trans_b) {
        /* B stored N x K: each panel is a transpose of nr rows of B, contiguous in k. */
        for (int64_t q = q0; q < q1; ++q) {
            const int64_t jp = q * nr;
            const int cols = (int)std::min<int64_t>(nr, nlen - jp);
            const float *src = g.B + (j0 + jp) * g.ldb + p0;
            if (uk.pack_b_rows)
                uk.pack_b_rows(src, g.ldb, cols, klen, dst + jp * klen);
            else
                pack_rows_portable(src, g.ldb, cols, nr, klen, dst + jp * klen);
        }
        return;
    }
    /* B row-major K x N: each k row is contiguous across the panels. */
    for (int64_t k0 = 0; k0 < klen; k0 += kPackChunkK) {
        const int64_t kn = std::min(kPackChunkK, klen - k0);
        for (int64_t q = q0; q < q1; ++q) {
            const int64_t jp = q * nr;
            const int cols = (int)std::min<int64_t>(nr, nlen - jp);
            pack_cols(g.B + (p0 + k0) * g.ldb + j0 + jp, g.ldb, cols, nr, kn,
                      dst + jp * klen + k0 * nr);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The blocked loop nest                                                    */
/* ------------------------------------------------------------------------ */

struct Blocking {
    const GemmMicroKernel *uk;
    int64_t mc, kc, nc;  /* block sizes, multiples of mr / nr */
    int64_t k_blocks;    /* K split into this many near-equal blocks of <= kc */
};

Blocking make_blocking(const GemmMicroKernel *uk, int64_t K) {
    Blocking b;
    b.uk = uk;
    b.mc = std::max<int64_t>(uk->mr, (TT_GEMM_MC / uk->mr) * uk->mr);
    b.nc = std::max<int64_t>(uk->nr, (TT_GEMM_NC / uk->nr) * uk->nr);
    /* Balance the K blocks (K = 300 becomes 150 + 150, not 256 + 44). */
    b.k_blocks = std::max<int64_t>(1, ceil_div(K, TT_GEMM_KC));
    b.kc = ceil_div(K, b.k_blocks);
    return b;
}

/* The compute chunks of one (jc, pc) step: row blocks of mc rows x groups of column
 * panels. On one thread: whole MC blocks, no column groups (the most reuse of packed A).
 * On nt threads: about kGemmChunksPerThread chunks per thread (a chunk of a worker that
 * loses its core delays the call by little), row blocks no taller than MC, and column
 * groups only when there are too few row blocks. Every tile of C is computed the same way
 * whatever the grid, so the grid changes no result. */
constexpr int64_t kGemmChunksPerThread = 4;

struct ChunkGrid {
    int64_t mc, m_blocks, n_groups;
};

ChunkGrid make_grid(const GemmArgs &g, const Blocking &b, int nt) {
    const int64_t mr = b.uk->mr, m_panels = ceil_div(g.M, mr);
    const int64_t max_n_panels = ceil_div(std::min(g.N, b.nc), b.uk->nr);
    ChunkGrid grid{b.mc, ceil_div(g.M, b.mc), 1};
    if (nt <= 1) return grid;
    const int64_t target = kGemmChunksPerThread * nt;
    grid.mc = std::min(b.mc, ceil_div(m_panels, target) * mr);
    grid.m_blocks = ceil_div(g.M, grid.mc);
    if (grid.m_blocks < target) grid.n_groups = std::min(max_n_panels, ceil_div(target, grid.m_blocks));
    return grid;
}

/* One rank-KC update of one column block: what every chunk of the step shares. */
struct GemmStep {
    int64_t jc, nlen, n_panels, pc, klen;
    float beta;
    const float *packed_b;
};

/* Which packed A block this thread holds: the same rows of the same call need no repack
 * when one thread takes two column groups of a row block in a row. */
struct PackedAKey {
    uint64_t call = 0;
    int64_t ic = -1, pc = -1;
};
thread_local PackedAKey tls_packed_a_key;
std::atomic<uint64_t> g_gemm_calls{0};

/* Chunk `chunk` of a step: rows [ic, ic + mlen) x column panels [q_begin, q_end). Returns
 * false if the packing buffer for A cannot be allocated. */
bool compute_chunk(const GemmArgs &g, const Blocking &b, const ChunkGrid &grid, const GemmStep &st,
                   uint64_t call, int64_t a_floats, int64_t chunk) {
    const GemmMicroKernel &uk = *b.uk;
    const int mr = uk.mr, nr = uk.nr;
    const int64_t ib = chunk / grid.n_groups, qg = chunk % grid.n_groups;
    const int64_t ic = ib * grid.mc, mlen = std::min(grid.mc, g.M - ic);
    int64_t q_begin, q_end;
    split_range(st.n_panels, (int)grid.n_groups, (int)qg, &q_begin, &q_end);
    if (q_begin >= q_end) return true;

    float *packed_a = tls_pack_a.reserve(a_floats);
    if (packed_a == nullptr) return false;
    PackedAKey &key = tls_packed_a_key;
    if (key.call != call || key.ic != ic || key.pc != st.pc) {
        pack_a(g, uk, ic, mlen, st.pc, st.klen, packed_a);
        key = {call, ic, st.pc};
    }
    alignas(64) float scratch[kGemmMaxMR * kGemmMaxNR];
    const int64_t a_panels = ceil_div(mlen, mr), klen = st.klen;
    for (int64_t q = q_begin; q < q_end; ++q) {
        const int64_t jr = q * nr;
        const int cols = (int)std::min<int64_t>(nr, st.nlen - jr);
        const float *bp = st.packed_b + jr * klen;
        /* The next B sliver usually sits in L3: pull it toward the cache a slice per A
         * panel, so the first micro-kernel of the next jr does not stall. */
        const char *next_b = reinterpret_cast<const char *>(bp + (int64_t)nr * klen);
        const int64_t next_lines = (q + 1 < q_end) ? (int64_t)nr * klen * 4 / 64 : 0;
        const int64_t lines_per_panel = ceil_div(next_lines, a_panels);
        for (int64_t ir = 0, panel = 0; ir < mlen; ir += mr, ++panel) {
            const int rows = (int)std::min<int64_t>(mr, mlen - ir);
            const float *ap = packed_a + ir * klen;
            for (int64_t l = panel * lines_per_panel;
                 l < std::min(next_lines, (panel + 1) * lines_per_panel); ++l)
                __builtin_prefetch(next_b + l * 64, 0, 2);
            float *c = g.C + (ic + ir) * g.ldc + st.jc + jr;
            if (rows == mr && cols == nr) {
                uk.fn(klen, ap, bp, c, g.ldc, g.alpha, st.beta);
                continue;
            }
            /* Edge tile: full tile into scratch, then merge the valid part. */
            uk.fn(klen, ap, bp, scratch, nr, g.alpha, 0.0f);
            for (int i = 0; i < rows; ++i) {
                float *ci = c + i * g.ldc;
                const float *si = scratch + i * nr;
                if (st.beta == 0.0f) {
                    for (int j = 0; j < cols; ++j) ci[j] = si[j];
                } else {
                    for (int j = 0; j < cols; ++j) ci[j] = si[j] + st.beta * ci[j];
                }
            }
        }
    }
    return true;
}

/* The blocked loop nest on nt threads: per (jc, pc) step, the threads pack the shared B
 * block in chunks of panels, then compute the step's chunks; each phase ends when its
 * chunks are done (core/thread_pool.h: nobody waits for a thread that took none). */
bool run_blocked(const GemmArgs &g, const Blocking &b, float *packed_b, int64_t a_floats, int nt) {
    const GemmMicroKernel &uk = *b.uk;
    const ChunkGrid grid = make_grid(g, b, nt);
    const uint64_t call = g_gemm_calls.fetch_add(1, std::memory_order_relaxed) + 1;
    std::atomic<bool> failed{false};
    for (int64_t jc = 0; jc < g.N; jc += b.nc) {
        GemmStep st;
        st.jc = jc;
        st.nlen = std::min(b.nc, g.N - jc);
        st.n_panels = ceil_div(st.nlen, uk.nr);
        st.packed_b = packed_b;
        const int64_t pack_chunks = nt <= 1 ? 1 : std::min<int64_t>(st.n_panels, 2 * nt);
        st.pc = 0;
        for (int64_t kb = 0; kb < b.k_blocks; ++kb) {
            st.klen = std::min(b.kc, g.K - st.pc);
            st.beta = (kb == 0) ? g.beta : 1.0f;
            parallel_chunks(pack_chunks, nt, [&](int64_t c, int) {
                int64_t q0, q1;
                split_range(st.n_panels, (int)pack_chunks, (int)c, &q0, &q1);
                pack_b(g, uk, st.pc, st.klen, jc, st.nlen, q0, q1, packed_b);
            });
            parallel_chunks(grid.m_blocks * grid.n_groups, nt, [&](int64_t c, int) {
                if (!compute_chunk(g, b, grid, st, call, a_floats, c)) failed.store(true);
            });
            if (failed.load()) return false;
            st.pc += st.klen;
        }
    }
    return true;
}

/* The narrow path takes op(A) row-major and either a result at most uk->narrow_max_n
 * wide, or a "dot-shaped" product: B read in place as B^T (transB), a result of at most
 * kDotMaxRows x kDotMaxCols and a long K (at least kDotMinKPerCol per result column).
 * That is the weight gradient of a convolution or of a small layer, g @ cols^T: a few
 * thousand dot products over tens of thousands of k, where tiles would mostly compute
 * padding and packing B would copy more bytes than the product reads. K is walked in
 * chunks whose slice of B^T stays in L2 (kNarrowMaxBtFloats) while the rows of A pass. */
constexpr int64_t kNarrowMaxBtFloats = 1 << 16;
constexpr int64_t kDotMaxRows = 16;
constexpr int64_t kDotMaxCols = 96;
constexpr int64_t kDotMinKPerCol = 64;

bool use_narrow(const GemmArgs &g, const GemmMicroKernel *uk) {
    if (uk->narrow == nullptr || g.trans_a || g.M <= 0 || g.N <= 0 || g.K <= 0 || g.alpha == 0.0f)
        return false;
    if (g.N <= uk->narrow_max_n) return true;
    return g.trans_b && g.M <= kDotMaxRows && g.N <= kDotMaxCols && g.K >= kDotMinKPerCol * g.N;
}

/* The narrow path: B^T is read in place (transB) or transposed once into the B buffer;
 * threads split the rows; each thread walks K in L2-sized chunks (the first applies the
 * caller's beta, later ones accumulate). */
tt_status run_narrow(const GemmArgs &g, const GemmMicroKernel *uk, int nt) {
    const float *bt = g.B;
    int64_t ldbt = g.ldb;
    if (!g.trans_b) {
        float *packed = tls_pack_b.reserve(g.N * g.K);
        if (packed == nullptr) return TT_ERR_OUT_OF_MEMORY;
        for (int64_t k = 0; k < g.K; ++k)
            for (int64_t j = 0; j < g.N; ++j) packed[j * g.K + k] = g.B[k * g.ldb + j];
        bt = packed;
        ldbt = g.K;
    }
    const int64_t chunk = std::max<int64_t>(8, (kNarrowMaxBtFloats / g.N) / 8 * 8);
    /* Chunks of an even number of rows (the kernels take rows in pairs), about
     * kGemmChunksPerThread per thread. */
    const int64_t rows = nt <= 1 ? g.M : std::max<int64_t>(2, ceil_div(ceil_div(g.M, kGemmChunksPerThread * nt), 2) * 2);
    parallel_for(g.M, rows, nt, [&](int64_t r0, int64_t r1, int) {
        for (int64_t k0 = 0; k0 < g.K; k0 += chunk) {
            const int64_t kc = std::min(chunk, g.K - k0);
            uk->narrow(r1 - r0, g.N, kc, g.A + r0 * g.lda + k0, g.lda, bt + k0, ldbt,
                       g.C + r0 * g.ldc, g.ldc, g.alpha, k0 == 0 ? g.beta : 1.0f);
        }
    });
    return TT_OK;
}

/* The row-vector path (decoding: one to kGemmRowvecMaxRows rows of op(A), row-major, and
 * a result wider than the narrow kernel takes): the weight is read in place, once, never
 * packed -- packing would copy all of it on every call to read it once. B row-major goes
 * to the entry's rowvec kernel (rows of B streamed in k order), B^T to its narrow kernel
 * (dot products over rows of B^T, contiguous in k). One thread takes all columns as one
 * range (the weight then streams by in storage order); more split them into a few ranges
 * per thread, multiples of 64 columns (a thread per kRowvecMinCols columns at most). Each element's k sum runs in order whichever
 * range holds it, so the split changes no bit. */
constexpr int64_t kRowvecMinCols = 256;
constexpr int64_t kRowvecKChunk = 256;

bool use_rowvec(const GemmArgs &g, const GemmMicroKernel *uk) {
    if (g.trans_a || g.M <= 0 || g.M > kGemmRowvecMaxRows || g.N <= 0 || g.K <= 0 || g.alpha == 0.0f)
        return false;
    if (uk->narrow != nullptr && g.N <= uk->narrow_max_n) return false; /* narrow is cheaper */
    return g.trans_b ? uk->narrow != nullptr : uk->rowvec != nullptr;
}

tt_status run_rowvec(const GemmArgs &g, const GemmMicroKernel *uk, int threads) {
    const int nt = std::min(threads, memory_bound_threads((double)g.N * (double)g.K,
                                                          ceil_div(g.N, kRowvecMinCols),
                                                          4000.0 / solo_cost::kGemmBytesPerUs));
    const int64_t grain = nt <= 1 ? g.N : ceil_div(ceil_div(g.N, kGemmChunksPerThread * nt), 64) * 64;
    parallel_for(g.N, std::max<int64_t>(grain, 64), nt, [&](int64_t j0, int64_t j1, int) {
        if (!g.trans_b) {
            uk->rowvec(g.M, j1 - j0, g.K, g.A, g.lda, g.B + j0, g.ldb, g.C + j0, g.ldc, g.alpha,
                       g.beta);
            return;
        }
        /* More than two rows pass the B^T range twice (the kernel takes rows in pairs):
         * walk K in chunks whose slice of the range stays in L2. The chunk is fixed, not
         * sized by the range, so that the split (which follows the thread count) cannot
         * change where partial sums are rounded. */
        const int64_t chunk = g.M <= 2 ? g.K : kRowvecKChunk;
        for (int64_t k0 = 0; k0 < g.K; k0 += chunk)
            uk->narrow(g.M, j1 - j0, std::min(chunk, g.K - k0), g.A + k0, g.lda,
                       g.B + j0 * g.ldb + k0, g.ldb, g.C + j0, g.ldc, g.alpha,
                       k0 == 0 ? g.beta : 1.0f);
    });
    return TT_OK;
}

/* The kernel-path report of one tt_sgemm call: the entry's row-vector or narrow path name
 * when that path will run, else its tiled path name. */
const char *gemm_path(const GemmArgs &g, const GemmMicroKernel *uk) {
    if (use_rowvec(g, uk)) return g.trans_b ? uk->narrow_path : uk->rowvec_path;
    return use_narrow(g, uk) ? uk->narrow_path : uk->path;
}

/* A GEMM's one-thread time, roughly, for the pool's wake-up rule (thread_pool.h): the longer
 * of its multiply-adds at 40 per ns (about 80 % of one AVX2 core's FMA peak; faster cores
 * only make the estimate cautious, i.e. closer to always waking) and its operand bytes at
 * 10 GB/s (tall, skinny products are memory-bound: 43264 x 9 x 8, 3M multiply-adds, took
 * 1.2-1.5 ms alone and 0.53-0.71x that on two threads even with the worker asleep). */
double solo_us_estimate(const GemmArgs &g) {
    const double macs = (double)g.M * (double)g.N * (double)g.K;
    const double bytes = 4.0 * ((double)g.M * (double)g.K + (double)g.K * (double)g.N + 2.0 * (double)g.M * (double)g.N);
    return std::max(macs / solo_cost::kGemmMacsPerUs, bytes / solo_cost::kGemmBytesPerUs);
}

/* One GEMM, whole: the narrow path or the tiled one. */
tt_status run_gemm_panels(const GemmArgs &g, const GemmMicroKernel *uk, int threads) {
    if (g.M == 0 || g.N == 0) return TT_OK;
    if (g.K == 0 || g.alpha == 0.0f) {
        gemm_scale_c(g.M, g.N, g.beta, g.C, g.ldc);
        return TT_OK;
    }
    const Blocking b = make_blocking(uk, g.K);
    const int64_t b_floats = b.kc * ceil_div(std::min(g.N, b.nc), uk->nr) * uk->nr;
    const int64_t a_floats = b.kc * std::min(b.mc, ceil_div(g.M, uk->mr) * uk->mr);

    const double work = (double)g.M * (double)g.N * (double)g.K;
    const int64_t tiles = ceil_div(g.M, uk->mr) * ceil_div(std::min(g.N, b.nc), uk->nr);
    /* Each thread must get enough work to pay for waking it and for the barriers. */
    int nt = (int)std::min<double>(threads, work / (double)TT_GEMM_MIN_FLOPS_PER_THREAD);
    if (nt < 1) nt = 1;
    /* The narrow path splits rows (two per kernel call), not tiles. */
    if (use_narrow(g, uk)) return run_narrow(g, uk, (int)std::min<int64_t>(nt, ceil_div(g.M, 2)));
    if (nt > tiles) nt = (int)tiles;
    /* A call the pool will run alone (a back-off after a stall) is cut as on one thread: the
     * finer grid of nt threads repacks A more often, and run by one thread it measured about
     * 1.1x the one-thread time (N = 256 beside one busy core of two). */
    nt = tt::threads_now(nt, solo_us_estimate(g));
    float *packed_b = tls_pack_b.reserve(b_floats);
    if (packed_b == nullptr) return TT_ERR_OUT_OF_MEMORY;
    return run_blocked(g, b, packed_b, a_floats, nt) ? TT_OK : TT_ERR_OUT_OF_MEMORY;
}

/* Edge columns: with op(A) row-major, when the last column panel of C would be a mostly
 * padded tile (N % nr at most kEdgeMaxCols), the tiled path computes the full panels and
 * the narrow kernel the few columns left: a 4096 x 65 logits product then computes 65
 * columns, not 96. C's columns are independent, so the split changes no result. */
constexpr int64_t kEdgeMaxCols = 8;

/* One GEMM on up to `threads` threads. Arguments are already checked. Returns
 * TT_ERR_OUT_OF_MEMORY without recording a message (the caller's thread must do it). */
tt_status run_gemm(const GemmArgs &g, const GemmMicroKernel *uk, int threads) {
    if (use_rowvec(g, uk)) return run_rowvec(g, uk, threads);
    const int64_t rem = g.N % uk->nr;
    if (uk->narrow != nullptr && !g.trans_a && g.N > uk->nr && rem <= kEdgeMaxCols &&
        rem <= uk->narrow_max_n && rem > 0 && g.M > 0 && g.K > 0 && g.alpha != 0.0f) {
        GemmArgs panels = g, edge = g;
        panels.N = g.N - rem;
        edge.N = rem;
        edge.B = g.trans_b ? g.B + panels.N * g.ldb : g.B + panels.N;
        edge.C = g.C + panels.N;
        const tt_status st = run_gemm_panels(panels, uk, threads);
        return st != TT_OK ? st : run_gemm_panels(edge, uk, threads);
    }
    return run_gemm_panels(g, uk, threads);
}

tt_status out_of_memory(const char *fn, const GemmArgs &g) {
    return fail(TT_ERR_OUT_OF_MEMORY,
                "%s: could not allocate GEMM packing buffers (M=%lld, N=%lld, K=%lld)", fn,
                (long long)g.M, (long long)g.N, (long long)g.K);
}

}  // namespace
}  // namespace tt

/* ------------------------------------------------------------------------ */
/* Public entry points                                                      */
/* ------------------------------------------------------------------------ */

extern "C" TT_API tt_status tt_sgemm(int transA, int transB, int64_t M, int64_t N, int64_t K,
                                     float alpha, const float *A, int64_t lda, const float *B,
                                     int64_t ldb, float beta, float *C, int64_t ldc) {
    static const char *kFn = "tt_sgemm";
    const tt::GemmArgs g{transA != 0, transB != 0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
    tt_status st = tt::gemm_check_args(kFn, g);
    if (st != TT_OK) return st;
    const tt::GemmMicroKernel *uk = tt::kernel_for(tt::active_isa());
    tt::set_kernel_path(tt::gemm_path(g, uk));
    st = tt::run_gemm(g, uk, tt::num_threads());
    return st == TT_OK ? TT_OK : tt::out_of_memory(kFn, g);
}

extern "C" TT_API tt_status tt_sgemm_strided_batched(
    int transA, int transB, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
    int64_t lda, int64_t strideA, const float *B, int64_t ldb, int64_t strideB, float beta,
    float *C, int64_t ldc, int64_t strideC, int64_t batch) {
    static const char *kFn = "tt_sgemm_strided_batched";
    if (batch < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT, "%s: batch=%lld is negative", kFn, (long long)batch);
    if (strideA < 0 || strideB < 0 || strideC < 0)
        return tt::fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: strides must be >= 0, got strideA=%lld strideB=%lld strideC=%lld", kFn,
                        (long long)strideA, (long long)strideB, (long long)strideC);
    const tt::GemmArgs g{transA != 0, transB != 0, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc};
    tt_status st = tt::gemm_check_args(kFn, g);
    if (st != TT_OK) return st;

    /* The last matrix must be addressable: (batch-1)*stride + extent fits in int64 bytes. */
    const struct {
        const char *name;
        int64_t rows, cols, ld, stride;
    } mats[3] = {{"A", g.trans_a ? K : M, g.trans_a ? M : K, lda, strideA},
                 {"B", g.trans_b ? N : K, g.trans_b ? K : N, ldb, strideB},
                 {"C", M, N, ldc, strideC}};
    for (const auto &m : mats) {
        int64_t extent = 0, span = 0, bytes = 0;
        tt::gemm_matrix_extent(m.rows, m.cols, m.ld, &extent);
        if (batch > 0 && extent > 0 &&
            (tt::mul_overflows(batch - 1, m.stride, &span) || tt::add_overflows(span, extent, &span) ||
             tt::mul_overflows(span, (int64_t)sizeof(float), &bytes)))
            return tt::fail(TT_ERR_OVERFLOW,
                            "%s: batch=%lld matrices of %s with stride%s=%lld overflow int64 bytes",
                            kFn, (long long)batch, m.name, m.name, (long long)m.stride);
    }
    /* The C matrices must be disjoint: either stacked (strideC >= whole matrix) or
     * interleaved row by row (all batch rows fit inside one ldc). */
    if (batch > 1 && M > 0 && N > 0) {
        const bool stacked = strideC >= (M - 1) * ldc + N;
        const bool interleaved = strideC >= N && (batch - 1) * strideC + N <= ldc;
        if (!stacked && !interleaved)
            return tt::fail(TT_ERR_INVALID_ARGUMENT,
                            "%s: the %lld C matrices overlap (M=%lld, N=%lld, ldc=%lld, strideC=%lld)",
                            kFn, (long long)batch, (long long)M, (long long)N, (long long)ldc,
                            (long long)strideC);
    }

    const tt::GemmMicroKernel *uk = tt::kernel_for(tt::active_isa());
    tt::set_kernel_path(uk->batched_path);
    if (batch == 0 || M == 0 || N == 0) return TT_OK;
    const int threads = tt::num_threads();

    /* An operand with no elements (K == 0) is never read: keep its pointer as given
     * rather than stepping it by a stride nobody checked. */
    const bool step_ab = K > 0;
    auto matrix = [&](int64_t i) {
        tt::GemmArgs gi = g;
        gi.A = step_ab ? A + i * strideA : A;
        gi.B = step_ab ? B + i * strideB : B;
        gi.C = C + i * strideC;
        return gi;
    };

    const double work = (double)M * (double)N * (double)K * (double)batch;
    if (threads > 1 && batch >= threads &&
        work >= (double)TT_GEMM_MIN_FLOPS_PER_THREAD * threads) {
        /* Enough matrices to keep every thread busy: one whole matrix per chunk. */
        std::atomic<bool> failed{false};
        tt::parallel_chunks(batch, threads, [&](int64_t i, int) {
            if (tt::run_gemm(matrix(i), uk, 1) != TT_OK) failed.store(true);
        });
        return failed.load() ? tt::out_of_memory(kFn, g) : TT_OK;
    }
    for (int64_t i = 0; i < batch; ++i)
        if (tt::run_gemm(matrix(i), uk, threads) != TT_OK) return tt::out_of_memory(kFn, g);
    return TT_OK;
}
