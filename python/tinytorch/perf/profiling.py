"""Profiling: parameters, FLOPs, peak memory and latency of a model or a function.

What this file owns
  Profiler.count_parameters(model)        number of scalars in ``model.parameters()``
  Profiler.count_flops(model, input_shape) FLOPs of one forward pass, counting the GEMM-shaped
                                          work (Linear, Conv2d, attention scores and weighted sum):
                                          a multiply-add is 2 FLOPs, so an (M,K)x(K,N) GEMM is
                                          2*M*K*N. Elementwise work (activations, norms, bias) is
                                          not counted: it is bandwidth-bound and tiny in FLOPs.
  Profiler.flop_breakdown(...)            the same, per module name
  Profiler.measure_memory(fn, *args)      peak bytes from ``tracemalloc`` (Python and NumPy
                                          allocations) and from the native runtime's own
                                          counters (``tinytorch.native.memory_stats()``), each on
                                          its own and added together
  Profiler.measure_latency(fn, *args, warmup, iterations)   median and percentiles

How FLOPs are found
  The model is run once on zeros of ``input_shape`` with gradient recording off; for that pass
  the ``forward`` of every Linear-like, Conv2d-like and attention module is wrapped (an instance
  attribute, removed afterwards) to record input and output shapes. Any module may instead
  define ``flops(inputs, output) -> int`` to say what one call costs; that wins. Token models say
  which input dtype they need through an ``input_dtype`` attribute (GPT sets int64).

What it never does
  It never changes the model beyond that temporary wrapping, and it never imports PyTorch.

Where it sits: the clocks and BenchmarkResult are tinytorch.measure.timing's, the runtime's
counters tinytorch.measure.memory's (``runtime_memory_stats`` is importable from here too);
nothing in perf/ is imported here, so mlperf.py and benchmark_suite.py build on it.

What it assumes: a model is a tinytorch Layer (``parameters()``, ``forward``) or a callable
on Tensors; the runtime's counters may be absent (the runtime fields are then None).
"""
from __future__ import annotations

import importlib  # noqa: F401  (measure.memory reaches the runtime through importlib.import_module at call time; tests stand in a fake runtime by patching it here)

import numpy as np

from ..core.tensor import BYTES_PER_FLOAT32, KB_TO_BYTES, MB_TO_BYTES  # noqa: F401  (the one definition)
from ..measure.memory import reset_runtime_peak, runtime_memory_stats, traced_call
from ..measure.timing import BenchmarkResult, benchmark

__all__ = ["Profiler", "runtime_memory_stats", "quick_profile", "analyze_weight_distribution",
           "BYTES_PER_FLOAT32", "KB_TO_BYTES", "MB_TO_BYTES"]


def _shape_of(x):
    data = getattr(x, "data", x)
    return tuple(np.shape(data))


def _kind(module) -> str | None:
    """Classify a module for FLOP counting by its class name and shape attributes."""
    name = type(module).__name__
    weight = getattr(module, "weight", None)
    wshape = _shape_of(weight) if weight is not None else ()
    if "Conv2d" in name and len(wshape) == 4:
        return "conv2d"
    if name == "MultiHeadAttention" or name.endswith("Attention"):
        return "attention"
    if name.endswith("Linear") and len(wshape) == 2:
        return "linear"
    return None


def _module_flops(module, kind: str, in_shapes: list, out_shape: tuple) -> int:
    if hasattr(module, "flops") and callable(module.flops):
        return int(module.flops(in_shapes, out_shape))
    if kind == "linear":
        in_features = _shape_of(module.weight)[0]
        rows = int(np.prod(in_shapes[0][:-1])) if in_shapes[0] else 1
        return 2 * rows * in_features * int(out_shape[-1])
    if kind == "conv2d":
        out_ch, in_ch_per_group, kh, kw = _shape_of(module.weight)
        n, _, oh, ow = out_shape
        return 2 * n * oh * ow * out_ch * in_ch_per_group * kh * kw
    if kind == "attention":
        # Scores (B,H,T,d)x(B,H,d,S) and weighted sum (B,H,T,S)x(B,H,S,d): 2 GEMMs of
        # B*T*S*E multiply-adds each. The projections are separate Linear modules.
        q = in_shapes[0]
        kv = in_shapes[1] if len(in_shapes) > 1 and in_shapes[1] else q
        b, t, e = q[0], q[1], q[2]
        s = kv[1]
        return 2 * 2 * b * t * s * e
    return 0


def _is_shape(value) -> bool:
    """A non-empty tuple or list of non-negative ints (an input shape)."""
    return (isinstance(value, (tuple, list)) and len(value) > 0
            and all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0 for n in value))


