"""Shared fixtures for the core tests.

Random inputs are fresh per run but reproducible: one session seed (from
TINYTORCH_TEST_SEED, or OS entropy) is combined with each test's id, and a failing test
reports the session seed so the run can be repeated exactly.
"""
import os
import sys
import zlib

import numpy as np
import pytest

_PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "python")
try:
    import tinytorch  # noqa: F401
except ImportError:  # not installed yet: use the source tree
    sys.path.insert(0, os.path.abspath(_PYTHON_DIR))

SESSION_SEED = int(os.environ.get("TINYTORCH_TEST_SEED", np.random.SeedSequence().entropy % (2 ** 32)))


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the session seed and this test's id."""
    return np.random.default_rng([SESSION_SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("tinytorch seed", f"rerun with TINYTORCH_TEST_SEED={SESSION_SEED}"))
