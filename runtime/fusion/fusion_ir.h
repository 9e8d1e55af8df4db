/*
 * fusion_ir.h -- private: the fusion program after validation, and its execution plan.
 *
 * tt_fusion_create parses the int64 words of the contract (runtime/fusion/README.md) into a
 * Program (validate.cpp) and then plans it once (plan.cpp):
 *
 *   kind   FULL (one value per domain point) or ROW (one per row: CONST, reductions, and ops
 *          whose operands are all ROW values);
 *   stage  when a ROW value is known within a row: CONST and ops of constants at stage 0,
 *          a reduction one stage after the stage of its operand, a ROW op at the latest
 *          stage of its operands. A FULL node's stage is the latest stage of its operands.
 *   passes The interpreter runs each row as P + 1 passes over its column tiles, P = the
 *          highest reduction stage: pass p (1..P) evaluates the FULL nodes that reductions
 *          of stage p need and accumulates those reductions; the last pass evaluates the
 *          FULL nodes that full outputs need. FULL nodes needed by two passes are
 *          recomputed (the row is never kept: a row of any length streams through L1
 *          tiles), which costs arithmetic, not DRAM traffic beyond re-reading the inputs.
 *   slots  Each pass is a list of steps over one tile; each value-producing step gets a
 *          scratch slot (one tile of doubles) by linear-scan allocation over the step list,
 *          so the scratch per thread is (live values + 1) tiles, not one per node.
 *
 * Nodes that reach no output are never evaluated (nor emitted by the code generator).
 */
#pragma once
#include <cstdint>
#include <vector>

#include "tinytorch/tinytorch.h"

namespace tt {
namespace fusion {

constexpr int64_t kMagic = 0x54544655;  // "TTFU"
constexpr int64_t kVersion = 1;

enum Op : int {
    OP_INPUT = 0, OP_CONST = 1, OP_CAST = 2, OP_NEG = 3, OP_ABS = 4, OP_EXP = 5, OP_LOG = 6,
    OP_SQRT = 7, OP_RSQRT = 8, OP_TANH = 9, OP_SIGMOID = 10, OP_RELU = 11, OP_GELU = 12,
    OP_ERF = 13, OP_POWI = 14, OP_RECIP = 15,
    OP_ADD = 20, OP_SUB = 21, OP_MUL = 22, OP_DIV = 23, OP_MAX = 24, OP_MIN = 25, OP_POW = 26,
    OP_LT = 30, OP_LE = 31, OP_GT = 32, OP_GE = 33, OP_EQ = 34, OP_NE = 35,
    OP_WHERE = 40,
    OP_SUM = 50, OP_MEAN = 51, OP_MAX_ROW = 52,
};

/* Operand count of an op code (0 for INPUT and CONST, which take no node operands), or -1
 * for a code that is no op. */
int op_arity(int64_t op);
/* "add", "exp", ...; "?" for an unknown code. */
const char *op_name(int64_t op);
inline bool is_unary(int op) { return op >= OP_CAST && op <= OP_RECIP; }
inline bool is_binary(int op) { return op >= OP_ADD && op <= OP_NE; }
inline bool is_reduction(int op) { return op >= OP_SUM && op <= OP_MAX_ROW; }

enum Kind : int { FULL = 0, ROW = 1 };

struct Node {
    int op, dtype;
    int a, b, c;  // operand node indices, -1 where unused (INPUT: a = input slot)
    double imm;
    Kind kind;
    int stage;
    bool needed;  // reaches an output
};

struct Output {
    int node;
    bool accumulate;
};

/* One step of a pass over a tile. */
enum StepKind : int {
    STEP_LOAD,    // INPUT node: point at the input (unit stride) or gather into its slot
    STEP_BCAST,   // ROW node used by FULL nodes: its value fills its slot
    STEP_EVAL,    // FULL op node: evaluate into its slot
    STEP_REDUCE,  // reduction node: fold its operand's tile into the row accumulator
};

struct Step {
    StepKind kind;
    int node;
    int slot;  // scratch slot of the value this step produces (-1 for REDUCE)
};

struct Pass {
    std::vector<Step> steps;
    int last_eval = -1;  // index in steps of the last EVAL (direct-to-output candidate)
};

struct Program {
    int rank = 0;
    int64_t shape[TT_MAX_DIMS] = {};
    int64_t rows = 0, cols = 0;  // outer product, last axis
    std::vector<int> input_dtypes;
    std::vector<Node> nodes;
    std::vector<Output> outputs;

    /* plan (plan.cpp) */
    int max_stage = 0;          // P: number of reduction passes
    std::vector<Pass> passes;   // P reduction passes, then the output pass
    std::vector<int> row_order; // needed ROW non-reduction, non-CONST nodes in index order
    int n_slots = 0;            // scratch slots per thread (the largest pass)
    bool has_row_outputs = false;
    uintptr_t token = 0;
};

/* Parse and validate words/imm into *program (then plans it). On failure returns the
 * status with tt_last_error() naming the word / node and the problem. */
tt_status parse_program(const char *fn, const int64_t *words, int64_t n_words, const double *imm,
                        int64_t n_imm, Program *program);

/* Given the kinds set by parse_program: stages, needed flags, passes and slots. */
void plan_program(Program *program);

/* Run with the tile interpreter (interp.cpp): arguments already checked non-NULL. */
tt_status run_program(const Program &program, const void *const *inputs,
                      const int64_t *input_strides, void *const *outputs,
                      const int64_t *output_strides);

/* Emit the generated C (codegen.cpp) into *source; TT_ERR_UNSUPPORTED (with a message)
 * for a program the generator refuses. */
tt_status emit_source(const Program &program, std::vector<char> *source);

}  // namespace fusion
}  // namespace tt
