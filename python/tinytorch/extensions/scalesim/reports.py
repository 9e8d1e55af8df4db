"""Parsers for SCALE-Sim 3.0.0's reports, into LayerResult records.

Design: SCALE-Sim writes, under ``<output>/<run_name>/``, three small CSVs with one row per
topology layer (``LayerID`` first; every line ends in a comma):

  COMPUTE_REPORT.csv          Total Cycles (incl. prefetch), Total Cycles, Stall Cycles,
                              Overall Util %, Mapping Efficiency %, Compute Util %
  BANDWIDTH_REPORT.csv        average SRAM and DRAM words/cycle per operand
  DETAILED_ACCESS_REPORT.csv  start/stop cycles and read/write counts per operand and level

and per layer ``layer<i>/{IFMAP,FILTER,OFMAP}_{SRAM,DRAM}_TRACE.csv``: the address request
streams (one row per cycle: the cycle, then the addresses, -1 for an idle port). The
parsers look columns up by their header names, so a report with a missing column, a
non-numeric cell or the wrong number of rows raises ``MalformedReportError`` (a ValueError)
naming the file and the problem, never a KeyError deep inside. The trace streams are
summarised (requests and the peak requests in one cycle per operand and level) instead of
being kept: they are megabytes per layer.

Owns the report parsers and MalformedReportError; assumes SCALE-Sim 3.0.0's report
columns (a report that does not match them is an error, never a guess).
"""
from __future__ import annotations

import os

import numpy as np

from .results import LayerResult

__all__ = ["MalformedReportError", "read_report", "parse_run", "summarize_traces", "find_run_dir"]

COMPUTE_REPORT, BANDWIDTH_REPORT, DETAIL_REPORT = \
    "COMPUTE_REPORT.csv", "BANDWIDTH_REPORT.csv", "DETAILED_ACCESS_REPORT.csv"
OPERANDS = ("ifmap", "filter", "ofmap")


class MalformedReportError(ValueError):
    """A SCALE-Sim report that cannot be read: missing file or column, bad number, wrong rows."""


def read_report(path: str) -> list[dict]:
    """Rows of one SCALE-Sim report CSV as dicts {column name: float}.

    Args:
        path: the CSV file (header row first; SCALE-Sim ends every line with a comma).
    """
    if not os.path.isfile(path):
        raise MalformedReportError(f"SCALE-Sim report {path} does not exist (the run wrote no report)")
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip()]
    if not lines:
        raise MalformedReportError(f"SCALE-Sim report {path} is empty")

    def fields(line):
        parts = [p.strip() for p in line.split(",")]
        return parts[:-1] if parts and parts[-1] == "" else parts

    header = fields(lines[0])
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = fields(line)
        if len(cells) != len(header):
            raise MalformedReportError(f"SCALE-Sim report {path} line {number}: {len(cells)} fields, "
                                       f"the header has {len(header)}")
        try:
            rows.append({name: float(cell) for name, cell in zip(header, cells)})
        except ValueError:
            raise MalformedReportError(f"SCALE-Sim report {path} line {number}: a non-numeric field in "
                                       f"{line!r}") from None
    return rows


def _column(row: dict, name: str, path: str) -> float:
    if name not in row:
        raise MalformedReportError(f"SCALE-Sim report {path} has no column {name!r} "
                                   f"(columns: {', '.join(row)})")
    return row[name]


def find_run_dir(output_dir: str, run_name: str) -> str:
    """The folder SCALE-Sim wrote its reports in: ``output_dir/run_name``.

    Args:
        output_dir: the ``-p`` folder given to SCALE-Sim.
        run_name: the config's run name.
    """
    run_dir = os.path.join(output_dir, run_name)
    if not os.path.isdir(run_dir):
        raise MalformedReportError(f"SCALE-Sim wrote no run folder {run_dir}")
    return run_dir


