"""``tinytorch launch``: runs a script on N ranks through the venv's mpirun, as root without the
OMPI_ALLOW_RUN_AS_ROOT variables, one runtime thread per rank unless --threads says otherwise,
the script's arguments passed through; --hostfile and the thread variables reach the launcher's
command line; a missing launcher or bad option is a one-line error naming what to do."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tinytorch.distributed.launcher import find_launcher, launch_command

sys.path.insert(0, str(Path(__file__).parent / "distributed"))
from mpi_helpers import needs_mpi  # noqa: E402

PROBE = str(Path(__file__).parent / "distributed" / "launch_probe.py")


def _cli(*args, env=None, timeout=120):
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "TINYTORCH_NUM", "OMP_NUM"))}
    return subprocess.run([sys.executable, "-m", "tinytorch", "launch", *args], env=dict(base, **(env or {})),
                          capture_output=True, text=True, timeout=timeout)


@needs_mpi
def test_launch_two_ranks_one_thread_each_args_passed():
    r = _cli("-n", "2", "--oversubscribe", PROBE, "--lr", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(line for line in r.stdout.splitlines() if line.startswith("rank "))
    assert lines == [f"rank {i} of 2 local {i} TINYTORCH_NUM_THREADS=1 runtime_threads=1 args=['--lr', '3']"
                     for i in range(2)]


@needs_mpi
def test_launch_threads_option_and_failing_script_status(tmp_path):
    r = _cli("-n", "2", "--oversubscribe", "--threads", "2", PROBE)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("TINYTORCH_NUM_THREADS=2 runtime_threads=2") == 2
    bad = tmp_path / "fail.py"
    bad.write_text("import sys\nsys.exit(3)\n")
    r = _cli("-n", "2", "--oversubscribe", str(bad))
    assert r.returncode != 0


@needs_mpi
def test_dry_run_passes_hostfile_and_thread_variables(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost slots=2\n")
    r = _cli("-n", "4", "--hostfile", str(hosts), "--dry-run", PROBE, "x")
    assert r.returncode == 0, r.stderr
    cmd = r.stdout.split()
    assert cmd[0] == find_launcher() and cmd[1:3] == ["-n", "4"]
    assert cmd[cmd.index("--hostfile") + 1] == str(hosts)
    assert "TINYTORCH_NUM_THREADS" in cmd and cmd[-3:] == [sys.executable, PROBE, "x"]
    if os.geteuid() == 0:
        assert "--allow-run-as-root" in cmd


def test_no_launcher_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no MPI launcher \(mpirun or mpiexec\).*pip install"):
        find_launcher(search=[str(tmp_path)])
    r = _cli("-n", "2", "--launcher", str(tmp_path / "mpirun"), PROBE)
    assert r.returncode == 2 and "is not an executable file" in r.stderr
    with pytest.raises(ValueError, match="-n must be a positive"):
        launch_command(0, PROBE, launcher=sys.executable)
    with pytest.raises(ValueError, match="hostfile"):
        launch_command(2, PROBE, hostfile=str(tmp_path / "none"), launcher=sys.executable)
    r = _cli("-n", "2", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_thread_default_keeps_the_callers_setting():
    _, env = launch_command(2, PROBE, launcher=sys.executable, environ={"OMP_NUM_THREADS": "3"})
    assert env["TINYTORCH_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "3"
    _, env = launch_command(2, PROBE, launcher=sys.executable, environ={})
    assert env["TINYTORCH_NUM_THREADS"] == env["OMP_NUM_THREADS"] == "1"
