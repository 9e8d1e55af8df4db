/*
 * codegen.cpp -- tt_fusion_source's engine: one readable, self-contained C11 file per
 * program (the contract is in runtime/fusion/README.md, "The generated C").
 *
 * The file is emitted only from the validated, planned node list: op names, node numbers,
 * integer sizes and hex-float constants are the only things printed, so no string from a
 * caller ever reaches the compiler. Its shape follows the interpreter's plan (plan.cpp):
 *
 *   constants            function scope (`const float v1 = ...`)
 *   for each row         of [row_begin, row_end): tt_fused_rows, which the runtime's pool
 *                        runs in chunks of rows (tt_fusion_run_rows); tt_fused_kernel runs
 *                        every row on the calling thread
 *     row offsets        from the row's multi-index and the caller's strides
 *     reduction pass p   one loop over the row accumulating in double (unit stride: in 16
 *                        lanes per 1024-column tile, emit_lane_reduction), then the row
 *                        values of stage p
 *     output pass        one loop computing and storing the full outputs
 *     row outputs        one store per row
 *
 * Every loop is emitted twice: with unit last-axis strides (a plain `[j]` loop the compiler
 * vectorises) and with general strides, chosen per row. The element formulas are those of
 * fusion_scalar.h, spelled as C (a few static inline helpers, emitted only when used).
 *
 * Kept values: a transcendental FULL node two passes evaluate (softmax's exp(x - max)) is
 * computed by the first into a per-call row buffer keep<i>[cols] and read back by the
 * later ones, which emit none of its operands (mark_live).
 *
 * ACCUMULATE outputs: the kernel finds the output's distinct elements at run time (the axes
 * with a non-zero stride and a size != 1), sums into a calloc'd double buffer over them
 * and stores the sums at the end. Such a program has no tt_fused_rows: its kernel runs every
 * row on one thread (the sums would race) and returns -1 if the buffer cannot be allocated.
 */
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "core/config.h"
#include "core/error.h"
#include "cpu/bias_gelu_kernels.h"
#include "fusion/fusion_ir.h"

namespace tt {
namespace fusion {

namespace {

struct Out {
    std::vector<char> *buf;
    void operator()(const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 2, 3)))
#endif
    {
        char small[512];
        va_list args;
        va_start(args, fmt);
        const int n = std::vsnprintf(small, sizeof small, fmt, args);
        va_end(args);
        if (n < 0) return;
        if ((size_t)n < sizeof small) {
            buf->insert(buf->end(), small, small + n);
            return;
        }
        std::vector<char> big((size_t)n + 1);
        va_start(args, fmt);
        std::vsnprintf(big.data(), big.size(), fmt, args);
        va_end(args);
        buf->insert(buf->end(), big.data(), big.data() + n);
    }
};

const char *ctype(int dtype) { return dtype == TT_F32 ? "float" : "double"; }
const char *fsuffix(int dtype) { return dtype == TT_F32 ? "f" : ""; }
const char *hsuffix(int dtype) { return dtype == TT_F32 ? "f" : "d"; }
const char *dtype_label(int dtype) { return dtype == TT_F32 ? "float32" : "float64"; }

/* A C constant of the given type with the exact value (double)(T)x. */
std::string literal(double x, int dtype) {
    if (dtype == TT_F32) x = (double)(float)x;
    const char *t = ctype(dtype);
    char s[64];
    if (std::isnan(x)) std::snprintf(s, sizeof s, "((%s)NAN)", t);
    else if (std::isinf(x)) std::snprintf(s, sizeof s, "((%s)%sINFINITY)", t, x < 0 ? "-" : "");
    else std::snprintf(s, sizeof s, "((%s)%a)", t, x);
    return s;
}

struct Emitter {
    const Program &p;
    Out out;
    bool used_max[2] = {}, used_min[2] = {}, used_sigmoid[2] = {}, used_gelu[2] = {};
    bool used_exp = false, used_tanh = false;  /* float32 vector-friendly exp / tanh */
    /* Kept values: a transcendental FULL node that two passes of a row evaluate is computed
     * by the first (writer) into a row buffer keep<i>[cols] and read back by the later ones
     * (whose evaluation of its operands the compiler then drops as dead code). */
    std::vector<int> keep_writer = {};  // per node: the pass index that writes it, or -1
    int cur_pass = 0;
    std::string keep_release = {};  // the free() calls of the row buffers (and, on failure, the sums)

    std::string v(int i) const { return "v" + std::to_string(i); }

