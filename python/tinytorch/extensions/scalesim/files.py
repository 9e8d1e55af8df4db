"""The three input files SCALE-Sim 3.0.0 reads, written from a list of Gemm and an ArrayConfig.

Design: each writer produces exactly the text SCALE-Sim's own parsers accept (checked by
tests that run the real simulator), and nothing else writes these formats.

  topology  ``Layer, M, N, K,`` then one ``name, M, N, K,`` row per GEMM. Note the column
            order (M, N, K) and the trailing comma: SCALE-Sim drops the last field of
            every row, so a row without it loses K. SCALE-Sim's ifmap is the M x K
            operand (A), its filter the K x N operand (B), its ofmap the M x N result (C).
  config    the INI sections SCALE-Sim reads: [general] (run name), [architecture_presets]
            (array, SRAM sizes in kB, address offsets, dataflow, bandwidth, request
            buffers), [layout] (per-bank SRAM parameters; the bank bandwidths are also the
            read interfaces' bandwidth in "user" mode), [sparsity] (off) and [run_presets]
            (CALC or USER interface bandwidth, no Ramulator trace). In "user" mode the read
            interfaces get one bank each (SCALE-Sim requires the bandwidth to divide evenly
            over the banks).
  layout    SCALE-Sim opens it even when no custom layout is used: a header-only CSV.

Layer names are sanitised (commas, whitespace) because the topology is comma-separated.

Assumes: SCALE-Sim 3.0.0's file formats; files are written atomically (tinytorch._atomic).
"""
from __future__ import annotations

import os

from ..._atomic import write_file
from .config import ArrayConfig

__all__ = ["topology_text", "config_text", "layout_text", "write_inputs", "scalesim_layer_name"]

# Address offsets of the three operands (SCALE-Sim's own defaults) and request-buffer sizes.
IFMAP_OFFSET, FILTER_OFFSET, OFMAP_OFFSET = 0, 10_000_000, 20_000_000
REQUEST_BUFFER = 32


def scalesim_layer_name(name: str) -> str:
    """``name`` as a topology field: commas and whitespace become underscores.

    Args:
        name: a layer name such as "blocks.0.attn.q_proj".
    """
    cleaned = "".join("_" if (ch == "," or ch.isspace()) else ch for ch in str(name))
    return cleaned or "gemm"


def topology_text(gemms) -> str:
    """The GEMM topology CSV for ``gemms``: header, then ``name, M, N, K,`` per product.

    Args:
        gemms: a non-empty sequence of ``Gemm`` (one row each; a batched product is one row,
            its ``batch`` count is applied to the results, not to the file).
    """
    gemms = list(gemms)
    if not gemms:
        raise ValueError("topology_text: no GEMMs to write (trace a model, or pass Gemm(...) items)")
    lines = ["Layer, M, N, K,"]
    lines += [f"{scalesim_layer_name(g.name)}, {g.M}, {g.N}, {g.K}," for g in gemms]
    return "\n".join(lines) + "\n"


def config_text(config: ArrayConfig) -> str:
    """The SCALE-Sim config file (INI) for ``config``.

    Args:
        config: the array (an ``ArrayConfig``).
    """
    if not isinstance(config, ArrayConfig):
        raise TypeError(f"config_text: config must be an ArrayConfig, got {type(config).__name__}")
    mode = "USER" if config.bandwidth_mode == "user" else "CALC"
    # "user" mode splits each read interface over the banks and needs the bandwidth divisible by
    # their number: one bank carries it all; "calc" keeps SCALE-Sim's usual 10 banks
    banks = 1 if config.bandwidth_mode == "user" else 10
    return f"""[general]
run_name = {config.run_name}

[architecture_presets]
ArrayHeight = {config.rows}
ArrayWidth = {config.cols}
ifmapsramszkB = {config.ifmap_sram_kb}
filtersramszkB = {config.filter_sram_kb}
ofmapsramszkB = {config.ofmap_sram_kb}
IfmapOffset = {IFMAP_OFFSET}
FilterOffset = {FILTER_OFFSET}
OfmapOffset = {OFMAP_OFFSET}
Bandwidth = {config.bandwidth}
Dataflow = {config.dataflow}
ReadRequestBuffer = {REQUEST_BUFFER}
WriteRequestBuffer = {REQUEST_BUFFER}

[layout]
IfmapCustomLayout = False
IfmapSRAMBankBandwidth = {config.bandwidth}
IfmapSRAMBankNum = {banks}
IfmapSRAMBankPort = 2
FilterCustomLayout = False
FilterSRAMBankBandwidth = {config.bandwidth}
FilterSRAMBankNum = {banks}
FilterSRAMBankPort = 2

[sparsity]
SparsitySupport = false
SparseRep = ellpack_block
OptimizedMapping = false
BlockSize = 8
RandomNumberGeneratorSeed = 40

[run_presets]
InterfaceBandwidth = {mode}
UseRamulatorTrace = False
"""


def layout_text() -> str:
    """The layout CSV SCALE-Sim opens in GEMM mode: a header only (no custom layout)."""
    return "Layer,\n"


def write_inputs(gemms, config: ArrayConfig, folder: str) -> dict:
    """Write topology.csv, scalesim.cfg and layout.csv into ``folder``; returns their paths.

    Args:
        gemms: the products (``Gemm``), one topology row each.
        config: the array (``ArrayConfig``).
        folder: an existing directory.
    """
    paths = {"topology": os.path.join(folder, "topology.csv"),
             "config": os.path.join(folder, "scalesim.cfg"),
             "layout": os.path.join(folder, "layout.csv")}
    texts = {"topology": topology_text(gemms), "config": config_text(config), "layout": layout_text()}
    for key, path in paths.items():
        write_file(path, texts[key])
    return paths