class Profiler:
    """Measures a model: parameter count, FLOPs, peak memory and latency."""

    # -- parameters -------------------------------------------------------------------------
    @staticmethod
    def count_parameters(model, trainable_only: bool = False) -> int:
        """Number of scalars in ``model.parameters()`` (or in ``model`` itself, an iterable
        of Tensors/arrays), tied weights counted once; only those with requires_grad
        when ``trainable_only``."""
        params = model.parameters() if hasattr(model, "parameters") else model
        seen, total = set(), 0
        for p in params:
            if id(p) in seen:  # tied weights count once
                continue
            seen.add(id(p))
            if trainable_only and not getattr(p, "requires_grad", True):
                continue
            total += int(np.size(getattr(p, "data", p)))
        return total

    # -- FLOPs ------------------------------------------------------------------------------
    def flop_breakdown(self, model, input_shape, dtype=None) -> dict:
        """FLOPs of one forward pass of ``model`` (a Layer) on zeros of ``input_shape`` (batch
        axis included), per module name (summed over calls). ``dtype`` of the zeros defaults
        to the model's ``input_dtype`` attribute, else float32."""
        if not hasattr(model, "named_modules"):
            raise TypeError(f"count_flops needs a Layer with named_modules(), got {type(model).__name__}")
        if isinstance(input_shape, int):
            input_shape = (input_shape,)
        input_shape = tuple(int(s) for s in input_shape)
        if any(s < 0 for s in input_shape):
            raise ValueError(f"input_shape must be non-negative, got {input_shape}")
        dtype = np.dtype(dtype if dtype is not None else getattr(model, "input_dtype", np.float32))

        counts: dict[str, int] = {}
        wrapped = []
        attention_names = []
        for name, module in model.named_modules():
            kind = _kind(module)
            if kind is None and not (hasattr(module, "flops") and callable(module.flops)):
                continue
            if kind == "attention":
                attention_names.append(name)
            kind = kind or "custom"

            def make_wrapper(module=module, name=name, kind=kind, original=module.forward):
                def forward(*args, **kwargs):
                    out = original(*args, **kwargs)
                    in_shapes = [_shape_of(a) for a in args]
                    first = out[0] if isinstance(out, tuple) else out
                    counts[name] = counts.get(name, 0) + _module_flops(module, kind, in_shapes, _shape_of(first))
                    return out
                return forward

            had_instance_forward = "forward" in vars(module)
            wrapped.append((module, had_instance_forward, vars(module).get("forward")))
            module.forward = make_wrapper()
        # Linear layers inside an attention module are counted on their own; a module nested
        # inside a counted Linear/Conv (e.g. an adapter) would be counted twice, so count only
        # the outermost GEMM-like module of each branch.
        try:
            from ..core.tensor import Tensor
            from ..core.autograd import no_grad
            x = Tensor(np.zeros(input_shape, dtype=dtype))
            with no_grad():
                model(x)
        finally:
            for module, had, prev in wrapped:
                if had:
                    module.forward = prev
                else:
                    del module.forward
        names = sorted(counts)
        keep = {}
        for n in names:
            parent_counted = any(n.startswith(p + ".") and p in counts and p not in attention_names
                                 for p in names if p != n)
            if not parent_counted:
                keep[n] = counts[n]
        return keep

    def count_flops(self, model, input_shape, dtype=None) -> int:
        """Total FLOPs of one forward pass of ``model`` on zeros of ``input_shape`` with
        ``dtype`` (see ``flop_breakdown`` and the module docstring for what is counted)."""
        return int(sum(self.flop_breakdown(model, input_shape, dtype).values()))

    # -- memory -----------------------------------------------------------------------------
    @staticmethod
    def measure_memory(fn, *args, **kwargs) -> dict:
        """Run ``fn(*args, **kwargs)`` once and report its peak memory.

        Returns ``tracemalloc_peak_bytes`` (peak above the level at the start of the call),
        ``runtime_peak_bytes``/``runtime_bytes_in_use``/``runtime_allocations`` from the native
        runtime (None when unavailable), ``combined_peak_bytes`` (the two peaks added: an upper
        bound on the true combined peak, since the two allocators need not peak together) and
        ``result`` (what ``fn`` returned).

        Upstream TinyTorch's form ``measure_memory(model, input_shape)`` (an object with
        ``forward`` and one tuple of ints) runs one forward pass on zeros of that shape without
        gradient recording and adds upstream's keys ``peak_memory_mb`` (the tracemalloc peak)
        and ``parameter_memory_mb``.
        """
        if hasattr(fn, "forward") and len(args) == 1 and not kwargs and _is_shape(args[0]):
            return Profiler._measure_forward_memory(fn, tuple(int(n) for n in args[0]))
        if not callable(fn):
            raise TypeError(f"measure_memory needs a callable, got {type(fn).__name__}")
        before_rt = runtime_memory_stats()
        reset_ok = reset_runtime_peak() if before_rt is not None else False
        result, tm_peak = traced_call(fn, *args, **kwargs)
        after_rt = runtime_memory_stats()
        rt_peak = rt_in_use = rt_allocs = None
        if before_rt is not None and after_rt is not None:
            base = int(before_rt.get("bytes_in_use", 0))
            # Without a peak reset the counter may hold an older, higher peak; the difference to
            # the bytes in use at the start is then an upper bound for this call.
            rt_peak = max(0, int(after_rt["peak_bytes"]) - base)
            rt_in_use = int(after_rt.get("bytes_in_use", 0))
            if "allocations" in after_rt and "allocations" in before_rt:
                rt_allocs = int(after_rt["allocations"]) - int(before_rt["allocations"])
        return {
            "tracemalloc_peak_bytes": int(tm_peak),
            "runtime_peak_bytes": rt_peak,
            "runtime_bytes_in_use": rt_in_use,
            "runtime_allocations": rt_allocs,
            "runtime_available": rt_peak is not None,
            "runtime_peak_exact": bool(reset_ok),
            "combined_peak_bytes": int(tm_peak) + (rt_peak or 0),
            "result": result,
        }

    @staticmethod
    def _measure_forward_memory(model, input_shape: tuple) -> dict:
        from ..core.autograd import no_grad
        from ..core.tensor import Tensor
        x = Tensor(np.zeros(input_shape, dtype=np.dtype(getattr(model, "input_dtype", np.float32))))

        def forward():
            with no_grad():
                return model.forward(x)

        report = Profiler.measure_memory(forward)
        params = list(model.parameters()) if hasattr(model, "parameters") else []
        report["peak_memory_mb"] = report["tracemalloc_peak_bytes"] / MB_TO_BYTES
        report["parameter_memory_mb"] = sum(p.data.nbytes for p in params) / MB_TO_BYTES
        return report

    # -- latency ----------------------------------------------------------------------------
    @staticmethod
    def measure_latency(fn, *args, warmup: int = 3, iterations: int = 20, **kwargs) -> BenchmarkResult:
        """Time ``fn(*args)`` ``iterations`` times after ``warmup`` untimed calls; the result
        (seconds) has ``median``, ``p50``/``p90``/``p99``, ``mean``, ``std``, ``min``, ``max``;
        ``.median * 1e3`` is ms."""
        return benchmark(fn, *args, warmup=warmup, iterations=iterations,
                         name=f"latency of {getattr(fn, '__name__', type(fn).__name__)}", **kwargs)

    def profile(self, model, input_shape, dtype=None, warmup: int = 2, iterations: int = 10) -> dict:
        """Parameters, FLOPs, forward memory and latency of ``model`` on zeros of ``input_shape``.

        ``dtype`` as in ``flop_breakdown``; latency uses ``warmup`` untimed and ``iterations``
        timed forward passes without gradient recording. Also reports ``gflops_per_s``."""
        from ..core.tensor import Tensor
        from ..core.autograd import no_grad
        dtype = np.dtype(dtype if dtype is not None else getattr(model, "input_dtype", np.float32))
        x = Tensor(np.zeros(tuple(input_shape), dtype=dtype))

        def forward():
            with no_grad():
                return model(x)

        latency = self.measure_latency(forward, warmup=warmup, iterations=iterations)
        flops = self.count_flops(model, input_shape, dtype)
        memory = self.measure_memory(forward)
        memory.pop("result")
        return {"parameters": self.count_parameters(model), "flops": flops,
                "memory": memory, "latency": latency,
                "gflops_per_s": flops / latency.median / 1e9 if latency.median > 0 else float("nan")}


    # ---------------------------------------------- upstream TinyTorch's reports (docs/compat.md)
    def profile_forward_pass(self, model, input_tensor) -> dict:
        """Upstream's flat report of one forward pass, built from ``profile`` (timed on zeros
        of ``input_tensor``'s shape and dtype): parameters, flops (per sample, upstream's
        convention: ``batch_flops`` over the first axis), batch_flops (``count_flops``, the whole
        batch), latency_ms (median), gflops_per_second (batch_flops over the latency),
        parameter_memory_mb, peak_memory_mb. Upstream's bottleneck and "efficiency" guesses
        (against an assumed 100 GFLOP/s peak) are not reproduced.

        Args:
            model: a Layer (or any callable model with ``parameters()``).
            input_tensor: a Tensor or array whose shape and dtype to profile with.
        """
        arr = np.asarray(getattr(input_tensor, "data", input_tensor))
        rep = self.profile(model, arr.shape, dtype=arr.dtype)
        mb = MB_TO_BYTES
        params = list(model.parameters()) if hasattr(model, "parameters") else []
        latency_ms = rep["latency"].median * 1e3
        batch = arr.shape[0] if arr.ndim > 1 and arr.shape[0] > 0 else 1
        return {"parameters": rep["parameters"], "flops": rep["flops"] // batch, "batch_flops": rep["flops"],
                "latency_ms": latency_ms,
                "gflops_per_second": (rep["flops"] / 1e9) / max(latency_ms / 1000.0, 1e-6),
                "parameter_memory_mb": sum(p.data.nbytes for p in params) / mb,
                "peak_memory_mb": rep["memory"]["combined_peak_bytes"] / mb}

    def profile_backward_pass(self, model, input_tensor, loss_fn=None) -> dict:
        """Upstream's training-step report, *measured*: ``profile_forward_pass`` plus the
        median time of forward + backward (loss = ``loss_fn(output)``, default
        ``output.sum()``); backward_latency_ms is the difference. backward_flops is upstream's
        2x-forward estimate. Gradients of ``model``'s parameters are cleared afterwards.

        Args:
            model: a Layer with parameters.
            input_tensor: a Tensor or array to run the step on.
            loss_fn: optional callable turning the output into a scalar Tensor.
        """
        from ..core.tensor import Tensor
        fwd = self.profile_forward_pass(model, input_tensor)
        x = Tensor(np.asarray(getattr(input_tensor, "data", input_tensor)))
        params = list(model.parameters())

        def step():
            out = model(x)
            (out.sum() if loss_fn is None else loss_fn(out)).backward()

        timed = self.measure_latency(step, warmup=2, iterations=10)
        for p in params:
            p.grad = None
        total_ms = timed.median * 1e3
        grad_mb = fwd["parameter_memory_mb"]
        total_flops = 3 * fwd["batch_flops"]
        return {"forward_flops": fwd["batch_flops"], "forward_latency_ms": fwd["latency_ms"],
                "forward_memory_mb": fwd["peak_memory_mb"],
                "backward_flops": 2 * fwd["batch_flops"], "backward_latency_ms": max(total_ms - fwd["latency_ms"], 0.0),
                "gradient_memory_mb": grad_mb, "total_flops": total_flops, "total_latency_ms": total_ms,
                "total_memory_mb": fwd["peak_memory_mb"] + grad_mb,
                "total_gflops_per_second": total_flops / timed.median / 1e9 if timed.median > 0 else float("nan"),
                "optimizer_memory_estimates": {"sgd": 0.0, "adam": 2 * grad_mb, "adamw": 2 * grad_mb}}

    def profile_layer(self, layer, input_shape) -> dict:
        """``profile_forward_pass`` on zeros of ``input_shape``, plus ``layer_type``.

        Args:
            layer: the layer to profile.
            input_shape: its input shape, batch included.
        """
        dtype = getattr(layer, "input_dtype", np.float32)
        rep = self.profile_forward_pass(layer, np.zeros(tuple(input_shape), dtype=dtype))
        return {"layer_type": type(layer).__name__, **rep}


