"""benchmarks/bench_distributed.py: the ring all-reduce formula and the paper scaling table
against hand counts, and a --quick run under `mpirun -n 2` whose report must be derived from
the raw samples it saved.

What this file owns: the checks that the distributed benchmark's numbers are computed from
what it measured (medians of the raw samples, samples/s = batch / median, raw / DDP time,
overlap saving = off - on) and that DDP kept both ranks' parameters identical while timed.
It assumes the benchmark writes a .json of raw samples next to its report; the --quick run is
skipped where MPI is not available (tinytorch.distributed.available()).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tinytorch import distributed as dist

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_distributed.py"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_distributed
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return bench_distributed


def test_ring_all_reduce_time_by_hand(bench):
    # 1.25 GB over 10 Gbit/s (1.25 GB/s): N = 2 moves 2 * 1/2 * bytes = 1 s; N = 4 moves 1.5 x
    assert bench.ring_ms(1.25e9, 2, 10) == pytest.approx(1000.0)
    assert bench.ring_ms(1.25e9, 4, 10) == pytest.approx(1500.0)
    assert bench.ring_ms(1.25e9, 4, 100) == pytest.approx(150.0)
    assert bench.ring_ms(1.25e9, 7, 10) == pytest.approx(2 * 6 / 7 * 1000.0)


def test_scaling_table_by_hand(bench):
    # compute 10 ms of which 2 ms optimizer; 12.5 MB of gradients: 20 ms at 10 Gbit/s for N = 2
    m = {"step_ms": {"compute": [9.0, 10.0, 11.0]}, "opt_ms": [2.0, 2.0, 3.0], "grad_bytes": 12_500_000}
    s = bench.scaling(m)
    assert s["compute_ms"] == 10.0 and s["opt_ms"] == 2.0
    rows = {r["hosts"]: r for r in s["rows"]}
    assert sorted(rows) == list(bench.HOSTS)
    for n, r in rows.items():
        assert r["weak_ms"] == 10.0
        assert r["strong_ms"] == pytest.approx((10.0 - 2.0) * 2 / n + 2.0)
        assert r["comm_ms"][10] == pytest.approx(2 * (n - 1) / n * 10.0)   # 12.5 MB / 1.25 GB/s = 10 ms
        assert r["comm_ms"][100] == pytest.approx(2 * (n - 1) / n * 1.0)
    # weak, 10 Gbit/s: comm 10 ms at N = 2 is not above 10 ms compute; 15 ms at N = 4 is
    assert s["dominates_from"]["weak_10"] == 4
    assert s["dominates_from"]["weak_100"] is None        # never above 2 ms
    # strong: compute 2 + 16/N ms; at 10 Gbit/s comm 10 ms = compute 10 ms at N = 2 (not above),
    # 15 ms > 6 ms at N = 4; at 100 Gbit/s comm stays below 2 ms < compute up to N = 64
    assert s["dominates_from"]["strong_10"] == 4
    assert s["dominates_from"]["strong_100"] is None


def _median(v):
    return float(np.median(v))


@pytest.mark.skipif(not dist.available()[0], reason="MPI is not available: " + dist.available()[1])
def test_quick_run_reports_what_it_measured(tmp_path, bench):
    out = tmp_path / "bench_distributed.md"
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--timeout", "300", "--out", str(out)],
                          capture_output=True, text=True, timeout=420, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    raw = json.loads(out.with_suffix(".json").read_text())
    report = out.read_text()
    local, mpi, summary = raw["local"], raw["mpi"], raw["summary"]
    assert mpi["world_size"] == 2
    for kind in bench.MODELS:
        m, s = mpi["models"][kind], summary[kind]
        assert all(m["params_identical"]), f"{kind}: DDP left the ranks' parameters different"
        assert m["per_rank_batch"] == bench.BATCH[kind] // 2
        steps = {"1x1": local[kind]["1x1"], "1x2": local[kind]["1x2"]}
        steps.update({f"2x1 {k}": v for k, v in m["step_ms"].items()})
        assert set(steps) == set(s["step_median_ms"])
        for key, samples in steps.items():
            assert samples and all(t > 0 for t in samples)
            assert s["step_median_ms"][key] == pytest.approx(_median(samples))
            assert s["samples_per_s"][key] == pytest.approx(bench.BATCH[kind] / (_median(samples) / 1e3))
        comm = {k: _median(v) for k, v in m["comm_ms"].items()}
        assert s["ddp_vs_raw"]["25"] == pytest.approx(comm["raw_one"] / comm["ddp_25"])
        assert s["ddp_vs_raw"]["run"] == pytest.approx(comm["raw_run"] / comm["ddp_run"])
        assert s["buckets_vs_raw"]["25"] == pytest.approx(comm["raw_one"] / comm["bkt_25"])
        assert s["buckets_vs_raw"]["run"] == pytest.approx(comm["raw_run"] / comm["bkt_run"])
        assert s["overlap_saving_ms"] == pytest.approx(s["step_median_ms"]["2x1 ddp_off"]
                                                       - s["step_median_ms"]["2x1 ddp_on"])
        # the bucket layouts cover every trainable gradient exactly once
        assert sum(m["buckets"]["25"]) == sum(m["buckets"]["run"]) == m["grad_bytes"] // 4
        # the report prints the derived medians
        assert f"| {kind.upper()} | 1 process x 2 threads | {s['step_median_ms']['1x2']:.2f} |" in report
        assert f"{m['grad_bytes']:,}" in report
    assert "## 4. Scaling on paper" in report and "mpirun" in report
