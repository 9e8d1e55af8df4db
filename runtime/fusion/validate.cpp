/*
 * validate.cpp -- the fusion IR reader: int64 words + one double per node -> Program.
 *
 * The words are read front to back through one bounds-checked cursor (`need` refuses to
 * read past n_words before any word is touched), so no input can make the reader leave
 * the buffer; every count is checked against the words that remain before anything is
 * allocated for it, so no input can make it allocate more than a few times n_words.
 * Each refusal is TT_ERR_INVALID_ARGUMENT (TT_ERR_OVERFLOW for a domain whose bytes do
 * not fit int64) with a message naming the word index, the node or output, and the rule.
 * The rules are those of runtime/fusion/README.md.
 */
#include <cmath>

#include "core/error.h"
#include "fusion/fusion_ir.h"

namespace tt {
namespace fusion {

int op_arity(int64_t op) {
    switch (op) {
        case OP_INPUT: case OP_CONST: return 0;
        case OP_CAST: case OP_NEG: case OP_ABS: case OP_EXP: case OP_LOG: case OP_SQRT:
        case OP_RSQRT: case OP_TANH: case OP_SIGMOID: case OP_RELU: case OP_GELU: case OP_ERF:
        case OP_POWI: case OP_RECIP: case OP_SUM: case OP_MEAN: case OP_MAX_ROW: return 1;
        case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_MAX: case OP_MIN:
        case OP_POW: case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE:
            return 2;
        case OP_WHERE: return 3;
        default: return -1;
    }
}

const char *op_name(int64_t op) {
    switch (op) {
        case OP_INPUT: return "input";     case OP_CONST: return "const";
        case OP_CAST: return "cast";       case OP_NEG: return "neg";
        case OP_ABS: return "abs";         case OP_EXP: return "exp";
        case OP_LOG: return "log";         case OP_SQRT: return "sqrt";
        case OP_RSQRT: return "rsqrt";     case OP_TANH: return "tanh";
        case OP_SIGMOID: return "sigmoid"; case OP_RELU: return "relu";
        case OP_GELU: return "gelu";       case OP_ERF: return "erf";
        case OP_POWI: return "powi";       case OP_RECIP: return "recip";
        case OP_ADD: return "add";         case OP_SUB: return "sub";
        case OP_MUL: return "mul";         case OP_DIV: return "div";
        case OP_MAX: return "maximum";     case OP_MIN: return "minimum";
        case OP_POW: return "pow";         case OP_LT: return "lt";
        case OP_LE: return "le";           case OP_GT: return "gt";
        case OP_GE: return "ge";           case OP_EQ: return "eq";
        case OP_NE: return "ne";           case OP_WHERE: return "where";
        case OP_SUM: return "sum";         case OP_MEAN: return "mean";
        case OP_MAX_ROW: return "max_row";
        default: return "?";
    }
}

namespace {

/* Node indices are int; no real graph comes near this. */
constexpr int64_t kMaxNodes = (int64_t)1 << 30;

const char *dtype_label(int64_t d) { return d == TT_F32 ? "float32" : d == TT_F64 ? "float64" : "?"; }

/* Bounds-checked reader over the words. */
struct Cursor {
    const char *fn;
    const int64_t *words;
    int64_t n, pos = 0;
    /* k more words exist; else fail naming what was being read. */
    tt_status need(int64_t k, const char *what) const {
        if (k < 0 || k > n - pos)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: the program ends at word %lld (n_words=%lld) but %s needs %lld more "
                        "word(s)",
                        fn, (long long)pos, (long long)n, what, (long long)k);
        return TT_OK;
    }
    int64_t next() { return words[pos++]; }
};

#define TRY(expr)                              \
    do {                                       \
        tt_status st_ = (expr);                \
        if (st_ != TT_OK) return st_;          \
    } while (0)

tt_status check_node_operands(const char *fn, int64_t word, int i, const Node &nd,
                              const int64_t raw[3], const Program &p) {
    const int arity = op_arity(nd.op);
    static const char *names[3] = {"a", "b", "c"};
    if (nd.op == OP_INPUT) {
        if (raw[0] < 0 || raw[0] >= (int64_t)p.input_dtypes.size())
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: node %d (input) names input slot %lld, outside 0..%lld",
                        fn, (long long)(word + 2), i, (long long)raw[0],
                        (long long)p.input_dtypes.size() - 1);
        if (raw[1] != -1 || raw[2] != -1)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: node %d (input) has operands b=%lld c=%lld; it takes "
                        "only the slot a (b and c must be -1)",
                        fn, (long long)(word + 3), i, (long long)raw[1], (long long)raw[2]);
        return TT_OK;
    }
    for (int k = 0; k < 3; ++k) {
        const int64_t w = word + 2 + k;
        if (k >= arity) {
            if (raw[k] != -1)
                return fail(TT_ERR_INVALID_ARGUMENT,
                            "%s: word %lld: node %d (%s) takes %d operand(s) but operand %s is "
                            "%lld (must be -1)",
                            fn, (long long)w, i, op_name(nd.op), arity, names[k], (long long)raw[k]);
            continue;
        }
        if (raw[k] < 0 || raw[k] >= i)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: node %d (%s) operand %s = %lld is not an earlier node "
                        "(0..%d): out of range or a cycle",
                        fn, (long long)w, i, op_name(nd.op), names[k], (long long)raw[k], i - 1);
    }
    return TT_OK;
}

