"""The SCALE-Sim bridge: tracer, file formats, the real simulator, the parser, the analytical model.

Tests marked by the ``scalesim`` fixture run the real SCALE-Sim 3.0.0 in its managed
environment (created on first use, ~15 s); they skip, saying why, only when no SCALE-Sim
interpreter exists and PyPI cannot be reached to make one. The parser tests read a real
SCALE-Sim output committed under tests/extensions/data/scalesim/ and need no simulator.
"""
import csv
import math
import os
import socket
import sys
import textwrap

import numpy as np
import pytest

from tinytorch.core import acceleration as acc
from tinytorch.core import random as tt_random
from tinytorch.core.activations import ReLU
from tinytorch.core.layers import Flatten, Linear, Sequential
from tinytorch.core.spatial import Conv2d, MaxPool2d, SimpleCNN
from tinytorch.core.tensor import Tensor
from tinytorch.core.transformers import GPT
from tinytorch.extensions import (ArrayConfig, Gemm, MalformedReportError, ScaleSimError, ScaleSimTimeout,
                                  ScaleSimUnavailable, SimulatedLinear, simulate, trace_gemms)
from tinytorch.extensions.scalesim import runner
from tinytorch.extensions.scalesim import simulation
from tinytorch.extensions.scalesim import (analytical_layer, config_text, parse_run, read_report, run_scalesim,
                                           summarize_traces, topology_text, write_inputs)

DATA = os.path.join(os.path.dirname(__file__), "data", "scalesim")
SAMPLE_GEMMS = [Gemm("ref", 128, 256, 64), Gemm("odd", 7, 13, 5)]  # what the sample was made from
# Awkward shapes (1, odd, prime, wider and narrower than the arrays) for the engine comparison.
SHAPES = [(1, 1, 1), (7, 13, 5), (31, 17, 97), (100, 50, 30), (17, 64, 256), (128, 256, 64)]


def _pypi_reachable() -> bool:
    try:
        with socket.create_connection(("pypi.org", 443), timeout=3):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def scalesim():
    """The SCALE-Sim interpreter (the managed venv is created on first use)."""
    ok, reason = runner.scalesim_status(install=True)
    if not ok:
        if not _pypi_reachable():
            pytest.skip(f"PyPI cannot be reached, so SCALE-Sim cannot be installed: {reason}")
        pytest.fail(f"SCALE-Sim should be installable here but is not: {reason}")
    return runner.scalesim_python(install=False)


def _csv_rows(path):
    """The report as {column: str} dicts with Python's csv module (an independent reader)."""
    with open(path, newline="") as f:
        rows = [[c.strip() for c in r] for r in csv.reader(f) if r]
    header = [h for h in rows[0] if h]
    return [dict(zip(header, r)) for r in rows[1:]]


# ---------------------------------------------------------------------------------- ArrayConfig, Gemm

@pytest.mark.parametrize("field", ["rows", "cols", "ifmap_sram_kb", "filter_sram_kb", "ofmap_sram_kb"])
@pytest.mark.parametrize("value", [0, -3])
def test_array_config_refuses_zero_and_negative_sizes(field, value):
    kwargs = {"rows": 32, "cols": 32, field: value}
    with pytest.raises(ValueError, match=field):
        ArrayConfig(**kwargs)


@pytest.mark.parametrize("kwargs,error,words", [
    ({"rows": 2.5, "cols": 4}, TypeError, "rows"),
    ({"rows": True, "cols": 4}, TypeError, "rows"),
    ({"rows": 4, "cols": 4, "dataflow": "rs"}, ValueError, "dataflow"),
    ({"rows": 4, "cols": 4, "bandwidth": 0, "bandwidth_mode": "user"}, ValueError, "bandwidth"),
    ({"rows": 4, "cols": 4, "bandwidth": 20}, ValueError, "bandwidth_mode='user'"),
    ({"rows": 4, "cols": 4, "bandwidth_mode": "fast"}, ValueError, "bandwidth_mode"),
    ({"rows": 4, "cols": 4, "run_name": "a b"}, ValueError, "run_name"),
])
def test_array_config_names_the_bad_field(kwargs, error, words):
    with pytest.raises(error, match=words):
        ArrayConfig(**kwargs)


