"""ArrayConfig: the systolic array a simulation runs on, checked once, written by files.py.

Design: one frozen dataclass holds every knob the study varies (array height and width,
the three SRAM sizes, the dataflow, the DRAM interface), validates it on construction
(ValueError/TypeError naming the field), and is shared by both engines, so the SCALE-Sim
config file and the analytical model can never read two different arrays.

Bandwidth. SCALE-Sim has two interface modes. "calc" (the default here, and SCALE-Sim's
estimate mode) streams the operand reads at its fixed 10 words/cycle and the output writes
at one array row (``cols`` words) per cycle, and reports the bandwidth the run needed;
``bandwidth`` must then be 10, the figure that mode uses. "user" makes every DRAM
interface run at ``bandwidth`` words/cycle (written to the config's ``Bandwidth`` field,
which sets the output interface, and to the layout section's per-bank bandwidths, which
set the two read interfaces), so stalls appear when the array outruns memory.

Owns ArrayConfig and DATAFLOWS; assumes nothing beyond the standard library.
"""
from __future__ import annotations

import dataclasses
import numbers

__all__ = ["ArrayConfig", "DATAFLOWS"]

DATAFLOWS = ("ws", "os", "is")
CALC_READ_BANDWIDTH = 10  # words/cycle SCALE-Sim's "calc" mode uses for the operand reads


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"ArrayConfig: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"ArrayConfig: {name} must be at least 1, got {value}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class ArrayConfig:
    """A systolic array for ``simulate``: its shape, buffers, dataflow and DRAM interface.

    Args:
        rows: array height (processing elements per column), at least 1.
        cols: array width (processing elements per row), at least 1.
        dataflow: "ws" (weight stationary), "os" (output stationary) or "is" (input stationary).
        ifmap_sram_kb: input-operand (A) SRAM in kB, at least 1.
        filter_sram_kb: weight-operand (B) SRAM in kB, at least 1.
        ofmap_sram_kb: output (C) SRAM in kB, at least 1.
        bandwidth: DRAM words per cycle, at least 1 (must be 10 in "calc" mode; see the module).
        bandwidth_mode: "calc" (SCALE-Sim estimates the bandwidth needed) or "user" (every DRAM
            interface limited to ``bandwidth``).
        run_name: the name SCALE-Sim gives its output folder (letters, digits, "_" and "-").
    """

    rows: int
    cols: int
    dataflow: str = "ws"
    ifmap_sram_kb: int = 64
    filter_sram_kb: int = 64
    ofmap_sram_kb: int = 64
    bandwidth: int = 10
    bandwidth_mode: str = "calc"
    run_name: str = "tinytorch"

    def __post_init__(self):
        for name in ("rows", "cols", "ifmap_sram_kb", "filter_sram_kb", "ofmap_sram_kb", "bandwidth"):
            object.__setattr__(self, name, _positive_int(name, getattr(self, name)))
        if self.dataflow not in DATAFLOWS:
            raise ValueError(f"ArrayConfig: dataflow must be one of {DATAFLOWS}, got {self.dataflow!r}")
        if self.bandwidth_mode not in ("calc", "user"):
            raise ValueError(f"ArrayConfig: bandwidth_mode must be 'calc' or 'user', got {self.bandwidth_mode!r}")
        if self.bandwidth_mode == "calc" and self.bandwidth != CALC_READ_BANDWIDTH:
            raise ValueError(f"ArrayConfig: bandwidth={self.bandwidth} needs bandwidth_mode='user'; SCALE-Sim's "
                             f"'calc' mode reads at its fixed {CALC_READ_BANDWIDTH} words/cycle")
        if not (isinstance(self.run_name, str) and self.run_name
                and all(ch.isalnum() or ch in "_-" for ch in self.run_name)):
            raise ValueError(f"ArrayConfig: run_name must be a non-empty name of letters, digits, '_' "
                             f"or '-', got {self.run_name!r}")

    @property
    def label(self) -> str:
        """A short name for tables: "32x32 ws"."""
        return f"{self.rows}x{self.cols} {self.dataflow}"

    def replace(self, **changes) -> "ArrayConfig":
        """A copy with some fields changed (validated again).

        Args:
            changes: field names and their new values, e.g. ``dataflow="os"``.
        """
        return dataclasses.replace(self, **changes)
