"""tinytorch.extensions: one file per systems optimisation, each plugging into one boundary.

    autograd boundary        checkpoint, checkpoint_sequential          (activation_checkpoint.py)
    architecture boundary    LoRALinear, inject_lora, lora_state_dict   (lora.py)
    training dynamics        LossScaler, DynamicLossScaler              (loss_scaler.py)
                             to_half, MixedPrecisionOptimizer           (mixed_precision.py)
                             Lion, Muon                                 (optimizers.py)
    silicon                  simd_matmul, simd_fused_bias_gelu          (simd_ops.py)
    memory                   flash_attention, FlashAttentionFunction    (flash_attn.py)
    memory bandwidth         compile_graph, CompiledGraph               (compile.py, fusion/)
    data systems             pack_tokens, TokenShard, ShardDataset,     (tinyverse/)
                             ShardBatcher, generate_tinypy,
                             generate_tinytalks, ast_validity_rate
    hardware simulation      Gemm, trace_gemms, SimulatedLinear,        (scalesim/)
                             ArrayConfig, simulate (SCALE-Sim)
    the worked example       scaled_matmul                              (template.py)

Every extension follows the contract in docs/extending.md, and importing this package never
fails: each extension looks up its optional dependencies (the runtime library, a compiler, a
device) at call time and falls back to NumPy, so the imports below are plain imports.

Owns the package's list of names (the guide's import paths); assumes every module imports
without its optional dependencies.
"""
from __future__ import annotations

# The package's one switch and one report (the kernel door's), for extension users.
from ..core.acceleration import last_path, use_native
from .template import scaled_matmul
from .lora import LoRALinear, inject_lora, lora_state_dict, load_lora_state_dict
from .activation_checkpoint import checkpoint, checkpoint_sequential
from .loss_scaler import LossScaler, DynamicLossScaler
from .mixed_precision import to_half, to_float, MixedPrecisionOptimizer
from .optimizers import Lion, Muon
from .simd_ops import simd_matmul, simd_fused_bias_gelu, has_simd_support, simd_build_info
from .flash_attn import flash_attention, FlashAttentionFunction
from .compile import compile_graph, CompiledGraph
from .tinyverse import (pack_tokens, TokenShard, ShardDataset, ShardBatcher, generate_tinypy,
                        generate_tinytalks, ast_validity_rate)
from .scalesim import (Gemm, GemmTracer, trace_gemms, SimulatedLinear, ArrayConfig, simulate,
                       SimulationResult, LayerResult, ScaleSimError, ScaleSimUnavailable, ScaleSimTimeout,
                       MalformedReportError, scalesim_status)
# upstream TinyTorch's accelerator modules (GPU kernels not written here yet: docs/compat.md)
from .triton_gelu import triton_fused_gelu, has_triton_support
from .mps_ops import mps_matmul, has_mps_support
from .cuda_ops import cuda_matmul, has_cuda_support

__all__ = [
    "last_path", "use_native",
    "scaled_matmul",
    "LoRALinear", "inject_lora", "lora_state_dict", "load_lora_state_dict",
    "checkpoint", "checkpoint_sequential",
    "LossScaler", "DynamicLossScaler",
    "to_half", "to_float", "MixedPrecisionOptimizer",
    "Lion", "Muon",
    "simd_matmul", "simd_fused_bias_gelu", "has_simd_support", "simd_build_info",
    "flash_attention", "FlashAttentionFunction",
    "compile_graph", "CompiledGraph",
    "pack_tokens", "TokenShard", "ShardDataset", "ShardBatcher", "generate_tinypy", "generate_tinytalks",
    "ast_validity_rate",
    "Gemm", "GemmTracer", "trace_gemms", "SimulatedLinear", "ArrayConfig", "simulate", "SimulationResult",
    "LayerResult", "ScaleSimError", "ScaleSimUnavailable", "ScaleSimTimeout", "MalformedReportError",
    "scalesim_status",
    "triton_fused_gelu", "has_triton_support", "mps_matmul", "has_mps_support",
    "cuda_matmul", "has_cuda_support",
]
