"""Upstream perf/ and extensions/ names (harvard-edge/cs249r_book tinytorch/tinytorch/perf,
extensions) called the upstream way, checked against this project's implementation, a
float64 reference or PyTorch."""
import statistics

import numpy as np
import pytest
import torch

import tinytorch
from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Linear, Sequential
from tinytorch.core.tensor import Tensor


def f32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------ memoization (KV cache)

def test_memoization_kvcache_is_ours_with_upstream_protocol():
    from tinytorch.core import kv_cache
    from tinytorch.perf import memoization
    assert memoization.KVCache is kv_cache.KVCache
    cache = memoization.KVCache(batch_size=1, max_seq_len=10, num_layers=2, num_heads=4, head_dim=8)
    assert cache.seq_pos == 0
    k0, v0 = f32(1, 4, 1, 8, seed=1), f32(1, 4, 1, 8, seed=2)
    for layer in range(2):
        cache.update(layer, Tensor(k0), Tensor(v0))
    assert cache.seq_pos == 0  # update does not advance (upstream)
    cache.advance()
    assert cache.seq_pos == 1
    k1, v1 = f32(1, 4, 1, 8, seed=3), f32(1, 4, 1, 8, seed=4)
    for layer in range(2):
        cache.update(layer, Tensor(k1), Tensor(v1))
    cache.advance()
    keys, values = cache.get(0)
    assert keys.shape == (1, 4, 2, 8) and not keys.requires_grad
    np.testing.assert_array_equal(keys.data, np.concatenate([k0, k1], axis=2))
    np.testing.assert_array_equal(values.data, np.concatenate([v0, v1], axis=2))
    usage = cache.get_memory_usage()
    assert usage["cache_tensors"] == 4 and usage["total_elements"] == 2 * 2 * 4 * 10 * 8
    assert usage["total_mb"] == pytest.approx(cache.memory_bytes() / 2 ** 20)
    with pytest.raises(ValueError):
        cache.get(2)
    cache.reset()
    assert cache.seq_pos == 0 and cache.get(1)[0].shape == (1, 4, 0, 8)


def test_enable_disable_kv_cache_sizes_for_the_model_and_decodes_exactly():
    from tinytorch.core.transformer import GPT
    from tinytorch.perf.memoization import disable_kv_cache, enable_kv_cache
    tinytorch.manual_seed(0)
    model = GPT(vocab_size=30, embed_dim=16, num_layers=2, num_heads=4, max_seq_len=16)
    cache = enable_kv_cache(model)
    assert model._cache_enabled and model._kv_cache is cache
    assert (cache.num_layers, cache.num_heads, cache.head_dim, cache.max_seq_len) == (2, 4, 4, 16)
    ids = np.array([[3, 1, 4, 1, 5]])
    full = model(ids).data
    steps = []
    with tinytorch.no_grad():
        for t in range(ids.shape[1]):
            steps.append(model(ids[:, t:t + 1], kv_cache=cache).data[:, -1])
            cache.advance()
    np.testing.assert_allclose(np.stack(steps, axis=1), full, atol=1e-4)
    disable_kv_cache(model)
    assert not model._cache_enabled and not hasattr(model, "_kv_cache")
    with pytest.raises(ValueError, match="embed_dim"):
        enable_kv_cache(Linear(2, 2))


# ------------------------------------------------------------------ quantization

def test_quantize_dequantize_int8_upstream_tuple():
    from tinytorch.core import quantization as core_q
    from tinytorch.perf.quantization import dequantize_int8, quantize_int8
    x = Tensor([[-1.0, 0.0, 2.0], [0.5, 1.5, -0.5]])
    q, scale, zero_point = quantize_int8(x)
    assert isinstance(q, Tensor) and q.data.dtype == np.int8
    assert isinstance(scale, float) and isinstance(zero_point, int)
    qp = core_q.compute_qparams(x, symmetric=False)
    np.testing.assert_array_equal(q.data, core_q.quantize(x, qp))
    assert scale == pytest.approx(3.0 / 255)  # range [-1, 2] over 255 steps, as upstream
    back = dequantize_int8(q, scale, zero_point)
    np.testing.assert_allclose(back.data, (q.data.astype(np.float64) - zero_point) * scale, rtol=1e-6)
    assert np.abs(back.data - x.data).max() <= scale / 2 + 1e-6
    # float64 reference of the formula on random data (ties at .5 are measure-zero there)
    r = f32(64, seed=7)
    qr, sr, zr = quantize_int8(Tensor(r))
    ref = np.clip(np.round(r.astype(np.float64) / sr) + zr, -128, 127)
    assert np.abs(qr.data.astype(np.float64) - ref).max() <= 1  # float32 reciprocal vs float64
    assert np.mean(qr.data == ref) > 0.95


