"""What a simulation returns: one LayerResult per GEMM and their SimulationResult.

Design: both engines (the real SCALE-Sim, parsed by reports.py, and the closed-form model of
analytical.py) fill the same record, so tables, plots and tests read one type, and
``SimulationResult.engine`` says which one produced it. Every figure is for ONE product of
the layer's shape (what SCALE-Sim simulated); a batched product (``batch`` > 1, e.g. one
attention product per head) counts ``batch`` times in the model totals, which is where the
batch is applied. Cycle, read and write counts are SCALE-Sim's; utilisation and mapping
efficiency are percentages; bandwidths are words per cycle.

Owns LayerResult and SimulationResult; assumes nothing beyond the standard library.
"""
from __future__ import annotations

import dataclasses

__all__ = ["LayerResult", "SimulationResult"]


@dataclasses.dataclass(frozen=True)
class LayerResult:
    """One GEMM on one array, as SCALE-Sim reports it (or as the analytical model estimates it).

    Args:
        name: the layer name (the Gemm's).
        M: rows of the A operand and of the result.
        K: the reduction size.
        N: columns of the B operand and of the result.
        batch: how many products of this shape the model runs (totals multiply by it).
        cycles: SCALE-Sim's "Total Cycles" (compute cycles including stalls).
        cycles_with_prefetch: "Total Cycles (incl. prefetch)": from the first DRAM read to the
            last DRAM write.
        stall_cycles: cycles the array waited for memory.
        utilization: "Overall Util %": M*K*N multiply-adds over cycles * rows * cols.
        mapping_efficiency: "Mapping Efficiency %": the share of the array the mapping covers.
        compute_utilization: "Compute Util %" (SCALE-Sim's per-fold utilisation; None from the
            analytical model).
        sram_reads: {"ifmap": A reads, "filter": B reads} from the array's SRAMs.
        sram_writes: {"ofmap": C writes} into the output SRAM.
        dram_reads: {"ifmap": ..., "filter": ...} words fetched from DRAM.
        dram_writes: {"ofmap": ...} words written back to DRAM.
        avg_sram_bandwidth: {"ifmap", "filter", "ofmap"} average SRAM words per cycle.
        avg_dram_bandwidth: {"ifmap", "filter", "ofmap"} average DRAM words per cycle.
        peak_dram_bandwidth: {"ifmap", "filter", "ofmap"} most DRAM words in one cycle, from
            the trace files (None when they were not read).
        trace_summary: the address request streams of A, B and C summarised per operand and
            level ({"ifmap_dram": {"requests", "peak", "cycles"}, ...}; None when not read).
    """

    name: str
    M: int
    K: int
    N: int
    batch: int
    cycles: int
    cycles_with_prefetch: int
    stall_cycles: int
    utilization: float
    mapping_efficiency: float
    compute_utilization: float | None
    sram_reads: dict
    sram_writes: dict
    dram_reads: dict
    dram_writes: dict
    avg_sram_bandwidth: dict
    avg_dram_bandwidth: dict
    peak_dram_bandwidth: dict | None = None
    trace_summary: dict | None = None

    @property
    def macs(self) -> int:
        """Multiply-adds of one product: M * K * N."""
        return self.M * self.K * self.N

    @property
    def dram_traffic(self) -> int:
        """DRAM words read and written by one product."""
        return sum(self.dram_reads.values()) + sum(self.dram_writes.values())


@dataclasses.dataclass(frozen=True)
class SimulationResult:
    """A model's GEMMs on one array: the per-layer results and the totals.

    Args:
        engine: "scalesim" (the real simulator ran) or "analytical" (the closed-form model).
        config: the ``ArrayConfig`` simulated.
        layers: one ``LayerResult`` per GEMM, in the order given.
        reason: why this engine ran (e.g. why SCALE-Sim could not, when "auto" fell back).
        output_dir: where SCALE-Sim's reports were kept (None when not kept).
    """

    engine: str
    config: object
    layers: tuple
    reason: str = ""
    output_dir: str | None = None

    @property
    def total_cycles(self) -> int:
        """Sum over layers of cycles * batch (the layers run one after another)."""
        return sum(layer.cycles * layer.batch for layer in self.layers)

    @property
    def total_cycles_with_prefetch(self) -> int:
        """Sum over layers of cycles_with_prefetch * batch."""
        return sum(layer.cycles_with_prefetch * layer.batch for layer in self.layers)

    @property
    def total_stall_cycles(self) -> int:
        """Sum over layers of stall_cycles * batch."""
        return sum(layer.stall_cycles * layer.batch for layer in self.layers)

    @property
    def total_macs(self) -> int:
        """Multiply-adds of the whole workload (batch counted)."""
        return sum(layer.macs * layer.batch for layer in self.layers)

    @property
    def utilization(self) -> float:
        """The whole workload's utilisation in percent: MACs over total_cycles * rows * cols."""
        cycles = self.total_cycles
        return 100.0 * self.total_macs / (cycles * self.config.rows * self.config.cols) if cycles else 0.0

    @property
    def total_dram_traffic(self) -> int:
        """DRAM words read and written by the whole workload (batch counted)."""
        return sum(layer.dram_traffic * layer.batch for layer in self.layers)

    @property
    def avg_dram_bandwidth(self) -> float:
        """DRAM words per cycle over the whole workload: total_dram_traffic / total_cycles_with_prefetch."""
        cycles = self.total_cycles_with_prefetch
        return self.total_dram_traffic / cycles if cycles else 0.0
