"""tinytorch/_allocator.py: on Linux with glibc, importing tinytorch raises malloc's mmap and
trim thresholds (freed activations are reused without page faults); TINYTORCH_MALLOC=default
leaves the allocator alone; elsewhere nothing is done and the report says why."""
import os
import subprocess
import sys

import pytest


def _tuning(env_extra):
    env = dict(os.environ, **env_extra)
    out = subprocess.run([sys.executable, "-c", "import tinytorch._allocator as a, tinytorch; print(a.tuning())"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt is Linux-only")
def test_import_sets_the_thresholds_and_says_so():
    import ctypes
    try:
        ctypes.CDLL(None).gnu_get_libc_version
    except AttributeError:
        pytest.skip("not glibc")
    line = _tuning({})
    assert line.startswith("glibc") and "mmap threshold 256 MiB" in line and "trim threshold 512 MiB" in line


def test_the_switch_leaves_the_allocator_alone():
    assert _tuning({"TINYTORCH_MALLOC": "default"}) == "left alone (TINYTORCH_MALLOC=default)"


def test_info_reports_the_allocator():
    out = subprocess.run([sys.executable, "-m", "tinytorch", "info"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and "allocator" in out.stdout