    /* The C expression of node nd (its operands are named v<i>). */
    std::string expr(const Node &nd) {
        const int dt = nd.dtype, k = dt == TT_F64;
        const std::string a = nd.a >= 0 ? v(nd.a) : "", b = nd.b >= 0 ? v(nd.b) : "",
                          c = nd.c >= 0 ? v(nd.c) : "";
        const std::string T = ctype(dt), f = fsuffix(dt), h = hsuffix(dt);
        const std::string one = "(" + T + ")1", zero = "(" + T + ")0";
        switch (nd.op) {
            case OP_CONST: return literal(nd.imm, dt);
            case OP_CAST: return "(" + T + ")" + a;
            case OP_NEG: return "-" + a;
            case OP_ABS: return "fabs" + f + "(" + a + ")";
            case OP_EXP:
                if (!k) { used_exp = true; return "tt_expf(" + a + ")"; }
                return "exp(" + a + ")";
            case OP_LOG: return "log" + f + "(" + a + ")";
            case OP_SQRT: return "sqrt" + f + "(" + a + ")";
            case OP_RSQRT: return one + " / sqrt" + f + "(" + a + ")";
            case OP_TANH:
                if (!k) { used_exp = used_tanh = true; return "tt_tanhf(" + a + ")"; }
                return "tanh(" + a + ")";
            case OP_SIGMOID:
                used_sigmoid[k] = true;
                used_exp |= !k;
                return "tt_sigmoid" + h + "(" + a + ")";
            case OP_RELU: return "(" + a + " < " + zero + " ? " + zero + " : " + a + ")";
            case OP_GELU:
                used_gelu[k] = used_sigmoid[k] = true;
                used_exp |= !k;
                return "tt_gelu" + h + "(" + a + ")";
            case OP_ERF: return "erf" + f + "(" + a + ")";
            case OP_POWI:
                if (nd.imm == 2.0) return a + " * " + a;
                return "pow" + f + "(" + a + ", " + literal(nd.imm, dt) + ")";
            case OP_RECIP: return one + " / " + a;
            case OP_ADD: return a + " + " + b;
            case OP_SUB: return a + " - " + b;
            case OP_MUL: return a + " * " + b;
            case OP_DIV: return a + " / " + b;
            case OP_MAX: used_max[k] = true; return "tt_max" + h + "(" + a + ", " + b + ")";
            case OP_MIN: used_min[k] = true; return "tt_min" + h + "(" + a + ", " + b + ")";
            case OP_POW: return "pow" + f + "(" + a + ", " + b + ")";
            case OP_LT: return "(" + a + " < " + b + " ? " + one + " : " + zero + ")";
            case OP_LE: return "(" + a + " <= " + b + " ? " + one + " : " + zero + ")";
            case OP_GT: return "(" + a + " > " + b + " ? " + one + " : " + zero + ")";
            case OP_GE: return "(" + a + " >= " + b + " ? " + one + " : " + zero + ")";
            case OP_EQ: return "(" + a + " == " + b + " ? " + one + " : " + zero + ")";
            case OP_NE: return "(" + a + " != " + b + " ? " + one + " : " + zero + ")";
            case OP_WHERE: return "(" + a + " != 0 ? " + b + " : " + c + ")";
            default: return "0";
        }
    }

    std::string describe(int i) const {
        const Node &nd = p.nodes[(size_t)i];
        std::string s = v(i) + " = " + op_name(nd.op);
        char t[96];
        if (nd.op == OP_INPUT) {
            std::snprintf(t, sizeof t, " %d", nd.a);
            s += t;
        } else if (nd.op == OP_CONST || nd.op == OP_POWI) {
            std::snprintf(t, sizeof t, " %.9g", nd.imm);
            if (nd.op == OP_POWI) s += "(" + v(nd.a) + "," + t + ")";
            else s += t;
        } else {
            const int ops[3] = {nd.a, nd.b, nd.c};
            s += "(";
            for (int k = 0; k < op_arity(nd.op); ++k) s += (k ? ", " : "") + v(ops[k]);
            s += ")";
        }
        s += std::string(" : ") + dtype_label(nd.dtype) + (nd.kind == FULL ? ", full" : ", row");
        return s;
    }