def test_quantized_linear_and_quantize_model_upstream_calls():
    from tinytorch.perf.quantization import QuantizedLinear, quantize_model
    tinytorch.manual_seed(0)
    lin = Linear(16, 8)
    lin.bias.data[:] = f32(8, seed=9)
    ql = QuantizedLinear(lin)
    x = Tensor(f32(4, 16, seed=2))
    ref = x.data.astype(np.float64) @ lin.weight.data + lin.bias.data
    assert np.abs(ql(x).data - ref).max() < 0.05 * np.abs(ref).max()
    assert ql.q_weight.data.dtype == np.int8 and ql.weight_zero_point == 0
    np.testing.assert_allclose(ql.q_weight.data * ql.weight_scale[0], ql.dequantized_weight(), rtol=1e-6)
    ql.calibrate([x, Tensor(f32(2, 16, seed=3))])
    assert ql.input_scale > 0
    usage = ql.memory_usage()
    assert usage["original_bytes"] == (16 * 8 + 8) * 4 and usage["compression_ratio"] > 1
    model = Sequential(Linear(10, 5), ReLU(), Linear(5, 2))
    x = Tensor(f32(3, 10))
    before = model(x).data
    assert quantize_model(model, calibration_data=[x]) is None
    assert all(isinstance(m, QuantizedLinear) for m in (model[0], model[2]))
    np.testing.assert_allclose(model(x).data, before, atol=0.05)
    with pytest.raises(ValueError):
        quantize_model(Linear(3, 3))


# ------------------------------------------------------------------ compression

def test_compression_upstream_functions():
    from tinytorch.perf.compression import (KnowledgeDistillation, low_rank_approximate, magnitude_prune,
                                            measure_sparsity, structured_prune)
    tinytorch.manual_seed(0)
    model = Sequential(Linear(100, 50), Linear(50, 10))
    assert measure_sparsity(model) == 0.0
    assert magnitude_prune(model, sparsity=0.8) is model
    assert measure_sparsity(model) == pytest.approx(80.0)
    allw = np.concatenate([model[0].weight.data.ravel(), model[1].weight.data.ravel()])
    assert np.count_nonzero(allw == 0) == 0.8 * allw.size  # one global threshold
    model = Sequential(Linear(100, 50), Linear(50, 10))
    head = model[1].weight.data.copy()
    structured_prune(model, prune_ratio=0.3)
    w = model[0].weight.data
    # the hidden layer loses 15 of its 50 output columns; the classifier head is kept whole
    assert (np.linalg.norm(w, axis=0) == 0).sum() == 15
    assert measure_sparsity(model) == pytest.approx(100.0 * 15 * 100 / (100 * 50 + 50 * 10))
    np.testing.assert_array_equal(model[1].weight.data, head)
    m = f32(100, 50).astype(np.float64)
    u, s, vt = low_rank_approximate(m, rank_ratio=0.3)
    assert u.shape == (100, 15) and s.shape == (15,) and vt.shape == (15, 50)
    tu, ts, tvt = torch.linalg.svd(torch.tensor(m), full_matrices=False)
    np.testing.assert_allclose(s, ts[:15].numpy(), rtol=1e-10)
    np.testing.assert_allclose(u @ np.diag(s) @ vt, (tu[:, :15] @ torch.diag(ts[:15]) @ tvt[:15]).numpy(), atol=1e-8)
    with pytest.raises(ValueError):
        low_rank_approximate(np.ones(3))
    kd = KnowledgeDistillation(Linear(4, 3), Linear(4, 3), temperature=4.0, alpha=0.8)
    s_logits = Tensor(f32(5, 3, seed=1), requires_grad=True)
    t_logits = Tensor(f32(5, 3, seed=2))
    labels = Tensor([0, 1, 2, 1, 0])  # upstream's float labels are accepted here
    loss = kd.distillation_loss(s_logits, t_logits, labels)
    ts_ = torch.tensor(s_logits.data, dtype=torch.float64)
    tt_ = torch.tensor(t_logits.data, dtype=torch.float64)
    # upstream's objective: the soft term is not scaled by T^2 (core.compression's default is)
    soft = torch.nn.functional.kl_div(torch.log_softmax(ts_ / 4, -1), torch.softmax(tt_ / 4, -1),
                                      reduction="batchmean")
    hard = torch.nn.functional.cross_entropy(ts_, torch.tensor([0, 1, 2, 1, 0]))
    assert float(loss.data) == pytest.approx(float(0.8 * soft + 0.2 * hard), rel=1e-5)
    loss.backward()
    assert s_logits.grad is not None