def test_array_config_defaults_are_the_issue_contract():
    c = ArrayConfig(32, 32)
    assert (c.dataflow, c.ifmap_sram_kb, c.filter_sram_kb, c.ofmap_sram_kb, c.bandwidth) == ("ws", 64, 64, 64, 10)
    assert ArrayConfig(np.int64(8), 16).rows == 8 and c.replace(dataflow="os").dataflow == "os"


@pytest.mark.parametrize("bad", [{"M": 0}, {"K": -1}, {"N": 0}, {"batch": 0}])
def test_gemm_refuses_empty_products(bad):
    sizes = {"M": 2, "K": 3, "N": 4, **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        Gemm("g", **sizes)


# ---------------------------------------------------------------------------------- file formats

def test_topology_is_name_m_n_k_with_the_trailing_comma():
    text = topology_text([Gemm("blocks.0.q, proj", 3, 5, 7), Gemm("b", 11, 2, 13)])
    lines = text.splitlines()
    assert lines[0] == "Layer, M, N, K,"
    assert lines[1] == "blocks.0.q__proj, 3, 7, 5,"  # M, N, K order; no comma in the name
    assert all(line.endswith(",") for line in lines)
    with pytest.raises(ValueError, match="no GEMMs"):
        topology_text([])


def test_config_has_every_section_scalesim_reads():
    import configparser
    text = config_text(ArrayConfig(8, 16, "is", 32, 16, 8))
    cp = configparser.ConfigParser()
    cp.read_string(text)
    assert set(cp.sections()) == {"general", "architecture_presets", "layout", "sparsity", "run_presets"}
    arch = cp["architecture_presets"]
    assert (arch["ArrayHeight"], arch["ArrayWidth"], arch["Dataflow"]) == ("8", "16", "is")
    assert (arch["ifmapsramszkB"], arch["filtersramszkB"], arch["ofmapsramszkB"]) == ("32", "16", "8")
    assert cp["run_presets"]["InterfaceBandwidth"] == "CALC"
    user = configparser.ConfigParser()
    user.read_string(config_text(ArrayConfig(4, 4, bandwidth=3, bandwidth_mode="user")))
    assert user["run_presets"]["InterfaceBandwidth"] == "USER" and user["architecture_presets"]["Bandwidth"] == "3"
    with pytest.raises(TypeError, match="ArrayConfig"):
        config_text({"rows": 4})


def test_written_files_are_what_scalesim_reads(scalesim, tmp_path):
    """SCALE-Sim itself parses the files: its access counts prove it read M, N and K as written
    (weight stationary: the filter K x N is read once, the ifmap M x K once per column fold)."""
    rows, cols = 8, 4
    gemms = [Gemm("p", 5, 11, 3), Gemm("q", 2, 9, 13)]
    paths = write_inputs(gemms, ArrayConfig(rows, cols), str(tmp_path))
    run_scalesim(paths, str(tmp_path / "out"), layers=2, timeout=120, python=scalesim)
    detail = _csv_rows(tmp_path / "out" / "tinytorch" / "DETAILED_ACCESS_REPORT.csv")
    assert len(detail) == 2
    for g, row in zip(gemms, detail):
        assert int(row["SRAM Filter Reads"]) == g.K * g.N
        assert int(row["SRAM IFMAP Reads"]) == g.M * g.K * math.ceil(g.N / cols)


def test_a_row_without_the_trailing_comma_loses_k(scalesim, tmp_path):
    """Why the writer keeps the trailing comma: SCALE-Sim drops a row's last field."""
    paths = write_inputs([Gemm("p", 5, 11, 3)], ArrayConfig(8, 4), str(tmp_path))
    with open(paths["topology"], "w") as f:
        f.write("Layer, M, N, K\np, 5, 3, 11\n")
    with pytest.raises(ScaleSimError, match="at least 4 entries per row"):
        run_scalesim(paths, str(tmp_path / "out"), layers=1, timeout=120, python=scalesim)


# ---------------------------------------------------------------------------------- the real simulator

def test_issue_reference_figure_is_exactly_scalesims(scalesim, tmp_path):
    result = simulate([Gemm("ref", 128, 256, 64)], ArrayConfig(32, 32), engine="scalesim",
                      keep_output=str(tmp_path))
    assert result.engine == "scalesim"
    layer = result.layers[0]
    report = _csv_rows(tmp_path / "output" / "tinytorch" / "COMPUTE_REPORT.csv")[0]
    assert layer.cycles == int(report["Total Cycles"]) == 3551 == result.total_cycles
    assert layer.cycles_with_prefetch == int(report["Total Cycles (incl. prefetch)"]) == 7818
    assert layer.utilization == float(report["Overall Util %"]) and round(layer.utilization, 1) == 57.7
    assert layer.stall_cycles == int(report["Stall Cycles"])


def test_batched_and_repeated_products_count_in_the_totals(scalesim):
    gemms = [Gemm("a", 9, 20, 6, batch=3), Gemm("b", 9, 20, 6), Gemm("c", 4, 5, 33)]
    deduped = simulate(gemms, ArrayConfig(8, 8, "os"), engine="scalesim")
    full = simulate(gemms, ArrayConfig(8, 8, "os"), engine="scalesim", deduplicate=False)
    assert [l.cycles for l in deduped.layers] == [l.cycles for l in full.layers]
    assert [l.name for l in deduped.layers] == ["a", "b", "c"]
    assert deduped.total_cycles == 4 * full.layers[0].cycles + full.layers[2].cycles
    assert deduped.total_macs == 4 * 9 * 20 * 6 + 4 * 5 * 33


@pytest.mark.parametrize("rows,cols", [(8, 16), (16, 8)])
@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_analytical_model_against_scalesim(scalesim, rows, cols, dataflow):
    """The tolerance docs/scalesim.md states: cycles, utilisation, mapping efficiency and SRAM
    traffic equal; DRAM traffic within 1 %; cycles with prefetch within 35 %."""
    gemms = [Gemm(f"g{i}", *s) for i, s in enumerate(SHAPES)]
    config = ArrayConfig(rows, cols, dataflow)
    real = simulate(gemms, config, engine="scalesim")
    model = simulate(gemms, config, engine="analytical")
    assert model.engine == "analytical"
    for sim, est in zip(real.layers, model.layers):
        where = f"{config.label} {sim.M}x{sim.K}x{sim.N}"
        assert est.cycles == sim.cycles, where
        assert est.utilization == pytest.approx(sim.utilization, rel=1e-9), where
        assert est.mapping_efficiency == pytest.approx(sim.mapping_efficiency, rel=1e-9), where
        assert est.sram_reads == sim.sram_reads and est.sram_writes == sim.sram_writes, where
        assert est.dram_traffic == pytest.approx(sim.dram_traffic, rel=0.01), where
        assert est.cycles_with_prefetch == pytest.approx(sim.cycles_with_prefetch, rel=0.35), where


@pytest.mark.parametrize("shape,sram_kb,bandwidth", [((256, 128, 64), 1, 1), ((100, 50, 30), 2, 10),
                                                      ((64, 128, 32), 64, 1)])
def test_user_bandwidth_shows_stalls_and_the_model_is_a_lower_bound(scalesim, shape, sram_kb, bandwidth):
    config = ArrayConfig(16, 16, "ws", sram_kb, sram_kb, sram_kb, bandwidth=bandwidth, bandwidth_mode="user")
    real = simulate([Gemm("g", *shape)], config, engine="scalesim").layers[0]
    model = analytical_layer(Gemm("g", *shape), config)
    compute_only = analytical_layer(Gemm("g", *shape), ArrayConfig(16, 16, "ws")).cycles
    assert compute_only <= model.cycles <= real.cycles
    assert model.stall_cycles <= real.stall_cycles
    if sram_kb == 1:
        assert real.stall_cycles > 0 and model.stall_cycles > 0  # 1 kB cannot hold the operands


def test_auto_uses_scalesim_when_it_can_run(scalesim, monkeypatch):
    monkeypatch.setattr(simulation, "_auto_refusal", {})
    result = simulate(Gemm("g", 3, 4, 5), ArrayConfig(4, 4))
    assert result.engine == "scalesim" and "SCALE-Sim" in result.reason


def test_traces_are_summarised_with_the_peak_bandwidth(scalesim):
    result = simulate([Gemm("g", 20, 9, 7)], ArrayConfig(4, 4), engine="scalesim", with_traces=True)
    layer = result.layers[0]
    peak = layer.peak_dram_bandwidth
    assert set(peak) == {"ifmap", "filter", "ofmap"} and all(v >= 1 for v in peak.values())
    streams = layer.trace_summary
    assert streams["filter_sram"]["requests"] == layer.sram_reads["filter"]
    assert streams["ifmap_sram"]["requests"] == layer.sram_reads["ifmap"]
    assert streams["ofmap_sram"]["requests"] == layer.sram_writes["ofmap"]
    assert peak["ofmap"] == streams["ofmap_dram"]["peak"]


# ---------------------------------------------------------------------------------- the parser

def test_parser_reads_the_committed_scalesim_output():
    layers = parse_run(DATA, SAMPLE_GEMMS)
    compute = _csv_rows(os.path.join(DATA, "COMPUTE_REPORT.csv"))
    detail = _csv_rows(os.path.join(DATA, "DETAILED_ACCESS_REPORT.csv"))
    bandwidth = _csv_rows(os.path.join(DATA, "BANDWIDTH_REPORT.csv"))
    assert [l.name for l in layers] == ["ref", "odd"]
    for layer, c, d, b in zip(layers, compute, detail, bandwidth):
        assert layer.cycles == int(c["Total Cycles"])
        assert layer.cycles_with_prefetch == int(c["Total Cycles (incl. prefetch)"])
        assert layer.stall_cycles == int(c["Stall Cycles"])
        assert layer.utilization == float(c["Overall Util %"])
        assert layer.mapping_efficiency == float(c["Mapping Efficiency %"])
        assert layer.sram_reads == {"ifmap": int(d["SRAM IFMAP Reads"]), "filter": int(d["SRAM Filter Reads"])}
        assert layer.dram_writes == {"ofmap": int(d["DRAM OFMAP Writes"])}
        assert layer.avg_dram_bandwidth["ofmap"] == float(b["Avg OFMAP DRAM BW"])
    assert (layers[0].cycles, layers[0].cycles_with_prefetch) == (3551, 7818)  # the issue's figure


def test_trace_summary_counts_requests_and_the_peak():
    summary = summarize_traces(os.path.join(DATA, "layer1"))
    assert set(summary) == {f"{op}_{lv}" for op in ("ifmap", "filter", "ofmap") for lv in ("sram", "dram")}
    with open(os.path.join(DATA, "layer1", "FILTER_SRAM_TRACE.csv")) as f:
        counts = [sum(1 for a in row[1:] if a.strip() and float(a) >= 0) for row in csv.reader(f) if row]
    assert summary["filter_sram"] == {"requests": sum(counts), "peak": max(counts), "cycles": len(counts)}
    detail = _csv_rows(os.path.join(DATA, "DETAILED_ACCESS_REPORT.csv"))[1]
    assert summary["filter_sram"]["requests"] == int(detail["SRAM Filter Reads"])


def _copy_reports(tmp_path, edit=None, which="COMPUTE_REPORT.csv"):
    for name in ("COMPUTE_REPORT.csv", "BANDWIDTH_REPORT.csv", "DETAILED_ACCESS_REPORT.csv"):
        with open(os.path.join(DATA, name)) as f:
            text = f.read()
        if name == which and edit is not None:
            text = edit(text)
        (tmp_path / name).write_text(text)
    return str(tmp_path)


@pytest.mark.parametrize("edit,words", [
    (lambda t: t.replace("Stall Cycles", "Stalls"), "no column 'Stall Cycles'"),
    (lambda t: t.replace("3551", "lots"), "non-numeric"),
    (lambda t: t.rsplit("\n", 2)[0] + "\n", "1 layer rows for 2 GEMMs"),
    (lambda t: t.replace(", 0, 57.67", ", 57.67", 1), "fields, the header has"),
    (lambda t: "", "is empty"),
])
def test_malformed_reports_raise_a_clear_error(tmp_path, edit, words):
    folder = _copy_reports(tmp_path, edit)
    with pytest.raises(MalformedReportError, match=words):
        parse_run(folder, SAMPLE_GEMMS)
    assert issubclass(MalformedReportError, ValueError)


def test_a_missing_report_is_named(tmp_path):
    folder = _copy_reports(tmp_path)
    os.remove(os.path.join(folder, "BANDWIDTH_REPORT.csv"))
    with pytest.raises(MalformedReportError, match="BANDWIDTH_REPORT.csv does not exist"):
        parse_run(folder, SAMPLE_GEMMS)
    with pytest.raises(MalformedReportError, match="does not exist"):
        read_report(os.path.join(folder, "nothing.csv"))


# ---------------------------------------------------------------------------------- errors of the runner

def test_missing_simulator_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("TINYTORCH_SCALESIM_PYTHON", str(tmp_path / "no-python"))
    monkeypatch.setattr(simulation, "_auto_refusal", {})
    with pytest.raises(ScaleSimUnavailable, match="pip install scalesim==3.0.0"):
        simulate([Gemm("g", 2, 3, 4)], ArrayConfig(4, 4), engine="scalesim")
    fallback = simulate([Gemm("g", 2, 3, 4)], ArrayConfig(4, 4), engine="auto")
    assert fallback.engine == "analytical" and "TINYTORCH_SCALESIM_PYTHON" in fallback.reason


def test_no_install_when_forbidden(monkeypatch, tmp_path):
    monkeypatch.delenv("TINYTORCH_SCALESIM_PYTHON", raising=False)
    monkeypatch.setenv("TINYTORCH_CACHE", str(tmp_path))
    monkeypatch.setenv("TINYTORCH_SCALESIM_INSTALL", "0")
    ok, reason = runner.scalesim_status(install=True)
    assert not ok and "TINYTORCH_SCALESIM_INSTALL=0" in reason
    assert not (tmp_path / "scalesim-venv").exists()


def _fake_scalesim(folder, body):
    """A stand-in ``scalesim.scale`` module in the run folder (``python -m`` finds it there)."""
    pkg = folder / "out" / "scalesim"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "scale.py").write_text(textwrap.dedent(body))
    return write_inputs([Gemm("g", 2, 3, 4)], ArrayConfig(4, 4), str(folder))


