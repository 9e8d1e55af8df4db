"""Hypothesis settings for the differential tests against PyTorch.

Profiles (choose with HYPOTHESIS_PROFILE):
  * ``tinytorch`` (default): bounded example counts so the whole folder runs in well
    under a minute on two cores; random (not derandomized) inputs, so every run explores
    new cases. A failure prints the falsifying example, the seed and a
    ``@reproduce_failure`` blob.
  * ``tinytorch-thorough``: ten times the examples (600 per test), for a nightly or a local soak.
  * ``tinytorch-ci``: derandomized, for a reproducible gate.
The example database lives in the temp folder, not the shared working tree, so a
failure replays first on the next run on the same machine.
"""
import os
import sys
import tempfile

import pytest

_PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")
try:
    import tinytorch  # noqa: F401
except ImportError:  # not installed: use the source tree
    sys.path.insert(0, os.path.abspath(_PYTHON_DIR))

try:
    from hypothesis import HealthCheck, settings
    from hypothesis.database import DirectoryBasedExampleDatabase
except ImportError:  # the tests themselves skip via importorskip
    settings = None

if settings is not None:
    _db = DirectoryBasedExampleDatabase(os.path.join(tempfile.gettempdir(), "tinytorch-hypothesis"))
    _common = dict(deadline=None, print_blob=True,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    settings.register_profile("tinytorch", max_examples=60, derandomize=False, database=_db, **_common)
    settings.register_profile("tinytorch-thorough", max_examples=600, derandomize=False, database=_db,
                              **_common)
    settings.register_profile("tinytorch-ci", max_examples=60, derandomize=True, database=None, **_common)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "tinytorch"))


@pytest.fixture(autouse=True, scope="session")
def _torch_single_thread():
    """Two cores are shared: keep PyTorch from spawning a thread pool per test."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
