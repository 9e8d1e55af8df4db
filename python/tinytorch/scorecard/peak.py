"""This machine's measured ceilings: the FMA peak (compute) and the copy bandwidth (memory).

Design: a speed means little on its own across CPU generations (the same AVX-512 code runs at
twice the rate on a core with two 512-bit FMA pipes as on one that splits them), so every
speed the scorecard and the benchmarks print stands beside the ceiling measured on the same
machine in the same run. The compute ceiling comes from peak.c (shipped beside this module, so
an installed package has it), compiled with the system C compiler into a temporary folder and
run for 1..T threads; see peak.c for why it is built the way it is. Without a C compiler or off
x86-64 there is no compute ceiling and the ratio reads "n/a". The memory ceiling is np.copyto
between two preallocated arrays (read + write bytes). ``measure_ceilings`` takes both once per
run; benchmarks/_common.py re-exports everything here.

Owns fma_peaks, copy_bandwidth, measure_ceilings and the Ceilings ratios. Assumes: a C
compiler found by the package's one search (backends.fusion.executors.compiler_on_path);
without one, or off x86-64, the compute ceiling is absent and says why.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import numpy as np

from ..backends.fusion.executors import compiler_on_path  # the package's one C-compiler search
from ..measure import Threads, measure_rounds

__all__ = ["PEAK_SOURCE", "fma_peaks", "merge_peaks", "fma_ceiling", "percent_of_peak", "copy_bandwidth",
           "Ceilings", "measure_ceilings"]

PEAK_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peak.c")


def fma_peaks(max_threads: int, seconds: float = 0.25, trials: int = 3) -> dict:
    """{threads: {isa: {placement: GFLOP/s}}} for 1..max_threads from peak.c, the best trial
    of each; placement is "free", "pinned" (both per wall-clock second) or "pinned-cputime"
    (per second of CPU time: what a loaded shared machine cannot take away). {} without a C
    compiler or off x86-64.

    Args:
        max_threads: the largest thread count measured.
        seconds: the timed window of one trial.
        trials: trials per configuration (the best is kept).
    """
    cc = compiler_on_path()
    if cc is None or platform.machine() not in ("x86_64", "AMD64"):
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "peak")
        build = subprocess.run([cc, "-O2", "-o", exe, PEAK_SOURCE, "-lpthread"], capture_output=True, text=True)
        if build.returncode != 0:
            print(f"peak.c did not build:\n{build.stderr}", file=sys.stderr)
            return {}
        out = subprocess.run([exe, str(max_threads), str(seconds), str(trials)], capture_output=True, text=True)
    peaks: dict = {}
    for line in out.stdout.splitlines():
        parts = line.split()  # peak <isa> <threads> <placement> <GFLOP/s>
        if len(parts) == 5 and parts[0] == "peak":
            peaks.setdefault(int(parts[2]), {}).setdefault(parts[1], {})[parts[3]] = float(parts[4])
    return peaks


def merge_peaks(*measurements: dict) -> dict:
    """The larger figure of each (threads, isa, placement) over several fma_peaks() results.

    Args:
        measurements: fma_peaks() results.
    """
    merged: dict = {}
    for peaks in measurements:
        for nt, per_isa in peaks.items():
            for isa, per_placement in per_isa.items():
                into = merged.setdefault(nt, {}).setdefault(isa, {})
                for placement, g in per_placement.items():
                    into[placement] = max(into.get(placement, 0.0), g)
    return merged


def fma_ceiling(peaks: dict, threads: int):
    """(GFLOP/s, isa) that no code on `threads` threads can beat: the best ISA and placement,
    and the best of 1..threads threads (a program given n threads may use fewer, and clocks
    drop with more busy cores). (None, None) when nothing was measured.

    Args:
        peaks: an fma_peaks() result.
        threads: the thread count the measured code ran on.
    """
    return max(((g, isa) for nt, per_isa in peaks.items() if nt <= threads
                for isa, per_placement in per_isa.items() for g in per_placement.values()),
               default=(None, None))


def percent_of_peak(value: float, ceiling) -> str:
    """'77%', or a flag when the figure exceeds the measured ceiling: that says the ceiling was
    measured too low (a loaded machine, a missing ISA), not that the code beat the hardware.

    Args:
        value: the measured speed (GFLOP/s or GB/s).
        ceiling: the ceiling in the same unit (None or 0: not measured).
    """
    if not ceiling:
        return "n/a"
    if value > ceiling:
        return ">100% (peak under-measured)"
    share = 100 * value / ceiling
    return "<1%" if share < 1 else f"{share:.0f}%"


def copy_bandwidth(nbytes: int = 381 * 2 ** 20, rounds: int = 5, block_time: float = 0.5) -> float:
    """GB/s of np.copyto between two preallocated arrays, counting read + write bytes.

    Args:
        nbytes: bytes per array (well above the last-level cache).
        rounds: measure_rounds' rounds.
        block_time: seconds of copies per round.
    """
    src = np.ones(nbytes // 4, np.float32)
    dst = np.empty_like(src)
    t = measure_rounds({"copy": lambda: np.copyto(dst, src)}, rounds, block_time=block_time)["copy"]
    return 2 * nbytes / t / 1e9


def _share(value, ceiling, name: str) -> str:
    if not ceiling:
        return f"{name} n/a"
    if value > ceiling:  # the ceiling read low (load while it was measured), not a faster-than-hardware code
        return f"above the measured {name}, which read low"
    return f"{percent_of_peak(value, ceiling)} of {name}"


@dataclass
class Ceilings:
    """One run's measured ceilings.

    Args:
        fma: an fma_peaks() result ({} when not measured).
        copy_gbs: np.copyto bandwidth in GB/s (None when not measured).
        reason: why the FMA peak is missing ('' when measured).
    """

    fma: dict = field(default_factory=dict)
    copy_gbs: float | None = None
    reason: str = ""

    def gflops(self, threads: int):
        """(GFLOP/s, isa) of the FMA ceiling on ``threads`` threads, (None, None) if unmeasured.

        Args:
            threads: the thread count.
        """
        return fma_ceiling(self.fma, threads)

    def of_fma(self, gflops: float, threads: int) -> str:
        """'89% of peak' against the FMA ceiling on ``threads`` threads ('peak n/a' without one).

        Args:
            gflops: the measured GFLOP/s.
            threads: the thread count it ran on.
        """
        return _share(gflops, self.gflops(threads)[0], "peak")

    def of_copy(self, gbs: float) -> str:
        """'75% of copy bandwidth' against the measured np.copyto bandwidth.

        Args:
            gbs: the measured GB/s.
        """
        return _share(gbs, self.copy_gbs, "copy bandwidth")

    def lines(self) -> list:
        """The ceilings as Markdown bullets (one for compute, one for memory)."""
        if self.fma:
            per_threads = "; ".join(f"{g:.0f} GFLOP/s on {nt} thread{'s' if nt > 1 else ''} ({isa})"
                                    for nt in sorted(self.fma) for g, isa in [fma_ceiling(self.fma, nt)])
            fma = f"- measured FMA peak (peak.c, a register-only float32 FMA loop): {per_threads}"
        else:
            fma = f"- measured FMA peak: not measured ({self.reason})"
        copy = ("- measured copy bandwidth (np.copyto, read + write): "
                + (f"{self.copy_gbs:.1f} GB/s on 1 thread" if self.copy_gbs else "not measured"))
        return [fma, copy, "- \"% of peak\" beside a speed is its ratio to these ceilings, so runs on different "
                "CPUs compare"]


def measure_ceilings(max_threads: int, quick: bool = True) -> Ceilings:
    """Measure the FMA peak for 1..max_threads threads and the 1-thread copy bandwidth.

    Args:
        max_threads: the largest thread count a speed was measured on.
        quick: short trials (about 3 s in all on 2 cores) instead of the benchmarks' longer ones.
    """
    peaks = fma_peaks(max_threads, seconds=0.1, trials=2) if quick else fma_peaks(max_threads)
    reason = ""
    if not peaks:
        reason = ("no C compiler to build peak.c" if compiler_on_path() is None else
                  f"peak.c runs on x86-64 only (this is {platform.machine()})"
                  if platform.machine() not in ("x86_64", "AMD64") else "peak.c did not build or run")
    with Threads(1):
        copy = copy_bandwidth(256 * 2 ** 20, rounds=3, block_time=0.2) if quick else copy_bandwidth()
    return Ceilings(peaks, copy, reason)
