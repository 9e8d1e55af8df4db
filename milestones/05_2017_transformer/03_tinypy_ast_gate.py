"""Milestone 05, part 3: the TinyPy AST-validity gate (compiler in the loop).

What it shows
  The TinyVerse workflow of the extension guide: a small GPT trained on TinyPy (a generated,
  closed-world corpus of short Python functions, tinytorch.extensions.tinyverse) is judged by
  Python's own parser, not only by its loss. Between training windows, greedy completions of the
  held-out prompts (function names that never appear in training) stream token by token into
  ``ast.parse``; the AST validity rate is recorded beside the loss. The gate passes when some
  evaluation during the run has at least 1 of the 7 held-out prompts completing to a
  syntactically valid function (the guide's bar): the greedy completions of a model this small
  swing between evaluations (5 of 7, then 0, then 2), so the rule is "reached during training",
  and the step that reached it is printed beside the last evaluation. The script exits 0 when
  the gate passed and 1 when it did not.

  The loop itself is the package's ``run_ast_gate_training`` (corpus -> character Tokenizer ->
  memory-mapped shard -> ShardBatcher -> Trainer -> ASTValidityHook); this script runs it with a
  time budget, prints the curve as a table and the last completions.

When TinyVerse is missing
  The script says "part 3 not available: <reason>" and exits 0: nothing was checked, and the
  other parts do not need it.

Run:    python milestones/05_2017_transformer/03_tinypy_ast_gate.py [--seconds 60] [--quick] [--json PATH]
        --quick: 20 s of training time, the gate every 30 steps (evaluation time comes on top and
        is reported).
"""
from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # milestones/: the shared _runtime helper
import _runtime  # noqa: E402

_runtime.load()  # the installed tinytorch (else the checkout's); says which runtime and ISA

GATE_FLOOR = 1  # valid completions out of the held-out prompts for the gate to pass (the guide's 1 of 7)


def load_tinyverse():
    """(module, None) when tinytorch.extensions.tinyverse imports with what this part uses,
    else (None, the reason)."""
    try:
        from tinytorch.extensions import tinyverse
    except Exception as exc:  # not built yet, or broken: say why instead of failing
        return None, f"tinytorch.extensions.tinyverse does not import ({type(exc).__name__}: {exc})"
    missing = [n for n in ("run_ast_gate_training", "generate_tinypy", "ast_validity_rate")
               if not hasattr(tinyverse, n)]
    if missing:
        return None, f"tinytorch.extensions.tinyverse lacks {', '.join(missing)}"
    return tinyverse, None


def main(argv=None):
    parser = argparse.ArgumentParser(description="TinyPy: a GPT trained with the AST-validity gate in the loop.")
    parser.add_argument("--seconds", type=float, default=60.0, help="training-time budget")
    parser.add_argument("--quick", action="store_true", help="20 s of training time")
    parser.add_argument("--eval-every", type=int, default=None,
                        help="optimizer steps between gate evaluations (100; 30 with --quick)")
    parser.add_argument("--seed", type=int, default=0)
    _runtime.add_json_option(parser)
    args = parser.parse_args(argv)
    seconds = 20.0 if args.quick else args.seconds
    args.eval_every = args.eval_every or (30 if args.quick else 100)
    if seconds <= 0 or args.eval_every < 1:
        parser.error("--seconds must be > 0 and --eval-every >= 1")

    tinyverse, reason = load_tinyverse()
    if tinyverse is None:
        print(f"part 3 not available: {reason}")
        with _runtime.track_kernel_paths() as paths:
            pass
        _runtime.report(paths)
        _runtime.save_results(args.json, {"milestone": "05_tinypy", "available": False, "reason": reason})
        return 0

    corpus = tinyverse.generate_tinypy(args.seed)
    print(f"TinyPy corpus: {len(corpus.train):,} characters of training functions, "
          f"{len(corpus.heldout)} held-out prompts ({', '.join(corpus.heldout_names)}); "
          f"{seconds:.0f} s of training, gate every {args.eval_every} steps")
    with _runtime.track_kernel_paths() as paths:
        out = tinyverse.run_ast_gate_training(seconds=seconds, seed=args.seed, eval_every=args.eval_every,
                                              corpus=corpus, say=lambda line: print("  " + line, flush=True))
    total = out["total"]
    print(f"\nAST-validity gate on {total} held-out prompts (greedy completions, ast.parse):")
    _runtime.print_table(["step", "train loss", "valid", "AST validity", "eval time (s)"],
                         [[str(s), "-" if loss != loss else f"{loss:.3f}", f"{v}/{total}", f"{r:.0f}%", f"{e:.1f}"]
                          for s, loss, v, r, e in zip(out["step"], out["loss"], out["valid"], out["rate"],
                                                      out["eval_seconds"])])
    verdict = gate_verdict(out["step"], out["valid"])
    passed = verdict["passed"]
    reached = (f"{verdict['valid_at_pass']} of {total} completions parsed at step {verdict['passed_at_step']}"
               if passed else f"no evaluation reached {GATE_FLOOR} of {total} (best {verdict['best_valid']})")
    print(f"gate {'PASSED' if passed else 'NOT PASSED'}: {reached} (floor {GATE_FLOOR} of {total}, reached at any "
          f"evaluation); last evaluation {out['valid'][-1]} of {total} at step {out['step'][-1]}; "
          f"{out['train_seconds']:.1f} s of training")
    print("last completions (first three lines, joined by ' | '):")
    for name, fn in zip(corpus.heldout_names, out["functions"]):
        lines = [line.strip() for line in (fn or "(no complete function)").splitlines() if line.strip()]
        print(f"  {name:<20} {' | '.join(lines[:3])}")
    _runtime.report(paths)
    _runtime.save_results(args.json, {
        "milestone": "05_tinypy", "available": True, "steps": out["step"], "loss": out["loss"],
        "valid": out["valid"], "rate": out["rate"], "total": total, "passed": passed, "floor": GATE_FLOOR,
        "passed_at_step": verdict["passed_at_step"], "best_valid": verdict["best_valid"],
        "train_seconds": out["train_seconds"]})
    return 0 if passed else 1


def gate_verdict(steps, valid) -> dict:
    """The pass rule: passed when some evaluation has at least GATE_FLOOR valid completions;
    {"passed", "passed_at_step" and "valid_at_pass" (the first such evaluation, or None),
    "best_valid"}."""
    first = next(((s, v) for s, v in zip(steps, valid) if v >= GATE_FLOOR), (None, None))
    return {"passed": first[0] is not None, "passed_at_step": first[0], "valid_at_pass": first[1],
            "best_valid": max(valid)}


if __name__ == "__main__":
    sys.exit(main())