# ------------------------------------------------------------------ acceleration

def test_acceleration_upstream_functions():
    from tinytorch.perf.acceleration import fused_gelu, tiled_matmul, vectorized_matmul
    a, b = f32(33, 20), f32(20, 17, seed=1)
    ref = a.astype(np.float64) @ b
    np.testing.assert_allclose(vectorized_matmul(Tensor(a), Tensor(b)).data, ref, atol=1e-4)
    np.testing.assert_allclose(vectorized_matmul(Tensor(f32(2, 3, 4)), Tensor(f32(2, 4, 5))).data,
                               np.matmul(f32(2, 3, 4), f32(2, 4, 5)), atol=1e-5)
    np.testing.assert_allclose(tiled_matmul(Tensor(a), Tensor(b), tile_size=8).data, ref, atol=1e-4)
    for fn in (vectorized_matmul, tiled_matmul):
        with pytest.raises(ValueError):
            fn(Tensor(f32(3, 4)), Tensor(f32(5, 2)))
        with pytest.raises(ValueError):
            fn(Tensor(f32(3)), Tensor(f32(3)))
    x = np.array([-2, -1, 0, 1, 2], np.float32)
    np.testing.assert_allclose(fused_gelu(Tensor(x)).data,
                               torch.nn.functional.gelu(torch.tensor(x), approximate="tanh").numpy(), atol=1e-6)


# ------------------------------------------------------------------ profiling / benchmarking

def test_profiler_and_benchmark_result_upstream_names():
    from tinytorch.perf.benchmarking import BenchmarkResult
    from tinytorch.perf.profiling import Profiler
    p = Profiler()
    assert p.count_parameters(Linear(128, 64)) == 128 * 64 + 64
    assert p.count_flops(Linear(128, 64), (1, 128)) == 128 * 64 * 2
    values = [1.0, 2.0, 3.0, 4.0, 5.0]
    r = BenchmarkResult("test_metric", values, metadata={"k": 1})
    assert r.metric_name == "test_metric" and r.mean == 3.0 and r.median == 3.0
    assert r.std == pytest.approx(statistics.stdev(values))
    assert (r.min_val, r.max_val, r.count) == (1.0, 5.0, 5)
    half = 1.96 * statistics.stdev(values) / np.sqrt(5)
    assert (r.ci_lower, r.ci_upper) == pytest.approx((3.0 - half, 3.0 + half))
    assert r.to_dict()["mean"] == 3.0


# ------------------------------------------------------------------ extensions