tt_status check_node_types(const char *fn, int64_t word, int i, Node *nd, const Program &p) {
    if (nd->op == OP_INPUT) {
        const int want = p.input_dtypes[(size_t)nd->a];
        if (nd->dtype != want)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: node %d (input) has dtype %s but input %d is %s", fn,
                        (long long)(word + 1), i, dtype_label(nd->dtype), nd->a, dtype_label(want));
        nd->kind = FULL;
        return TT_OK;
    }
    if (nd->op == OP_CONST) {
        nd->kind = ROW;
        return TT_OK;
    }
    const int ops[3] = {nd->a, nd->b, nd->c};
    const int arity = op_arity(nd->op);
    bool any_full = false;
    for (int k = 0; k < arity; ++k) {
        const Node &o = p.nodes[(size_t)ops[k]];
        any_full |= o.kind == FULL;
        const bool free_dtype = nd->op == OP_CAST || (nd->op == OP_WHERE && k == 0);
        if (!free_dtype && o.dtype != nd->dtype)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: node %d (%s, %s) has operand %d (node %d) of dtype %s: "
                        "dtype mismatch (insert a cast)",
                        fn, (long long)(word + 2 + k), i, op_name(nd->op), dtype_label(nd->dtype),
                        k, ops[k], dtype_label(o.dtype));
    }
    if (is_reduction(nd->op)) {
        if (p.nodes[(size_t)nd->a].kind != FULL)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: node %d (%s) reduces node %d, a row value or constant: "
                        "kind mismatch (a reduction needs a full operand)",
                        fn, (long long)(word + 2), i, op_name(nd->op), nd->a);
        nd->kind = ROW;
    } else {
        nd->kind = any_full ? FULL : ROW;
    }
    return TT_OK;
}

}  // namespace

