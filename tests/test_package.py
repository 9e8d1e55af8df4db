"""The package surface: lazy top-level names resolve to the objects in their modules,
`import tinytorch` never imports PyTorch (a test/benchmark reference only), and the
extension guide's import paths work."""
import importlib
import subprocess
import sys

import tinytorch


def test_lazy_names_resolve_to_their_modules():
    for name, module in tinytorch._LAZY.items():
        assert getattr(tinytorch, name) is getattr(importlib.import_module(module), name)
    assert set(tinytorch._LAZY) <= set(dir(tinytorch))


def test_unknown_attribute_raises_attribute_error():
    try:
        tinytorch.not_a_thing
    except AttributeError as exc:
        assert "not_a_thing" in str(exc)
    else:
        raise AssertionError("tinytorch.not_a_thing should raise AttributeError")


def test_import_does_not_pull_in_torch():
    code = ("import sys, tinytorch, tinytorch.extensions, tinytorch.core.transformers; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_extension_guide_import_paths():
    from tinytorch.core.dataloader import DataLoader, Dataset  # noqa: F401
    from tinytorch.core.layers import Layer, Linear  # noqa: F401
    from tinytorch.core.tensor import Function, Tensor
    from tinytorch.core.tokenization import Tokenizer  # noqa: F401
    from tinytorch.core.training import Trainer  # noqa: F401
    from tinytorch.extensions import (LoRALinear, LossScaler, checkpoint,  # noqa: F401
                                      simd_fused_bias_gelu, simd_matmul)
    from tinytorch.perf.benchmarking import MLPerf, precise_timer  # noqa: F401
    from tinytorch.core import autograd
    assert Function is autograd.Function and Tensor is tinytorch.Tensor
