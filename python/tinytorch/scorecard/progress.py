"""Progress while the scorecard runs: one bar per section, and the ETA of the whole run.

Design: the runner knows every selected section's estimated seconds (from the registry) and
the time each finished one really took, so before each section it prints the section's
number, its estimate and the remaining time of the run, corrected by how fast this machine
has been so far (elapsed / estimated-so-far, damped by a minute of prior). Inside a section, ``bar.step(text)`` advances
a bar of the section's own steps: tqdm's bar (with its own ETA) when tqdm is installed,
otherwise a plain line per step with the section's ETA, so a log file reads well too.
Progress goes to stderr, the results to stdout and the files.

Owns RunProgress (per-section bars, the run's ETA); assumes the registry's estimated
seconds per section; tqdm is optional.
"""
from __future__ import annotations

import sys
import time

__all__ = ["SectionBar", "RunProgress", "format_seconds", "PRIOR_SECONDS"]

PRIOR_SECONDS = 60.0


def format_seconds(s: float) -> str:
    """'42 s', '3 min 05 s'.

    Args:
        s: seconds.
    """
    s = max(0.0, float(s))
    return f"{s:.0f} s" if s < 60 else f"{int(s // 60)} min {int(s % 60):02d} s"


def _tqdm():
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm


class SectionBar:
    """The steps of one section.

    Args:
        total: the number of steps the section will report.
        label: the section's name.
        stream: where progress is written (stderr by default).
        use_tqdm: use tqdm when installed (False: plain lines).
    """

    def __init__(self, total: int, label: str, stream=None, use_tqdm: bool = True):
        self.total, self.label, self.done = max(1, int(total)), label, 0
        self.stream = stream or sys.stderr
        self.started = time.perf_counter()
        tqdm = _tqdm() if use_tqdm else None
        self.bar = tqdm(total=self.total, desc=f"  {label}", file=self.stream, leave=True,
                        dynamic_ncols=True) if tqdm else None

    def step(self, text: str = "") -> None:
        """Mark one step done.

        Args:
            text: what was just measured (shown beside the bar).
        """
        self.done = min(self.total, self.done + 1)
        if self.bar is not None:
            self.bar.set_postfix_str(text[:40], refresh=False)
            self.bar.update(1)
            return
        spent = time.perf_counter() - self.started
        eta = spent / self.done * (self.total - self.done)
        print(f"  [{self.label}] {self.done}/{self.total} {text}  (section ETA {format_seconds(eta)})",
              file=self.stream, flush=True)

    def close(self) -> None:
        """Finish the bar."""
        if self.bar is not None:
            self.bar.close()


class RunProgress:
    """The whole run: section headers with the run's ETA.

    Args:
        estimates: {section name: estimated seconds}, in run order.
        stream: where progress is written (stderr by default).
        use_tqdm: whether section bars use tqdm when installed.
    """

    def __init__(self, estimates: dict, stream=None, use_tqdm: bool = True):
        self.estimates = dict(estimates)
        self.stream = stream or sys.stderr
        self.use_tqdm = use_tqdm
        self.started = time.perf_counter()
        self.finished: dict = {}

    def eta(self) -> float:
        """Seconds left for the sections not finished, scaled by this run's pace so far."""
        left = sum(v for k, v in self.estimates.items() if k not in self.finished)
        est_done = sum(self.estimates[k] for k in self.finished)
        # this machine's pace so far, damped by PRIOR_SECONDS of "as estimated" so that one
        # slow first section does not multiply the whole ETA
        pace = (sum(self.finished.values()) + PRIOR_SECONDS) / (est_done + PRIOR_SECONDS)
        return left * pace

    def begin(self, name: str) -> None:
        """Print the header of section ``name``.

        Args:
            name: the section about to run.
        """
        index = list(self.estimates).index(name) + 1
        print(f"[{index}/{len(self.estimates)}] {name} (estimated {format_seconds(self.estimates[name])}; "
              f"run ETA {format_seconds(self.eta())})", file=self.stream, flush=True)

    def end(self, name: str, seconds: float, status: str) -> None:
        """Record that section ``name`` finished.

        Args:
            name: the section.
            seconds: how long it took.
            status: its status ("ok", "unavailable", "failed").
        """
        self.finished[name] = seconds
        print(f"      {name}: {status} in {format_seconds(seconds)}", file=self.stream, flush=True)

    def bar(self, total: int, label: str) -> SectionBar:
        """A SectionBar for the running section.

        Args:
            total: its number of steps.
            label: its name.
        """
        return SectionBar(total, label, self.stream, self.use_tqdm)