    /* The loop over one row's columns for a pass, in its unit-stride and general forms. */
    void emit_pass_loop(const Pass &pass, bool output_pass) {
        mark_live(pass, output_pass);
        std::vector<std::string> strides;  // the stride variables this loop reads
        for (const Step &st : pass.steps)
            if (st.kind == STEP_LOAD) strides.push_back("s_in" + std::to_string(p.nodes[(size_t)st.node].a));
        if (output_pass)
            for (size_t o = 0; o < p.outputs.size(); ++o)
                if (p.nodes[(size_t)p.outputs[o].node].kind == FULL && !p.outputs[o].accumulate)
                    strides.push_back("s_out" + std::to_string(o));
        std::string unit;
        for (const std::string &s : strides) unit += (unit.empty() ? "" : " && ") + s + " == 1";
        if (unit.empty()) unit = "1";
        for (int form = 0; form < 2; ++form) {
            if (form == 0) out("        if (%s) {\n", unit.c_str());
            else out("        } else {\n");
            if (form == 0 && !output_pass) {
                emit_lane_reduction(pass);
                continue;
            }
            out("            for (int64_t j = 0; j < cols; ++j) {\n");
            for (const Step &st : pass.steps) {
                const Node &nd = p.nodes[(size_t)st.node];
                if (st.kind == STEP_LOAD) {
                    if (!live[(size_t)st.node]) continue;
                    const int k = nd.a;
                    if (form == 0) out("                const %s v%d = row_in%d[j];\n", ctype(nd.dtype), st.node, k);
                    else out("                const %s v%d = row_in%d[j * s_in%d];\n", ctype(nd.dtype), st.node, k, k);
                } else if (st.kind == STEP_EVAL) {
                    emit_eval("                ", st.node, "j");
                } else if (st.kind == STEP_REDUCE) {
                    if (nd.op == OP_MAX_ROW) {
                        used_max[1] = true;
                        out("                acc%d = tt_maxd(acc%d, (double)v%d);\n", st.node, st.node, nd.a);
                    }
                    else out("                acc%d += (double)v%d;\n", st.node, nd.a);
                }
            }
            if (output_pass)
                for (size_t o = 0; o < p.outputs.size(); ++o) {
                    const int node = p.outputs[o].node;
                    if (p.nodes[(size_t)node].kind != FULL) continue;
                    if (p.outputs[o].accumulate) {
                        out("                acc_out%zu[acc_row%zu + j * acc_cs%zu[%d]] += (double)v%d;\n", o, o, o,
                            p.rank - 1, node);
                        continue;
                    }
                    if (form == 0) out("                row_out%zu[j] = v%d;\n", o, node);
                    else out("                row_out%zu[j * s_out%zu] = v%d;\n", o, o, node);
                }
            out("            }\n");
        }
        out("        }\n");
    }

    /* One FULL node's value at column `col`: evaluated (and stored to its row buffer when
     * this pass is its writer), or read back from the buffer a former pass filled. */
    void emit_eval(const char *indent, int node, const char *col) {
        const Node &nd = p.nodes[(size_t)node];
        if (!live[(size_t)node]) return;
        const int writer = keep_writer[(size_t)node];
        if (writer >= 0 && cur_pass > writer) {
            out("%sconst %s v%d = keep%d[%s];\n", indent, ctype(nd.dtype), node, node, col);
            return;
        }
        out("%sconst %s v%d = %s;\n", indent, ctype(nd.dtype), node, expr(nd).c_str());
        if (writer >= 0) out("%skeep%d[%s] = v%d;\n", indent, node, col, node);
    }

    /* live[i]: node i's value is read in this pass (by a reduction, an output, or a live
     * node evaluated here); a node read back from its row buffer needs none of its operands. */
    std::vector<char> live = {};
    void mark_live(const Pass &pass, bool output_pass) {
        live.assign(p.nodes.size(), 0);
        for (const Step &st : pass.steps)
            if (st.kind == STEP_REDUCE) live[(size_t)p.nodes[(size_t)st.node].a] = 1;
        if (output_pass)
            for (const Output &o : p.outputs)
                if (p.nodes[(size_t)o.node].kind == FULL) live[(size_t)o.node] = 1;
        for (size_t s = pass.steps.size(); s-- > 0;) {
            const Step &st = pass.steps[s];
            if (st.kind != STEP_EVAL || !live[(size_t)st.node]) continue;
            const int writer = keep_writer[(size_t)st.node];
            if (writer >= 0 && cur_pass > writer) continue;
            const Node &nd = p.nodes[(size_t)st.node];
            for (int o : {nd.a, nd.b, nd.c})
                if (o >= 0) live[(size_t)o] = 1;
        }
    }

