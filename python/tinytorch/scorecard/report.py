"""Writing the scorecard: scorecard.md, the terminal summary, and PNG plots.

Design: the Markdown file is the record (machine, then per section the guide's rows beside
this machine's with a verdict column, then the measured detail and the plots); the terminal
gets the same claim tables without the detail. Plots use matplotlib's Agg back end when
matplotlib is importable; otherwise ``plotting_unavailable()`` gives the reason, which the
file states once instead of each plot.

Owns the layout of scorecard.md, the terminal summary and the plots; assumes the
SectionResults of results.py; matplotlib is optional; figures are written atomically.
"""
from __future__ import annotations

import os
import time

from .._atomic import save_figure

__all__ = ["plotting_unavailable", "save_bar_plot", "save_line_plot", "claims_table",
           "section_markdown", "scorecard_markdown", "terminal_summary"]


def plotting_unavailable() -> str:
    """'' when matplotlib can plot, else the reason it cannot."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any failure means no plots
        return f"matplotlib is not usable ({type(exc).__name__}: {exc}); pip install matplotlib for the PNG plots"
    return ""


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _plain_log_labels(axis) -> None:
    """Label a log axis with plain numbers (40, 6, 0.5) instead of matplotlib's default
    mathtext ("4 x 10^1"): a reader compares figures, not exponents."""
    from matplotlib import ticker

    class Plain(ticker.LogFormatter):  # LogFormatter picks which ticks get a label; "%g" writes it
        def __call__(self, x, pos=None):
            return f"{x:g}" if super().__call__(x, pos) else ""
    axis.set_major_formatter(Plain(labelOnlyBase=False))
    axis.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(2, 0.5)))


def save_bar_plot(path: str, labels, values, title: str, xlabel: str, log: bool = True,
                  annotate: str = "{:.3g}") -> str:
    """A horizontal bar chart (first label on top); returns ``path``.

    Args:
        path: the PNG file to write.
        labels: one label per bar.
        values: one positive number per bar.
        title: the chart's title.
        xlabel: the value axis label.
        log: a logarithmic value axis.
        annotate: format of the number printed at each bar's end.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.55 * len(labels) + 1.6))
    labels, values = list(labels)[::-1], [float(v) for v in values][::-1]
    ax.barh(labels, values, color="tab:blue")
    if log and min(values) > 0:
        ax.set_xscale("log")
        _plain_log_labels(ax.xaxis)
    for i, v in enumerate(values):
        ax.text(v, i, " " + annotate.format(v), va="center", fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def save_line_plot(path: str, x, series: dict, title: str, xlabel: str, ylabel: str,
                   logx: bool = True, logy: bool = True) -> str:
    """Lines of y against x, one per series; returns ``path``.

    Args:
        path: the PNG file to write.
        x: the x values.
        series: {label: y values (None where not measured)}.
        title: the chart's title.
        xlabel: the x axis label.
        ylabel: the y axis label.
        logx: a logarithmic x axis.
        logy: a logarithmic y axis.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for (label, ys), style in zip(series.items(), ["o-", "s--", "^:", "x-.", "d-"] * 3):
        pts = [(a, b) for a, b in zip(x, ys) if b is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=label)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
        _plain_log_labels(ax.yaxis)
    ax.set_xticks(list(x))
    ax.set_xticklabels([str(v) for v in x])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def claims_table(result) -> list:
    """The section's claims as a Markdown table (guide | this machine | reproduced | why).

    Args:
        result: a SectionResult.
    """
    lines = ["| Row | Guide's claim | This machine | Reproduced | Why / note |", "|---|---|---|---|---|"]
    for c in result.claims:
        mark = "yes" if c.reproduced else ("**NO**" if c.reproduced is False else "n/a")
        lines.append(f"| {_cell(c.row)} | {_cell(c.guide)} | {_cell(c.measured)} | {mark} | {_cell(c.why)} |")
    return lines


def _status_line(result) -> str:
    if result.status == "ok":
        return ""
    return f"**{result.status}: {result.reason}**"


def section_markdown(result, plots_note: str = "") -> list:
    """One section of scorecard.md.

    Args:
        result: a SectionResult.
        plots_note: why there are no plots ('' when matplotlib works).
    """
    lines = [f"## {result.title}", "", f"`--only {result.name}`; ran in {result.seconds:.1f} s.", ""]
    status = _status_line(result)
    if status:
        lines += [status, ""]
    if result.claims:
        lines += claims_table(result) + [""]
    if result.tables:
        lines += list(result.tables) + [""]
    for p in result.plots:
        lines += [f"![{os.path.basename(p)}]({os.path.basename(p)})", ""]
    if plots_note and result.status == "ok" and not result.plots:
        lines += [f"(no plot: {plots_note})", ""]
    return lines


def _counts(result):
    yes = sum(c.reproduced is True for c in result.claims)
    no = sum(c.reproduced is False for c in result.claims)
    return yes, no


def summary_table(results) -> list:
    """One line per section: status, rows reproduced / not, time.

    Args:
        results: the SectionResults in run order.
    """
    lines = ["| Section | Status | Claims reproduced | Not reproduced | Time |", "|---|---|---:|---:|---:|"]
    for r in results:
        yes, no = _counts(r)
        status = r.status if r.status == "ok" else f"{r.status}: {_cell(r.reason)}"
        lines.append(f"| {r.name} | {status} | {yes} | {no} | {r.seconds:.1f} s |")
    return lines


def scorecard_markdown(results, machine: list, command: str, quick: bool, plots_note: str,
                       seconds: float) -> str:
    """The whole scorecard.md text.

    Args:
        results: the SectionResults in run order.
        machine: the machine's Markdown bullets.
        command: the command line that ran.
        quick: whether this was a --quick run.
        plots_note: why there are no plots ('' when matplotlib works).
        seconds: the run's total time.
    """
    lines = ["# TinyTorch scorecard: the extension guide's tables, re-measured on this machine", "",
             f"Command: `{command}` ({'quick' if quick else 'full'} run, {seconds:.0f} s, finished "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).", "",
             "Each row puts the guide's figure (measured by its authors on their machine, mostly an "
             "Apple M5 Max) beside this machine's. **NO** marks a claim this machine did not "
             "reproduce, with the reason.", "", "## Machine", ""] + list(machine) + [""]
    if plots_note:
        lines += [f"Plots: none ({plots_note}).", ""]
    lines += ["## Summary", ""] + summary_table(results) + [""]
    for r in results:
        lines += section_markdown(r, plots_note)
    return "\n".join(lines).rstrip("\n") + "\n"


def terminal_summary(results, machine=None) -> str:
    """What the command prints: the machine, per section its claims table (or why it did not
    run), then the summary.

    Args:
        results: the SectionResults in run order.
        machine: the machine's Markdown bullets (None: not printed).
    """
    lines = (["== Machine ==", ""] + list(machine) + [""]) if machine else []
    for r in results:
        lines += [f"== {r.title} ==", ""]
        if r.status != "ok":
            lines += [_status_line(r).strip("*"), ""]
        if r.claims:
            lines += claims_table(r) + [""]
    lines += ["== Summary ==", ""] + summary_table(results)
    return "\n".join(lines)
