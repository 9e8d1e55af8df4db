/*
 * attention.cpp -- tt_attention_forward / tt_attention_backward: FlashAttention on the CPU.
 *
 * What it owns: argument checks, the blocking (kAttnBlockQ queries x kAttnBlockK keys),
 * causal block skipping and masking, packing of Q^T / dO^T, the final division by l_i,
 * the log-sum-exp, the workspace and the threads. The arithmetic inside a block (block
 * products, softmax step, exp) is the active ISA's entry of the kernel table
 * (attention_kernels.h); the driver knows no ISA by name.
 *
 * Forward, for one (batch*head, query block Qi) -- FlashAttention with online softmax:
 *   Q^T = scale * Qi^T (packed, queries along the lanes); m = -inf, l = 0, O^T = 0
 *   for each key block Kj, Vj that some query of the block may see:
 *     S^T   = Kj Q^T                               (block product, keys x queries)
 *     causal: S^T[j][i] = -inf where key j is after what query i may see
 *     m_new = max(m, colmax S^T); alpha = exp(m - m_new); P^T = exp(S^T - m_new)
 *     l     = alpha l + colsum P^T;  O^T = alpha O^T + Vj^T P^T;  m = m_new
 *   O = (O^T / l)^T,  lse = m + log l  (a query that sees no key: O = 0, lse = -inf)
 * Key blocks entirely in a query block's causal future are never touched.
 *
 * Backward (FlashAttention-2), for one (batch*head, key block Kj, Vj): with Q^T, dO^T,
 * lse and D_i = rowsum(dO_i * O_i) prepared once per head,
 *   for each query block Qi that may see some key of the block:
 *     P^T  = exp(Kj Q^T - lse)          (recomputed, not stored by the forward)
 *     dVj += P^T dOi;   dP^T = Vj dO^T;  dS^T = P^T (dP^T - D) scale
 *     dKj += dS^T Qi;   dQi += dS Kj
 * dK and dV of a key block live in the workspace until the block is done; dQ goes to the
 * output directly when one item owns the whole head, else to a partial sum per item that
 * is added in item order afterwards.
 *
 * Threads (the runtime's pool through parallel.h): the forward's chunks are (batch*head,
 * query block) items, the causally heaviest (last) query blocks first; each item writes its
 * own rows, so the result does not depend on the schedule. The backward's items are whole
 * heads when there are at least 8, else a head's key blocks cut into a few groups (in an
 * order that mixes light and heavy causal blocks); the number of groups depends on the
 * problem alone, so every thread count gives the same bits.
 *
 * Workspace is allocated as runtime storage (tt_storage_create), so tt_memory_stats
 * counts it: forward (2d + 64 + 3) x 64 floats per thread, backward about
 * 2 (sq + 64) (d + 1) + 2 x 64 (64 + d) floats per thread, plus sq d per item when
 * heads are split (fewer than 8 heads: at most 14 sq d). Nothing of size sq x sk is ever allocated.
 */
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/config.h"
#include "core/error.h"
#include "core/isa.h"
#include "core/parallel.h"
#include "cpu/attention_kernels.h"