def test_accelerator_probes_and_fallbacks():
    from tinytorch import extensions as ext
    from tinytorch.extensions import cuda_ops, mps_ops, triton_gelu
    assert ext.has_triton_support() is False and ext.has_mps_support() is False
    assert ext.has_cuda_support() is False and isinstance(ext.has_simd_support(), bool)
    for info in (triton_gelu.triton_build_info(), mps_ops.mps_build_info(), cuda_ops.cuda_build_info()):
        assert info["kernel"] is False and isinstance(info["detail"], str) and info["detail"]
    x, bias = f32(4, 8), f32(8, seed=1)
    ref = torch.nn.functional.gelu(torch.tensor(x + bias), approximate="tanh").numpy()
    out = ext.triton_fused_gelu(x, bias)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, ref, atol=1e-5)
    np.testing.assert_allclose(ext.triton_fused_gelu(Tensor(x), Tensor(bias)).data, ref, atol=1e-5)
    a, b = f32(6, 5), f32(5, 3, seed=2)
    for fn in (ext.mps_matmul, ext.cuda_matmul, ext.simd_matmul):
        out = fn(a, b)
        assert isinstance(out, np.ndarray)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, atol=1e-5)
    ta = Tensor(a, requires_grad=True)
    ext.mps_matmul(ta, Tensor(b)).sum().backward()
    np.testing.assert_allclose(ta.grad, np.ones((6, 3)) @ b.T, atol=1e-5)
    with pytest.raises(ValueError):
        ext.cuda_matmul(a, b, stage="warp")
    from tinytorch.extensions.simd_ops import compile_and_load_simd
    lib = compile_and_load_simd()
    assert (lib is not None) == ext.has_simd_support()
    assert cuda_ops.compile_and_load_cuda() is None


def test_lora_and_loss_scaler_upstream_calls():
    from tinytorch.extensions import LoRALinear, LossScaler
    from tinytorch.core.optimizers import SGD
    tinytorch.manual_seed(0)
    lora = LoRALinear(8, 4, rank=2)
    assert lora.A.shape == (8, 2) and lora.B.shape == (2, 4)
    assert np.all(lora.B.data == 0)
    x = Tensor(f32(3, 8))
    np.testing.assert_allclose(lora(x).data, x.data @ lora.weight.data + lora.bias.data, atol=1e-5)
    scaler = LossScaler(scale=1024.0)
    p = Tensor(np.ones(3, np.float32), requires_grad=True)
    opt = SGD([p], lr=0.1)
    scaler.backward((p * p).sum())
    np.testing.assert_allclose(p.grad, 2 * 1024.0 * np.ones(3))
    scaler.unscale_(opt)
    np.testing.assert_allclose(p.grad, 2 * np.ones(3))


def test_compressor_facade_fractions():
    from tinytorch.perf.compression import Compressor
    tinytorch.manual_seed(0)
    model = Sequential(Linear(40, 20), Linear(20, 10))
    assert Compressor.measure_sparsity(model) == 0.0
    model, stats = Compressor.compress_model(model, {"magnitude_sparsity": 0.5})
    assert stats["original_sparsity"] == 0.0 and stats["final_sparsity"] == pytest.approx(0.5)
    assert stats["compression_ratio"] == pytest.approx(2.0)
    assert Compressor.structured_prune(model, 0.5) is model


def test_profiler_upstream_reports_and_helpers(capsys):
    from tinytorch.perf.profiling import Profiler, analyze_weight_distribution, quick_profile
    tinytorch.manual_seed(0)
    layer = Linear(256, 128)
    rep = Profiler().profile_layer(layer, (32, 256))
    assert rep["layer_type"] == "Linear" and rep["parameters"] == 256 * 128 + 128
    # upstream's current report: flops per sample, batch_flops (count_flops) for the whole batch
    assert rep["batch_flops"] == Profiler().count_flops(layer, (32, 256)) == 2 * 32 * 256 * 128
    assert rep["flops"] == 2 * 256 * 128
    assert rep["gflops_per_second"] == pytest.approx(rep["batch_flops"] / 1e9 / (rep["latency_ms"] / 1e3))
    assert rep["latency_ms"] > 0 and rep["gflops_per_second"] > 0
    assert rep["parameter_memory_mb"] == pytest.approx((256 * 128 + 128) * 4 / 2 ** 20)
    out = quick_profile(Linear(128, 64), Tensor(f32(16, 128)))
    assert "Parameters: 8,256" in capsys.readouterr().out and out["parameters"] == 8256
    model = Sequential(Linear(64, 32), ReLU(), Linear(32, 8))
    stats = analyze_weight_distribution(model)
    w = np.abs(np.concatenate([p.data.ravel().astype(np.float64) for p in model.parameters()]))
    assert stats["total_weights"] == w.size and stats["max"] == pytest.approx(w.max())
    assert stats["percentile_50"] == pytest.approx(np.median(w))
    assert stats["below_threshold_001"] == pytest.approx(100 * np.mean(w < 0.01))
    assert analyze_weight_distribution(ReLU()) == {"error": "No weights found"}