def test_a_run_past_the_timeout_is_stopped(tmp_path):
    paths = _fake_scalesim(tmp_path, "import time\nprint('Running Layer 0', flush=True)\ntime.sleep(60)\n")
    with pytest.raises(ScaleSimTimeout, match="timeout of 1 s"):
        run_scalesim(paths, str(tmp_path / "out"), layers=1, timeout=1, python=sys.executable)
    assert issubclass(ScaleSimTimeout, TimeoutError)


def test_a_failing_simulator_reports_its_output(tmp_path):
    paths = _fake_scalesim(tmp_path, "import sys\nprint('ERROR: Topology file not found')\nsys.exit(3)\n")
    with pytest.raises(ScaleSimError, match="exited 3.*Topology file not found"):
        run_scalesim(paths, str(tmp_path / "out"), layers=1, timeout=30, python=sys.executable)
    with pytest.raises(ValueError, match="timeout"):
        run_scalesim(paths, str(tmp_path / "out"), layers=1, timeout=0, python=sys.executable)


def test_simulate_checks_its_arguments():
    with pytest.raises(ValueError, match="engine"):
        simulate([Gemm("g", 1, 2, 3)], ArrayConfig(4, 4), engine="fast")
    with pytest.raises(TypeError, match="ArrayConfig"):
        simulate([Gemm("g", 1, 2, 3)], (4, 4))
    with pytest.raises(ValueError, match="no GEMMs"):
        simulate([], ArrayConfig(4, 4), engine="analytical")
    with pytest.raises(TypeError, match="item 1"):
        simulate([Gemm("g", 1, 2, 3), (1, 2, 3)], ArrayConfig(4, 4), engine="analytical")