namespace tt {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kBq = kAttnBlockQ;
constexpr int64_t kBk = kAttnBlockK;

constexpr double kMinWorkPerThread = (double)TT_ATTENTION_MIN_WORK_PER_THREAD;

const AttentionKernels &kernels_for(tt_isa isa) {
    switch (isa) {
#if defined(TT_HAVE_AVX512_KERNELS)
        case TT_ISA_AVX512: return kAttentionAvx512;
#endif
#if defined(TT_HAVE_AVX2_KERNELS)
        case TT_ISA_AVX2: return kAttentionAvx2;
#endif
#if defined(TT_HAVE_NEON_KERNELS)
        case TT_ISA_NEON: return kAttentionNeon;
#endif
        default: return kAttentionScalar;
    }
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

/* ------------------------------------------------------------------------ */
/* Argument checks                                                          */
/* ------------------------------------------------------------------------ */

/* One [batch][heads][rows][d] operand: element (b, h, r, c) at p[b*s0 + h*s1 + r*s2 + c]. */
struct Operand {
    const char *name;
    float *p;
    int64_t s0, s1, s2;
    int64_t rows;
    uintptr_t lo, hi; /* bytes [lo, hi) spanned; lo == hi when empty */
};

struct Dims {
    int64_t batch, heads, sq, sk, d;
};

tt_status check_dims(const char *fn, const Dims &g, int causal, float scale) {
    const struct { const char *name; int64_t v; } sizes[] = {
        {"batch", g.batch}, {"heads", g.heads}, {"sq", g.sq}, {"sk", g.sk}, {"d", g.d}};
    for (const auto &s : sizes)
        if (s.v < 0)
            return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s=%lld is negative", fn, s.name,
                        (long long)s.v);
    if (causal < 0 || causal > 2)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: causal=%d is not TT_ATTENTION_FULL (0), TT_ATTENTION_CAUSAL (1) or "
                    "TT_ATTENTION_CAUSAL_END (2)", fn, causal);
    if (!std::isfinite(scale))
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: scale=%g is not finite", fn, (double)scale);
    /* Every element count (and the workspace below) must fit int64 bytes; the sizes are
     * counted as at least 1, like tt_tensor_create, so a stride computation never overflows. */
    int64_t n = 1, rows_padded = 0, d_plus = 0;
    const int64_t rows = std::max(g.sq, g.sk);
    /* checked adds: rows or d near INT64_MAX must not overflow on the way to the product */
    const bool padded_overflow = add_overflows(std::max<int64_t>(rows, 1), kBq, &rows_padded) ||
                                 add_overflows(std::max<int64_t>(g.d, 1), 1, &d_plus);
    const int64_t factors[] = {std::max<int64_t>(g.batch, 1), std::max<int64_t>(g.heads, 1),
                               rows_padded, d_plus, (int64_t)sizeof(float) * 8};
    for (int64_t f : factors)
        if (padded_overflow || mul_overflows(n, f, &n))
            return fail(TT_ERR_OVERFLOW,
                        "%s: batch=%lld x heads=%lld x %lld rows x d=%lld floats overflow int64 "
                        "bytes", fn, (long long)g.batch, (long long)g.heads, (long long)rows,
                        (long long)g.d);
    return TT_OK;
}

/* The operand's strides (NULL: contiguous), the NULL-pointer rule, the byte span, and for
 * outputs that no two elements share an address. */
tt_status check_operand(const char *fn, Operand *op, const float *ptr, const int64_t *strides,
                        const Dims &g, bool output) {
    const int64_t B = g.batch, H = g.heads, R = op->rows, d = g.d;
    op->p = const_cast<float *>(ptr);
    if (strides) {
        op->s0 = strides[0];
        op->s1 = strides[1];
        op->s2 = strides[2];
        for (int i = 0; i < 3; ++i)
            if (strides[i] < 0)
                return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s_strides[%d]=%lld is negative", fn,
                            op->name, i, (long long)strides[i]);
    } else { /* contiguous [B][H][R][d]; fits: check_dims bounded the product */
        op->s2 = d;
        op->s1 = R * d;
        op->s0 = H * R * d;
    }
    op->lo = op->hi = reinterpret_cast<uintptr_t>(ptr);
    if (B == 0 || H == 0 || R == 0 || d == 0) return TT_OK;
    if (ptr == nullptr)
        return fail(TT_ERR_NULL_POINTER, "%s: %s is NULL but holds %lld x %lld x %lld x %lld floats",
                    fn, op->name, (long long)B, (long long)H, (long long)R, (long long)d);
    /* elements spanned: (B-1) s0 + (H-1) s1 + (R-1) s2 + d, in int64 bytes */
    int64_t span = d, t = 0;
    const int64_t extents[3][2] = {{B, op->s0}, {H, op->s1}, {R, op->s2}};
    for (const auto &e : extents)
        if (mul_overflows(e[0] - 1, e[1], &t) || add_overflows(span, t, &span))
            return fail(TT_ERR_OVERFLOW, "%s: %s spans more than int64 elements (strides %lld, %lld, %lld)",
                        fn, op->name, (long long)op->s0, (long long)op->s1, (long long)op->s2);
    int64_t bytes = 0;
    if (mul_overflows(span, (int64_t)sizeof(float), &bytes) ||
        (uint64_t)bytes > UINTPTR_MAX - op->lo)
        return fail(TT_ERR_OVERFLOW, "%s: %s spans %lld floats, more than int64 bytes", fn,
                    op->name, (long long)span);
    op->hi = op->lo + (uintptr_t)bytes;
    if (output) {
        /* No two elements alias: sorted by stride, each stride reaches past everything the
         * smaller ones span (a sufficient rule that every ordinary layout meets). */
        struct Dim { int64_t size, stride; };
        Dim dims[4] = {{d, 1}, {R, op->s2}, {H, op->s1}, {B, op->s0}};
        std::sort(dims, dims + 4, [](const Dim &a, const Dim &b) { return a.stride < b.stride; });
        int64_t reach = 0; /* elements spanned by the dims so far, minus one */
        for (const Dim &e : dims) {
            if (e.size <= 1) continue;
            if (e.stride <= reach)
                return fail(TT_ERR_INVALID_ARGUMENT,
                            "%s: %s has overlapping elements (strides %lld, %lld, %lld over "
                            "%lld x %lld x %lld rows of %lld): an output must not alias itself",
                            fn, op->name, (long long)op->s0, (long long)op->s1, (long long)op->s2,
                            (long long)B, (long long)H, (long long)R, (long long)d);
            reach += (e.size - 1) * e.stride;
        }
    }
    return TT_OK;
}

