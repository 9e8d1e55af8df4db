"""Fixtures shared by every test folder (the folders' own conftest.py files hold the rest).

`threads` runs a test once on 1 and once on 2 kernel threads (tinytorch.set_num_threads,
restored afterwards): the runtime's kernels split work by thread count, so each threaded
kernel is checked both alone and split. Assumes nothing else changes the thread count while
a test runs. Files the package puts in the system temp folder (MLPerf's LoadGen logs when no
log_dir is given, say) go under pytest's own temp folder for the session, which pytest prunes,
instead of piling up in /tmp run after run.
"""
import tempfile

import pytest

import tinytorch


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    """The kernel thread count for this run of the test (1, then 2)."""
    before = tinytorch.get_num_threads()
    tinytorch.set_num_threads(request.param)
    yield request.param
    tinytorch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="session")
def _temp_folder_under_pytest(tmp_path_factory):
    """tempfile's folder for this process is a session folder of pytest's (restored after)."""
    before = tempfile.tempdir
    tempfile.tempdir = str(tmp_path_factory.mktemp("tempfile"))
    yield
    tempfile.tempdir = before
