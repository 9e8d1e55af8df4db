"""docs/examples/interop_workflow.py end to end, as docs/interop.md tells users to run it: each step
a separate command (fine-tune the checked-in tiny GPT-2 folder with LoRA, merge, save_pretrained,
export to ONNX, serve with ONNX Runtime), in a fresh folder; the files each step promises exist,
the merged folder differs from the original (the fine-tuning counted), and serving's logits equal
ours (the script itself asserts that at every decoding step)."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("safetensors")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "docs", "examples", "interop_workflow.py")
FOLDER = os.path.join(ROOT, "tests", "data", "tiny_gpt2")


def _step(tmp_path, *args):
    done = subprocess.run([sys.executable, SCRIPT, *args, "--work", str(tmp_path / "work")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_workflow_runs_step_by_step(tmp_path):
    from tinytorch.core.transformers import GPT
    out = _step(tmp_path, "finetune", FOLDER, "--steps", "3")
    assert "step 3/3" in out
    work = tmp_path / "work"
    assert (work / "adapters.safetensors").is_file() and (work / "gpt2-merged" / "model.safetensors").is_file()
    merged, original = GPT.from_pretrained(str(work / "gpt2-merged")), GPT.from_pretrained(FOLDER)
    ids = np.array([[1, 2, 3, 4]])
    assert np.abs(merged(ids).data - original(ids).data).max() > 1e-4  # the adapters changed the model
    assert "onnx.checker passed" in _step(tmp_path, "export")
    assert (work / "model.onnx").is_file()
    out = _step(tmp_path, "serve")
    assert "ONNX Runtime greedy tokens: [1, 2, 3," in out and "within 1e-5" in out


def test_finetune_without_a_folder_is_refused(tmp_path):
    done = subprocess.run([sys.executable, SCRIPT, "finetune"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "tests/data/tiny_gpt2" in done.stderr
