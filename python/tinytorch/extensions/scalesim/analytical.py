"""The closed-form model of a GEMM on a systolic array (SCALE-Sim paper, Samajdar et al.).

Design. The paper maps a GEMM C (M x N) = A (M x K) B (K x N) onto an R x C array by
dataflow: one operand dimension on the rows (S_R), one on the columns (S_C), and one
streamed in time (T):

  dataflow            stationary   S_R   S_C   T
  ws (weight)         B            K     N     M
  os (output)         C            M     N     K
  is (input)          A            K     M     N

The array holds one R x C "fold" of the S_R x S_C mapping at a time and the folds run
back to back. A ws or is fold loads the stationary operand (R cycles), streams T vectors
and drains through R + C - 2 more; an os fold streams T and drains its outputs down the
columns while the next fold fills:

  cycles  = ceil(S_R / R) * ceil(S_C / C) * F - 1,  F = 2R + C + T - 2 (ws, is), R + C + T - 2 (os)
  mapping efficiency = S_R * S_C / (ceil(S_R / R) R * ceil(S_C / C) C)
  utilisation        = M K N / (cycles * R * C)

(the - 1: SCALE-Sim 3.0.0 numbers its first cycle 0). SRAM traffic follows from the folds:
the streamed operand is read once per fold along the other mapped dimension, the
stationary one once, and each output is written once per fold along the reduction (os:
once, plus the R + C drain slots SCALE-Sim counts per fold). DRAM traffic: an operand
that fits the active half of its double-buffered SRAM is fetched once, else as often as
the array reads it; outputs are written back as the array writes them (os: once).
``cycles_with_prefetch`` adds the first buffer fill at the read bandwidth (at least the
66 cycles SCALE-Sim always spends) and the last output buffer's drain at the write
bandwidth. In the "calc" interface SCALE-Sim never stalls and neither does the model. In
"user" mode the model adds a memory-bound floor (no interface moves more than
``bandwidth`` words a cycle): a lower bound on the stalls, not a prediction of them
(SCALE-Sim's refetches with small SRAMs cost more); ask the real simulator there.

Measured against SCALE-Sim 3.0.0 (tests/extensions/test_scalesim.py, docs/scalesim.md):
cycles, utilisation, mapping efficiency and SRAM traffic equal on every shape and
dataflow tried; DRAM traffic within 0.1 % on the test shapes and 22 % on the study's layers
(os with weights overflowing their SRAM); ``cycles_with_prefetch`` within 30 %.

Owns ``analytical_layer``; assumes a checked ArrayConfig (config.py) and returns LayerResult
records (results.py), as the real SCALE-Sim's parser does.
"""
from __future__ import annotations

import math

from .config import ArrayConfig
from .results import LayerResult

__all__ = ["analytical_layer", "mapping"]

WORD_BYTES = 1  # SCALE-Sim counts SRAM capacity in one-byte words
MIN_PREFETCH_CYCLES = 66  # SCALE-Sim 3.0.0 starts its DRAM reads at least this early (seen on 1x1x1)


def mapping(gemm, config: ArrayConfig) -> tuple[int, int, int]:
    """(S_R, S_C, T) of ``gemm`` under ``config.dataflow`` (the table in the module docstring).

    Args:
        gemm: a ``Gemm`` (M, K, N).
        config: the array (its dataflow is used).
    """
    m, k, n = gemm.M, gemm.K, gemm.N
    return {"ws": (k, n, m), "os": (m, n, k), "is": (k, m, n)}[config.dataflow]


