"""Regenerates tests/data/tiny_gpt2/: a tiny GPT-2 folder of generated weights (config.json +
model.safetensors in the Hugging Face layout), used by tests/core/test_gpt2_tiny_folder.py so the
GPT-2 loader is checked against a float64 NumPy reference forward even without transformers.

Why a script and not transformers: the folder must be reproducible on a machine without torch;
the weights are seeded NumPy draws (nonzero biases, non-unit LayerNorms, so every tensor's mapping
matters). Run: python tests/data/make_tiny_gpt2.py
"""
import json
import os

import numpy as np
from safetensors.numpy import save_file

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tiny_gpt2")
CONFIG = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 61,
          "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": None,
          "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "resid_pdrop": 0.0,
          "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True,
          "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
          "initializer_range": 0.02, "tie_word_embeddings": True,
          "bos_token_id": None, "eos_token_id": None}


def main(folder: str = HERE) -> None:
    """Write the tiny folder into ``folder`` (default tests/data/tiny_gpt2)."""
    rng = np.random.default_rng(29)
    d, v, p = CONFIG["n_embd"], CONFIG["vocab_size"], CONFIG["n_positions"]

    def r(*shape, scale=0.2, base=0.0):
        return (base + scale * rng.standard_normal(shape)).astype(np.float32)

    w = {"transformer.wte.weight": r(v, d), "transformer.wpe.weight": r(p, d),
         "transformer.ln_f.weight": r(d, base=1.0), "transformer.ln_f.bias": r(d)}
    for n in range(CONFIG["n_layer"]):
        h = f"transformer.h.{n}."
        for ln in ("ln_1", "ln_2"):
            w[h + ln + ".weight"], w[h + ln + ".bias"] = r(d, base=1.0), r(d)
        for name, (i, o) in {"attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d),
                             "mlp.c_fc": (d, 4 * d), "mlp.c_proj": (4 * d, d)}.items():
            w[h + name + ".weight"], w[h + name + ".bias"] = r(i, o), r(o)
    os.makedirs(folder, exist_ok=True)
    save_file(w, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
