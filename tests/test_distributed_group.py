"""The process group: collectives (all_reduce, broadcast, all_gather, reduce_scatter), local rank,
is_initialized / finalize, under ``mpirun -n 2`` and in one process without mpi4py (world size 1,
everything works). The worker asserts rank-dependent values and prints one line per rank."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent / "distributed"))
from mpi_helpers import needs_mpi, run  # noqa: E402


@needs_mpi
def test_collectives_on_two_ranks():
    r = run("collectives_worker.py", [], 2)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(r.stdout.split("\n")[:2]) == ["ok rank 0 of 2 local 0", "ok rank 1 of 2 local 1"]


def test_collectives_without_mpi4py_are_world_size_one():
    r = run("collectives_worker.py", ["--no-mpi"], 1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "ok rank 0 of 1 local 0"


def test_ddp_and_zero_without_mpi4py_match_plain_adam():
    r = run("world_one_worker.py", [], 1)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "ok"


@needs_mpi
def test_available_names_the_mpi_library_without_control_bytes():
    """Open MPI's MPI_Get_library_version ends with a NUL byte; it once reached the reports."""
    from tinytorch import distributed as dist
    ok, detail = dist.available()
    assert ok and detail.startswith("mpi4py ")
    assert detail.isprintable(), repr(detail)