def analytical_layer(gemm, config: ArrayConfig) -> LayerResult:
    """The closed-form estimate of one product of ``gemm``'s shape on ``config``.

    Args:
        gemm: a ``Gemm``.
        config: the ``ArrayConfig``.
    """
    rows, cols = config.rows, config.cols
    s_r, s_c, t = mapping(gemm, config)
    row_folds, col_folds = math.ceil(s_r / rows), math.ceil(s_c / cols)
    folds = row_folds * col_folds
    # ws / is: fill R rows of stationary operand, stream T, drain through R + C; os: the
    # stationary outputs leave through the columns while the next fold fills (R + C + T - 2)
    fold_cycles = (rows + cols + t - 2) if config.dataflow == "os" else (2 * rows + cols + t - 2)
    cycles = folds * fold_cycles - 1
    m, k, n = gemm.M, gemm.K, gemm.N
    macs = m * k * n
    mapping_eff = 100.0 * s_r * s_c / (row_folds * rows * col_folds * cols)
    # SRAM reads/writes per operand (A = ifmap, B = filter, C = ofmap)
    if config.dataflow == "ws":      # B stationary; A streamed once per column fold; C per row fold
        a_reads, b_reads, c_writes = m * k * col_folds, k * n, m * n * row_folds
    elif config.dataflow == "os":    # C stationary; A re-read per column fold, B per row fold;
        # SCALE-Sim also counts the R + C drain slots of every fold as output writes
        a_reads, b_reads, c_writes = m * k * col_folds, k * n * row_folds, m * n + folds * (rows + cols)
    else:                            # is: A stationary; B re-read per column fold; C per row fold
        a_reads, b_reads, c_writes = m * k, k * n * col_folds, m * n * row_folds
    # DRAM: an operand that fits the active half of its double-buffered SRAM is fetched once,
    # else as often as the array reads it; outputs go back as the array writes them
    half = {name: kb * 1024 // (2 * WORD_BYTES) for name, kb in
            (("ifmap", config.ifmap_sram_kb), ("filter", config.filter_sram_kb), ("ofmap", config.ofmap_sram_kb))}
    a_dram = m * k if m * k < half["ifmap"] else a_reads
    # (os walks the column folds outermost, so SCALE-Sim keeps most of B resident: compulsory)
    b_dram = k * n if (k * n < half["filter"] or config.dataflow == "os") else b_reads
    c_dram = m * n if config.dataflow == "os" else c_writes
    # Prefetch: the first buffer fills before compute starts (both read interfaces at once);
    # the last output buffer drains after it ends (one row of the array per cycle in "calc")
    read_bw = config.bandwidth
    write_bw = cols if config.bandwidth_mode == "calc" else config.bandwidth
    prefetch = max(MIN_PREFETCH_CYCLES,
                   math.ceil(max(min(a_dram, half["ifmap"]), min(b_dram, half["filter"])) / read_bw))
    drain = math.ceil(min(c_dram, half["ofmap"]) / write_bw)
    stalls = 0
    if config.bandwidth_mode == "user":
        # a memory-bound floor: the array cannot finish before each DRAM interface has moved
        # its words at ``bandwidth`` per cycle (a lower bound on SCALE-Sim's stalls), counted
        # for the operands that do not fit their SRAM (the others move in the prefetch window)
        streamed = [words for words, fits in ((a_dram, m * k < half["ifmap"]), (b_dram, k * n < half["filter"]),
                                              (c_dram, c_dram < half["ofmap"])) if not fits]
        stalls = max(0, math.ceil(max(streamed, default=0) / config.bandwidth) - cycles)
        cycles += stalls
    with_prefetch = prefetch + cycles + drain
    return LayerResult(
        name=gemm.name, M=m, K=k, N=n, batch=gemm.batch,
        cycles=cycles, cycles_with_prefetch=with_prefetch, stall_cycles=stalls,
        utilization=100.0 * macs / (cycles * rows * cols), mapping_efficiency=mapping_eff,
        compute_utilization=None,
        sram_reads={"ifmap": a_reads, "filter": b_reads}, sram_writes={"ofmap": c_writes},
        dram_reads={"ifmap": a_dram, "filter": b_dram}, dram_writes={"ofmap": c_dram},
        avg_sram_bandwidth={"ifmap": a_reads / cycles, "filter": b_reads / cycles, "ofmap": c_writes / cycles},
        avg_dram_bandwidth={"ifmap": a_dram / with_prefetch, "filter": b_dram / with_prefetch,
                            "ofmap": c_dram / with_prefetch},
        peak_dram_bandwidth=None,
    )