tt_status parse_program(const char *fn, const int64_t *words, int64_t n_words, const double *imm,
                        int64_t n_imm, Program *p) {
    if (n_words < 0)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: n_words=%lld is negative", fn, (long long)n_words);
    if (words == nullptr && n_words > 0)
        return fail(TT_ERR_NULL_POINTER, "%s: words is NULL but n_words=%lld", fn, (long long)n_words);
    Cursor cur{fn, words, n_words};
    TRY(cur.need(3, "the header (magic, version, rank)"));
    const int64_t magic = cur.next(), version = cur.next(), rank = cur.next();
    if (magic != kMagic)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: word 0: bad magic 0x%llx (want 0x%llx, \"TTFU\")",
                    fn, (unsigned long long)magic, (unsigned long long)kMagic);
    if (version != kVersion)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: word 1: version %lld is not supported (want %lld)",
                    fn, (long long)version, (long long)kVersion);
    if (rank < 1 || rank > TT_MAX_DIMS)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: word 2: rank %lld is outside 1..%d", fn,
                    (long long)rank, TT_MAX_DIMS);
    p->rank = (int)rank;
    TRY(cur.need(rank, "the domain shape"));
    int64_t span = 8;  // bytes of the largest element; sizes of 0 count as 1 (like tensors)
    for (int d = 0; d < p->rank; ++d) {
        const int64_t w = cur.pos, s = cur.next();
        if (s < 0)
            return fail(TT_ERR_INVALID_ARGUMENT, "%s: word %lld: shape[%d]=%lld is negative", fn,
                        (long long)w, d, (long long)s);
        if (mul_overflows(span, s > 0 ? s : 1, &span))
            return fail(TT_ERR_OVERFLOW,
                        "%s: word %lld: the domain overflows int64 bytes at shape[%d]=%lld (size "
                        "overflow)",
                        fn, (long long)w, d, (long long)s);
        p->shape[d] = s;
    }
    p->cols = p->shape[p->rank - 1];
    p->rows = 1;
    for (int d = 0; d + 1 < p->rank; ++d) p->rows *= p->shape[d];  // cannot overflow: span fits

    TRY(cur.need(1, "the input count"));
    const int64_t n_in_word = cur.pos, n_in = cur.next();
    if (n_in < 0 || n_in > cur.n - cur.pos)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: word %lld: input count %lld is negative or exceeds the %lld words left",
                    fn, (long long)n_in_word, (long long)n_in, (long long)(cur.n - cur.pos));
    p->input_dtypes.resize((size_t)n_in);
    for (int64_t k = 0; k < n_in; ++k) {
        const int64_t w = cur.pos, d = cur.next();
        if (d != TT_F32 && d != TT_F64)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: input %lld has dtype %lld (want TT_F32=0 or TT_F64=1)", fn,
                        (long long)w, (long long)k, (long long)d);
        p->input_dtypes[(size_t)k] = (int)d;
    }

    TRY(cur.need(1, "the node count"));
    const int64_t n_word = cur.pos, n = cur.next();
    if (n < 1 || n > (cur.n - cur.pos) / 5 || n > kMaxNodes)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: word %lld: node count %lld is not in 1..%lld (5 words per node of the "
                    "%lld left)",
                    fn, (long long)n_word, (long long)n, (long long)((cur.n - cur.pos) / 5),
                    (long long)(cur.n - cur.pos));
    if (n_imm != n)
        return fail(TT_ERR_INVALID_ARGUMENT, "%s: n_imm=%lld but the program has %lld nodes", fn,
                    (long long)n_imm, (long long)n);
    if (imm == nullptr)
        return fail(TT_ERR_NULL_POINTER, "%s: imm is NULL but the program has %lld nodes", fn,
                    (long long)n);
    p->nodes.resize((size_t)n);
    for (int i = 0; i < (int)n; ++i) {
        const int64_t w = cur.pos;
        const int64_t op = cur.next(), dtype = cur.next();
        const int64_t raw[3] = {cur.next(), cur.next(), cur.next()};
        if (op_arity(op) < 0)
            return fail(TT_ERR_INVALID_ARGUMENT, "%s: word %lld: node %d has unknown op %lld", fn,
                        (long long)w, i, (long long)op);
        if (dtype != TT_F32 && dtype != TT_F64)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: node %d (%s) has dtype %lld (want TT_F32=0 or TT_F64=1)",
                        fn, (long long)(w + 1), i, op_name(op), (long long)dtype);
        Node &nd = p->nodes[(size_t)i];
        nd.op = (int)op;
        nd.dtype = (int)dtype;
        nd.imm = imm[i];
        TRY(check_node_operands(fn, w, i, nd, raw, *p));
        nd.a = (int)raw[0];
        nd.b = (int)raw[1];
        nd.c = (int)raw[2];
        nd.stage = 0;
        nd.needed = false;
        TRY(check_node_types(fn, w, i, &nd, *p));
    }

    TRY(cur.need(1, "the output count"));
    const int64_t n_out_word = cur.pos, n_out = cur.next();
    if (n_out < 1 || n_out > (cur.n - cur.pos) / 2)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: word %lld: output count %lld is not in 1..%lld (2 words per output of "
                    "the %lld left)",
                    fn, (long long)n_out_word, (long long)n_out, (long long)((cur.n - cur.pos) / 2),
                    (long long)(cur.n - cur.pos));
    p->outputs.resize((size_t)n_out);
    for (int64_t k = 0; k < n_out; ++k) {
        const int64_t w = cur.pos, node = cur.next(), flags = cur.next();
        if (node < 0 || node >= n)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: output %lld names node %lld, outside 0..%lld", fn,
                        (long long)w, (long long)k, (long long)node, (long long)n - 1);
        if (flags & ~(int64_t)1)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: output %lld has unknown flags 0x%llx (only bit 0, "
                        "ACCUMULATE)",
                        fn, (long long)(w + 1), (long long)k, (unsigned long long)flags);
        const bool acc = (flags & 1) != 0;
        if (acc && p->nodes[(size_t)node].kind != FULL)
            return fail(TT_ERR_INVALID_ARGUMENT,
                        "%s: word %lld: output %lld accumulates node %lld, which is a row value or "
                        "constant: kind mismatch (only full nodes may be accumulated)",
                        fn, (long long)(w + 1), (long long)k, (long long)node);
        p->outputs[(size_t)k] = Output{(int)node, acc};
    }
    if (cur.pos != cur.n)
        return fail(TT_ERR_INVALID_ARGUMENT,
                    "%s: n_words=%lld but the program ends at word %lld (n_words mismatch)", fn,
                    (long long)cur.n, (long long)cur.pos);
    plan_program(p);
    return TT_OK;
}

}  // namespace fusion
}  // namespace tt
