"""`tinytorch scorecard`: every section runs in --quick mode, writes scorecard.md and its PNG
plots, and its numbers are sane against references computed here (shapes, float64, IEEE
float16 via NumPy), never against hard-coded results. Sections whose extension or device is
missing must say why instead of failing (forced with monkeypatch).

Each section runs once per test session (the ``card`` fixture caches it); the whole file is
meant to take well under 4 minutes on 2 cores.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from tinytorch.scorecard import SECTIONS, run_scorecard, section_names
from tinytorch.scorecard import fusion as fusion_section
from tinytorch.scorecard import offload as offload_section
from tinytorch.scorecard.results import Context

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_CACHE: dict = {}


@pytest.fixture(scope="session")
def out_root(tmp_path_factory):
    return tmp_path_factory.mktemp("scorecard")


def _card(name, out_root):
    if name not in _CACHE:
        out = os.path.join(str(out_root), name)
        (result,) = run_scorecard(quick=True, only=[name], out=out, use_tqdm=False)
        _CACHE[name] = (result, out)
    return _CACHE[name]


@pytest.fixture
def card(out_root):
    return lambda name: _card(name, out_root)


def _markdown(out):
    with open(os.path.join(out, "scorecard.md")) as f:
        return f.read()


@pytest.mark.parametrize("name", section_names())
def test_each_section_writes_markdown_and_its_plots(name, card):
    result, out = card(name)
    assert result.status in ("ok", "unavailable"), f"{name} {result.status}: {result.reason}"
    text = _markdown(out)
    assert f"## {SECTIONS[name].title}" in text and "## Machine" in text and "## Summary" in text
    if result.status == "unavailable":
        assert result.reason and f"unavailable: {result.reason}"[:60] in text.replace("**", "")
        return
    assert result.claims, f"{name} filed no claim"
    assert "Guide's claim" in text and "This machine" in text
    for c in result.claims:
        assert c.reproduced is not False or c.why, f"{name}: a NO row without its reason: {c}"
    assert result.plots, f"{name} wrote no plot"
    for p in result.plots:
        with open(p, "rb") as f:
            assert f.read(8) == PNG_MAGIC, p
        assert f"({os.path.basename(p)})" in text


def test_machine_is_stated(card):
    from tinytorch import native
    from tinytorch.scorecard.machine import cpu_model
    _, out = card("loss_scaling")
    text = _markdown(out)
    assert cpu_model() in text
    info = native.info()
    if info["available"]:
        assert info["isa_active"] in text and info["library"] in text
    assert "NumPy " in text and "BLAS" in text and "threads:" in text


def test_lora_memory_matches_the_formula_from_shapes(card):
    result, _ = card("lora")
    d, k = result.numbers["shape"]
    full = result.numbers["Full fine-tuning"]
    assert full["trainable"] == d * k and full["adam"] == 2 * 4 * d * k
    for rank in (16, 8, 4):
        r = result.numbers[f"LoRA (r = {rank})"]
        assert r["trainable"] == rank * (d + k)
        assert r["adam"] == 2 * 4 * rank * (d + k)  # exp_avg and exp_avg_sq, float32
        assert math.isclose(1 - r["adam"] / full["adam"], 1 - rank * (d + k) / (d * k), rel_tol=1e-12)
        assert not r["frozen_grad"]
    assert all(c.reproduced for c in result.claims)


def test_loss_scaling_follows_ieee_float16(card):
    result, _ = card("loss_scaling")
    for g, r in result.numbers.items():
        # float16 backprop of the exact gradient g: what NumPy's float16 rounding gives
        assert r["raw"] == float(np.float16(g))
        assert math.isclose(r["scaled16"], float(np.float16(g * 65536.0)), rel_tol=2 ** -10)
        assert abs(r["unscaled"] - g) <= 2 ** -11 * g
    raws = {g: r["raw"] for g, r in result.numbers.items()}
    assert raws[2e-9] == 0.0 and raws[1e-7] > 0.0  # flushed vs subnormal
    no_rows = [c for c in result.claims if c.reproduced is False]
    assert any("subnormal" in c.why for c in no_rows)


def test_checkpoint_saves_memory_with_equal_gradients(card):
    result, _ = card("checkpoint")
    for L, r in result.numbers["measured"].items():
        assert r["act_ckpt"] < r["act_plain"], L
        assert r["grad_diff"] <= 1e-5 * max(1.0, r["grad_scale"])
        assert r["segments"] == round(math.sqrt(L))


def test_gemm_ladder_climbs(card):
    result, _ = card("gemm")
    g = {k: v["gflops"] for k, v in result.numbers.items()}
    assert all(v > 0 for v in g.values())
    assert g["blas"] > g["python"]
    if "simd" in g:
        assert g["simd"] > g["blocked_scalar"] > 0 and g["simd"] > g["python"]


def test_gelu_parity_and_speed(card):
    result, _ = card("gelu")
    assert result.numbers["max_error"] < 1e-5 * 10  # float32 kernel against float64
    if result.numbers["path"].startswith("native"):
        assert result.numbers["speedup"] > 1.0


def test_contention_times_both_counts_under_load(card):
    """The section measured under busy cores and reports what the pool did (no timing
    asserts: the verdict is the card's, the mechanism's tests are test_threading.py)."""
    import tinytorch
    result, _ = card("contention")
    if tinytorch.get_num_threads() < 2:
        assert result.status == "unavailable" and "nothing to compare" in result.reason
        return
    n = result.numbers
    assert n["busy_cores"] == n["threads"] - 1 >= 1
    for call in ("bias + GELU 512 x 1024", "GEMM 256 x 256 x 256"):
        one, many = n[call]["one"], n[call]["default"]
        assert 0 < one[0] <= one[1] <= one[2] and 0 < many[0] <= many[1] <= many[2]
        assert n[call]["p50_ratio"] == pytest.approx(many[0] / one[0])
    assert {"jobs", "stalls", "one_core_jobs", "backed_off_jobs"} <= set(n["pool"])
    assert len(result.claims) == 2


def test_contention_on_one_thread_says_why(tmp_path):
    import tinytorch
    before = tinytorch.get_num_threads()
    tinytorch.set_num_threads(1)
    try:
        (result,) = run_scorecard(quick=True, only=["contention"], out=str(tmp_path), use_tqdm=False)
    finally:
        tinytorch.set_num_threads(before)
    assert result.status == "unavailable", result
    assert "uses 1 thread" in result.reason and "tt_set_num_threads(1)" in result.reason, result.reason


def test_the_busy_loops_stop_by_themselves():
    from tinytorch.scorecard.contention import start_load, stop_load
    procs = start_load(2, 0.2)
    try:
        assert [p.wait(timeout=30) for p in procs] == [0, 0]
    finally:
        stop_load(procs)


def test_attention_memory_stays_linear(card):
    result, _ = card("attention")
    rows = result.numbers["rows"]
    assert result.numbers["max_error"] < 1e-4
    first, last = rows[0], rows[-1]
    flash_growth = last["flash_bytes"] / first["flash_bytes"]
    stock_growth = last["stock_bytes"] / first["stock_bytes"]
    s_ratio = last["S"] / first["S"]
    assert flash_growth < 1.5 * s_ratio            # O(S d)
    assert stock_growth > 0.5 * s_ratio ** 2       # the stock path really holds S x S matrices
    assert last["stock_ms"] > 0 and last["flash_ms"] > 0


def test_fusion_traffic_when_available(card):
    result, _ = card("fusion")
    if result.status == "unavailable":
        assert "compile_graph" in result.reason or "CompiledGraph" in result.reason or result.reason
        return
    n = fusion_section.ELEMENTS
    # eager: t = x + b reads 2n, writes n; y = t * s reads n, writes n; fused: reads 2n, writes n
    assert math.isclose(result.numbers["eager_mb"], 5 * n * 4 / 1e6, rel_tol=0.02)  # 200 MB
    assert math.isclose(result.numbers["fused_mb"], 3 * n * 4 / 1e6, rel_tol=0.02)  # 120 MB
    assert result.numbers["max_error"] is None or result.numbers["max_error"] < 1e-5


def _ctx(tmp_path):
    from tinytorch.scorecard.progress import SectionBar
    return Context(quick=True, out=str(tmp_path), progress=lambda n, label: SectionBar(n, label, use_tqdm=False),
                   plots_enabled=False)


def test_fusion_without_the_extension_says_why(monkeypatch, tmp_path):
    from tinytorch import extensions
    monkeypatch.delattr(extensions, "compile_graph", raising=False)
    res = fusion_section.run(_ctx(tmp_path))
    assert res.status == "unavailable" and "compile_graph" in res.reason


def test_fusion_with_a_failing_or_old_extension_says_why(monkeypatch, tmp_path):
    from tinytorch import extensions

    def broken(fn, *arrays):
        raise RuntimeError("no compiler")
    monkeypatch.setattr(extensions, "compile_graph", broken, raising=False)
    res = fusion_section.run(_ctx(tmp_path))
    assert res.status == "unavailable" and "RuntimeError: no compiler" in res.reason
    monkeypatch.setattr(extensions, "compile_graph", lambda fn, *a: "def fused_kernel(x): ...", raising=False)
    res = fusion_section.run(_ctx(tmp_path))
    assert res.status == "unavailable" and "str" in res.reason


def test_fusion_reads_a_report_dict(monkeypatch, tmp_path):
    """The section's arithmetic on a stand-in CompiledGraph whose report is exact."""
    from tinytorch import extensions
    n = fusion_section.ELEMENTS

    class FakeGraph:
        def __init__(self, fn):
            self.fn = fn

        def __call__(self, *arrays):
            return self.fn(*arrays)

        def report(self):
            return {"dram_bytes_eager": 5 * n * 4, "dram_bytes_fused": 3 * n * 4, "executor": "stand-in"}
    monkeypatch.setattr(extensions, "compile_graph", lambda fn, *a: FakeGraph(fn), raising=False)
    res = fusion_section.run(_ctx(tmp_path))
    assert res.status == "ok"
    assert res.numbers["executor"] == "stand-in" and math.isclose(res.numbers["saved"], 40.0)
    assert res.claims[0].reproduced and res.claims[1].reproduced