    static bool worth_keeping(const Node &nd) {
        switch (nd.op) {
            case OP_EXP: case OP_LOG: case OP_TANH: case OP_SIGMOID: case OP_GELU: case OP_ERF:
            case OP_POW: return true;
            case OP_POWI: return nd.imm != 2.0;
            default: return false;
        }
    }

    /* The loads and evaluations of a pass at column `col` (a C expression), unit stride. */
    void emit_steps_at(const Pass &pass, const char *indent, const char *col) {
        for (const Step &st : pass.steps) {
            const Node &nd = p.nodes[(size_t)st.node];
            if (st.kind == STEP_LOAD && live[(size_t)st.node])
                out("%sconst %s v%d = row_in%d[%s];\n", indent, ctype(nd.dtype), st.node, nd.a, col);
            else if (st.kind == STEP_EVAL)
                emit_eval(indent, st.node, col);
        }
    }

    /* A reduction pass over unit-stride columns, vectorisable: the row goes in tiles of
     * kReduceTile columns; within a tile each reduction folds into kLanes accumulators of
     * the node's dtype (lane l takes columns j + l: independent chains the compiler keeps
     * in vector registers), the tile's tail folds straight into the row's double
     * accumulator, and at the tile's end the lanes are added (or maxed) into it, in
     * double. float32 sums so round as the interpreter's do (a tile in float, the tiles in
     * double); a maximum's lanes keep a plain max and a NaN flag (NaN if any element is
     * NaN, as tt_max), exact either way. */
    void emit_lane_reduction(const Pass &pass) {
        constexpr int kLanes = 16, kReduceTile = 1024;
        out("            for (int64_t j0 = 0; j0 < cols; j0 += %d) {\n", kReduceTile);
        out("                const int64_t j1 = cols - j0 < %d ? cols : j0 + %d;\n", kReduceTile, kReduceTile);
        for (const Step &st : pass.steps) {
            if (st.kind != STEP_REDUCE) continue;
            const Node &nd = p.nodes[(size_t)st.node];
            const char *T = ctype(nd.dtype);
            if (nd.op == OP_MAX_ROW)
                out("                %s lane%d[%d];\n                int nan%d[%d] = {0};\n"
                    "                for (int l = 0; l < %d; ++l) lane%d[l] = -INFINITY;\n",
                    T, st.node, kLanes, st.node, kLanes, kLanes, st.node);
            else
                out("                %s lane%d[%d] = {0};\n", T, st.node, kLanes);
        }
        out("                int64_t j = j0;\n");
        out("                for (; j + %d <= j1; j += %d) {\n", kLanes, kLanes);
        /* kept as a loop: GCC 12 vectorises it as one, but unrolls it first otherwise and
         * leaves the 16 selects of a maximum scalar (the softmax max pass: 9 -> 3 ms) */
        out("#if defined(__GNUC__) && !defined(__clang__)\n#pragma GCC unroll 1\n#endif\n");
        out("                    for (int l = 0; l < %d; ++l) {\n", kLanes);
        emit_steps_at(pass, "                        ", "j + l");
        for (const Step &st : pass.steps) {
            if (st.kind != STEP_REDUCE) continue;
            const Node &nd = p.nodes[(size_t)st.node];
            if (nd.op == OP_MAX_ROW) {
                /* a plain max the compiler turns into a vector max, NaNs flagged apart */
                out("                        lane%d[l] = v%d > lane%d[l] ? v%d : lane%d[l];\n", st.node, nd.a, st.node,
                    nd.a, st.node);
                out("                        nan%d[l] |= v%d != v%d;\n", st.node, nd.a, nd.a);
            } else {
                out("                        lane%d[l] += v%d;\n", st.node, nd.a);
            }
        }
        out("                    }\n                }\n");
        out("                for (; j < j1; ++j) {\n");
        emit_steps_at(pass, "                    ", "j");
        for (const Step &st : pass.steps) {
            if (st.kind != STEP_REDUCE) continue;
            const Node &nd = p.nodes[(size_t)st.node];
            if (nd.op == OP_MAX_ROW) {
                used_max[1] = true;
                out("                    acc%d = tt_maxd(acc%d, (double)v%d);\n", st.node, st.node, nd.a);
            } else {
                out("                    acc%d += (double)v%d;\n", st.node, nd.a);
            }
        }
        out("                }\n");
        out("                for (int l = 0; l < %d; ++l) {\n", kLanes);
        for (const Step &st : pass.steps) {
            if (st.kind != STEP_REDUCE) continue;
            const Node &nd = p.nodes[(size_t)st.node];
            if (nd.op == OP_MAX_ROW) {
                used_max[1] = true;
                out("                    acc%d = tt_maxd(acc%d, nan%d[l] ? (double)NAN : (double)lane%d[l]);\n", st.node,
                    st.node, st.node, st.node);
            } else {
                out("                    acc%d += (double)lane%d[l];\n", st.node, st.node);
            }
        }
        out("                }\n");
        out("            }\n");
    }