bool spans_overlap(const Operand &a, const Operand &b) {
    return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

/* Each output against every input and every other output (by the byte ranges spanned). */
tt_status check_overlaps(const char *fn, const Operand *const *outputs, int n_out,
                         const Operand *const *inputs, int n_in) {
    for (int i = 0; i < n_out; ++i) {
        for (int j = 0; j < n_in; ++j)
            if (spans_overlap(*outputs[i], *inputs[j]))
                return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s overlaps %s (outputs must not share memory "
                            "with inputs)", fn, outputs[i]->name, inputs[j]->name);
        for (int j = i + 1; j < n_out; ++j)
            if (spans_overlap(*outputs[i], *outputs[j]))
                return fail(TT_ERR_INVALID_ARGUMENT, "%s: %s overlaps %s", fn, outputs[i]->name,
                            outputs[j]->name);
    }
    return TT_OK;
}

/* lse: batch*heads*sq contiguous floats, as an Operand with d = 1 row per query. */
void lse_operand(Operand *op, const float *ptr, const Dims &g) {
    op->p = const_cast<float *>(ptr);
    op->s2 = 1;
    op->s1 = g.sq;
    op->s0 = g.heads * g.sq;
    op->lo = op->hi = reinterpret_cast<uintptr_t>(ptr);
    if (ptr) op->hi += (uintptr_t)(g.batch * g.heads * g.sq) * sizeof(float);
}

/* ------------------------------------------------------------------------ */
/* Workspace: runtime storage, so the memory counters see it                */
/* ------------------------------------------------------------------------ */

class Workspace {
public:
    ~Workspace() {
        if (storage_) tt_storage_release(storage_);
    }
    /* copies x floats (one block of floats per thread) */
    tt_status allocate(const char *fn, int64_t floats, int copies) {
        int64_t bytes = 0;
        if (mul_overflows(floats, (int64_t)copies, &floats) ||
            mul_overflows(floats, (int64_t)sizeof(float), &bytes))
            return fail(TT_ERR_OVERFLOW, "%s: a workspace of %lld floats overflows int64 bytes", fn,
                        (long long)floats);
        void *data = nullptr;
        if (tt_storage_create(bytes, &storage_) != TT_OK ||
            tt_storage_data(storage_, &data) != TT_OK)
            return fail(TT_ERR_OUT_OF_MEMORY, "%s: cannot allocate %lld bytes of workspace", fn,
                        (long long)bytes);
        data_ = static_cast<float *>(data);
        return TT_OK;
    }
    float *data() const { return data_; }

private:
    tt_storage_t *storage_ = nullptr;
    float *data_ = nullptr;
};

int threads_for(int64_t items, double work) {
    const int nt = num_threads();
    if (nt <= 1 || items < 2 || work < 2 * kMinWorkPerThread) return 1;
    const double by_work = work / kMinWorkPerThread;
    return threads_now((int)std::max<int64_t>(1, std::min<int64_t>({(int64_t)nt, items, (int64_t)by_work})),
                       work / solo_cost::kAttentionMacsPerUs);
}

/* Causal rule: query i may see key j iff j <= i + off (off = 0 top-left, sk - sq end). */

/* S^T[r][c] = -inf for key j0 + r that query i0 + c may not see (c < n). */
void mask_block(float *S, int64_t rows, int64_t n, int64_t ld, int64_t j0, int64_t i0, int64_t off) {
    for (int64_t r = 0; r < rows; ++r) {
        /* query i sees key j iff i >= j - off: the first c0 = j - off - i0 lanes are masked */
        const int64_t c0 = std::min<int64_t>(std::max<int64_t>(j0 + r - off - i0, 0), n);
        std::fill(S + r * ld, S + r * ld + c0, -kInf);
    }
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */
/* ------------------------------------------------------------------------ */

struct ForwardProblem {
    Dims g;
    Operand q, k, v, o;
    float *lse;
    float scale;
    int causal;
    int64_t off;
};

/* floats of one thread's forward workspace */
int64_t forward_workspace(int64_t d) { return (2 * d + kBk + 3) * kBq; }

void forward_block(const ForwardProblem &P, const AttentionKernels &K, int64_t bh, int64_t qb,
                   float *ws) {
    const int64_t d = P.g.d, H = P.g.heads, sq = P.g.sq, sk = P.g.sk;
    const int64_t b = bh / H, h = bh % H;
    const float *qh = P.q.p + b * P.q.s0 + h * P.q.s1;
    const float *kh = P.k.p + b * P.k.s0 + h * P.k.s1;
    const float *vh = P.v.p + b * P.v.s0 + h * P.v.s1;
    float *oh = P.o.p + b * P.o.s0 + h * P.o.s1;
    const int64_t i0 = qb * kBq, nr = std::min(kBq, sq - i0);
    const int64_t np = round_up(nr, K.lanes);

    float *Qt = ws, *S = Qt + d * kBq, *Ot = S + kBk * kBq;
    float *m = Ot + d * kBq, *l = m + kBq, *alpha = l + kBq;

    /* Q^T, scaled, zero in the padding lanes */
    for (int64_t i = 0; i < nr; ++i) {
        const float *row = qh + (i0 + i) * P.q.s2;
        for (int64_t c = 0; c < d; ++c) Qt[c * np + i] = row[c] * P.scale;
    }
    for (int64_t c = 0; c < d; ++c)
        for (int64_t i = nr; i < np; ++i) Qt[c * np + i] = 0.0f;
    std::fill(m, m + np, -kInf);
    std::fill(l, l + np, 0.0f);
    std::fill(Ot, Ot + d * np, 0.0f);

    /* keys j < jend may be seen by some query of the block */
    int64_t jend = sk;
    if (P.causal) jend = std::min(sk, std::max<int64_t>(0, i0 + nr + P.off));
    for (int64_t j0 = 0; j0 < jend; j0 += kBk) {
        const int64_t nc = std::min(kBk, jend - j0);
        K.product(nc, np, d, kh + j0 * P.k.s2, P.k.s2, false, Qt, np, S, np, kProductOverwrite,
                  nullptr);
        if (P.causal && j0 + nc - 1 > i0 + P.off) mask_block(S, nc, np, np, j0, i0, P.off);
        K.softmax(S, nc, np, np, m, l, alpha);
        K.product(d, np, nc, vh + j0 * P.v.s2, P.v.s2, true, S, np, Ot, np, kProductScaleColumns,
                  alpha);
    }

    for (int64_t i = 0; i < nr; ++i) {
        const float li = l[i];
        const float inv = li == 0.0f ? 0.0f : 1.0f / li; /* no key: O = 0; NaN stays NaN */
        float *row = oh + (i0 + i) * P.o.s2;
        for (int64_t c = 0; c < d; ++c) row[c] = Ot[c * np + i] * inv;
        if (P.lse) P.lse[bh * sq + i0 + i] = li == 0.0f ? -kInf : m[i] + std::log(li);
    }
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                 */
/* ------------------------------------------------------------------------ */

struct BackwardProblem {
    Dims g;
    Operand q, k, v, o, go, gq, gk, gv;
    const float *lse;
    float scale;
    int causal;
    int64_t off;
    int64_t nqb, ncb;
};

/* One thread's backward workspace: per-head packs, then per-key-block scratch. */
struct BackwardScratch {
    float *Qt, *dOt, *lsub, *D; /* [nqb][d][kBq], [nqb][d][kBq], [nqb*kBq], [nqb*kBq] */
    float *S, *dP;              /* [kBk][kBq] each */
    float *dK, *dV;             /* [kBk][d] each */
    int64_t head = -1;          /* the head packed in Qt/dOt/lsub/D */
};

int64_t backward_workspace(const BackwardProblem &P) {
    const int64_t d = P.g.d, padded = P.nqb * kBq;
    return 2 * padded * d + 2 * padded + 2 * kBk * kBq + 2 * kBk * d;
}

void carve(BackwardScratch *s, float *ws, const BackwardProblem &P) {
    const int64_t d = P.g.d, padded = P.nqb * kBq;
    s->Qt = ws;
    s->dOt = s->Qt + padded * d;
    s->lsub = s->dOt + padded * d;
    s->D = s->lsub + padded;
    s->S = s->D + padded;
    s->dP = s->S + kBk * kBq;
    s->dK = s->dP + kBk * kBq;
    s->dV = s->dK + kBk * d;
    s->head = -1;
}

/* Q^T (scaled), dO^T, lse (+inf for a query that sees no key) and D of one head. */
void prepare_head(const BackwardProblem &P, int64_t bh, BackwardScratch *s) {
    if (s->head == bh) return;
    s->head = bh;
    const int64_t d = P.g.d, H = P.g.heads, sq = P.g.sq;
    const int64_t b = bh / H, h = bh % H;
    const float *qh = P.q.p + b * P.q.s0 + h * P.q.s1;
    const float *oh = P.o.p + b * P.o.s0 + h * P.o.s1;
    const float *gh = P.go.p + b * P.go.s0 + h * P.go.s1;
    const float *lse = P.lse + bh * sq;
    for (int64_t qb = 0; qb < P.nqb; ++qb) {
        const int64_t i0 = qb * kBq, nr = std::min(kBq, sq - i0);
        float *Qt = s->Qt + qb * d * kBq, *dOt = s->dOt + qb * d * kBq;
        for (int64_t i = 0; i < nr; ++i) {
            const float *qr = qh + (i0 + i) * P.q.s2, *gr = gh + (i0 + i) * P.go.s2;
            const float *orow = oh + (i0 + i) * P.o.s2;
            float dot = 0.0f;
            for (int64_t c = 0; c < d; ++c) {
                Qt[c * kBq + i] = qr[c] * P.scale;
                dOt[c * kBq + i] = gr[c];
                dot += gr[c] * orow[c];
            }
            s->D[i0 + i] = dot;
            const float li = lse[i0 + i];
            s->lsub[i0 + i] = li == -kInf ? kInf : li;
        }
        for (int64_t c = 0; c < d; ++c)
            for (int64_t i = nr; i < kBq; ++i) Qt[c * kBq + i] = dOt[c * kBq + i] = 0.0f;
        for (int64_t i = nr; i < kBq; ++i) {
            s->D[i0 + i] = 0.0f;
            s->lsub[i0 + i] = kInf;
        }
    }
}

/* Gradients of key block cb of head bh; dQ rows are accumulated into dq (row stride ldq). */
void backward_block(const BackwardProblem &P, const AttentionKernels &K, int64_t bh, int64_t cb,
                    BackwardScratch *s, float *dq, int64_t ldq) {
    const int64_t d = P.g.d, H = P.g.heads, sq = P.g.sq, sk = P.g.sk;
    const int64_t b = bh / H, h = bh % H;
    const float *qh = P.q.p + b * P.q.s0 + h * P.q.s1;
    const float *kh = P.k.p + b * P.k.s0 + h * P.k.s1;
    const float *vh = P.v.p + b * P.v.s0 + h * P.v.s1;
    const float *gh = P.go.p + b * P.go.s0 + h * P.go.s1;
    const bool need_k = P.gk.p != nullptr, need_v = P.gv.p != nullptr, need_q = dq != nullptr;
    const int64_t j0 = cb * kBk, nc = std::min(kBk, sk - j0);
    const float *kb = kh + j0 * P.k.s2, *vb = vh + j0 * P.v.s2;

    if (need_k) std::fill(s->dK, s->dK + nc * d, 0.0f);
    if (need_v) std::fill(s->dV, s->dV + nc * d, 0.0f);
    /* the first query that may see key j0 */
    int64_t qb0 = 0;
    if (P.causal) qb0 = std::max<int64_t>(0, j0 - P.off) / kBq;
    for (int64_t qb = qb0; qb < P.nqb; ++qb) {
        const int64_t i0 = qb * kBq, nr = std::min(kBq, sq - i0);
        const int64_t np = round_up(nr, K.lanes);
        const float *Qt = s->Qt + qb * d * kBq, *dOt = s->dOt + qb * d * kBq;
        K.product(nc, np, d, kb, P.k.s2, false, Qt, kBq, s->S, kBq, kProductOverwrite, nullptr);
        if (P.causal && j0 + nc - 1 > i0 + P.off) mask_block(s->S, nc, np, kBq, j0, i0, P.off);
        K.exp_sub(s->S, nc, np, kBq, s->lsub + i0);
        if (need_v)
            K.product(nc, d, nr, s->S, kBq, false, gh + i0 * P.go.s2, P.go.s2, s->dV, d,
                      kProductAccumulate, nullptr);
        if (!need_k && !need_q) continue;
        K.product(nc, np, d, vb, P.v.s2, false, dOt, kBq, s->dP, kBq, kProductOverwrite, nullptr);
        K.ds(s->S, s->dP, nc, np, kBq, s->D + i0, P.scale);
        if (need_k)
            K.product(nc, d, nr, s->dP, kBq, false, qh + i0 * P.q.s2, P.q.s2, s->dK, d,
                      kProductAccumulate, nullptr);
        if (need_q)
            K.product(nr, d, nc, s->dP, kBq, true, kb, P.k.s2, dq + i0 * ldq, ldq,
                      kProductAccumulate, nullptr);
    }
    const struct { const Operand *op; const float *acc; } outs[] = {{&P.gk, s->dK}, {&P.gv, s->dV}};
    for (const auto &out : outs) {
        if (out.op->p == nullptr) continue;
        float *base = out.op->p + b * out.op->s0 + h * out.op->s1 + j0 * out.op->s2;
        for (int64_t r = 0; r < nc; ++r)
            std::memcpy(base + r * out.op->s2, out.acc + r * d, (size_t)d * sizeof(float));
    }
}

/* Groups of key blocks per head in the backward: enough items (heads x groups) to keep
 * kBackwardItems threads busy when there are few heads, never more groups than key blocks.
 * A function of the problem only: the dQ sums must not depend on the thread count. */
constexpr int64_t kBackwardItems = 8;
inline int64_t backward_groups(int64_t heads, int64_t key_blocks) {
    if (heads >= kBackwardItems) return 1;
    return std::max<int64_t>(1, std::min<int64_t>(key_blocks, (kBackwardItems + heads - 1) / heads));
}

/* Key block at position idx of a head's order: 0, n-1, 1, n-2, ... so that a contiguous
 * range of positions mixes blocks many queries see with blocks few queries see. */
inline int64_t balanced_block(int64_t idx, int64_t n) {
    return (idx % 2 == 0) ? idx / 2 : n - 1 - idx / 2;
}

void zero_rows(float *base, int64_t rows, int64_t stride, int64_t d) {
    for (int64_t r = 0; r < rows; ++r) std::memset(base + r * stride, 0, (size_t)d * sizeof(float));
}

void zero_operand(const Operand &op, const Dims &g) {
    if (op.p == nullptr || g.d == 0) return;
    for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t h = 0; h < g.heads; ++h)
            zero_rows(op.p + b * op.s0 + h * op.s1, op.rows, op.s2, g.d);
}

/* lse of a d = 0 problem without running the blocks: every score is 0, so query i's lse is
 * the log of the number of keys it sees (-inf when none), the same for every head. */
void zero_width_lse(float *lse, int64_t BH, int64_t sq, int64_t sk, int causal) {
    const int64_t off = causal == 2 ? sk - sq : 0;
    for (int64_t i = 0; i < sq; ++i) {
        const int64_t seen = causal ? std::min<int64_t>(std::max<int64_t>(i + off + 1, 0), sk) : sk;
        lse[i] = seen > 0 ? std::log((float)seen) : -kInf;
    }
    for (int64_t bh = 1; bh < BH; ++bh) std::memcpy(lse + bh * sq, lse, (size_t)sq * sizeof(float));
}

}  // namespace
}  // namespace tt

