"""The interop workflow of docs/interop.md, one command per step (run from the repository root).

What this file owns: the four steps a user copies, each a subcommand that reads the previous
step's files from --work (default interop-work/):

  python docs/examples/interop_workflow.py finetune tests/data/tiny_gpt2   # LoRA steps, merge, save_pretrained
  python docs/examples/interop_workflow.py export                           # gpt2-merged/ -> model.onnx
  python docs/examples/interop_workflow.py serve                            # ONNX Runtime: greedy tokens + parity
  python docs/examples/interop_workflow.py all tests/data/tiny_gpt2         # the three in a row

finetune: GPT.from_pretrained on a Hugging Face GPT-2 folder, rank-4 LoRA adapters on the query
and value projections, a few AdamW steps on random token windows (a stand-in for your data),
the adapters saved alone (adapters.safetensors), then merge_and_unload and save_pretrained
(gpt2-merged/, loadable by transformers' GPT2LMHeadModel too). export: the merged folder loaded
back and written as ONNX (dynamic batch and sequence axes). serve: an ONNX Runtime session
greedy-decodes 8 tokens from a prompt and checks its logits against ours (1e-5). Needs the
onnx and safetensors extras: pip install 'tinytorch[onnx,safetensors]'.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np


def finetune(folder: str, work: str, steps: int) -> float:
    """LoRA-fine-tune the GPT-2 folder ``folder`` for ``steps`` steps; writes work/adapters.safetensors
    and work/gpt2-merged/; returns the last loss."""
    from tinytorch.core.losses import cross_entropy
    from tinytorch.core.optimizers import AdamW
    from tinytorch.core.transformers import GPT
    from tinytorch.extensions import inject_lora
    from tinytorch.extensions.lora import merge_and_unload, save_lora
    model = GPT.from_pretrained(folder)
    inject_lora(model, ["q_proj", "v_proj"], rank=4)
    opt = AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    rng = np.random.default_rng(0)
    for step in range(steps):
        ids = rng.integers(0, model.vocab_size, (4, 9))
        loss = cross_entropy(model(ids[:, :-1]).reshape(-1, model.vocab_size), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step + 1}/{steps}: loss {float(loss.data):.4f}")
    os.makedirs(work, exist_ok=True)
    save_lora(model, os.path.join(work, "adapters.safetensors"))
    merge_and_unload(model).save_pretrained(os.path.join(work, "gpt2-merged"))
    print(f"wrote {work}/adapters.safetensors and {work}/gpt2-merged/")
    return float(loss.data)


def export_onnx(work: str) -> str:
    """Load work/gpt2-merged/ and write work/model.onnx; returns its path."""
    from tinytorch import export
    from tinytorch.core.transformers import GPT
    model = GPT.from_pretrained(os.path.join(work, "gpt2-merged"))
    model.eval()
    path = export.to_onnx(model, np.zeros((1, 4), np.int64), os.path.join(work, "model.onnx"))
    print(f"wrote {path} (onnx.checker passed; axes batch and sequence dynamic)")
    return path


def serve(work: str, prompt=(1, 2, 3), new_tokens: int = 8) -> list:
    """Greedy-decode ``new_tokens`` after ``prompt`` with ONNX Runtime on work/model.onnx, each
    step's logits checked against our GPT from work/gpt2-merged/; returns the ids."""
    import onnxruntime as ort
    from tinytorch.core.transformers import GPT
    sess = ort.InferenceSession(os.path.join(work, "model.onnx"), providers=["CPUExecutionProvider"])
    ours = GPT.from_pretrained(os.path.join(work, "gpt2-merged"))
    ids = np.array([prompt], np.int64)
    for _ in range(new_tokens):
        logits = sess.run(None, {"input": ids})[0]
        np.testing.assert_allclose(logits, ours(ids).data, rtol=1e-5, atol=1e-5)  # float32 logits of order 1
        ids = np.concatenate([ids, logits[:, -1].argmax(-1)[:, None]], axis=1)
    print("ONNX Runtime greedy tokens:", ids[0].tolist(), "(logits equal ours within 1e-5 at every step)")
    return ids[0].tolist()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=["finetune", "export", "serve", "all"])
    ap.add_argument("folder", nargs="?", help="the GPT-2 folder to fine-tune (finetune, all)")
    ap.add_argument("--work", default="interop-work", help="where the steps' files go (default interop-work/)")
    ap.add_argument("--steps", type=int, default=20, help="LoRA fine-tuning steps (default 20)")
    args = ap.parse_args(argv)
    if args.step in ("finetune", "all"):
        if not args.folder:
            ap.error(f"{args.step} needs the GPT-2 folder, e.g. tests/data/tiny_gpt2")
        finetune(args.folder, args.work, args.steps)
    if args.step in ("export", "all"):
        export_onnx(args.work)
    if args.step in ("serve", "all"):
        serve(args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