def test_scalesim_without_the_extension_says_why(monkeypatch, tmp_path):
    from tinytorch import extensions
    from tinytorch.scorecard import scalesim as scalesim_section
    monkeypatch.delattr(extensions, "scalesim", raising=False)
    monkeypatch.setitem(sys.modules, "tinytorch.extensions.scalesim", None)  # import now fails
    res = scalesim_section.run(_ctx(tmp_path))
    assert res.status == "unavailable" and "scalesim" in res.reason


def test_scalesim_cycles_when_available(card):
    result, _ = card("scalesim")
    if result.status != "ok":
        assert result.reason
        return
    cycles = result.numbers["cycles"]
    assert result.numbers["gemms"] > 0 and 0 < cycles[128] < cycles[32]


def test_offload_napkin_and_gpu_rows(card, monkeypatch, tmp_path):
    for n in (256, 1000, 4096):
        assert math.isclose(offload_section.gemm_intensity(n), (2 * n ** 3) / (3 * n * n * 4))
    result, _ = card("offload")
    from tinytorch.backends import status
    if not status("cuda")[0] and not status("mps")[0]:
        gpu_rows = [c for c in result.claims if "offload speedup" in c.row]
        assert gpu_rows and all(c.reproduced is None and "unavailable" in c.why for c in gpu_rows)
    # the measured path, with a stand-in device 10x faster than the CPU measured in the same call
    monkeypatch.setattr(offload_section, "gpu_matmul_timer",
                        lambda: ("stand-in GPU", lambda a, b: (0.001, None), ""))
    res = offload_section.run(_ctx(tmp_path))
    rows = [c for c in res.claims if "offload speedup" in c.row]
    assert rows and all(c.reproduced is not None for c in rows)
    assert "stand-in GPU" in rows[0].measured