def summarize_traces(layer_dir: str) -> dict:
    """Requests and peak requests per cycle of each trace file of one layer.

    Returns {"ifmap_dram": {"requests": n, "peak": p, "cycles": c}, ...} for the files present
    (keys ``<operand>_<sram|dram>``); an idle port (-1) is not a request.

    Args:
        layer_dir: SCALE-Sim's ``layer<i>`` folder.
    """
    summary = {}
    for operand in OPERANDS:
        for level in ("sram", "dram"):
            path = os.path.join(layer_dir, f"{operand.upper()}_{level.upper()}_TRACE.csv")
            if not os.path.isfile(path):
                continue
            requests = peak = cycles = 0
            with open(path) as f:
                for line in f:
                    parts = line.strip().rstrip(",").split(",")
                    if len(parts) < 2:
                        continue
                    try:
                        addresses = np.asarray(parts[1:], dtype=np.float64)
                    except ValueError:
                        raise MalformedReportError(f"SCALE-Sim trace {path}: non-numeric address in "
                                                   f"{line[:80]!r}") from None
                    busy = int((addresses >= 0).sum())
                    requests += busy
                    peak = max(peak, busy)
                    cycles += 1
            summary[f"{operand}_{level}"] = {"requests": requests, "peak": peak, "cycles": cycles}
    return summary


def parse_run(run_dir: str, gemms, with_traces: bool = False) -> list[LayerResult]:
    """One LayerResult per topology row from SCALE-Sim's reports in ``run_dir``.

    Args:
        run_dir: ``<output>/<run_name>`` holding the three report CSVs.
        gemms: the products simulated, in topology order (names, shapes and batch counts).
        with_traces: also summarise the per-layer trace files (``trace_summary``, and the peak
            DRAM bandwidth).
    """
    gemms = list(gemms)
    paths = {kind: os.path.join(run_dir, kind) for kind in (COMPUTE_REPORT, BANDWIDTH_REPORT, DETAIL_REPORT)}
    tables = {kind: read_report(path) for kind, path in paths.items()}
    for kind, rows in tables.items():
        if len(rows) != len(gemms):
            raise MalformedReportError(f"SCALE-Sim report {paths[kind]} has {len(rows)} layer rows for "
                                       f"{len(gemms)} GEMMs")
    results = []
    for i, gemm in enumerate(gemms):
        comp, bw, det = (tables[k][i] for k in (COMPUTE_REPORT, BANDWIDTH_REPORT, DETAIL_REPORT))
        c = lambda name, row=comp: _column(row, name, paths[COMPUTE_REPORT])  # noqa: E731
        b = lambda name, row=bw: _column(row, name, paths[BANDWIDTH_REPORT])  # noqa: E731
        d = lambda name, row=det: _column(row, name, paths[DETAIL_REPORT])  # noqa: E731
        peak = traces = None
        if with_traces:
            traces = summarize_traces(os.path.join(run_dir, f"layer{i}"))
            peak = {op: traces.get(f"{op}_dram", {}).get("peak", 0) for op in OPERANDS}
        results.append(LayerResult(
            name=gemm.name, M=gemm.M, K=gemm.K, N=gemm.N, batch=gemm.batch,
            cycles=int(c("Total Cycles")),
            cycles_with_prefetch=int(c("Total Cycles (incl. prefetch)")),
            stall_cycles=int(c("Stall Cycles")),
            utilization=c("Overall Util %"),
            mapping_efficiency=c("Mapping Efficiency %"),
            compute_utilization=c("Compute Util %"),
            sram_reads={"ifmap": int(d("SRAM IFMAP Reads")), "filter": int(d("SRAM Filter Reads"))},
            sram_writes={"ofmap": int(d("SRAM OFMAP Writes"))},
            dram_reads={"ifmap": int(d("DRAM IFMAP Reads")), "filter": int(d("DRAM Filter Reads"))},
            dram_writes={"ofmap": int(d("DRAM OFMAP Writes"))},
            avg_sram_bandwidth={"ifmap": b("Avg IFMAP SRAM BW"), "filter": b("Avg FILTER SRAM BW"),
                                "ofmap": b("Avg OFMAP SRAM BW")},
            avg_dram_bandwidth={"ifmap": b("Avg IFMAP DRAM BW"), "filter": b("Avg FILTER DRAM BW"),
                                "ofmap": b("Avg OFMAP DRAM BW")},
            peak_dram_bandwidth=peak,
            trace_summary=traces,
        ))
    return results