# ---------------------------------------------------------------------------------- the tracer

def _gpt(layers=2, embed=24, heads=3, vocab=29, seq=11):
    tt_random.manual_seed(3)
    return GPT(vocab_size=vocab, embed_dim=embed, num_layers=layers, num_heads=heads, max_seq_len=seq)


def test_tracer_records_every_gpt_gemm_with_the_models_shapes():
    model, b, t = _gpt(), 3, 7
    idx = np.random.default_rng(0).integers(0, model.vocab_size, (b, t))
    reference = model(idx).data
    gemms = trace_gemms(model, idx)
    np.testing.assert_array_equal(model(idx).data, reference)  # the model is unchanged
    by_name = {g.name: g for g in gemms}
    rows, d, hd = b * t, model.embed_dim, model.head_dim
    for i in range(model.num_layers):
        p = f"blocks.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "out_proj"):
            assert (by_name[f"{p}.attn.{proj}"].M, by_name[f"{p}.attn.{proj}"].K, by_name[f"{p}.attn.{proj}"].N) \
                == (rows, d, d)
        fc1, fc2 = model.blocks[i].mlp.fc1, model.blocks[i].mlp.fc2
        assert (by_name[f"{p}.mlp.fc1"].K, by_name[f"{p}.mlp.fc1"].N) == fc1.weight.shape
        assert (by_name[f"{p}.mlp.fc2"].K, by_name[f"{p}.mlp.fc2"].N) == fc2.weight.shape
        scores, context = by_name[f"{p}.attn.scores"], by_name[f"{p}.attn.context"]
        assert (scores.M, scores.K, scores.N, scores.batch) == (t, hd, t, b * model.num_heads)
        assert (context.M, context.K, context.N, context.batch) == (t, t, hd, b * model.num_heads)
        assert (scores.a, scores.b, scores.c) == ("query", "key^T", "scores")
    head = by_name["lm_head"]
    assert (head.M, head.K, head.N) == (rows, d, model.vocab_size)
    assert len(gemms) == model.num_layers * 8 + 1
    # the recorded work equals the model's multiply-adds, counted from its parameters
    macs = sum(rows * w.shape[0] * w.shape[1] for name, w in model.named_parameters()
               if name.endswith("weight") and w.ndim == 2 and "embedding" not in name)
    macs += model.num_layers * 2 * b * model.num_heads * t * t * hd
    assert sum(g.macs for g in gemms) == macs