    void emit_row_values(int stage) {
        for (int i : p.row_order) {
            const Node &nd = p.nodes[(size_t)i];
            if (nd.stage == stage) out("        const %s v%d = %s;\n", ctype(nd.dtype), i, expr(nd).c_str());
        }
    }

    void emit_helpers(std::vector<char> *dst) {
        Out h{dst};
        if (used_exp) {
            /* The runtime's exp (simd_exp.h) written as plain C, so the compiler vectorises it:
             * t = n ln2 + f, exp(f) = 1 + f + f^2 P(f), 2^n applied as 2^(n/2) twice. */
            /* Where the CPU has FMA, the multiply-adds are fused as in simd_exp.h (the same
             * bits as the interpreter's vector exp, and half the instructions: without
             * fmaf, ISO C mode never contracts a * b + c). The clamp is written as the
             * max / min the vector code uses (NaN passes), which compiles to two
             * instructions where the nested select took nine. A softmax over 10^7 floats
             * (rows of 1000): 13.4 -> 12.0 ms on Zen 3, 1 thread (the row kernel: 8.4). */
            h("/* exp for float32, the runtime's formula (no libm call: the loop vectorises). */\n"
              "#ifdef __FMA__\n"
              "#define TT_MADD(a, b, c) fmaf(a, b, c)\n"
              "#else\n"
              "#define TT_MADD(a, b, c) ((a) * (b) + (c))\n"
              "#endif\n"
              "static inline float tt_expf(float t) {\n"
              "    t = %s > t ? %s : t; /* NaN passes (the vector max's rule) */\n"
              "    t = %s < t ? %s : t;\n"
              "    const float n = rintf(t * %s), f = TT_MADD(-n, %s, t), f2 = f * f;\n"
              "    const float p = TT_MADD(TT_MADD(TT_MADD(%s, f, %s), f2, TT_MADD(%s, f, %s)), f2,\n"
              "                            TT_MADD(%s, f, %s));\n"
              "    const float e = TT_MADD(p, f2, f + 1.0f);\n"
              "    const int32_t ni = n == n ? (int32_t)n : 0, n1 = ni >> 1, n2 = ni - n1;\n"
              "    const uint32_t b1 = (uint32_t)(n1 + 127) << 23, b2 = (uint32_t)(n2 + 127) << 23;\n"
              "    float s1, s2;\n"
              "    memcpy(&s1, &b1, 4);\n"
              "    memcpy(&s2, &b2, 4);\n"
              "    return e * s1 * s2;\n"
              "}\n",
              literal(kExpLo, TT_F32).c_str(), literal(kExpLo, TT_F32).c_str(),
              literal(kExpHi, TT_F32).c_str(), literal(kExpHi, TT_F32).c_str(),
              literal(kLog2e, TT_F32).c_str(), literal(kLn2, TT_F32).c_str(),
              literal(kExpP0, TT_F32).c_str(), literal(kExpP1, TT_F32).c_str(),
              literal(kExpP2, TT_F32).c_str(), literal(kExpP3, TT_F32).c_str(),
              literal(kExpP4, TT_F32).c_str(), literal(kExpP5, TT_F32).c_str());
        }
        if (used_tanh)
            h("/* tanh for float32, the interpreter's formula: a + a^3 P(a^2) below 0.625 (no\n"
              " * cancellation near 0), else (1 - e) / (1 + e) with e = exp(-2|a|). */\n"
              "static inline float tt_tanhf(float a) {\n"
              "    const float z = a * a, ax = fabsf(a);\n"
              "    const float p = (((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z\n"
              "                     + 1.33314422036e-1f) * z - 3.33332819422e-1f;\n"
              "    const float e = tt_expf(-2.0f * ax), mag = (1.0f - e) / (1.0f + e);\n"
              "    return ax < 0.625f ? p * z * a + a : (a < 0.0f ? -mag : mag);\n"
              "}\n");
        for (int k = 0; k < 2; ++k) {
            const char *T = k ? "double" : "float", *s = k ? "d" : "f", *f = k ? "" : "f";
            if (used_max[k])
                h("/* NumPy maximum: NaN if either operand is NaN. */\n"
                  "static inline %s tt_max%s(%s a, %s b) { return (a != a || a > b) ? a : b; }\n",
                  T, s, T, T);
            if (used_min[k])
                h("/* NumPy minimum: NaN if either operand is NaN. */\n"
                  "static inline %s tt_min%s(%s a, %s b) { return (a != a || a < b) ? a : b; }\n",
                  T, s, T, T);
            if (used_sigmoid[k])
                h("/* 1 / (1 + exp(-a)) without overflow for either sign. */\n"
                  "static inline %s tt_sigmoid%s(%s a) {\n"
                  "    const %s e = %s(-fabs%s(a));\n"
                  "    const %s r = (%s)1 / ((%s)1 + e);\n"
                  "    return a >= (%s)0 ? r : e * r;\n"
                  "}\n",
                  T, s, T, T, k ? "exp" : "tt_expf", f, T, T, T, T);
            if (used_gelu[k]) {
                const double A = k ? 2.0 * 0.79788456080286535588 : (double)kGeluA;
                const double B = k ? 2.0 * 0.79788456080286535588 * 0.044715 : (double)kGeluB;
                h("/* GELU, tanh form: u * sigmoid(u (A + B u^2)), A = 2 sqrt(2/pi), B = 0.044715 A. */\n"
                  "static inline %s tt_gelu%s(%s u) {\n"
                  "    if (u == -INFINITY) return -(%s)0;\n"
                  "    return u * tt_sigmoid%s(u * (%s + %s * u * u));\n"
                  "}\n",
                  T, s, T, T, s, literal(A, k).c_str(), literal(B, k).c_str());
            }
        }
        h("\n");
    }

