"""Hardware simulation: trace a model's GEMMs and run them through the real SCALE-Sim.

Profiling on a host CPU cannot say how many multiply-accumulate units of a systolic array a
model keeps busy, whether a larger SRAM would remove DRAM stalls, or which array shape suits
it. This extension (architecture boundary) answers that with SCALE-Sim 3.0.0:

  trace.py       Gemm, GemmTracer, trace_gemms, SimulatedLinear: a model's products
  config.py      ArrayConfig: the array, its SRAMs, dataflow and DRAM interface
  files.py       the topology, config and layout files in SCALE-Sim's formats
  runner.py      the simulator's own interpreter (managed venv), subprocess, progress, timeout
  reports.py     SCALE-Sim's report CSVs -> LayerResult; trace summaries
  analytical.py  the paper's closed-form cycles and utilisation, for machines without it
  results.py     LayerResult, SimulationResult
  simulation.py  simulate(gemms, config, engine="auto")

Nothing here imports SCALE-Sim (it runs in a subprocess) and import never fails. The guide
and the measured agreement of the two engines: docs/scalesim.md.

Assumes: SCALE-Sim itself is optional (run in its own interpreter by runner.py); without
it ``simulate`` can use the closed form of analytical.py.
"""
from __future__ import annotations

from .analytical import analytical_layer
from .config import DATAFLOWS, ArrayConfig
from .files import config_text, layout_text, topology_text, write_inputs
from .reports import MalformedReportError, parse_run, read_report, summarize_traces
from .results import LayerResult, SimulationResult
from .runner import (ScaleSimError, ScaleSimTimeout, ScaleSimUnavailable, managed_venv_dir, run_scalesim,
                     scalesim_python, scalesim_status)
from .simulation import simulate
from .trace import Gemm, GemmTracer, SimulatedLinear, trace_gemms

__all__ = [
    "Gemm", "GemmTracer", "trace_gemms", "SimulatedLinear",
    "ArrayConfig", "DATAFLOWS",
    "simulate", "SimulationResult", "LayerResult", "analytical_layer",
    "topology_text", "config_text", "layout_text", "write_inputs",
    "read_report", "parse_run", "summarize_traces", "MalformedReportError",
    "scalesim_status", "scalesim_python", "managed_venv_dir", "run_scalesim",
    "ScaleSimError", "ScaleSimUnavailable", "ScaleSimTimeout",
]