def test_tracer_backward_records_both_gradient_products_and_restores_grads():
    model, b, t = _gpt(layers=1), 2, 5
    idx = np.random.default_rng(1).integers(0, model.vocab_size, (b, t))
    gemms = trace_gemms(model, idx, backward=True)
    assert all(p.grad is None for p in model.parameters())
    back = {g.name: g for g in gemms if g.phase == "backward"}
    rows, d = b * t, model.embed_dim
    gi, gw = back["blocks.0.mlp.fc2.grad_input"], back["blocks.0.mlp.fc2.grad_weight"]
    hidden = model.blocks[0].mlp.hidden_dim
    assert (gi.M, gi.K, gi.N) == (rows, d, hidden) and (gw.M, gw.K, gw.N) == (hidden, rows, d)
    assert {"blocks.0.attn.grad_query", "blocks.0.attn.grad_key", "blocks.0.attn.grad_value"} <= set(back)
    forward_macs = sum(g.macs for g in gemms if g.phase == "forward" and "attn.scores" not in g.name
                       and "attn.context" not in g.name)
    linear_back = sum(g.macs for g in back.values() if ".grad_input" in g.name or ".grad_weight" in g.name)
    assert linear_back == 2 * forward_macs  # every Linear: one product for each operand's gradient


def test_tracer_records_the_convolutions_im2col_gemms():
    model = Sequential(Conv2d(1, 8, 3, padding=1), ReLU(), MaxPool2d(2), Conv2d(8, 16, 3, padding=1), ReLU(),
                       MaxPool2d(2), Flatten(), Linear(16 * 2 * 2, 10))
    x = np.random.default_rng(2).random((5, 1, 8, 8)).astype(np.float32)
    gemms = trace_gemms(model, x)
    assert [(g.name, g.M, g.K, g.N) for g in gemms] == [
        ("0", 5 * 8 * 8, 1 * 3 * 3, 8), ("3", 5 * 4 * 4, 8 * 3 * 3, 16), ("7", 5, 16 * 2 * 2, 10)]
    assert gemms[0].a == "im2col patches" and gemms[0].b == "weight"
    cnn = SimpleCNN()
    conv1, conv2 = trace_gemms(cnn, np.zeros((2, 3, 32, 32), np.float32))
    assert (conv1.M, conv1.K, conv1.N) == (2 * 32 * 32, 3 * 9, 16)
    assert (conv2.M, conv2.K, conv2.N) == (2 * 16 * 16, 16 * 9, 32)


