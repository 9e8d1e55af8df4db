/*
 * plan.cpp -- turns a validated Program into its execution plan (see fusion_ir.h): which
 * nodes reach an output, the stage of each value, the step list of each pass over a tile,
 * and the scratch slots of those steps (linear scan: a slot is reused once the last step
 * reading its value has run; an elementwise step may write over its own operand's slot
 * (not a cast between float32 and float64: the widths differ),
 * which every op kernel allows, reading element j before writing element j). Broadcast
 * row values keep their slots for the whole pass.
 */
#include <algorithm>

#include "fusion/fusion_ir.h"

namespace tt {
namespace fusion {

namespace {

int operands_of(const Node &nd, int out[3]) {
    if (nd.op == OP_INPUT || nd.op == OP_CONST) return 0;
    const int arity = op_arity(nd.op);
    const int all[3] = {nd.a, nd.b, nd.c};
    for (int k = 0; k < arity; ++k) out[k] = all[k];
    return arity;
}

/* Steps of one pass: the FULL nodes marked in `want` (their FULL ancestors are added here)
 * and, for a reduction pass, the REDUCE steps of the reductions of stage `stage`. */
Pass build_pass(const Program &p, std::vector<char> want, int stage, const std::vector<int> &final_uses) {
    const int n = (int)p.nodes.size();
    std::vector<char> bcast((size_t)n, 0);
    for (int i = n - 1; i >= 0; --i) {
        if (!want[(size_t)i]) continue;
        int ops[3];
        const int k = operands_of(p.nodes[(size_t)i], ops);
        for (int j = 0; j < k; ++j) {
            const Node &o = p.nodes[(size_t)ops[j]];
            if (o.kind == FULL) want[(size_t)ops[j]] = 1;
            else bcast[(size_t)ops[j]] = 1;
        }
    }
    Pass pass;
    for (int i = 0; i < n; ++i)
        if (bcast[(size_t)i]) pass.steps.push_back({STEP_BCAST, i, -1});
    for (int i = 0; i < n; ++i) {
        const Node &nd = p.nodes[(size_t)i];
        if (want[(size_t)i] && nd.kind == FULL)
            pass.steps.push_back({nd.op == OP_INPUT ? STEP_LOAD : STEP_EVAL, i, -1});
        if (stage > 0 && nd.needed && is_reduction(nd.op) && nd.stage == stage)
            pass.steps.push_back({STEP_REDUCE, i, -1});
    }
    /* Last step reading each value; values in final_uses stay live to the end. */
    const int n_steps = (int)pass.steps.size();
    std::vector<int> last_use((size_t)n, -1);
    for (int s = 0; s < n_steps; ++s) {
        const Step &st = pass.steps[(size_t)s];
        if (st.kind != STEP_EVAL && st.kind != STEP_REDUCE) continue;
        int ops[3];
        const int k = operands_of(p.nodes[(size_t)st.node], ops);
        for (int j = 0; j < k; ++j) last_use[(size_t)ops[j]] = s;
    }
    for (int v : final_uses) last_use[(size_t)v] = n_steps;
    /* A broadcast row value keeps its slot for the whole pass, so the interpreter fills it
     * once per row rather than once per tile. */
    for (const Step &st : pass.steps)
        if (st.kind == STEP_BCAST) last_use[(size_t)st.node] = n_steps;
    std::vector<int> slot_of((size_t)n, -1), free_slots;
    int next_slot = 0;
    for (int s = 0; s < n_steps; ++s) {
        Step &st = pass.steps[(size_t)s];
        int ops[3];
        const Node &node = p.nodes[(size_t)st.node];
        const int k = st.kind == STEP_BCAST ? 0 : operands_of(node, ops);
        /* A cast between float32 and float64 must not write over its operand: the elements
         * differ in width, so writing element j would clobber operand elements not yet read. */
        const bool widths_differ = node.op == OP_CAST && p.nodes[(size_t)node.a].dtype != node.dtype;
        auto free_operands = [&]() {
            for (int j = 0; j < k; ++j) {
                const int v = ops[j];
                if (last_use[(size_t)v] == s && slot_of[(size_t)v] >= 0) {
                    free_slots.push_back(slot_of[(size_t)v]);
                    slot_of[(size_t)v] = -1;  // freed once even when used twice (x * x)
                }
            }
        };
        if (!widths_differ) free_operands();
        if (st.kind == STEP_REDUCE) continue;
        int slot;
        if (!free_slots.empty()) {
            slot = free_slots.back();
            free_slots.pop_back();
        } else {
            slot = next_slot++;
        }
        st.slot = slot;
        slot_of[(size_t)st.node] = slot;
        if (widths_differ) free_operands();
        if (st.kind == STEP_EVAL) pass.last_eval = s;
        if (last_use[(size_t)st.node] < 0) {  // produced, never read here: free at once
            free_slots.push_back(slot);
            slot_of[(size_t)st.node] = -1;
        }
    }
    return pass;
}

}  // namespace

void plan_program(Program *pp) {
    Program &p = *pp;
    const int n = (int)p.nodes.size();
    for (const Output &o : p.outputs) p.nodes[(size_t)o.node].needed = true;
    for (int i = n - 1; i >= 0; --i) {
        if (!p.nodes[(size_t)i].needed) continue;
        int ops[3];
        const int k = operands_of(p.nodes[(size_t)i], ops);
        for (int j = 0; j < k; ++j) p.nodes[(size_t)ops[j]].needed = true;
    }
    p.max_stage = 0;
    for (int i = 0; i < n; ++i) {
        Node &nd = p.nodes[(size_t)i];
        int ops[3];
        const int k = operands_of(nd, ops);
        int s = 0;
        for (int j = 0; j < k; ++j) s = std::max(s, p.nodes[(size_t)ops[j]].stage);
        nd.stage = is_reduction(nd.op) ? s + 1 : s;
        if (nd.needed && is_reduction(nd.op)) p.max_stage = std::max(p.max_stage, nd.stage);
    }
    p.row_order.clear();
    for (int i = 0; i < n; ++i) {
        const Node &nd = p.nodes[(size_t)i];
        if (nd.needed && nd.kind == ROW && nd.op != OP_CONST && !is_reduction(nd.op))
            p.row_order.push_back(i);
    }
    p.passes.clear();
    for (int stage = 1; stage <= p.max_stage; ++stage) {
        std::vector<char> want((size_t)n, 0);
        for (int i = 0; i < n; ++i) {
            const Node &nd = p.nodes[(size_t)i];
            if (nd.needed && is_reduction(nd.op) && nd.stage == stage) want[(size_t)nd.a] = 1;
        }
        p.passes.push_back(build_pass(p, want, stage, {}));
    }
    std::vector<char> want((size_t)n, 0);
    std::vector<int> final_uses;
    p.has_row_outputs = false;
    for (const Output &o : p.outputs) {
        if (p.nodes[(size_t)o.node].kind == FULL) {
            want[(size_t)o.node] = 1;
            final_uses.push_back(o.node);
        } else {
            p.has_row_outputs = true;
        }
    }
    p.passes.push_back(build_pass(p, want, 0, final_uses));
    p.n_slots = 0;
    for (const Pass &pass : p.passes)
        for (const Step &st : pass.steps) p.n_slots = std::max(p.n_slots, st.slot + 1);
}

}  // namespace fusion
}  // namespace tt