def quick_profile(model, input_tensor, profiler=None) -> dict:
    """Print and return ``Profiler.profile_forward_pass(model, input_tensor)`` (upstream's helper).

    Args:
        model: the model to profile.
        input_tensor: a Tensor or array giving the input shape and dtype.
        profiler: a Profiler to use (a new one by default).
    """
    rep = (profiler or Profiler()).profile_forward_pass(model, input_tensor)
    print("Quick profile:")
    print(f"   Parameters: {rep['parameters']:,}")
    print(f"   FLOPs: {rep['flops']:,}")
    print(f"   Latency: {rep['latency_ms']:.3f} ms")
    print(f"   Peak memory: {rep['peak_memory_mb']:.2f} MB")
    return rep


def analyze_weight_distribution(model, percentiles=(10, 25, 50, 75, 90)) -> dict:
    """Statistics of |w| over every parameter of ``model`` (what magnitude pruning would
    cut): total_weights, mean, std, min, max, ``percentile_<p>`` for each p, and
    ``below_threshold_0001`` / ``_001`` / ``_01``, the percent of |w| under 0.001, 0.01, 0.1.

    Args:
        model: a Layer (or anything with ``parameters()`` or a ``weight``).
        percentiles: the percentiles of |w| to report.
    """
    if hasattr(model, "parameters"):
        params = list(model.parameters())
    elif getattr(model, "weight", None) is not None:
        params = [model.weight]
    else:
        params = []
    if not params:
        return {"error": "No weights found"}
    w = np.abs(np.concatenate([np.asarray(p.data, dtype=np.float64).reshape(-1) for p in params]))
    stats = {"total_weights": int(w.size), "mean": float(w.mean()), "std": float(w.std()),
             "min": float(w.min()), "max": float(w.max())}
    for q in percentiles:
        stats[f"percentile_{q}"] = float(np.percentile(w, q))
    for t in (0.001, 0.01, 0.1):
        stats[f"below_threshold_{str(t).replace('.', '')}"] = float(np.mean(w < t) * 100)
    return stats
