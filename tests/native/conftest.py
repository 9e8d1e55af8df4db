"""Shared fixtures of the native-runtime tests: the suite runs against a built package, so
a missing library (or a disabled native path) is a failure here, never a skip; `threads`
runs a test once on 1 and once on 2 kernel threads."""
import pytest

import tinytorch
from tinytorch import native
from tinytorch.core import acceleration as acc


@pytest.fixture(scope="module", autouse=True)
def runtime():
    assert native.available(), native.reason()
    assert acc.native_enabled(), "TINYTORCH_DISABLE_NATIVE is set: these tests need the native path"


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    before = tinytorch.get_num_threads()
    tinytorch.set_num_threads(request.param)
    yield request.param
    tinytorch.set_num_threads(before)
