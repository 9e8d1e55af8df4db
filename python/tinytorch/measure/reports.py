"""reports: how a measurement is written down -- Markdown tables, and files that survive a kill.

What this file owns
  markdown_table(header, rows)  a Markdown table; floats below 100 with 3 significant digits,
                                larger ones as whole numbers (the benchmark reports' style)
  write_file, save_figure       the package's atomic writers (tinytorch._atomic: temp file,
                                fsync, rename), named here so every report writer finds them
                                beside the table

What it assumes: the caller composes the report's lines (a title, the command, the machine from
machine.py, the measured rows); this file formats and writes, it measures nothing.
"""
from __future__ import annotations

from .._atomic import save_figure, write_file

__all__ = ["markdown_table", "write_file", "save_figure"]


def markdown_table(header: list, rows: list) -> list:
    """The Markdown lines of a table.

    Args:
        header: the column titles.
        rows: one list of cells per row; a float is written with 3 significant digits below
            100 and as a whole number from 100 on, anything else with ``str``.
    """
    def cell(v):
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines
