"""benchmarks/bench_scale.py: its FLOP formula against a hand count, and a --quick run on a tiny
point whose reported columns must be the ones computed from its raw measurements.

What this file owns: the checks that the scale benchmark's table is derived from what it
measured (tokens/s = B T / median step, GFLOP/s = FLOPs / median, ratios = ours / PyTorch's
medians, decode tokens/s from the sample timestamps) and that both frameworks computed the
same function (first-step losses, greedy tokens). It assumes the benchmark writes a .json of
raw measurements next to its report; PyTorch rows are checked when torch is installed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_scale.py"


@pytest.fixture(scope="module")
def bench(request):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_scale
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return bench_scale


def hand_count(d, layers, vocab, batch, seq):
    """Every matrix product of a training step, one by one: forward, then backward = 2 x forward
    (a product's input gradient and its weight gradient cost one forward product each)."""
    rows = batch * seq
    forward = 0
    for _ in range(layers):
        forward += 4 * (2 * rows * d * d)          # q, k, v, out projections
        forward += 2 * rows * d * (4 * d)          # fc1
        forward += 2 * rows * (4 * d) * d          # fc2
        forward += 2 * batch * seq * seq * d       # q k^T over all heads (full square)
        forward += 2 * batch * seq * seq * d       # p v
    forward += 2 * rows * d * vocab                # tied head
    return 3 * forward


@pytest.mark.parametrize("d, layers, vocab, batch, seq", [(8, 2, 11, 3, 5), (64, 1, 100, 1, 7), (4, 0, 9, 2, 2)])
def test_step_flops_match_a_hand_count(bench, d, layers, vocab, batch, seq):
    assert bench.step_flops(d, layers, vocab, batch, seq) == hand_count(d, layers, vocab, batch, seq)


def test_gpt2_small_step_is_about_0_8_tflop(bench):
    flops = bench.step_flops(768, 12, 50257, 4, 256)
    assert 0.75e12 < flops < 0.82e12, flops


def test_parameter_count_is_the_models(bench):
    from tinytorch.core.transformers import GPT
    for name in ("tiny", "d256-L3"):
        cfg = bench.SIZES[name]
        model = GPT(**cfg, tie_weights=True)
        assert bench.parameter_count(cfg) == sum(p.data.size for p in model.parameters())


def test_bad_options_are_refused_by_name():
    for extra, needle in ((["--shapes", "4by256"], "--shapes"), (["--sizes", "gpt9"], "unknown size")):
        done = subprocess.run([sys.executable, str(SCRIPT), "--quick", *extra], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
        assert done.returncode != 0 and needle in done.stderr, (extra, done.stderr[-500:])


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench_scale")
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--sizes", "tiny", "--shapes", "2x32",
                           "--new-tokens", "8", "--out", str(out) + os.sep],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = (out / "bench_scale.md").read_text()
    raw = json.loads((out / "bench_scale.json").read_text())
    return done.stdout, report, raw, out


def _row(report, *cells):
    """The report's table line holding all of `cells`."""
    lines = [ln for ln in report.splitlines() if ln.startswith("|") and all(f"| {c} |" in ln for c in cells)]
    assert len(lines) == 1, (cells, lines)
    return lines[0]


def test_training_columns_come_from_the_measured_steps(bench, quick_run):
    _, report, raw, _ = quick_run
    train = [r for r in raw["results"] if r["kind"] == "train"]
    assert train and all("error" not in r for r in train)
    for r in train:
        steps = np.asarray(r["step_s"])
        assert len(steps) == 2 and np.all(steps > 0)  # --quick: 2 timed steps
        median = float(np.median(steps))
        tokens_per_s = r["batch"] * r["seq"] / median
        assert r["tokens_per_s"] == pytest.approx(tokens_per_s, rel=1e-12)
        flops = hand_count(r["embed_dim"], r["num_layers"], r["vocab_size"], r["batch"], r["seq"])
        assert r["gflops_per_s"] == pytest.approx(flops / median / 1e9, rel=1e-12)
        line = _row(report, r["framework"], f"{r['batch']}x{r['seq']}")
        assert f"| {median:.3f} |" in line and f"| {tokens_per_s:,.0f} |" in line
        assert f"| {flops / 1e9 / median:.1f} |" in line and f"| {r['first_loss']:.6f} |" in line
        assert r["rss_peak_bytes"] >= r["rss_imports_bytes"] > 0


def test_decode_columns_come_from_the_sample_times(quick_run):
    _, report, raw, _ = quick_run
    infer = [r for r in raw["results"] if r["kind"] == "infer"]
    assert infer and all("error" not in r for r in infer)
    for r in infer:
        stamps = np.asarray(r["sample_times_s"])
        assert len(stamps) == 8 and len(r["tokens"]) == 8 and np.all(np.diff(stamps) > 0)
        tps = 7 / (stamps[-1] - stamps[0])
        assert r["tokens_per_s"] == pytest.approx(tps, rel=1e-12)
        assert r["prefill_s"] == stamps[0]
        line = _row(report, r["framework"], str(r["prompt"]))
        assert f"| {tps:.1f} |" in line and f"| {stamps[0] * 1e3:.1f} |" in line


def test_both_frameworks_compute_the_same_function(quick_run):
    stdout, report, raw, _ = quick_run
    by = {(r["kind"], r["framework"]): r for r in raw["results"]}
    if ("train", "PyTorch") not in by:
        pytest.skip("PyTorch is not installed")
    ours, theirs = by[("train", "TinyTorch")], by[("train", "PyTorch")]
    assert abs(ours["first_loss"] - theirs["first_loss"]) < 1e-4
    assert abs(ours["first_loss"] - np.log(512)) < 0.1  # random init: near uniform over the vocab
    assert "first-step losses:" in stdout and f"{ours['first_loss']:.6f}" in stdout
    # greedy decoding of the same weights picks the same tokens (tiny model: no near ties expected)
    assert by[("infer", "TinyTorch")]["tokens"] == by[("infer", "PyTorch")]["tokens"]
    # the comparison row is the ratio of the two medians
    ratio = np.median(ours["step_s"]) / np.median(theirs["step_s"])
    assert f"= **{ratio:.2f}x**" in _row(report, "train 2x32")
    dec = by[("infer", "TinyTorch")]["tokens_per_s"] / by[("infer", "PyTorch")]["tokens_per_s"]
    assert f"= **{dec:.2f}x**" in _row(report, "decode")


def test_progress_and_figure(quick_run):
    stdout, report, _, out = quick_run
    assert "[1/4] start tiny train 2x32, 1 thr, TinyTorch" in stdout or "[1/2] start tiny train" in stdout
    assert "ETA" in stdout and "done in" in stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    png = out / "bench_scale.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "bench_scale.png" in report