def test_tracer_restores_the_door_and_the_layers_after_an_error():
    model = _gpt(layers=1)
    originals = {name: getattr(acc, name) for name in ("gemm", "matmul", "matmul_backward", "attention")}
    with pytest.raises(ValueError):
        trace_gemms(model, np.zeros((1, 99), np.int64))  # longer than max_seq_len
    assert all(getattr(acc, name) is fn for name, fn in originals.items())
    assert all("forward" not in m.__dict__ for m in model.modules())


@pytest.mark.parametrize("shape", [(0, 6), (1, 6), (7, 6), (2, 3, 6)])
def test_simulated_linear_matches_linear_and_records_its_gemm(shape):
    tt_random.manual_seed(5)
    layer = SimulatedLinear(6, 5, name="proj")
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    out = layer(Tensor(x)).data
    ref = x.astype(np.float64) @ layer.weight.data.astype(np.float64) + layer.bias.data.astype(np.float64)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    rows = int(np.prod(shape[:-1]))
    assert layer.gemms == ([] if rows == 0 else [Gemm("proj", rows, 6, 5)])
    shared = SimulatedLinear.from_linear(Linear(4, 3), name="x")
    assert shared.gemms == [] and shared.weight.shape == (4, 3)


def test_a_traced_model_runs_on_the_analytical_engine():
    model = _gpt(layers=1)
    gemms = trace_gemms(model, np.zeros((2, 6), np.int64))
    result = simulate(gemms, ArrayConfig(16, 16, "os"), engine="analytical")
    assert [l.name for l in result.layers] == [g.name for g in gemms]
    assert result.total_cycles == sum(analytical_layer(g, result.config).cycles * g.batch for g in gemms)
    assert 0 < result.utilization <= 100
