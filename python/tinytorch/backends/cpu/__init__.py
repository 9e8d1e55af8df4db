"""backends/cpu: the native CPU back end -- the runtime's kernels, through the one binding (_native).

Registered once per instruction set (cpu:scalar, cpu:avx2, cpu:avx512, cpu:neon); the
entry of the runtime's active ISA is the usable one (the runtime picks the micro-kernels;
these functions are the same for all). Each op returns NotImplemented to decline a call,
and the NumPy back end then serves it.

Routing rule (which calls run here):
  * float32 -- every operand float32, and the work large enough: at least
    NATIVE_MIN_GEMM_WORK multiply-adds for a GEMM and NATIVE_MIN_ELEMENTS elements for
    bias+GELU, unless the caller passed any_size=True. Below those sizes the fixed cost of
    a ctypes call (~2-4 us) exceeds what the kernel saves, so NumPy runs (measured with
    benchmarks/bench_gemm.py and bench_gelu.py on the development machine).
  * float16 -- float16 GEMMs and matmuls (both operands float16, at least
    NATIVE_MIN_HALF_GEMM_WORK multiply-adds, alpha 1 and beta 0) go to tt_hgemm: float16
    storage, float32 products and sums, result rounded to float16. NumPy has no BLAS for
    float16, so this is what makes float16 training usable.
  * attention -- float32 q, k, v (v as wide as q), no mask, at least
    NATIVE_MIN_ATTENTION_WORK multiply-adds (0: every size): tt_attention_forward / _backward (FlashAttention:
    tiled, online softmax). Batch dims are folded into the runtime's [batch][heads] with
    strides (broadcast and transposed-head layouts need no copy).
  * layer norm, softmax, log-softmax (forward and backward) -- over the last axis of a
    float32 array of at least NATIVE_MIN_ELEMENTS elements (gamma / beta float32 (D,) or
    None): tt_layernorm_* / tt_softmax_* / tt_log_softmax_* (one row kernel per ISA);
    cross-entropy of float32 logits (M, C) without label smoothing: tt_cross_entropy_*.
  * everything else (float64, integers, mixed dtypes, tiny problems) is declined.
Every call files the runtime's own kernel-path report ("native:sgemm:avx2",
"native:sgemm_strided_batched:avx2", "native:bias_gelu_forward:avx2", "native:hgemm:...",
"native:attention_forward:avx2", "native:layernorm_forward:avx2", "native:softmax_forward:avx2").

Layouts: operands are passed by pointer with a leading dimension. A row-major view with
any row stride is passed as is, and a transposed view (column-major storage, e.g. ``x.T``
or ``np.swapaxes(x, -1, -2)``) is passed as the transpose flag of the untransposed
storage: no copy. Anything else (negative or odd strides, unaligned data) is copied once
to a contiguous array. ``out=`` receives the result directly when it is a row-major
float32 array that does not overlap an input; otherwise through a temporary.

Output allocation is part of the cost: results are fresh ``np.empty`` arrays, and NumPy
already asks Linux for transparent huge pages on large allocations (madvise), so a fresh
40 MB output takes ~20 page faults rather than ~10,000. A caller that repeats a shape can
still skip the allocation with ``gemm(..., out=buffer)``; benchmarks/bench_gemm.py and
bench_gelu.py report both ("fresh output" columns).

One file per family of runtime/cpu/ (this file holds the probe and the registration only):
  common.py         size floors, dtypes, operand layouts of the C ABI
  gemm_ops.py       gemm, matmul (tt_sgemm, tt_sgemm_strided_batched, tt_hgemm), observe_gemms
  gelu_ops.py       bias_gelu and its backward
  attention_ops.py  attention and its backward (FlashAttention)
  row_ops.py        layer norm, softmax, log-softmax, cross-entropy (forward and backward)
  train_ops.py      adam_step, embedding and its backward
  conv_ops.py       im2col, col2im, max pooling and its backward
  relu_ops.py       relu and its backward
  qgemm_ops.py      the INT8 GEMM (quantize_rows, quantized_pack / _matmul / _linear)

Assumes: the one binding (tinytorch._native) and the runtime's own choice of ISA; arrays
only (no back end imports the core or an extension).
"""
from __future__ import annotations

from ... import _native
from .. import door_ops, register
from . import attention_ops, conv_ops, gelu_ops, gemm_ops, qgemm_ops, relu_ops, row_ops, train_ops
from .attention_ops import NATIVE_MIN_ATTENTION_WORK, attention, attention_backward
from .common import NATIVE_MIN_ELEMENTS, NATIVE_MIN_GEMM_WORK, NATIVE_MIN_HALF_GEMM_WORK
from .conv_ops import col2im, im2col, max_pool2d, max_pool2d_backward
from .gelu_ops import bias_gelu, bias_gelu_backward
from .gemm_ops import gemm, matmul, observe_gemms
from .qgemm_ops import pack_for, quantize_rows, quantized_linear, quantized_matmul, quantized_pack
from .relu_ops import relu, relu_backward
from .row_ops import (cross_entropy, cross_entropy_backward, layer_norm, layer_norm_backward,
                      log_softmax, log_softmax_backward, softmax, softmax_backward)
from .train_ops import adam_step, embedding, embedding_backward

__all__ = ["NATIVE_MIN_GEMM_WORK", "NATIVE_MIN_ELEMENTS", "NATIVE_MIN_HALF_GEMM_WORK",
           "NATIVE_MIN_ATTENTION_WORK", "OPS", "observe_gemms", "pack_for", "probe",
           "gemm", "matmul", "bias_gelu", "bias_gelu_backward", "attention", "attention_backward",
           "layer_norm", "layer_norm_backward", "softmax", "log_softmax", "softmax_backward",
           "log_softmax_backward", "cross_entropy", "cross_entropy_backward", "adam_step",
           "embedding", "embedding_backward", "im2col", "col2im", "max_pool2d",
           "max_pool2d_backward", "relu", "relu_backward", "quantize_rows", "quantized_pack",
           "quantized_matmul", "quantized_linear"]


def probe(isa: str):
    """(usable, why) of the entry for ``isa``: usable when the runtime is loaded, built with
    and running on that ISA."""
    if not _native.available():
        return False, _native.reason()
    info = _native.build_info()
    if isa not in info["isas_compiled"]:
        return False, f"this build has no {isa} kernels"
    if isa not in info["isa_detected"]:
        return False, f"this CPU does not support {isa}"
    if info["isa_active"] != isa:
        why = f"; {info['isa_env_error']}" if info.get("isa_env_error") else ""
        return False, f"supported, but the active ISA is {info['isa_active']} " \
                      f"(tinytorch.native.set_isa({isa!r}) switches){why}"
    return True, f"active: libtinytorch {info['version']} kernels for {isa}, " \
                 f"{info['threads']} thread(s)"



OPS = door_ops(gemm_ops, gelu_ops, attention_ops, row_ops, train_ops, conv_ops, relu_ops, qgemm_ops)

for _isa in ("avx512", "avx2", "neon", "scalar"):
    register(f"cpu:{_isa}", probe=lambda isa=_isa: probe(isa), ops=OPS, priority=100,
             description=f"the runtime's {_isa} kernels")