def test_a_failing_section_does_not_lose_the_card(monkeypatch, tmp_path):
    from tinytorch.scorecard import loss_scaling

    def boom(ctx):
        raise ZeroDivisionError("injected")
    monkeypatch.setattr(loss_scaling, "run", boom)
    results = run_scorecard(quick=True, only=["loss_scaling", "offload"], out=str(tmp_path), use_tqdm=False)
    assert [r.status for r in results] == ["failed", "ok"]
    assert "ZeroDivisionError: injected" in results[0].reason
    assert "failed: ZeroDivisionError: injected" in _markdown(str(tmp_path))


def test_unknown_section_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="nope"):
        run_scorecard(only=["nope"], out=str(tmp_path))


def test_plain_progress_lines_have_an_eta(tmp_path, capsys):
    run_scorecard(quick=True, only=["loss_scaling"], out=str(tmp_path), use_tqdm=False)
    err = capsys.readouterr().err
    assert "run ETA" in err and "section ETA" in err and "[loss_scaling] 3/3" in err


def test_the_command_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tinytorch", "scorecard", "--quick", "--only", "loss_scaling",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Loss scaling" in done.stdout and "scorecard.md" in done.stdout
    assert os.path.exists(tmp_path / "scorecard.md")
    bad = subprocess.run([sys.executable, "-m", "tinytorch", "scorecard", "--only", "nope"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_the_run_eta_follows_the_pace():
    from tinytorch.scorecard.progress import RunProgress, format_seconds
    p = RunProgress({"a": 10.0, "b": 20.0, "c": 30.0}, use_tqdm=False)
    assert p.eta() == 60.0
    p.end("a", 2.0, "ok")            # five times faster than estimated
    assert p.eta() < 50.0            # the remaining estimate, scaled down
    p.end("b", 200.0, "ok")          # then ten times slower
    assert p.eta() > 30.0
    assert format_seconds(185) == "3 min 05 s" and format_seconds(4.2) == "4 s"


def test_without_matplotlib_or_tqdm_the_card_says_so(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now fails
    monkeypatch.setitem(sys.modules, "tqdm", None)
    (res,) = run_scorecard(quick=True, only=["loss_scaling"], out=str(tmp_path), use_tqdm=True)
    assert res.status == "ok" and not res.plots
    assert not list(tmp_path.glob("*.png"))
    text = _markdown(str(tmp_path))
    assert "Plots: none (matplotlib is not usable" in text and "pip install matplotlib" in text
    captured = capsys.readouterr()
    assert "no plots: matplotlib is not usable" in captured.out
    assert "[loss_scaling] 1/3" in captured.err  # plain progress lines instead of a bar


def test_importing_the_scorecard_loads_no_optional_heavy_package():
    code = ("import sys, importlib\nimport tinytorch.scorecard as s\n"
            "for n in s.section_names(): importlib.import_module('tinytorch.scorecard.' + n)\n"
            "print(' '.join(m for m in ('torch', 'triton', 'numexpr', 'scalesim', 'matplotlib', 'tqdm')"
            " if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"imported at import time: {done.stdout}"