extern "C" TT_API tt_status tt_attention_forward(
    const float *q, const int64_t *q_strides, const float *k, const int64_t *k_strides,
    const float *v, const int64_t *v_strides, float *o, const int64_t *o_strides, float *lse,
    int64_t batch, int64_t heads, int64_t sq, int64_t sk, int64_t d, float scale, int causal) {
    static const char *kFn = "tt_attention_forward";
    using namespace tt;
    ForwardProblem P;
    P.g = {batch, heads, sq, sk, d};
    tt_status st = check_dims(kFn, P.g, causal, scale);
    if (st != TT_OK) return st;
    P.q.name = "q"; P.q.rows = sq;
    P.k.name = "k"; P.k.rows = sk;
    P.v.name = "v"; P.v.rows = sk;
    P.o.name = "o"; P.o.rows = sq;
    if ((st = check_operand(kFn, &P.q, q, q_strides, P.g, false)) != TT_OK ||
        (st = check_operand(kFn, &P.k, k, k_strides, P.g, false)) != TT_OK ||
        (st = check_operand(kFn, &P.v, v, v_strides, P.g, false)) != TT_OK ||
        (st = check_operand(kFn, &P.o, o, o_strides, P.g, true)) != TT_OK)
        return st;
    Operand L;
    L.name = "lse";
    L.rows = sq;
    lse_operand(&L, lse, P.g);
    const Operand *ins[] = {&P.q, &P.k, &P.v};
    const Operand *outs[] = {&P.o, &L};
    if ((st = check_overlaps(kFn, outs, 2, ins, 3)) != TT_OK) return st;

    const AttentionKernels &K = kernels_for(active_isa());
    set_kernel_path(K.forward_path);
    const int64_t BH = batch * heads;
    if (BH == 0 || sq == 0) return TT_OK;
    if (d == 0) { /* every score is 0 and o has no elements: only lse = log(keys seen) */
        if (lse) zero_width_lse(lse, BH, sq, sk, causal);
        return TT_OK;
    }
    P.lse = lse;
    P.scale = scale;
    P.causal = causal;
    P.off = causal == 2 ? sk - sq : 0;

    if (K.rows != nullptr && 2 * sq <= K.lanes) { /* few queries: one row at a time, no padding */
        set_kernel_path(K.rows_path);
        const int64_t items = BH * sq, per_row = kAttnRowsWorkspace(d);
        const int nt = threads_for(items, 2.0 * (double)BH * (double)sq * (double)sk * (double)d);
        Workspace ws;
        if ((st = ws.allocate(kFn, per_row, nt)) != TT_OK) return st;
        parallel_chunks(items, nt, [&](int64_t t, int slot) {
            const int64_t bh = t / sq, i = t % sq, b = bh / heads, h = bh % heads;
            const int64_t keys = causal ? std::min(sk, std::max<int64_t>(0, i + 1 + P.off)) : sk;
            K.rows(P.q.p + b * P.q.s0 + h * P.q.s1 + i * P.q.s2, P.k.p + b * P.k.s0 + h * P.k.s1,
                   P.k.s2, P.v.p + b * P.v.s0 + h * P.v.s1, P.v.s2, keys, d, scale,
                   P.o.p + b * P.o.s0 + h * P.o.s1 + i * P.o.s2, lse ? lse + bh * sq + i : nullptr,
                   ws.data() + slot * per_row);
        });
        return TT_OK;
    }
    const int64_t nqb = ceil_div(sq, kBq), items = BH * nqb;
    const int nt = threads_for(items, 2.0 * (double)BH * (double)sq * (double)sk * (double)d);
    const int64_t per_thread = forward_workspace(d);
    Workspace ws;
    if ((st = ws.allocate(kFn, per_thread, nt)) != TT_OK) return st;
    /* Item t: head t % BH, query block nqb - 1 - t / BH (the causally heaviest first). */
    parallel_chunks(items, nt, [&](int64_t t, int slot) {
        forward_block(P, K, t % BH, nqb - 1 - t / BH, ws.data() + slot * per_thread);
    });
    return TT_OK;
}

