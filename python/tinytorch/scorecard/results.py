"""What a scorecard section returns, and what it is given.

Design: a section is a function ``run(ctx) -> SectionResult``. It measures, then files one
``Claim`` per row of the extension guide's table it mirrors: the guide's figure beside this
machine's, and a verdict (``reproduced`` True / False, or None when the row is information
that nothing can contradict, e.g. a napkin formula). A row whose claim was not reproduced
always carries ``why``. Extra detail (the full measured table) goes in ``tables`` as
Markdown lines, plots in ``plots`` (paths written by ``report.save_plot``), and the raw
numbers in ``numbers`` for tests and other tools. A section that cannot run (its extension
is missing, no GPU) returns ``unavailable(name, title, reason)`` instead of raising.

Owns Claim, SectionResult and Context and the verdict helpers; assumes nothing beyond
the standard library.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["Claim", "SectionResult", "Context", "unavailable", "within"]


@dataclass
class Claim:
    """One row: the guide's figure and this machine's, side by side.

    Args:
        row: what the row is about (the guide's row label).
        guide: the guide's figure, as text.
        measured: this machine's figure, as text.
        reproduced: True, False, or None for a row that is not a measurable claim.
        why: the reason when not reproduced (or a note).
    """

    row: str
    guide: str
    measured: str
    reproduced: bool | None
    why: str = ""

    @property
    def mark(self) -> str:
        """'yes', 'NO' or 'n/a', the verdict as printed."""
        return {True: "yes", False: "NO", None: "n/a"}[self.reproduced]


@dataclass
class SectionResult:
    """What one section produced.

    Args:
        name: the section's registry name (what --only takes).
        title: the heading of the section.
        status: "ok", "unavailable" (cannot run here, see reason) or "failed" (an error).
        reason: why a section is unavailable or failed ('' when ok).
        claims: the guide's rows with this machine's figures.
        tables: further Markdown lines (measured detail, notes).
        plots: paths of the PNG files written.
        numbers: raw measured numbers, by name.
        seconds: how long the section ran.
    """

    name: str
    title: str
    status: str = "ok"
    reason: str = ""
    claims: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    plots: list = field(default_factory=list)
    numbers: dict = field(default_factory=dict)
    seconds: float = 0.0

    def claim(self, row, guide, measured, reproduced, why=""):
        """Append a Claim and return it.

        Args:
            row: the row label.
            guide: the guide's figure.
            measured: this machine's figure.
            reproduced: True, False or None.
            why: the reason for a NO (or a note).
        """
        c = Claim(row, str(guide), str(measured), None if reproduced is None else bool(reproduced), why)
        self.claims.append(c)
        return c


def unavailable(name: str, title: str, reason: str) -> SectionResult:
    """A section that cannot run here, and why.

    Args:
        name: the section's name.
        title: its heading.
        reason: why it is unavailable (printed as "unavailable: <reason>").
    """
    return SectionResult(name, title, status="unavailable", reason=reason)


def within(measured: float, claimed: float, rel: float) -> bool:
    """True when ``measured`` is within a relative distance ``rel`` of ``claimed``.

    Args:
        measured: this machine's figure.
        claimed: the guide's figure.
        rel: allowed relative difference (0.05 = 5 %).
    """
    return abs(measured - claimed) <= rel * abs(claimed)


@dataclass
class Context:
    """What the runner hands each section.

    Args:
        quick: the small, fast variant (--quick).
        out: the folder for scorecard.md and the plots.
        progress: a factory ``progress(total, label) -> handle`` with ``handle.step(text)``
            (see progress.py).
        plots_enabled: whether matplotlib is importable (sections skip plotting otherwise).
        ceilings: this machine's measured FMA peak and copy bandwidth (peak.Ceilings), which
            sections print each speed against; None: not measured (the ratios read "n/a").
    """

    quick: bool
    out: str
    progress: object
    plots_enabled: bool = True
    ceilings: object = None

    def of_fma(self, gflops: float, threads: int) -> str:
        """'89% of peak': ``gflops`` against the measured FMA peak on ``threads`` threads.

        Args:
            gflops: the measured GFLOP/s.
            threads: the thread count it ran on.
        """
        return self.ceilings.of_fma(gflops, threads) if self.ceilings else "peak n/a"

    def of_copy(self, gbs: float) -> str:
        """'75% of copy bandwidth': ``gbs`` against the measured np.copyto bandwidth.

        Args:
            gbs: the measured GB/s.
        """
        return self.ceilings.of_copy(gbs) if self.ceilings else "copy bandwidth n/a"

    def path(self, filename: str) -> str:
        """A path inside the output folder.

        Args:
            filename: the file's name.
        """
        return os.path.join(self.out, filename)