def test_quantizer_and_verify_helpers():
    from tinytorch.core.quantization import model_size_bytes
    from tinytorch.perf.compression import magnitude_prune, verify_pruning_works
    from tinytorch.perf.quantization import QuantizedLinear, Quantizer, quantize_model, verify_quantization_works
    tinytorch.manual_seed(0)
    original, quantized = Sequential(Linear(100, 50)), Sequential(Linear(100, 50))
    quantize_model(quantized)
    assert quantized.parameters() == []  # the float original is not kept as a sub-layer
    assert isinstance(quantized[0], QuantizedLinear) and quantized[0].original_layer.weight.shape == (100, 50)
    res = verify_quantization_works(original, quantized)
    assert res["verified"] and res["actual_reduction"] == pytest.approx(
        model_size_bytes(original) / model_size_bytes(quantized))
    with pytest.raises(AssertionError):
        verify_quantization_works(original, original)
    info = Quantizer.quantize_model(original)
    assert info["compression_ratio"] == pytest.approx(4.0) and len(info["quantized_layers"]) == 2
    cmp = Quantizer.compare_models(original, info)
    assert cmp["memory_saved_mb"] == pytest.approx(info["original_size_mb"] - info["quantized_size_mb"])
    q, s, z = Quantizer.quantize_tensor(original[0].weight)
    np.testing.assert_allclose(Quantizer.dequantize_tensor(q, s, z).data, original[0].weight.data, atol=s)
    magnitude_prune(original, 0.8)
    res = verify_pruning_works(original, 0.8)
    assert res["zeros"] == 4000 and res["total"] == 5050 and res["verified"]
    with pytest.raises(AssertionError):
        verify_pruning_works(Sequential(Linear(10, 10)), 0.8)


def test_profile_backward_pass_measures_a_training_step():
    from tinytorch.perf.profiling import Profiler
    tinytorch.manual_seed(0)
    model = Sequential(Linear(64, 32), ReLU(), Linear(32, 4))
    rep = Profiler().profile_backward_pass(model, Tensor(f32(16, 64)))
    fwd_flops = Profiler().count_flops(model, (16, 64))
    assert rep["forward_flops"] == fwd_flops and rep["backward_flops"] == 2 * fwd_flops
    assert rep["total_flops"] == 3 * fwd_flops and rep["total_latency_ms"] > 0
    assert rep["gradient_memory_mb"] == pytest.approx(sum(p.data.nbytes for p in model.parameters()) / 2 ** 20)
    assert rep["optimizer_memory_estimates"]["adam"] == pytest.approx(2 * rep["gradient_memory_mb"])
    assert all(p.grad is None for p in model.parameters())


def test_compile_graph_emits_a_fused_kernel_that_computes_func():
    from tinytorch.extensions.compile import TracedNode, compile_graph

    def f(x, w, b):
        return x * w + b * 2.0 + 1

    src = compile_graph(f, "x", "w", "b")
    assert src.startswith("def fused_kernel(x, w, b):")
    scope = {}
    exec(src, scope)
    x, w, b = f32(4, 3), f32(4, 3, seed=1), f32(4, 3, seed=2)
    np.testing.assert_allclose(scope["fused_kernel"](x, w, b), f(x, w, b), rtol=1e-6)
    t = scope["fused_kernel"](Tensor(x), Tensor(w), Tensor(b))
    np.testing.assert_allclose(t.data, f(x, w, b), rtol=1e-6)
    assert (2 * TracedNode("a")).name == "(2 * a)"
    with pytest.raises(TypeError):
        compile_graph(lambda a: 3, "a")