    tt_status emit(std::vector<char> *dst) {
        bool any_acc = false;
        for (const Output &o : p.outputs) any_acc |= o.accumulate;
        const int R = p.rank;
        std::vector<char> body;
        out.buf = &body;
        /* The comment on top: the program. */
        std::vector<char> head;
        Out hd{&head};
        hd("/*\n * Fused kernel generated by TinyTorch's fusion code generator (fusion IR version %lld).\n",
           (long long)kVersion);
        hd(" * Domain [");
        for (int d = 0; d < R; ++d) hd("%s%lld", d ? ", " : "", (long long)p.shape[d]);
        hd("] (rows x cols = %lld x %lld), %zu input(s), %zu node(s), %zu output(s).\n", (long long)p.rows,
           (long long)p.cols, p.input_dtypes.size(), p.nodes.size(), p.outputs.size());
        for (size_t i = 0; i < p.nodes.size(); ++i)
            hd(" *   %s%s\n", describe((int)i).c_str(), p.nodes[i].needed ? "" : "  (unused)");
        for (size_t o = 0; o < p.outputs.size(); ++o) hd(" *   output %zu = v%d\n", o, p.outputs[o].node);
        hd(" * Rows run in parallel when the runtime calls tt_fused_rows (tt_fusion_run_rows); each row streams through\n"
           " * %d reduction pass(es) and one output pass; intermediates are locals, never stored.\n"
           " * Strides are in elements, %d per operand (input_strides[i * %d + d]).\n */\n"
           "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n",
           p.max_stage, R, R);

        /* Without ACCUMULATE outputs rows are independent: the kernel is a function of a row
         * range that the runtime's thread pool runs in chunks (tt_fusion_run_rows). */
        const char *fn_name = any_acc ? "tt_fused_kernel" : "tt_fused_rows";
        out("int %s(const void *const *inputs, const int64_t *input_strides,\n"
            "        void *const *outputs, const int64_t *output_strides%s)\n{\n", fn_name,
            any_acc ? "" : ",\n        int64_t row_begin, int64_t row_end");
        out("    const int64_t rows = %lld, cols = %lld;\n", (long long)p.rows, (long long)p.cols);
        out("    (void)inputs; (void)input_strides; (void)outputs; (void)output_strides; (void)cols; (void)rows;\n");
        if (any_acc) out("    const int64_t row_begin = 0, row_end = rows;\n");
        std::vector<char> in_used(p.input_dtypes.size(), 0);
        for (const Node &nd : p.nodes)
            if (nd.needed && nd.op == OP_INPUT) in_used[(size_t)nd.a] = 1;
        for (size_t k = 0; k < in_used.size(); ++k)
            if (in_used[k])
                out("    const %s *in%zu = (const %s *)inputs[%zu];\n", ctype(p.input_dtypes[k]), k,
                    ctype(p.input_dtypes[k]), k);
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const int dt = p.nodes[(size_t)p.outputs[o].node].dtype;
            out("    %s *out%zu = (%s *)outputs[%zu];\n", ctype(dt), o, ctype(dt), o);
        }
        for (size_t i = 0; i < p.nodes.size(); ++i) {
            const Node &nd = p.nodes[i];
            if (nd.needed && nd.op == OP_CONST)
                out("    const %s v%zu = %s;\n", ctype(nd.dtype), i, expr(nd).c_str());
        }
        if (any_acc) {
            out("    static const int64_t shape[%d] = {", R);
            for (int d = 0; d < R; ++d) out("%s%lld", d ? ", " : "", (long long)p.shape[d]);
            out("};\n");
        }
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            if (!p.outputs[o].accumulate) continue;
            out("    /* output %zu accumulates: sums over its distinct elements (axes with a non-zero\n"
                "     * stride and a size != 1), in double, stored at the end */\n", o);
            out("    int64_t acc_n%zu = 1, acc_cs%zu[%d];\n", o, o, R);
            out("    for (int d = %d; d >= 0; --d) {\n", R - 1);
            out("        const int kept = output_strides[%zu + d] != 0 && shape[d] != 1;\n", o * (size_t)R);
            out("        acc_cs%zu[d] = kept ? acc_n%zu : 0;\n", o, o);
            out("        if (kept) acc_n%zu *= shape[d];\n    }\n", o);
            out("    double *acc_out%zu = (double *)calloc((size_t)(acc_n%zu > 0 ? acc_n%zu : 1), sizeof(double));\n", o, o, o);
            out("    if (acc_out%zu == NULL) return -1;\n", o);
        }
        if (any_acc) out("    /* one thread: the sums above are shared */\n");
        keep_writer.assign(p.nodes.size(), -1);
        {
            std::vector<int> first(p.nodes.size(), -1);
            for (size_t q = 0; q < p.passes.size(); ++q)
                for (const Step &st : p.passes[q].steps) {
                    if (st.kind != STEP_EVAL || !worth_keeping(p.nodes[(size_t)st.node])) continue;
                    int &f = first[(size_t)st.node];
                    if (f < 0) f = (int)q;
                    else keep_writer[(size_t)st.node] = f;
                }
        }
        bool any_keep = false;
        for (size_t i = 0; i < p.nodes.size(); ++i) {
            if (keep_writer[i] < 0) continue;
            if (!any_keep) out("    /* row buffers of values two passes read (evaluated once per row) */\n");
            any_keep = true;
            const char *T = ctype(p.nodes[i].dtype);
            out("    %s *keep%zu = (%s *)malloc((size_t)(cols > 0 ? cols : 1) * sizeof(%s));\n", T, i, T, T);
        }
        if (any_keep) {
            std::string failed, release;
            for (size_t i = 0; i < p.nodes.size(); ++i)
                if (keep_writer[i] >= 0) {
                    failed += std::string(failed.empty() ? "" : " || ") + "keep" + std::to_string(i) + " == NULL";
                    release += " free(keep" + std::to_string(i) + ");";
                }
            for (size_t o = 0; o < p.outputs.size(); ++o)
                if (p.outputs[o].accumulate) release += " free(acc_out" + std::to_string(o) + ");";
            out("    if (%s) {%s return -1; }\n", failed.c_str(), release.c_str());
            keep_release = release;
        }
        out("    for (int64_t r = row_begin; r < row_end; ++r) {\n");
        out("        int64_t rest = r;\n");
        for (int d = R - 2; d >= 0; --d) {
            if (d > 0) out("        const int64_t i%d = rest %% %lld; rest /= %lld;\n", d, (long long)p.shape[d], (long long)p.shape[d]);
            else out("        const int64_t i0 = rest;\n");
        }
        out("        (void)rest;\n");
        auto offset = [&](const char *strides, size_t k) {
            std::string s = "0";
            for (int d = 0; d + 1 < R; ++d)
                s += " + i" + std::to_string(d) + " * " + strides + "[" + std::to_string(k * (size_t)R + (size_t)d) + "]";
            return s;
        };
        for (size_t k = 0; k < in_used.size(); ++k) {
            if (!in_used[k]) continue;
            const char *T = ctype(p.input_dtypes[k]);
            out("        const %s *row_in%zu = in%zu + (%s);\n", T, k, k, offset("input_strides", k).c_str());
            out("        const int64_t s_in%zu = input_strides[%zu];\n", k, k * (size_t)R + (size_t)R - 1);
        }
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const Node &nd = p.nodes[(size_t)p.outputs[o].node];
            if (p.outputs[o].accumulate) {
                std::string s = "0";
                for (int d = 0; d + 1 < R; ++d) s += " + i" + std::to_string(d) + " * acc_cs" + std::to_string(o) + "[" + std::to_string(d) + "]";
                out("        const int64_t acc_row%zu = %s;\n", o, s.c_str());
                continue;
            }
            out("        %s *row_out%zu = out%zu + (%s);\n", ctype(nd.dtype), o, o, offset("output_strides", o).c_str());
            if (nd.kind == FULL) out("        const int64_t s_out%zu = output_strides[%zu];\n", o, o * (size_t)R + (size_t)R - 1);
        }
        emit_row_values(0);
        for (int stage = 1; stage <= p.max_stage; ++stage) {
            const Pass &pass = p.passes[(size_t)stage - 1];
            cur_pass = stage - 1;
            out("        /* pass %d: reductions of stage %d */\n", stage, stage);
            for (const Step &st : pass.steps)
                if (st.kind == STEP_REDUCE)
                    out("        double acc%d = %s;\n", st.node, p.nodes[(size_t)st.node].op == OP_MAX_ROW ? "-INFINITY" : "0.0");
            emit_pass_loop(pass, false);
            for (const Step &st : pass.steps) {
                if (st.kind != STEP_REDUCE) continue;
                const Node &nd = p.nodes[(size_t)st.node];
                if (nd.op == OP_MEAN)
                    out("        const %s v%d = (%s)(acc%d / (double)cols);\n", ctype(nd.dtype), st.node, ctype(nd.dtype), st.node);
                else
                    out("        const %s v%d = (%s)acc%d;\n", ctype(nd.dtype), st.node, ctype(nd.dtype), st.node);
            }
            emit_row_values(stage);
        }
        const Pass &out_pass = p.passes.back();
        if (!out_pass.steps.empty()) {
            out("        /* output pass */\n");
            cur_pass = (int)p.passes.size() - 1;
            emit_pass_loop(out_pass, true);
        }
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            const int node = p.outputs[o].node;
            if (p.nodes[(size_t)node].kind == ROW) out("        row_out%zu[0] = v%d;\n", o, node);
        }
        out("    }\n");
        for (size_t o = 0; o < p.outputs.size(); ++o) {
            if (!p.outputs[o].accumulate) continue;
            const char *T = ctype(p.nodes[(size_t)p.outputs[o].node].dtype);
            out("    for (int64_t e = 0; e < acc_n%zu; ++e) {\n", o);
            out("        int64_t off = 0, left = e;\n");
            out("        for (int d = %d; d >= 0; --d) {\n", R - 1);
            out("            if (acc_cs%zu[d] == 0) continue;\n", o);
            out("            off += (left %% shape[d]) * output_strides[%zu + d];\n", o * (size_t)R);
            out("            left /= shape[d];\n        }\n");
            out("        out%zu[off] = (%s)acc_out%zu[e];\n    }\n", o, T, o);
            out("    free(acc_out%zu);\n", o);
        }
        if (!keep_release.empty()) out("   %s\n", keep_release.substr(0, keep_release.find(" free(acc_out")).c_str());
        out("    return 0;\n}\n");
        if (!any_acc) {
            out("\n/* The whole domain on the calling thread. */\n"
                "int tt_fused_kernel(const void *const *inputs, const int64_t *input_strides,\n"
                "                    void *const *outputs, const int64_t *output_strides)\n{\n"
                "    return tt_fused_rows(inputs, input_strides, outputs, output_strides, 0, %lld);\n}\n",
                (long long)p.rows);
        }
        out("\n/* rows, cols of the domain (tt_fusion_run_rows takes them) */\n"
            "const int64_t tt_fused_domain[2] = {%lld, %lld};\n", (long long)p.rows, (long long)p.cols);
        dst->clear();
        dst->insert(dst->end(), head.begin(), head.end());
        emit_helpers(dst);
        dst->insert(dst->end(), body.begin(), body.end());
        return TT_OK;
    }
};

}  // namespace

tt_status emit_source(const Program &program, std::vector<char> *source) {
    Emitter e{program, Out{nullptr}};
    return e.emit(source);
}

}  // namespace fusion
}  // namespace tt