extern "C" TT_API tt_status tt_attention_backward(
    const float *q, const int64_t *q_strides, const float *k, const int64_t *k_strides,
    const float *v, const int64_t *v_strides, const float *o, const int64_t *o_strides,
    const float *grad_o, const int64_t *grad_o_strides, const float *lse, float *grad_q,
    const int64_t *grad_q_strides, float *grad_k, const int64_t *grad_k_strides, float *grad_v,
    const int64_t *grad_v_strides, int64_t batch, int64_t heads, int64_t sq, int64_t sk,
    int64_t d, float scale, int causal) {
    static const char *kFn = "tt_attention_backward";
    using namespace tt;
    BackwardProblem P;
    P.g = {batch, heads, sq, sk, d};
    tt_status st = check_dims(kFn, P.g, causal, scale);
    if (st != TT_OK) return st;
    P.q.name = "q"; P.q.rows = sq;
    P.k.name = "k"; P.k.rows = sk;
    P.v.name = "v"; P.v.rows = sk;
    P.o.name = "o"; P.o.rows = sq;
    P.go.name = "grad_o"; P.go.rows = sq;
    P.gq.name = "grad_q"; P.gq.rows = sq;
    P.gk.name = "grad_k"; P.gk.rows = sk;
    P.gv.name = "grad_v"; P.gv.rows = sk;
    if ((st = check_operand(kFn, &P.q, q, q_strides, P.g, false)) != TT_OK ||
        (st = check_operand(kFn, &P.k, k, k_strides, P.g, false)) != TT_OK ||
        (st = check_operand(kFn, &P.v, v, v_strides, P.g, false)) != TT_OK ||
        (st = check_operand(kFn, &P.o, o, o_strides, P.g, false)) != TT_OK ||
        (st = check_operand(kFn, &P.go, grad_o, grad_o_strides, P.g, false)) != TT_OK)
        return st;
    /* the gradients are optional: NULL means "not wanted" (its strides are ignored) */
    Operand *grads[] = {&P.gq, &P.gk, &P.gv};
    const float *grad_ptrs[] = {grad_q, grad_k, grad_v};
    const int64_t *grad_strides[] = {grad_q_strides, grad_k_strides, grad_v_strides};
    for (int i = 0; i < 3; ++i) {
        if (grad_ptrs[i] == nullptr) {
            grads[i]->p = nullptr;
            grads[i]->s0 = grads[i]->s1 = grads[i]->s2 = 0;
            grads[i]->lo = grads[i]->hi = 0;
        } else if ((st = check_operand(kFn, grads[i], grad_ptrs[i], grad_strides[i], P.g, true)) != TT_OK) {
            return st;
        }
    }
    Operand L;
    L.name = "lse";
    L.rows = sq;
    lse_operand(&L, lse, P.g);
    if (lse == nullptr && batch * heads * sq > 0)
        return fail(TT_ERR_NULL_POINTER, "%s: lse is NULL but there are %lld x %lld x %lld queries "
                    "(pass the lse the forward wrote)", kFn, (long long)batch, (long long)heads,
                    (long long)sq);
    const Operand *ins[] = {&P.q, &P.k, &P.v, &P.o, &P.go, &L};
    const Operand *outs[] = {&P.gq, &P.gk, &P.gv};
    if ((st = check_overlaps(kFn, outs, 3, ins, 6)) != TT_OK) return st;

    const AttentionKernels &K = kernels_for(active_isa());
    set_kernel_path(K.backward_path);
    const int64_t BH = batch * heads;
    if (BH == 0 || d == 0) return TT_OK;
    if (sq == 0 || sk == 0) { /* no pair: every gradient that exists is zero */
        zero_operand(P.gq, P.g);
        zero_operand(P.gk, P.g);
        zero_operand(P.gv, P.g);
        return TT_OK;
    }
    P.lse = lse;
    P.scale = scale;
    P.causal = causal;
    P.off = causal == 2 ? sk - sq : 0;
    P.nqb = ceil_div(sq, kBq);
    P.ncb = ceil_div(sk, kBk);

    /* Items are (head, group of key blocks). How many groups a head's key blocks form
     * depends on the problem alone (never on the thread count), so dQ, summed over the
     * groups in group order, has the same bits on any thread count. */
    const int64_t groups = backward_groups(BH, P.ncb), items = BH * groups;
    const int nt = threads_for(items, 4.0 * (double)BH * (double)sq * (double)sk * (double)d);
    const bool need_q = grad_q != nullptr, partial_q = need_q && groups > 1;
    const int64_t per_thread = backward_workspace(P);
    Workspace ws, partials;
    if ((st = ws.allocate(kFn, per_thread, nt)) != TT_OK) return st;
    if (partial_q && (st = partials.allocate(kFn, sq * d, (int)items)) != TT_OK) return st;
    BackwardScratch scratch[TT_MAX_THREADS];  // one per slot, so a slot keeps its packed head
    for (int t = 0; t < nt; ++t) carve(&scratch[t], ws.data() + t * per_thread, P);

    parallel_chunks(items, nt, [&](int64_t item, int slot) {
        BackwardScratch &s = scratch[slot];
        const int64_t bh = item / groups, group = item % groups;
        prepare_head(P, bh, &s);
        float *dq = nullptr;
        int64_t ldq = d;
        if (partial_q) {
            dq = partials.data() + item * sq * d;
            std::memset(dq, 0, (size_t)(sq * d) * sizeof(float));
        } else if (need_q) {
            dq = P.gq.p + (bh / heads) * P.gq.s0 + (bh % heads) * P.gq.s1;
            ldq = P.gq.s2;
            zero_rows(dq, sq, ldq, d);
        }
        if (groups == 1) {
            for (int64_t cb = 0; cb < P.ncb; ++cb) backward_block(P, K, bh, cb, &s, dq, ldq);
            return;
        }
        int64_t begin, end;
        split_range(P.ncb, (int)groups, (int)group, &begin, &end);
        for (int64_t pos = begin; pos < end; ++pos)
            backward_block(P, K, bh, balanced_block(pos, P.ncb), &s, dq, ldq);
    });
    if (!partial_q) return TT_OK;
    /* dQ of each head: its groups' partial sums, in group order. */
    parallel_for(BH, 1, nt, [&](int64_t b0, int64_t b1, int) {
        for (int64_t bh = b0; bh < b1; ++bh) {
            float *dq = P.gq.p + (bh / heads) * P.gq.s0 + (bh % heads) * P.gq.s1;
            for (int64_t i = 0; i < sq; ++i) {
                float *row = dq + i * P.gq.s2;
                const float *src = partials.data() + (bh * groups) * sq * d + i * d;
                std::memcpy(row, src, (size_t)d * sizeof(float));
                for (int64_t gi = 1; gi < groups; ++gi) {
                    const float *part = src + gi * sq * d;
                    for (int64_t c = 0; c < d; ++c) row[c] += part[c];
                }
            }
        }
    });
    return TT_OK;
}
