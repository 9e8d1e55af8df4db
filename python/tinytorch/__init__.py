"""TinyTorch: a small, readable deep-learning framework.

The package is a thin Python layer (autograd, layers, optimizers, training, data,
extensions) over libtinytorch, a native runtime with a plain C ABI reached
through ctypes (see tinytorch.native). Importing it never fails for lack of the
library: kernels then fall back to NumPy and `tinytorch info` says why.

Top-level names are loaded lazily, so `import tinytorch` stays cheap:
    Tensor, Function, no_grad, manual_seed      the core contracts
    GPT, MultiHeadAttention, Embedding, ...     common building blocks (see _LAZY)
    Profiler, precise_timer, MLPerf             measurement
    set_num_threads, get_num_threads            kernel threads
Code written for the course's (upstream) TinyTorch: see docs/compat.md.

Owns the lazy facade (_LAZY: name -> module, loaded on first access) and the thread-count
functions; assumes only the binding at import (_allocator, native), so importing stays cheap.
"""
from __future__ import annotations

import importlib
import os

from . import _allocator, native

_allocator.apply()  # freed arrays reused without page faults (see _allocator.py)

__version__ = "0.1.0"

# name -> module that defines it (imported on first use)
_LAZY = {
    "Tensor": "tinytorch.core.tensor",
    "Function": "tinytorch.core.autograd",
    "no_grad": "tinytorch.core.autograd",
    "is_grad_enabled": "tinytorch.core.autograd",
    "enable_grad": "tinytorch.core.autograd",
    "set_grad_enabled": "tinytorch.core.autograd",
    "Parameter": "tinytorch.core.layers",
    "gradcheck": "tinytorch.core.autograd",
    "manual_seed": "tinytorch.core.random",
    "get_rng_state": "tinytorch.core.random",
    "set_rng_state": "tinytorch.core.random",
    "GPT": "tinytorch.core.transformers",
    "TransformerBlock": "tinytorch.core.transformers",
    "LayerNorm": "tinytorch.core.transformers",
    "MultiHeadAttention": "tinytorch.core.attention",
    "scaled_dot_product_attention": "tinytorch.core.attention",
    "Embedding": "tinytorch.core.embeddings",
    "Tokenizer": "tinytorch.core.tokenization",
    "CharTokenizer": "tinytorch.core.tokenization",
    "BPETokenizer": "tinytorch.core.tokenization",
    "KVCache": "tinytorch.core.kv_cache",
    "Profiler": "tinytorch.perf.profiling",
    "precise_timer": "tinytorch.perf.benchmarking",
    "MLPerf": "tinytorch.perf.benchmarking",
    "simd_matmul": "tinytorch.extensions.simd_ops",
    "simd_fused_bias_gelu": "tinytorch.extensions.simd_ops",
    "use_native": "tinytorch.core.acceleration",
    # upstream TinyTorch's top-level names (docs/compat.md)
    "Sigmoid": "tinytorch.core.activations",
    "ReLU": "tinytorch.core.activations",
    "Tanh": "tinytorch.core.activations",
    "GELU": "tinytorch.core.activations",
    "Softmax": "tinytorch.core.activations",
    "Layer": "tinytorch.core.layers",
    "Linear": "tinytorch.core.layers",
    "Dropout": "tinytorch.core.layers",
    "Sequential": "tinytorch.core.layers",
    "MSELoss": "tinytorch.core.losses",
    "CrossEntropyLoss": "tinytorch.core.losses",
    "BinaryCrossEntropyLoss": "tinytorch.core.losses",
    "Dataset": "tinytorch.core.dataloader",
    "TensorDataset": "tinytorch.core.dataloader",
    "DataLoader": "tinytorch.core.dataloader",
    "RandomHorizontalFlip": "tinytorch.core.transforms",
    "RandomCrop": "tinytorch.core.transforms",
    "Compose": "tinytorch.core.transforms",
    "enable_autograd": "tinytorch.core.autograd",
    "SGD": "tinytorch.core.optimizers",
    "Adam": "tinytorch.core.optimizers",
    "AdamW": "tinytorch.core.optimizers",
    "Trainer": "tinytorch.core.training",
    "CosineSchedule": "tinytorch.core.training",
    "clip_grad_norm": "tinytorch.core.training",
    "Conv2d": "tinytorch.core.spatial",
    "MaxPool2d": "tinytorch.core.spatial",
    "AvgPool2d": "tinytorch.core.spatial",
    "Conv2D": "tinytorch.core.spatial",
    "MaxPool2D": "tinytorch.core.spatial",
    "AvgPool2D": "tinytorch.core.spatial",
    "PositionalEncoding": "tinytorch.core.embeddings",
    "EmbeddingLayer": "tinytorch.core.embeddings",
    "MLP": "tinytorch.core.transformers",
    "create_causal_mask": "tinytorch.core.transformer",
    "benchmarking": "tinytorch.perf",
}

# submodules loaded on first attribute access (upstream's ``tinytorch.olympics``)
_LAZY_MODULES = {"olympics": "tinytorch.olympics"}


def __getattr__(name: str):
    if name in _LAZY_MODULES:
        return importlib.import_module(_LAZY_MODULES[name])  # the import binds it on the package
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tinytorch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY) + list(_LAZY_MODULES))


_fallback_threads = int(os.environ.get("OMP_NUM_THREADS", "0") or 0) or (os.cpu_count() or 1)


MAX_THREADS = 256


def set_num_threads(n: int) -> None:
    """Threads used by native kernels (default: OMP_NUM_THREADS when set, else the CPUs this
    process may use: its affinity mask, lowered to a cgroup CPU quota; ``tinytorch info``
    says which rule decided)."""
    global _fallback_threads
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"set_num_threads: n must be an int, got {n!r}")
    if not 1 <= n <= MAX_THREADS:  # the runtime's TT_MAX_THREADS
        raise ValueError(f"set_num_threads: n={n} is outside 1..{MAX_THREADS}")
    _fallback_threads = n
    if native.available():
        from . import _native
        _native.check(_native.lib.tt_set_num_threads(n), "set_num_threads")


def get_num_threads() -> int:
    if native.available():
        from . import _native
        return int(_native.lib.tt_get_num_threads())
    return _fallback_threads
